"""Local transformers backend: greedy generation with hidden states, token log-probs and entropies."""

from __future__ import annotations

import functools
import math
import os
import time
from typing import Any, Sequence

import numpy as np
import torch

from ..kernels import pack_linear_weights
from ..kvcache import preallocated_cache
from ..models import load_model
from ..types import GenerationResult
from .base import DecodingConfig
from .context import check_context, context_length, over_context_result
from .prompt_render import THINKING_SWITCHES, PromptRenderer, chat_template_of, template_kwargs

__all__ = ["HFLocalBackend", "set_threads", "token_stats", "neutral_generation_config", "template_kwargs",
           "attention_window",
           "THINKING_SWITCHES", "NEUTRAL_DECODING"]

#: Every decoding setting that can change which token greedy search picks, at its neutral value
#: (no penalties, no forced/suppressed/bad tokens, no length rules). A model folder's own
#: ``generation_config.json`` (e.g. Qwen2.5-Instruct's ``repetition_penalty: 1.05``) is never
#: used: SAGO (arXiv 2610.01428) §Decoding is plain greedy, the argmax of the model's logits.
NEUTRAL_DECODING: dict[str, Any] = {
    "do_sample": False, "num_beams": 1, "temperature": 1.0, "top_k": 50, "top_p": 1.0, "typical_p": 1.0,
    "min_p": None, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0, "repetition_penalty": 1.0,
    "encoder_repetition_penalty": 1.0, "length_penalty": 1.0, "no_repeat_ngram_size": 0,
    "encoder_no_repeat_ngram_size": 0, "bad_words_ids": None, "suppress_tokens": None,
    "begin_suppress_tokens": None, "sequence_bias": None, "forced_bos_token_id": None,
    "forced_eos_token_id": None, "min_length": 0, "min_new_tokens": None, "renormalize_logits": False,
    "remove_invalid_values": False, "exponential_decay_length_penalty": None, "stop_strings": None,
    "guidance_scale": None, "watermarking_config": None, "num_beam_groups": 1, "diversity_penalty": 0.0,
    "max_time": None,
}

def neutral_generation_config(eos_ids: Sequence[int], pad_id: int | None, max_new_tokens: int | None = None):
    """A fresh ``transformers.GenerationConfig`` for plain greedy decoding.

    Args:
        eos_ids: token ids that stop generation (the model's EOS set).
        pad_id: padding token id.
        max_new_tokens: generation cap (None: unset, as stored on the model).
    Returns:
        ``GenerationConfig`` with ``NEUTRAL_DECODING`` plus eos/pad/max_new_tokens and nothing
        else (source: transformers ``GenerationConfig``; every other field is unset and so
        takes the library default, none of which changes a greedy choice).
    """
    from transformers import GenerationConfig

    return GenerationConfig(**NEUTRAL_DECODING, eos_token_id=list(eos_ids), pad_token_id=pad_id,
                            max_new_tokens=max_new_tokens)


def set_threads() -> int:
    """Apply ``SAGO_THREADS`` (if set) to ``torch.set_num_threads``; return the thread count.

    Without the env var torch's default is kept.

    Raises:
        ValueError: ``SAGO_THREADS`` is not a positive integer.
    """
    val = os.environ.get("SAGO_THREADS")
    if val:
        n = int(val)
        if n < 1:
            raise ValueError(f"SAGO_THREADS must be >= 1, got {val!r}")
        if torch.get_num_threads() != n:
            torch.set_num_threads(n)
    return torch.get_num_threads()


