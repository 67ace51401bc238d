"""Sampled decoding of a local model: temperature, top-k, top-p, one seeded generator per row.

Each row of a decoding batch draws its token from its own ``torch.Generator`` seeded with that
reply's seed (``sago_engine.seeds.sample_seed``), one uniform number per decoding step, by
inverse-CDF sampling over the filtered distribution in float64. A reply therefore depends only
on its prompt, its seed and the model's logits, never on which other rows share its batch or in
what order they are decoded: batches of any size give the same replies (up to a uniform draw
falling within float noise of a CDF boundary, about 1e-7 per step).

``SampledStepStats`` replaces ``statistics.StepStats`` in the greedy loop of ``generation``: it
records the log-prob and entropy of the sampled token under the model's unprocessed distribution
(T = 1, what Δ-Prob and Δ-Ent read, SAGO arXiv 2610.01428 §Axes) and hands ``generate`` scores
whose argmax is the sampled token, so the loop (rows leaving the batch, KV cache reuse) is the
greedy one. Filtering rules follow transformers' ``TopKLogitsWarper`` / ``TopPLogitsWarper``
(temperature first, then top-k, then top-p keeping at least one token).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .statistics import StepStats, token_stats

__all__ = ["SamplingParams", "filtered_probs", "draw", "row_generators", "SampledStepStats"]


@dataclass(frozen=True)
class SamplingParams:
    """How a sampled reply is drawn (``HFLocalSettings``: temperature > 0, top_p in (0, 1], top_k ≥ 0)."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0

    @property
    def greedy(self) -> bool:
        """True for temperature 0 (greedy decoding: no sampling at all)."""
        return self.temperature == 0.0

    def record(self) -> dict:
        """``{"temperature", "top_p", "top_k"}`` for the run record."""
        return {"temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k}


def filtered_probs(logits: torch.Tensor, p: SamplingParams) -> torch.Tensor:
    """The sampling distribution of each row: softmax(logits / T) after top-k and top-p.

    Args:
        logits: (B, V) raw next-token logits; p: the settings (temperature > 0).
    Returns:
        (B, V) float64 probabilities summing to 1 per row; tokens cut by top-k / top-p are 0.
    """
    x = logits.double() / p.temperature
    if p.top_k and p.top_k < x.shape[-1]:
        kth = torch.topk(x, p.top_k, dim=-1).values[..., -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    if p.top_p < 1.0:
        srt, idx = torch.sort(x, dim=-1, descending=False)
        cum = torch.softmax(srt, dim=-1).cumsum(-1)
        cut = cum <= 1.0 - p.top_p  # the least probable tokens whose mass stays within 1 - top_p
        cut[..., -1] = False  # the most probable token is always kept
        x = x.masked_fill(cut.scatter(-1, idx, cut), float("-inf"))
    return torch.softmax(x, dim=-1)


def draw(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw: per row the first token whose cumulative probability exceeds ``u``.

    Args:
        probs: (B, V) float64 probabilities; u: (B,) uniforms in [0, 1) on the same device.
    Returns:
        (B,) long token ids, each with probability > 0.
    """
    cdf = probs.cumsum(-1)
    tok = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(-1), right=True).squeeze(-1)
    tok = tok.clamp(max=probs.shape[-1] - 1)
    zero = probs.gather(-1, tok.unsqueeze(-1)).squeeze(-1) <= 0  # only when u rounds onto the top of the CDF
    return torch.where(zero, probs.argmax(-1), tok)


def row_generators(seeds: Sequence[int]) -> list[torch.Generator]:
    """One CPU ``torch.Generator`` per row, seeded with that reply's seed (an int ≥ 0)."""
    return [torch.Generator(device="cpu").manual_seed(int(s)) for s in seeds]


class SampledStepStats(StepStats):
    """``StepStats`` for sampled decoding: at each step every row draws its token with its own
    generator (``filtered_probs``, ``draw``), the step's statistics are those of the drawn token
    under the unprocessed logits, and the returned scores are 0 at the drawn token and −inf
    elsewhere (so greedy ``generate`` emits it).

    Args:
        params: the sampling settings; generators: one per row of the ``generate`` call, in row order.
    """

    def __init__(self, params: SamplingParams, generators: Sequence[torch.Generator]) -> None:
        super().__init__()
        self.params, self.generators = params, list(generators)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if scores.shape[0] != len(self.generators):
            raise RuntimeError(f"{scores.shape[0]} rows but {len(self.generators)} generators")
        u = torch.cat([torch.rand(1, generator=g, dtype=torch.float64) for g in self.generators]).to(scores.device)
        tok = draw(filtered_probs(scores, self.params), u)
        lp, ent = token_stats(scores, tok)
        self.logprobs.append(lp)
        self.entropies.append(ent)
        forced = torch.full_like(scores, float("-inf"))
        return forced.scatter_(-1, tok.unsqueeze(-1), 0.0)
