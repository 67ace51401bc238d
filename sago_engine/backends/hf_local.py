"""Local transformers backend: greedy generation with hidden states, token log-probs and entropies."""

from __future__ import annotations

import math
import os
import time
from typing import Any, Sequence

import numpy as np
import torch

from ..models import load_model
from ..types import GenerationResult
from .base import DecodingConfig

__all__ = ["HFLocalBackend", "set_threads", "token_stats"]


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


class HFLocalBackend:
    """A local Hugging Face causal LM (zoo key, ``"tiny-random"`` or model folder).

    Greedy decoding, batched with left padding; prompts are sorted by token length into
    batches and the outputs put back in input order. One ``generate`` call per batch returns:
    the response, per-token log-probs and entropies of every generated token up to and
    including the first EOS (from the step logits, float32), and the hidden state of the last
    input token at the embedding output and after every layer (SAGO (arXiv 2610.01428) §Axes:
    Δ-Cos, Δ-Prob, Δ-Ent).

    Chat models (``info["chat"]``) get the tokenizer's chat template with one user message and
    ``add_generation_prompt=True``; base models (gemma-3-270m) get the plain prompt text as a
    completion, never a template.

    Shared prefix: the token prefix every prompt of a batch shares (the chat template's system
    turn, ≈ 24 of ≈ 50 tokens for smollm2) is prefilled once at batch size 1 and its KV cache
    repeated over the batch, so only each prompt's own tokens are prefilled per row
    (``MIN_SHARED_PREFIX`` tokens or more; greedy tokens identical to a full prefill in the
    benchmark, hidden states within float noise — see benchmarks/README.md).

    Response text: the generated tokens decoded with ``skip_special_tokens=True``, then
    ``.strip()``-ed of surrounding whitespace (the scored token ids are kept unchanged in
    ``GenerationResult.token_ids``).
    """

    name = "hf_local"
    capabilities = frozenset({"cos", "prob", "ent"})
    #: Shortest shared token prefix worth a separate batch-1 prefill (below it: one full prefill).
    MIN_SHARED_PREFIX = 8

    def __init__(
        self,
        model_key_or_path: str | None = None,
        dtype: str = "float32",
        device: str = "auto",
        batch_size: int = 8,
        model: str | None = None,
        seed: int = 0,
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
        Raises:
            ValueError: bad arguments or unknown model; ModelUnavailableError: weights missing.
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
        self.device = torch.device(self._info["device"])
        self.chat = bool(self._info["chat"])
        eos = self.model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}
        if self.tokenizer.eos_token_id is not None:
            eos_ids.add(self.tokenizer.eos_token_id)
        self.eos_ids = sorted(eos_ids)
        self.pad_id = self.tokenizer.pad_token_id
        self._closed = False

    # ------------------------------------------------------------------ record

    def info(self) -> dict[str, Any]:
        """Run-record facts: backend, model info from ``load_model``, decoding, threads.

        Returns:
            dict with ``backend``, ``model_id``, ``capabilities`` (sorted list), all keys of
            ``load_model``'s info, ``decoding`` (``DecodingConfig.as_dict()`` minus
            ``max_new_tokens``, which is per call), ``eos_token_ids``, ``chat_template``
            (bool: whether a template is applied), ``threads``.
        """
        dec = DecodingConfig(batch_size=self.batch_size).as_dict()
        dec.pop("max_new_tokens")
        return {
            "backend": self.name,
            "model_id": self.model_id,
            "capabilities": sorted(self.capabilities),
            **self._info,
            "decoding": dec,
            "eos_token_ids": list(self.eos_ids),
            "chat_template": self.chat,
            "threads": self.threads,
            "shared_prefix_cache": True,
        }

    # ------------------------------------------------------------------ prompts

    def format_prompt(self, prompt: str) -> str:
        """The exact text fed to the model: chat template (chat models) or the prompt itself."""
        if self.chat:
            return self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
            )
        return prompt

    def encode_prompt(self, prompt: str) -> list[int]:
        """Token ids of the formatted prompt (templates carry their own special tokens; base
        models get the tokenizer's default special tokens, e.g. BOS)."""
        text = self.format_prompt(prompt)
        return self.tokenizer(text, add_special_tokens=not self.chat)["input_ids"]

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
            One ``GenerationResult`` per prompt: ``text``; ``token_ids`` (scored tokens: up to
            and including the first EOS); ``n_tokens = len(token_ids)``; ``token_logprobs`` and
            ``token_entropies`` float64 (n_tokens,), natural log / nats, from the step logits
            (unprocessed, float32 log_softmax); ``hidden_last`` float32 (L+1, H) from the
            prefill step at the last input position; ``finish_reason`` "stop" (EOS emitted) or
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
        for i, p in enumerate(prompts):
            try:
                ids = self.encode_prompt(p)
                if not ids:
                    raise ValueError("prompt encodes to zero tokens")
                encoded.append(ids)
            except Exception as exc:  # one bad prompt becomes a row
                encoded.append(None)
                out[i] = GenerationResult(text="", n_tokens=0, error=f"{type(exc).__name__}: {exc}")
        valid = [i for i, e in enumerate(encoded) if e is not None]
        for batch in self._batches([len(encoded[i]) for i in valid]):  # type: ignore[arg-type]
            idx = [valid[b] for b in batch]
            try:
                res = self._generate_batch([encoded[i] for i in idx], max_new_tokens)  # type: ignore[misc]
            except Exception:
                res = []
                for i in idx:
                    try:
                        res.extend(self._generate_batch([encoded[i]], max_new_tokens))  # type: ignore[list-item]
                    except Exception as exc:
                        res.append(
                            GenerationResult(text="", n_tokens=0, error=f"{type(exc).__name__}: {exc}")
                        )
            for i, r in zip(idx, res):
                out[i] = r
        return out  # type: ignore[return-value]

    @torch.inference_mode()
    def _generate_batch(self, seqs: list[list[int]], max_new_tokens: int) -> list[GenerationResult]:
        t0 = time.perf_counter()
        n_shared = self.shared_prefix(seqs)
        extra: dict[str, Any] = {}
        if n_shared:
            # prefill the shared prefix once, repeat its KV cache over the batch; rows are
            # [prefix | left padding | own tokens], positions follow the attention mask.
            prefix = torch.tensor([seqs[0][:n_shared]], dtype=torch.long, device=self.device)
            out = self.model(input_ids=prefix, use_cache=True)
            cache = out["cache"] if "cache" in out else out["past_key_values"]
            cache.batch_repeat_interleave(len(seqs))
            own, own_mask = self._pad_left([s[n_shared:] for s in seqs])
            ids = torch.cat([prefix.expand(len(seqs), -1), own], dim=1)
            mask = torch.cat([torch.ones_like(prefix).expand(len(seqs), -1), own_mask], dim=1)
            extra["cache"] = cache
        else:
            ids, mask = self._pad_left(seqs)
        gen = self.model.generate(
            input_ids=ids,
            attention_mask=mask,
            **extra,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            temperature=None,
            top_p=None,
            top_k=None,
            num_beams=1,
            eos_token_id=self.eos_ids,
            pad_token_id=self.pad_id,
            return_dict_in_generate=True,
            output_hidden_states=True,
            output_logits=True,
        )
        prompt_len = ids.shape[1]
        new = gen.sequences[:, prompt_len:]  # (B, T_max)
        # per step (B, V) rather than one stacked (B, T_max, V) tensor: same numbers, ~4× less time
        lp = torch.empty(new.shape, dtype=torch.float32)
        ent = torch.empty(new.shape, dtype=torch.float32)
        for t, step_logits in enumerate(gen.logits):
            lp[:, t], ent[:, t] = token_stats(step_logits, new[:, t])
        # prefill step: tuple of L+1 tensors (B, S, H) (S: the uncached part); position -1 is
        # the last real token of every row (left padding).
        hidden = torch.stack([h[:, -1, :] for h in gen.hidden_states[0]], dim=1).float()  # (B, L+1, H)
        hidden_np = hidden.cpu().numpy()
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
            text = self.tokenizer.decode(kept, skip_special_tokens=True).strip()
            results.append(
                GenerationResult(
                    text=text,
                    n_tokens=n,
                    token_logprobs=lp_np[b, :n].copy(),
                    token_entropies=ent_np[b, :n].copy(),
                    hidden_last=hidden_np[b].copy(),
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
