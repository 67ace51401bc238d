"""The local side of the hybrid backend: the ids a server reply is scored on, and one teacher-forced
forward pass of the local copy over prompt + reply that gives the white-box statistics.

SAGO (arXiv 2610.01428) §Axes defines Δ-Prob / Δ-Ent under teacher forcing; Δ-Cos reads the
hidden state of the last prompt token. Statistics are computed as ``hf_local`` computes them
(``hf_local.token_stats``: float32 log_softmax over the vocabulary), so a hybrid run's deltas
equal a pure ``hf_local`` run's whenever the server returns the ids the local model would generate.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from sago_engine.backends.hf_local import HFLocalBackend, token_stats
from sago_engine.types import GenerationResult

__all__ = ["TeacherForcedScorer"]


class TeacherForcedScorer:
    """Scores server replies with a loaded ``HFLocalBackend`` (its model, tokenizer and EOS ids)."""

    def __init__(self, local: HFLocalBackend) -> None:
        self.local = local
        self.eos: set[int] = set(local.eos_ids)
        fwd = inspect.signature(local.model.forward).parameters
        self._keep_arg = "logits_to_keep" if "logits_to_keep" in fwd else (
            "num_logits_to_keep" if "num_logits_to_keep" in fwd else None)

    def scored_ids(self, r: GenerationResult) -> tuple[list[int], str, bool]:
        """The ids to score, their source and whether EOS was appended: the server's ids, else the
        text re-tokenized; the EOS token appended when the server stopped (finish "stop") without
        returning one (vLLM returns it; a server may not), as hf_local counts it; cut after the
        first EOS, as hf_local keeps them.

        Returns:
            ``(ids, source, appended)``: source ``"server"`` or ``"re-tokenized"``.
        """
        if r.token_ids is not None:
            ids, source = [int(t) for t in r.token_ids], "server"
        else:
            ids, source = list(self.local.tokenizer(r.text, add_special_tokens=False)["input_ids"]), "re-tokenized"
        appended = r.finish_reason == "stop" and not any(t in self.eos for t in ids)
        if appended:
            eos = self.local.tokenizer.eos_token_id
            ids.append(eos if eos in self.eos else self.local.eos_ids[0])
        for t, tok in enumerate(ids):
            if tok in self.eos:
                return ids[: t + 1], source, appended
        return ids, source, appended

    @torch.inference_mode()
    def score(self, pairs: list[tuple[list[int], list[int]]],
              spans: Sequence[tuple[int, int] | None] | None = None) -> list[tuple]:
        """One teacher-forced forward pass over ``prompt + response`` rows (left padded).

        ``spans``: per row the token span [a, b) of the user's text among the prompt tokens
        (``HFLocalBackend.prompt_layout``), or None.
        Returns per row ``(logprobs, entropies, hidden_last, (hidden_user_last, hidden_user_mean))``:
        float64 (T,), float64 (T,) (``hf_local.token_stats``: float32 log_softmax over the
        vocabulary), float32 (L+1, H), the hidden state of the last prompt token at the
        embedding output and after every layer, and the states at the user's text
        (``HFLocalBackend.user_states``; (None, None) without a span) — the Δ-Cos options.
        Only the last max(T)+1 positions' logits are computed where the model allows it.
        """
        local = self.local
        ids, mask = local.pad_left([p + r for p, r in pairs])
        pos = (mask.cumsum(-1) - 1).clamp_min(0)
        t_max = max(len(r) for _, r in pairs)
        kw: dict[str, Any] = {}
        if self._keep_arg:
            kw[self._keep_arg] = t_max + 1
        out = local.model(input_ids=ids, attention_mask=mask, position_ids=pos, output_hidden_states=True, **kw)
        logits = out.logits  # (B, K, V), K = t_max + 1 (or S without logits_to_keep)
        S, K = ids.shape[1], logits.shape[1]
        res = []
        spans = list(spans) if spans is not None else [None] * len(pairs)
        for b, (p, r) in enumerate(pairs):
            n = len(r)
            last_prompt = S - n - 1  # left padding: every row ends at S - 1
            hid = torch.stack([h[b, last_prompt] for h in out.hidden_states]).float().cpu().numpy()
            # the prompt's token j sits at column S - n - len(p) + j, as in a prompt-only pass of
            # length len(p) over the first S - n columns
            user = HFLocalBackend.user_states([h[:, : S - n] for h in out.hidden_states], None, b, len(p), spans[b])
            if n == 0:
                res.append((np.zeros(0), np.zeros(0), hid, user))
                continue
            # the token at position S-n+k is predicted by the logits at position S-n+k-1
            lg = logits[b, K - n - 1 : K - 1]
            lp, ent = token_stats(lg, ids[b, S - n : S])
            res.append((lp.double().cpu().numpy(), ent.double().cpu().numpy(), hid, user))
        return res
