"""``HFLocalBackend``: a local transformers causal LM behind the ``Backend`` protocol."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from sago_engine.runtime.kernels import pack_linear_weights, set_threads
from sago_engine.runtime.threads import last_choice

from ...models import TINY_RANDOM_KEY, load_model, tiny_random_model
from ...types import DEFAULT_MAX_NEW_TOKENS, GenerationResult
from ..base import DecodingConfig
from ..context import check_context, context_length
from ..protocol import Backend
from . import generation, prefill, statistics, teacher
from .engine import length_batches
from .generation import neutral_generation_config
from .kvcache import preallocated_cache
from .prefill import NewCache
from .prompt_render import PromptRenderer, chat_template_of, template_kwargs
from .sampling import SamplingParams
from .settings import check_sampling

__all__ = ["HFLocalBackend"]


class HFLocalBackend(Backend):
    """A local Hugging Face causal LM (zoo key, ``"tiny-random"`` or model folder).

    Greedy decoding, batched with left padding; prompts are sorted by token length into
    batches and the outputs put back in input order. One decoding batch
    (``generation.generate_batch``) returns: the response, per-token log-probs and entropies of
    every generated token up to and including the first EOS (from the step logits, float32), and
    the hidden state of the last input token at the embedding output and after every layer (SAGO
    (arXiv 2610.01428) §Axes: Δ-Cos, Δ-Prob, Δ-Ent), plus, from the same prefill, the hidden states
    at the last token of the user's text and their mean over its tokens (the ``cos@user_*``
    options; the user's text is located in the rendered template by the tokenizer's offset
    mapping, ``prompt_layout``).

    Chat models (``info["chat"]``) get the tokenizer's chat template with one user message and
    ``add_generation_prompt=True``; base models (gemma-3-270m) get the plain prompt text as a
    completion, never a template (``prompt_render.PromptRenderer``).

    The prompts of a batch are prefilled once (``prefill``: a shared prefix at batch size 1, own
    tokens in length buckets) and decoded together; rows that emitted EOS leave the batch
    (``generation``). KV caches are written in place (``kvcache``).

    Response text: the generated tokens (up to and including the first EOS) decoded with
    ``skip_special_tokens=True`` and nothing else — no stripping: trailing whitespace the model
    emitted is part of the reply. ``GenerationResult.token_ids`` holds exactly those ids (EOS
    included, no padding), so ``seq_logprob``/``mean_entropy`` can be re-derived by teacher
    forcing (``teacher_force``, ``sago_engine.verify.replay``). Any normalisation happens inside an axis,
    documented there.

    Decoding: plain greedy with ``generation.neutral_generation_config`` (the model folder's
    ``generation_config.json`` is recorded but never applied), so every generated token is the
    argmax of the stored step logits. With ``temperature > 0`` replies are sampled instead
    (``sampling``: temperature, top-k, top-p; each reply drawn with a generator seeded by the seed
    the caller gives it, ``generate(..., seeds=...)``), in the same batched loop.
    """

    name = "hf_local"
    capabilities = frozenset({"cos", "prob", "ent"})
    #: Shortest shared token prefix worth a separate batch-1 prefill (below it: one full prefill).
    MIN_SHARED_PREFIX = 8
    #: Share of a decoding batch's rows that, once finished (EOS), are dropped from it: the batch's
    #: ``generate`` stops and the unfinished rows continue from the same KV cache (> 1: never drop).
    DROP_FINISHED_FRACTION = 0.125
    #: Prefill length buckets (``prefill.length_buckets``): a bucket of at least ``PREFILL_MIN_ROWS``
    #: rows holds at most ``PREFILL_PAD_FRACTION`` padding.
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
        temperature: float = 0.0,
        top_p: float = 1.0,
        top_k: int = 0,
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
            temperature, top_p, top_k: sampled decoding (``settings.HFLocalSettings``; temperature 0:
                greedy, the default).
        Raises:
            ValueError: bad arguments, unknown model, a (dtype, device) pair this machine does
                not offer (``models.check_device``), template variables the template lacks, a
                ``template_date`` that is not an ISO date;
            ModelUnavailableError: weights missing.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        check_sampling({"temperature": temperature, "top_p": top_p, "top_k": top_k})
        self.sampling = SamplingParams(float(temperature), float(top_p), int(top_k))
        self.threads = set_threads()
        #: what the thread count was chosen from (``sago_engine.runtime.threads.ThreadChoice.record``)
        self.thread_choice = last_choice().record()
        key = model_key_or_path or model
        if not key:
            raise ValueError("HFLocalBackend needs a model key or path")
        if key == TINY_RANDOM_KEY:
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
        self.attention_window = prefill.attention_window(self.model)
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
            ``thread_choice`` (``threads.ThreadChoice.record()``: the count, its source, the CPU
            affinity and cgroup quota it rests on, OMP_WAIT_POLICY), ``shared_prefix_cache`` (True), ``drop_finished_fraction``, ``kv_cache``
            (``"preallocated"``: ``kvcache.preallocated_cache``), ``packed_weights``
            (``kernels.pack_linear_weights``' record or None), ``prefill_buckets``
            (``{"max_pad_fraction", "min_rows"}``), ``attention_window``, ``context_length``
            (tokens of prompt + reply, ``context.context_length``; None: unknown), and from
            ``load_model`` ``linear_kernel``.
        """
        dec = DecodingConfig(batch_size=self.batch_size).as_dict()
        dec.pop("max_new_tokens")
        gc = self.generation_config.to_diff_dict()
        gc.pop("transformers_version", None)
        dec["generation_config"] = gc
        if not self.sampling.greedy:  # a greedy backend's record is unchanged
            dec.update(greedy=False, sampling={**self.sampling.record(), "sampler": "inverse CDF, one seeded "
                                               "torch.Generator per reply (hf_local.sampling)"})
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
            "thread_choice": self.thread_choice,
            "shared_prefix_cache": True,
            "drop_finished_fraction": self.DROP_FINISHED_FRACTION,
            "kv_cache": "preallocated",
            "packed_weights": self.packed_weights,
            "prefill_buckets": {"max_pad_fraction": self.PREFILL_PAD_FRACTION, "min_rows": self.PREFILL_MIN_ROWS},
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

    # ------------------------------------------------------------------ batches

    def pad_left(self, seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """``prefill.pad_left`` with this model's pad id and device."""
        return prefill.pad_left(seqs, self.pad_id, self.device)

    def shared_prefix(self, seqs: list[list[int]]) -> int:
        """Length of the token prefix all ``seqs`` share, leaving each row ≥ 1 token of its own;
        0 for a single row or a prefix shorter than ``MIN_SHARED_PREFIX`` (``prefill.shared_prefix``)."""
        return prefill.shared_prefix(seqs, self.MIN_SHARED_PREFIX)

    def batches(self, lengths: Sequence[int]) -> list[list[int]]:
        """Indices sorted by length (then index), cut into batches of ``batch_size`` (``engine.length_batches``)."""
        return length_batches(lengths, self.batch_size)

    #: Hidden states at the user's text of one row (``statistics.user_states``).
    user_states = staticmethod(statistics.user_states)

    # ------------------------------------------------------------------ generation

    def generate(self, prompts: list[str], max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                 seeds: Sequence[int] | None = None) -> list[GenerationResult]:
        """Greedy (or sampled) responses with white-box statistics, in input order.

        Args:
            prompts: user prompts (raw text; formatting per ``format_prompt``).
            max_new_tokens: generation cap (≥ 1); the EOS token counts.
            seeds: per prompt the seed of its reply (``seeds.sample_seed``); required when the
                backend samples (temperature > 0), ignored when greedy. A sampled reply is a function
                of its prompt and seed only (not of the batch it is decoded in).
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
            "length"; ``latency_s`` = the batch's wall time divided by its size. A prompt whose
            tokens plus the cap exceed ``context_length`` is an error row
            (``context.over_context_result``). If a batch fails it is retried one prompt at a
            time; a prompt that still fails becomes a result with ``error`` set and ``text=""``.
            ``meta["request"]``: the prompt as the model read it (``format_prompt``: the chat
            template rendered, or the text itself for a model without one).
        Raises:
            RuntimeError: the backend was closed; ValueError: ``max_new_tokens < 1``, or a sampled
            backend without one seed per prompt.
        """
        if self._closed:
            raise RuntimeError("backend is closed")
        out = generation.generate(self, prompts, max_new_tokens, seeds)
        for prompt, r in zip(prompts, out):  # the model input as rendered (stored as responses.request)
            if r.error is None:  # an error row (a prompt that cannot be rendered, over context) has none
                r.meta = {**(r.meta or {}), "request": self.format_prompt(prompt)}
        return out

    def generate_batch(self, seqs: list[list[int]], max_new_tokens: int,
                       spans: Sequence[tuple[int, int] | None] | None = None, *, one_prefill: bool = False,
                       new_cache: NewCache = preallocated_cache, seeds: Sequence[int] | None = None
                       ) -> list[GenerationResult]:
        """One decoding batch of token ids (``generation.generate_batch``; ``one_prefill`` /
        ``new_cache`` choose a reference path, which only tests do; ``seeds``: sampled rows)."""
        return generation.generate_batch(self, seqs, max_new_tokens, spans, one_prefill=one_prefill,
                                         new_cache=new_cache, seeds=seeds)

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
        return teacher.teacher_force(self, prompts, responses)

    def teacher_batch(self, pairs: list[tuple[list[int], list[int]]]) -> list[tuple[np.ndarray, np.ndarray]]:
        """One teacher-forced forward pass over ``(prompt ids, response ids)`` rows (``teacher.teacher_batch``)."""
        return teacher.teacher_batch(self, pairs)

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
