"""The white-box statistics of a local model: token log-probs and entropies, hidden states at the user's text.

SAGO (arXiv 2610.01428) §Axes: Δ-Prob and Δ-Ent read the log-prob of each reply token and the
entropy of the full predictive distribution (``token_stats``, float32 whatever the model's dtype);
during generation ``StepStats`` takes them from each step's logits. Δ-Cos reads hidden states;
its ``cos@user_*`` options (docs/METHOD.md) read them at the user's text (``user_states``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from transformers import LogitsProcessor

__all__ = ["token_stats", "StepStats", "user_states"]


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


class StepStats(LogitsProcessor):
    """A ``transformers.LogitsProcessor`` that records, at every decoding step, the log-prob of the
    greedy token and the entropy of the full predictive distribution of each row (``token_stats``
    on the step's float32 logits, which it returns unchanged), so ``generate`` need not hold every
    step's (rows, vocabulary) logits until it ends.

    Attributes:
        logprobs, entropies: one float32 tensor (rows,) per step seen.
    """

    def __init__(self) -> None:
        self.logprobs: list[torch.Tensor] = []
        self.entropies: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        # greedy picks argmax(scores) (no other processor: neutral_generation_config); a row
        # that finished earlier in this call gets the pad token instead, and its cell is not kept
        lp, ent = token_stats(scores, scores.argmax(-1))
        self.logprobs.append(lp)
        self.entropies.append(ent)
        return scores


def user_states(layers: Sequence[torch.Tensor], prefix_layers: Sequence[torch.Tensor] | None, row: int,
                seq_len: int, span: tuple[int, int] | None) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Hidden states at the user's text of one row: (last user token, mean over user tokens).

    Args:
        layers: L+1 tensors (B, S, H) of a pass whose last position is the row's last token
            (left padding); token j of the row's sequence is at column ``S - seq_len + j``.
        prefix_layers: L+1 tensors (1, P, H) of a separately prefilled shared prefix (its
            token j < P at column j), or None.
        row: the row; seq_len: its sequence length (prefix included); span: [a, b) token
            span of the user's text in the sequence (``PromptRenderer.prompt_layout``), or None.
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