def token_stats(logits: torch.Tensor, token_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-prob of chosen tokens and entropy of the full predictive distribution.

    Computed in float32 whatever the model dtype (``log_softmax`` over the vocabulary).

    Args:
        logits: (..., V) raw next-token logits.
        token_ids: (...) the tokens whose log-prob is wanted.
    Returns:
        ``(logprobs, entropies)``, both float32 of shape (...): natural-log probabilities
        (≤ 0) and entropies in nats (0 ≤ H ≤ log V).
    """
    logp = torch.log_softmax(logits.float(), dim=-1)
    chosen = logp.gather(-1, token_ids.long().unsqueeze(-1)).squeeze(-1)
    ent = (-(logp.exp() * logp).sum(-1)).clamp_min(0.0)
    return chosen, ent


def attention_window(model: Any) -> int | None:
    """Tokens a sliding-window attention layer of ``model`` looks back (gemma-3: 512), or None when
    every layer attends to the whole sequence (llama/smollm2, qwen2 without ``use_sliding_window``).

    Read from the text config: ``sliding_window`` counts when ``layer_types`` names a non-full
    layer, or, without ``layer_types``, unless ``use_sliding_window`` is False.
    """
    cfg = model.config
    tc = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    win = getattr(tc, "sliding_window", None)
    if not win:
        return None
    types = getattr(tc, "layer_types", None)
    if types is not None:
        return int(win) if any(t != "full_attention" for t in types) else None
    return None if getattr(tc, "use_sliding_window", True) is False else int(win)


@functools.cache
def _rows_finished_class() -> type:
    """A ``transformers.StoppingCriteria`` class that stops one
    ``generate`` call once ``fraction`` of its rows (at least one, not all) have emitted an EOS, so
    ``HFLocalBackend`` can drop them and continue the others from the KV cache (imported on first
    use: transformers loads with the model)."""
    from transformers import StoppingCriteria

    class RowsFinished(StoppingCriteria):
        def __init__(self, start: int, eos: torch.Tensor, fraction: float) -> None:
            self.start, self.eos, self.fraction = start, eos, fraction

        def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: Any) -> torch.BoolTensor:
            done = torch.isin(input_ids[:, self.start:], self.eos).any(1)
            n = int(done.sum())
            stop = 0 < n < len(done) and n >= max(1.0, self.fraction * len(done))
            return torch.full((len(done),), stop, dtype=torch.bool, device=input_ids.device)

    return RowsFinished


@functools.cache
def _step_stats_class() -> type:
    """A ``transformers.LogitsProcessor`` class that records, at every decoding step, the
    log-prob of the greedy token and the entropy of the full predictive distribution of each row
    (``token_stats`` on the step's float32 logits, which it returns unchanged), so ``generate``
    need not hold every step's (rows, vocabulary) logits until it ends (imported on first use)."""
    from transformers import LogitsProcessor

    class StepStats(LogitsProcessor):
        def __init__(self) -> None:
            self.logprobs: list[torch.Tensor] = []  # per step (rows,) float32
            self.entropies: list[torch.Tensor] = []

        def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
            # greedy picks argmax(scores) (no other processor: neutral_generation_config); a row
            # that finished earlier in this call gets the pad token instead, and its cell is not kept
            lp, ent = token_stats(scores, scores.argmax(-1))
            self.logprobs.append(lp)
            self.entropies.append(ent)
            return scores

    return StepStats


class HFLocalBackend:
    """A local Hugging Face causal LM (zoo key, ``"tiny-random"`` or model folder).

    Greedy decoding, batched with left padding; prompts are sorted by token length into
    batches and the outputs put back in input order. One ``generate`` call per batch returns:
    the response, per-token log-probs and entropies of every generated token up to and
    including the first EOS (from the step logits, float32), and the hidden state of the last
    input token at the embedding output and after every layer (SAGO (arXiv 2610.01428) §Axes:
    Δ-Cos, Δ-Prob, Δ-Ent), plus, from the same prefill, the hidden states at the last token of
    the user's text and their mean over its tokens (the ``cos@user_*`` options; the user's
    text is located in the rendered template by the tokenizer's offset mapping,
    ``prompt_layout``).

    Chat models (``info["chat"]``) get the tokenizer's chat template with one user message and
    ``add_generation_prompt=True``; base models (gemma-3-270m) get the plain prompt text as a
    completion, never a template.

    Shared prefix: the token prefix every prompt of a batch shares (the chat template's system
    turn, ≈ 24 of ≈ 50 tokens for smollm2) is prefilled once at batch size 1 and its KV cache
    repeated over the batch, so only each prompt's own tokens are prefilled per row
    (``MIN_SHARED_PREFIX`` tokens or more; greedy tokens identical to a full prefill in the
    benchmark, hidden states within float noise — see benchmarks/README.md). Not for a
    sliding-window model (``attention_window``) whose batch could outgrow its window: its cache is
    cut to the window, and a repeated prefix followed by left padding would shift what each row
    sees (test: gemma-3 with a 700-token shared prefix).

    Finished rows leave the batch: once ``DROP_FINISHED_FRACTION`` of a batch's rows have emitted
    EOS, its ``generate`` call stops (a ``StoppingCriteria``), those rows are done, and the others
    continue in a new ``generate`` call from the same KV cache (``Cache.batch_select_indices``),
    so no decode step is spent on a finished row and token statistics are computed only for real
    reply tokens (greedy tokens identical to a batch that never drops a row and to the naive
    batch-1 loop: tests/test_backend.py, benchmarks/README.md).

    Response text: the generated tokens (up to and including the first EOS) decoded with
    ``skip_special_tokens=True`` and nothing else — no stripping: trailing whitespace the model
    emitted is part of the reply. ``GenerationResult.token_ids`` holds exactly those ids (EOS
    included, no padding), so ``seq_logprob``/``mean_entropy`` can be re-derived by teacher
    forcing (``sago_engine.replay``). Any normalisation happens inside an axis, documented there.

    Decoding: plain greedy with ``neutral_generation_config`` (the model folder's
    ``generation_config.json`` is recorded but never applied), so every generated token is the
    argmax of the stored step logits.
    """

    name = "hf_local"
    capabilities = frozenset({"cos", "prob", "ent"})
    #: Shortest shared token prefix worth a separate batch-1 prefill (below it: one full prefill).
    MIN_SHARED_PREFIX = 8
    #: Share of a decoding batch's rows that, once finished (EOS), are dropped from it: the batch's
    #: ``generate`` stops and the unfinished rows continue from the same KV cache (> 1: never drop).
    DROP_FINISHED_FRACTION = 0.125
    #: KV cache of generation: ``"preallocated"`` (``kvcache.preallocated_cache``: written in place,
    #: same numbers) or ``"dynamic"`` (``transformers``' ``DynamicCache``, one ``torch.cat`` per step).
    KV_CACHE = "preallocated"
    #: Prefill in length buckets (``prefill.length_buckets``: a bucket of at least
    #: ``PREFILL_MIN_ROWS`` rows holds at most ``PREFILL_PAD_FRACTION`` padding), then decode as
    #: one batch; False: one padded prefill per batch.
    PREFILL_BUCKETS = True
    PREFILL_PAD_FRACTION = 0.1
    PREFILL_MIN_ROWS = 8

    def __init__(
        self,
        model_key_or_path: str | None = None,
        dtype: str = "float32",
        device: str = "auto",
        batch_size: int = 8,
        model: str | None = None,
        seed: int = 0,
        chat_template_kwargs: dict[str, Any] | None = None,
        pack_weights: bool = True,
        template_date: str | None = None,
    ) -> None:
        """Load the model (see ``sago_engine.models.load_model``).

        Args:
            model_key_or_path: zoo key, ``"tiny-random"`` or local HF model folder.
            dtype: ``"float32"`` or ``"bfloat16"``.
            device: ``"auto"`` | ``"cpu"`` | ``"cuda"``.
            batch_size: prompts per generate / teacher-forcing call (≥ 1).
            model: alias of ``model_key_or_path`` (so ``get_backend({"name": "hf_local",
                "model": ...})`` works); ignored if ``model_key_or_path`` is given.
            seed: weight seed, used only for ``"tiny-random"``.
            chat_template_kwargs: extra chat-template variables (see ``template_kwargs``).
            pack_weights: lay the linear weights out once for the CPU kernels
                (``kernels.pack_linear_weights`` for ``batch_size`` rows; also subject to
                ``SAGO_PACK_WEIGHTS``); False keeps the plain weights only (less memory).
            template_date: the day a clock-reading chat template sees (ISO ``YYYY-MM-DD``; None:
                the template's own fallback date, see ``template_clock``).
        Raises:
            ValueError: bad arguments, unknown model, a (dtype, device) pair this machine does
                not offer (``models.check_device``), template variables the template lacks, a
                ``template_date`` that is not an ISO date;
            ModelUnavailableError: weights missing.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.threads = set_threads()
        key = model_key_or_path or model
        if not key:
            raise ValueError("HFLocalBackend needs a model key or path")
        if key == "tiny-random":
            from ..models import tiny_random_model

            self.model, self.tokenizer, self._info = tiny_random_model(seed, dtype, device)
        else:
            self.model, self.tokenizer, self._info = load_model(key, dtype=dtype, device=device)
        self.model_id = key
        self.batch_size = batch_size
        # weights laid out once for the CPU kernels (a full batch's decoding steps: MKL's packed
        # GEMM); None where nothing is packed (kernel torch, bf16, GPU, SAGO_PACK_WEIGHTS=0)
        self.packed_weights = (pack_linear_weights(self.model, batch_size)
                               if pack_weights and self._info.get("linear_kernel") == "onednn" else None)
        self.device = torch.device(self._info["device"])
        self.chat = bool(self._info["chat"])
        eos = self.model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}
        if self.tokenizer.eos_token_id is not None:
            eos_ids.add(self.tokenizer.eos_token_id)
        self.eos_ids = sorted(eos_ids)
        self.pad_id = self.tokenizer.pad_token_id
        # neutral decoding: the folder's generation_config.json is recorded, never applied
        self.model_generation_config = self.model.generation_config.to_diff_dict()
        self.generation_config = neutral_generation_config(self.eos_ids, self.pad_id)
        self.model.generation_config = neutral_generation_config(self.eos_ids, self.pad_id)
        tmpl = chat_template_of(self.tokenizer, self.chat, key)
        self.template: str | None = tmpl
        self.template_kwargs = template_kwargs(tmpl, chat_template_kwargs)
        self.template_date = template_date
        self._renderer: tuple[tuple, PromptRenderer] | None = None
        self.renderer  # noqa: B018 - a bad template_date raises here, at load
        self.attention_window = attention_window(self.model)
        #: tokens of prompt + reply the model's positions cover (``context.context_length``; None: unknown)
        self.context_length = context_length(self.model.config)
        self._closed = False

    # ------------------------------------------------------------------ record

    def info(self) -> dict[str, Any]:
        """Run-record facts: backend, model info from ``load_model``, decoding, threads.

        Returns:
            dict with ``backend``, ``model_id``, ``capabilities`` (sorted list), all keys of
            ``load_model``'s info, ``decoding`` (``DecodingConfig.as_dict()`` minus
            ``max_new_tokens``, which is per call, plus ``generation_config``: the settings
            passed to ``generate`` — ``neutral_generation_config``'s ``to_diff_dict()`` — and
            ``model_generation_config_ignored``: the model folder's own, not applied),
            ``eos_token_ids``, ``chat_template`` (``template_record()``), ``threads``,
            ``shared_prefix_cache``, ``drop_finished_fraction``, ``packed_weights``
            (``kernels.pack_linear_weights``' record or None), ``context_length`` (tokens of prompt +
            reply, ``context.context_length``; None: unknown), and from ``load_model`` ``linear_kernel``.
        """
        dec = DecodingConfig(batch_size=self.batch_size).as_dict()
        dec.pop("max_new_tokens")
        gc = self.generation_config.to_diff_dict()
        gc.pop("transformers_version", None)
        dec["generation_config"] = gc
        dec["model_generation_config_ignored"] = {k: v for k, v in self.model_generation_config.items()
                                                  if k != "transformers_version"}
        return {
            "backend": self.name,
            "model_id": self.model_id,
            "capabilities": sorted(self.capabilities),
            **self._info,
            "decoding": dec,
            "eos_token_ids": list(self.eos_ids),
            "chat_template": self.template_record(),
            "threads": self.threads,
            "shared_prefix_cache": True,
            "drop_finished_fraction": self.DROP_FINISHED_FRACTION,
            "kv_cache": self.KV_CACHE,
            "packed_weights": self.packed_weights,
            "prefill_buckets": ({"max_pad_fraction": self.PREFILL_PAD_FRACTION, "min_rows": self.PREFILL_MIN_ROWS}
                                if self.PREFILL_BUCKETS else None),
            "attention_window": self.attention_window,
            "context_length": self.context_length,
        }

    # ------------------------------------------------------------------ prompts

    @property
    def renderer(self) -> PromptRenderer:
        """The ``PromptRenderer`` of the current ``tokenizer``, ``chat``, ``template``,
        ``template_kwargs`` and ``template_date`` (rebuilt when one of them is reassigned)."""
        key = (id(self.tokenizer), self.chat, self.template, tuple(sorted(self.template_kwargs.items())),
               self.template_date)
        if self._renderer is None or self._renderer[0] != key:
            self._renderer = (key, PromptRenderer(self.tokenizer, self.template if self.chat else None,
                                                  self.template_kwargs, self.template_date))
        return self._renderer[1]

    def template_record(self) -> dict[str, Any]:
        """What the model input is a pure function of besides the prompt text
        (``PromptRenderer.template_record``: template sha256, variables, pinned date, user-text rule)."""
        return self.renderer.template_record()

    def format_prompt(self, prompt: str) -> str:
        """The rendered text: chat template (chat models) or the prompt itself
        (``PromptRenderer.format_prompt``; everything it depends on is in ``template_record()``)."""
        return self.renderer.format_prompt(prompt)

    def encode_prompt(self, prompt: str) -> list[int]:
        """Token ids fed to the model: the template's control tokens as tokens, the user's text as
        text (``PromptRenderer.encode_prompt``); base models get the tokenizer's BOS."""
        return self.renderer.encode_prompt(prompt)

    def user_char_span(self, prompt: str) -> tuple[int, int] | None:
        """Character span [start, end) of the user's text inside ``format_prompt(prompt)``
        (``PromptRenderer.user_char_span``), or None where the template rewrites the message."""
        return self.renderer.user_char_span(prompt)

    def prompt_layout(self, prompt: str) -> tuple[list[int], tuple[int, int] | None]:
        """``encode_prompt``'s ids and the token span [a, b) of the user's text among them
        (``PromptRenderer.prompt_layout``), or ``(ids, None)`` where it cannot be located."""
        return self.renderer.prompt_layout(prompt)

    def context_error(self, prompt: str, max_new_tokens: int) -> str | None:
        """Why ``prompt`` cannot run with reply cap ``max_new_tokens``: its tokens plus the cap exceed
        ``context_length`` (``context.check_context``'s reason), or None."""
        return check_context(len(self.encode_prompt(prompt)), int(max_new_tokens), self.context_length)

    def _pad_left(self, seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        n = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), n), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), n), dtype=torch.long)
        for i, s in enumerate(seqs):
            if s:
                ids[i, n - len(s) :] = torch.tensor(s, dtype=torch.long)
                mask[i, n - len(s) :] = 1
        return ids.to(self.device), mask.to(self.device)

    def shared_prefix(self, seqs: list[list[int]]) -> int:
        """Length of the token prefix all ``seqs`` share, leaving each row ≥ 1 token of its own;
        0 for a single row or a prefix shorter than ``MIN_SHARED_PREFIX``."""
        if len(seqs) < 2:
            return 0
        n = min(len(s) for s in seqs) - 1
        first = seqs[0]
        for s in seqs[1:]:
            k = 0
            while k < n and s[k] == first[k]:
                k += 1
            n = k
        return n if n >= self.MIN_SHARED_PREFIX else 0

    def _batches(self, lengths: Sequence[int]) -> list[list[int]]:
        order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
        return [order[k : k + self.batch_size] for k in range(0, len(order), self.batch_size)]

    # ------------------------------------------------------------------ generation

    def generate(self, prompts: list[str], max_new_tokens: int = 48) -> list[GenerationResult]:
        """Greedy responses with white-box statistics, in input order.

        Args:
            prompts: user prompts (raw text; formatting per ``format_prompt``).
            max_new_tokens: generation cap (≥ 1); the EOS token counts.
        Returns:
            One ``GenerationResult`` per prompt: ``text`` (decode of ``token_ids``, special
            tokens skipped, not stripped); ``token_ids`` (the ids as emitted: up to and
            including the first EOS, no padding); ``n_tokens = len(token_ids)``; ``token_logprobs`` and
            ``token_entropies`` float64 (n_tokens,), natural log / nats, from the step logits
            (unprocessed, float32 log_softmax); ``hidden_last`` float32 (L+1, H) from the
            prefill step at the last input position; ``hidden_user_last`` / ``hidden_user_mean``
            float32 (L+1, H) from the same prefill at the last token of the user's text / averaged
            over its tokens (``prompt_layout``; None where it cannot be located; Δ-Cos options,
            docs/METHOD.md); ``finish_reason`` "stop" (EOS emitted) or
            "length"; ``latency_s`` = the batch's wall time divided by its size. If a batch
            fails it is retried one prompt at a time; a prompt that still fails becomes a
            result with ``error`` set and ``text=""``.
        Raises:
            RuntimeError: the backend was closed; ValueError: ``max_new_tokens < 1``.
        """
        if self._closed:
            raise RuntimeError("backend is closed")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        out: list[GenerationResult | None] = [None] * len(prompts)
        encoded: list[list[int] | None] = []
        spans: list[tuple[int, int] | None] = []
        for i, p in enumerate(prompts):
            try:
                ids, span = self.prompt_layout(p)
                if not ids:
                    raise ValueError("prompt encodes to zero tokens")
                if check_context(len(ids), max_new_tokens, self.context_length):
                    out[i] = over_context_result(len(ids), max_new_tokens, self.context_length)  # type: ignore[arg-type]
                    ids, span = None, None
                encoded.append(ids)
                spans.append(span)
            except Exception as exc:  # one bad prompt becomes a row
                encoded.append(None)
                spans.append(None)
                out[i] = GenerationResult(text="", n_tokens=0, error=f"{type(exc).__name__}: {exc}")
        valid = [i for i, e in enumerate(encoded) if e is not None]
        for batch in self._batches([len(encoded[i]) for i in valid]):  # type: ignore[arg-type]
            idx = [valid[b] for b in batch]
            try:
                res = self._generate_batch([encoded[i] for i in idx], max_new_tokens,  # type: ignore[misc]
                                           [spans[i] for i in idx])
            except Exception:
                res = []
                for i in idx:
                    try:
                        res.extend(self._generate_batch([encoded[i]], max_new_tokens, [spans[i]]))  # type: ignore[list-item]
                    except Exception as exc:
                        res.append(
                            GenerationResult(text="", n_tokens=0, error=f"{type(exc).__name__}: {exc}")
                        )
            for i, r in zip(idx, res):
                out[i] = r
        return out  # type: ignore[return-value]

    @staticmethod
    def user_states(layers: Sequence[torch.Tensor], prefix_layers: Sequence[torch.Tensor] | None, row: int,
                    seq_len: int, span: tuple[int, int] | None) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Hidden states at the user's text of one row: (last user token, mean over user tokens).

        Args:
            layers: L+1 tensors (B, S, H) of a pass whose last position is the row's last token
                (left padding); token j of the row's sequence is at column ``S - seq_len + j``.
            prefix_layers: L+1 tensors (1, P, H) of a separately prefilled shared prefix (its
                token j < P at column j), or None.
            row: the row; seq_len: its sequence length (prefix included); span: [a, b) token
                span of the user's text in the sequence (``prompt_layout``), or None.
        Returns:
            Two float32 arrays (L+1, H) (the mean taken in float32), or (None, None) without a span.
        """
        if span is None or span[1] <= span[0]:
            return None, None
        P = 0 if prefix_layers is None else prefix_layers[0].shape[1]
        S = layers[0].shape[1]
        toks = range(span[0], span[1])
        pre = [j for j in toks if j < P]
        own = [S - seq_len + j for j in toks if j >= P]
        parts = []
        for li, h in enumerate(layers):
            chunk = []
            if pre:
                chunk.append(prefix_layers[li][0, pre].float())  # type: ignore[index]
            if own:
                chunk.append(h[row, own].float())
            parts.append(torch.cat(chunk, dim=0))
        st = torch.stack(parts)  # (L+1, k, H), tokens in order
        return st[:, -1].cpu().numpy().copy(), st.mean(dim=1).cpu().numpy()

    def _empty_cache(self, reserve: int) -> Any:
        """An empty KV cache for a forward / ``generate`` call: ``kvcache.preallocated_cache`` with
        ``reserve`` positions of room when ``KV_CACHE`` is ``"preallocated"``, else the
        ``transformers.DynamicCache`` that ``generate`` would make."""
        if self.KV_CACHE == "preallocated":
            return preallocated_cache(self.model, reserve)
        from transformers.cache_utils import DynamicCache

        return DynamicCache(config=self.model.config)

    def _prefill_buckets(self, seqs: list[list[int]], n_shared: int, prefix_cache: Any,
                         reserve: int) -> tuple[Any, list[torch.Tensor] | None]:
        """Prefill every row's own tokens but the last in length buckets (``prefill.length_buckets``)
        and lay their caches side by side (``prefill.left_padded_layers``).

        Args:
            seqs: the batch's token ids (B rows); n_shared: tokens of the shared prefix (0: none);
            prefix_cache: the prefix's cache at batch 1 (None without a prefix); reserve: room
                for the reply in the returned cache.
        Returns:
            ``(cache, own_hidden)``: a cache (B rows) over ``[prefix | left padding | own tokens
            but the last]``, which is ``ids`` of ``_generate_batch`` minus its last column, and
            L+1 hidden-state tensors (B, W, H) over the own part (W = the longest own part but its
            last token; zeros at padding), or None when no row has such tokens (W = 0).
        """
        from .prefill import left_padded_layers, length_buckets

        B, P = len(seqs), n_shared
        own = [s[P:-1] for s in seqs]
        width = max(map(len, own))
        if width == 0:
            if prefix_cache is None:
                return self._empty_cache(reserve), None
            prefix_cache.batch_repeat_interleave(B)
            return prefix_cache, None
        kv: list[tuple[list, list]] = []
        hid: list[list] = []
        no_logits = torch.zeros(0, dtype=torch.long, device=self.device)  # hidden states only: no LM head
        for bucket in length_buckets([len(o) for o in own], self.PREFILL_PAD_FRACTION, self.PREFILL_MIN_ROWS):
            b = len(bucket)
            b_ids, b_mask = self._pad_left([own[r] for r in bucket])
            # with a prefix, room for the bucket's tokens after it (no regrowth, no second copy)
            c = self._empty_cache(b_ids.shape[1] if prefix_cache is not None else 0)
            if prefix_cache is not None:
                for li, layer in enumerate(prefix_cache.layers):
                    c.update(layer.keys.expand(b, *layer.keys.shape[1:]),
                             layer.values.expand(b, *layer.values.shape[1:]), li)
            full_mask = torch.cat([torch.ones((b, P), dtype=b_mask.dtype, device=b_mask.device), b_mask], dim=1)
            pos = P + (b_mask.cumsum(-1) - 1).clamp(min=0)
            out = self.model(input_ids=b_ids, attention_mask=full_mask, position_ids=pos, cache=c,
                             use_cache=True, output_hidden_states=True, logits_to_keep=no_logits)
            rows = torch.tensor(bucket, dtype=torch.long, device=self.device)
            for li, layer in enumerate(c.layers):
                if len(kv) <= li:
                    kv.append(([], []))
                kv[li][0].append((rows, layer.keys, b_mask))
                kv[li][1].append((rows, layer.values, b_mask))
            for li, h in enumerate(out.hidden_states):
                if len(hid) <= li:
                    hid.append([])
                hid[li].append((rows, h, b_mask))
            del c, out
        cache = self._empty_cache(reserve)
        for li, (kp, vp) in enumerate(kv):
            cache.update(left_padded_layers(kp, B, width, keep_left=P), left_padded_layers(vp, B, width, keep_left=P), li)
        return cache, [left_padded_layers(hp, B, width) for hp in hid]

    @torch.inference_mode()
    def _generate_batch(self, seqs: list[list[int]], max_new_tokens: int,
                        spans: Sequence[tuple[int, int] | None] | None = None) -> list[GenerationResult]:
        t0 = time.perf_counter()
        n_shared = self.shared_prefix(seqs)
        fits = self.attention_window is None or max(map(len, seqs)) + max_new_tokens <= self.attention_window
        if n_shared and not fits:
            # a sliding-window model's cache is cut to the window: a prefix cache repeated and then
            # left-padded would shift what each row's window sees (wrong replies); prefill in full
            n_shared = 0
        prefix_hidden = None
        cache = None
        if n_shared:
            # prefill the shared prefix once; rows are [prefix | left padding | own tokens],
            # positions follow the attention mask.
            prefix = torch.tensor([seqs[0][:n_shared]], dtype=torch.long, device=self.device)
            cache = self._empty_cache(max_new_tokens)
            out = self.model(input_ids=prefix, use_cache=True, output_hidden_states=True, cache=cache)
            prefix_hidden = out.hidden_states  # user tokens can lie in the shared prefix
            own, own_mask = self._pad_left([s[n_shared:] for s in seqs])
            ids = torch.cat([prefix.expand(len(seqs), -1), own], dim=1)
            mask = torch.cat([torch.ones_like(prefix).expand(len(seqs), -1), own_mask], dim=1)
        else:
            ids, mask = self._pad_left(seqs)
        own_hidden = None
        if fits and self.PREFILL_BUCKETS:
            # own tokens but the last prefilled in length buckets (sliding window: only while the
            # cache is never cut), then decoding starts from every row's last prompt token
            cache, own_hidden = self._prefill_buckets(seqs, n_shared, cache, max_new_tokens)
        elif cache is not None:
            cache.batch_repeat_interleave(len(seqs))
        else:
            cache = self._empty_cache(max_new_tokens)
        B = len(seqs)
        eos_t = torch.tensor(self.eos_ids, dtype=torch.long, device=self.device)
        pad = self.pad_id if self.pad_id is not None else self.eos_ids[0]
        new = torch.full((B, max_new_tokens), pad, dtype=torch.long)  # (B, T_max), original row order
        lp = torch.zeros((B, max_new_tokens), dtype=torch.float32)
        ent = torch.zeros((B, max_new_tokens), dtype=torch.float32)
        rows = torch.arange(B)  # original index of each row still decoding
        done, prefill_hidden = 0, None
        from transformers import LogitsProcessorList, StoppingCriteriaList

        while True:
            # decode until the cap, every row's EOS, or enough rows finished to drop them (they would
            # otherwise keep decoding with the batch); then continue the rest from the same KV cache
            gc = neutral_generation_config(self.eos_ids, self.pad_id, max_new_tokens - done)
            gc.update(return_dict_in_generate=True, output_hidden_states=prefill_hidden is None)
            stop = StoppingCriteriaList([_rows_finished_class()(ids.shape[1], eos_t, self.DROP_FINISHED_FRACTION)])
            stats = _step_stats_class()()
            gen = self.model.generate(input_ids=ids, attention_mask=mask, generation_config=gc,
                                      stopping_criteria=stop, logits_processor=LogitsProcessorList([stats]),
                                      cache=cache)
            if prefill_hidden is None:
                # first step: tuple of L+1 tensors (B, S, H) over the uncached part (S = 1 after
                # bucketed prefill: the own tokens before it are in own_hidden); position -1 is
                # the last real token of every row (left padding).
                prefill_hidden = gen.hidden_states[0]
                if own_hidden is not None:
                    prefill_hidden = [torch.cat([o, g], dim=1) for o, g in zip(own_hidden, prefill_hidden)]
                    own_hidden = None
            chunk = gen.sequences[:, ids.shape[1]:].cpu()  # (b, T) new tokens of the rows in `rows`
            T = chunk.shape[1]
            is_eos = torch.isin(chunk, eos_t.cpu())
            finished = is_eos.any(1)
            n_row = torch.where(finished, is_eos.int().argmax(1) + 1, torch.full_like(finished, T, dtype=torch.long))
            new[rows, done:done + T] = chunk
            # token statistics computed at each step (StepStats); kept only for the (row, step)
            # cells of real reply tokens (up to and including the first EOS)
            if T:
                r, t = (torch.arange(T) < n_row.unsqueeze(1)).nonzero(as_tuple=True)  # (row, step) cells
                # generate can run one step past its stop and drop it (transformers' deferred stop
                # check, on mps): the processor saw that step too; it is always the last
                if len(stats.logprobs) not in (T, T + 1):
                    raise RuntimeError(f"{len(stats.logprobs)} step statistics for {T} generated tokens")
                lp[rows[r], done + t] = torch.stack(stats.logprobs[:T], dim=1).cpu()[r, t]
                ent[rows[r], done + t] = torch.stack(stats.entropies[:T], dim=1).cpu()[r, t]
            done += T
            keep = (~finished).nonzero().squeeze(1)
            if done >= max_new_tokens or len(keep) == 0:
                break
            cache = gen["cache"] if "cache" in gen else gen["past_key_values"]
            dev_keep = keep.to(self.device)
            if len(keep) < len(rows):
                cache.batch_select_indices(dev_keep)
            ids = gen.sequences[dev_keep]
            mask = torch.cat([mask[dev_keep], torch.ones((len(keep), T), dtype=mask.dtype, device=mask.device)], dim=1)
            rows = rows[keep]
        hidden = torch.stack([h[:, -1, :] for h in prefill_hidden], dim=1).float()  # (B, L+1, H)
        hidden_np = hidden.cpu().numpy()
        spans = list(spans) if spans is not None else [None] * len(seqs)
        user = [self.user_states(prefill_hidden, prefix_hidden, b, len(s), sp)
                for b, (s, sp) in enumerate(zip(seqs, spans))]
        new_l = new.cpu().tolist()
        lp_np = lp.double().cpu().numpy()
        ent_np = ent.double().cpu().numpy()
        eos = set(self.eos_ids)
        per = (time.perf_counter() - t0) / len(seqs)
        results = []
        for b, toks in enumerate(new_l):
            n = len(toks)
            finish = "length"
            for t, tok in enumerate(toks):
                if tok in eos:
                    n, finish = t + 1, "stop"
                    break
            kept = toks[:n]
            # exactly as decoded: no strip, no tokenization-space clean-up
            text = self.tokenizer.decode(kept, skip_special_tokens=True, clean_up_tokenization_spaces=False)
            results.append(
                GenerationResult(
                    text=text,
                    n_tokens=n,
                    token_logprobs=lp_np[b, :n].copy(),
                    token_entropies=ent_np[b, :n].copy(),
                    hidden_last=hidden_np[b].copy(),
                    hidden_user_last=user[b][0],
                    hidden_user_mean=user[b][1],
                    finish_reason=finish,
                    latency_s=per,
                    token_ids=kept,
                )
            )
        return results

    # ------------------------------------------------------------------ teacher forcing

    def teacher_force(
        self, prompts: list[str], responses: list[list[int] | str]
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Score given responses by teacher forcing: one forward pass over prompt + response.

        SAGO (arXiv 2610.01428) §Axes: Δ-Prob / Δ-Ent are defined under teacher forcing. For a
        greedy response from ``generate`` this reproduces its ``token_logprobs`` /
        ``token_entropies`` up to float noise (tested: fp32 abs ≤ 1e-3).

        Args:
            prompts: user prompts, formatted like ``generate`` does.
            responses: per prompt either the response token ids (e.g.
                ``GenerationResult.token_ids``) or a response string, tokenized without
                special tokens (no EOS appended).
        Returns:
            Per prompt ``(logprobs, entropies)``, float64 arrays of shape (len(response ids),);
            natural log and nats. An empty response gives two empty arrays.
        Raises:
            ValueError: lengths of ``prompts`` and ``responses`` differ.
        """
        if len(prompts) != len(responses):
            raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
        resp_ids = [
            r if not isinstance(r, str) else self.tokenizer(r, add_special_tokens=False)["input_ids"]
            for r in responses
        ]
        seqs = [(self.encode_prompt(p), list(r)) for p, r in zip(prompts, resp_ids)]
        out: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(seqs)
        for batch in self._batches([len(a) + len(b) for a, b in seqs]):
            for i, res in zip(batch, self._teacher_batch([seqs[i] for i in batch])):
                out[i] = res
        return out  # type: ignore[return-value]

    @torch.inference_mode()
    def _teacher_batch(
        self, pairs: list[tuple[list[int], list[int]]]
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        ids, mask = self._pad_left([p + r for p, r in pairs])
        pos = (mask.cumsum(-1) - 1).clamp_min(0)
        logits = self.model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
        S = ids.shape[1]
        res = []
        for b, (p, r) in enumerate(pairs):
            if not r:
                res.append((np.zeros(0), np.zeros(0)))
                continue
            # token at position S-len(r)+k is predicted by logits at position S-len(r)+k-1
            start = S - len(r)
            lg = logits[b, start - 1 : S - 1]
            lp, ent = token_stats(lg, ids[b, start:S])
            res.append((lp.double().cpu().numpy(), ent.double().cpu().numpy()))
        return res

    def close(self) -> None:
        """Drop the model and tokenizer references (and empty the CUDA cache). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self.model = None
        self.tokenizer = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def __repr__(self) -> str:
        return f"HFLocalBackend({self.model_id!r}, dtype={self._info['dtype']!r}, device={self._info['device']!r})"
