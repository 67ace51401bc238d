"""Teacher forcing: the log-probs and entropies a local model gives to given reply tokens.

SAGO (arXiv 2610.01428) §Axes: Δ-Prob / Δ-Ent are defined under teacher forcing. One forward pass
over prompt + reply per batch; for a greedy reply from ``generate`` it reproduces that reply's
``token_logprobs`` / ``token_entropies`` up to float noise (tested: fp32 abs ≤ 1e-3).
"""

from __future__ import annotations

import numpy as np
import torch

from .engine import LocalEngine
from .statistics import token_stats

__all__ = ["teacher_force", "teacher_batch"]


def teacher_force(be: LocalEngine, prompts: list[str],
                  responses: list[list[int] | str]) -> list[tuple[np.ndarray, np.ndarray]]:
    """``HFLocalBackend.teacher_force``: per prompt ``(logprobs, entropies)`` of its response.

    Args:
        be: the backend (prompt encoding, batch size, model).
        prompts: user prompts, encoded as ``generate`` encodes them.
        responses: per prompt the response token ids or a string (tokenized without special
            tokens, no EOS appended).
    Returns:
        float64 arrays of shape (len(response ids),), natural log and nats; empty for an empty response.
    Raises:
        ValueError: lengths of ``prompts`` and ``responses`` differ.
    """
    if len(prompts) != len(responses):
        raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
    resp_ids = [
        r if not isinstance(r, str) else be.tokenizer(r, add_special_tokens=False)["input_ids"]
        for r in responses
    ]
    seqs = [(be.encode_prompt(p), list(r)) for p, r in zip(prompts, resp_ids)]
    out: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(seqs)
    for batch in be.batches([len(a) + len(b) for a, b in seqs]):
        for i, res in zip(batch, teacher_batch(be, [seqs[i] for i in batch])):
            out[i] = res
    return out  # type: ignore[return-value]


@torch.inference_mode()
def teacher_batch(be: LocalEngine, pairs: list[tuple[list[int], list[int]]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """One forward pass over left-padded ``prompt ids + response ids`` rows: per row the float64
    ``(logprobs, entropies)`` of the response tokens (two empty arrays for an empty response)."""
    ids, mask = be.pad_left([p + r for p, r in pairs])
    pos = (mask.cumsum(-1) - 1).clamp_min(0)
    logits = be.model(input_ids=ids, attention_mask=mask, position_ids=pos).logits
    S = ids.shape[1]
    res = []
    for b, (_p, r) in enumerate(pairs):
        if not r:
            res.append((np.zeros(0), np.zeros(0)))
            continue
        # token at position S-len(r)+k is predicted by logits at position S-len(r)+k-1
        start = S - len(r)
        lg = logits[b, start - 1 : S - 1]
        lp, ent = token_stats(lg, ids[b, start:S])
        res.append((lp.double().cpu().numpy(), ent.double().cpu().numpy()))
    return res
