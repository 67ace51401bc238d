"""Log-probs an API server returned: checked before anything sums them, and the top-k entropy bound.

A server's log-probs are input, not measurements to trust. ``check_server_logprobs`` decides, per
reply, what reaches ``GenerationResult.token_logprobs`` / ``token_entropies``:

- **Trailing end-of-text entries are dropped.** An entry whose token has neither text nor bytes
  (vLLM's entry for an end-of-sequence token it cannot detokenize, vllm-project/vllm PR #17637:
  ``{"token": "", "logprob": -9999.0, "bytes": [], "top_logprobs": []}``) carries no part of the
  reply. When the provider gives no token strings (an older cached reply), a trailing entry with
  a placeholder value (≤ ``LOGPROB_SENTINEL``) and no alternatives is taken to be one. Dropping
  them keeps Δ-Prob over the visible text only, as for the providers that never return the
  end-of-sequence token (``ApiBackend``: API sums are comparable within one model only).
- **Any other invalid value sets the reply's log-probs aside.** A placeholder (OpenAI documents
  ``-9999.0`` for a token outside the top 20), a value above ``LOGPROB_POSITIVE_TOL``, NaN or
  ±inf among the produced tokens, or NaN / +inf / a positive value among the alternatives: the
  produced token's probability is then unknown, and leaving that one term out of the sum would
  bias Δ-Prob by an unknown amount. Δ-Prob and Δ-Ent are unavailable for that reply, with the
  reason "invalid log-probs from server: …", and the runner counts it
  (``run_usage.invalid_logprobs``). An alternative of −inf or ≤ ``LOGPROB_SENTINEL`` is
  probability 0 there (a valid statement about an alternative).
- **Short and empty top-k lists.** A list shorter than k is used as it is (the bound is over the
  alternatives returned); a position with an empty list has no entropy (NaN) and is skipped by
  ``GenerationResult.mean_entropy``, so one empty list does not remove the reply's Δ-Ent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sago_engine.types import LOGPROB_POSITIVE_TOL, LOGPROB_SENTINEL, logprob_problem

__all__ = ["INVALID_FROM_SERVER", "ServerLogprobs", "check_server_logprobs", "topk_entropy"]

#: The start of every reason a reply's log-probs were set aside for.
INVALID_FROM_SERVER = "invalid log-probs from server"


def topk_entropy(top_logprobs: Sequence[Sequence[float]]) -> np.ndarray:
    """Per-token entropy (nats) approximated from the top-k log-probs an API returns.

    For one position with top-k probabilities p_1..p_k (p_j = exp(logprob_j)) and leftover
    mass r = max(0, 1 − Σ p_j)::

        H ≈ −Σ_{j≤k} p_j log p_j − r log r

    i.e. the unseen tokens are treated as one bucket. Since spreading r over several tokens can
    only raise the entropy, this is a **lower bound** of the true predictive entropy (exact
    when the top-k cover all the mass); it tightens as k grows. Log-probs ≤ −700 (OpenAI's
    −9999 "very unlikely") and −inf count as probability 0.

    Args:
        top_logprobs: T positions, each a sequence of k ≥ 1 natural-log probabilities.
    Returns:
        float64 array (T,), each value in [0, log(k+1)].
    Raises:
        ValueError: a position has no alternatives (k = 0).
    """
    out = np.zeros(len(top_logprobs), dtype=np.float64)
    for t, lps in enumerate(top_logprobs):
        if len(lps) == 0:
            raise ValueError(f"position {t} has no top-k log-probs")
        lp = np.minimum(np.asarray(lps, dtype=np.float64), 0.0)
        p = np.where(lp > -700.0, np.exp(lp), 0.0)
        s = float(p.sum())
        if s > 1.0:  # rounding in the API's numbers: renormalise, no leftover
            p, lp, s = p / s, np.log(np.maximum(p / s, 1e-300)), 1.0
        h = float(-(p * np.where(p > 0, lp, 0.0)).sum())
        r = 1.0 - s
        if r > 1e-12:
            h -= r * math.log(r)
        out[t] = max(0.0, h)
    return out


@dataclass(frozen=True)
class ServerLogprobs:
    """What ``check_server_logprobs`` keeps of one reply's log-probs."""

    logprobs: np.ndarray | None
    """float64 (T',), each ≤ 0 (values in (0, ``LOGPROB_POSITIVE_TOL``] rounded to 0); None when
    set aside (``invalid``) or when no entry is left."""
    entropies: np.ndarray | None
    """float64 (T',) top-k lower bound per kept token, NaN where the list was empty; None when
    no alternatives were asked for or returned, or when set aside."""
    dropped: int
    """Trailing end-of-text entries removed (0 or more)."""
    invalid: str | None
    """"invalid log-probs from server: <value> at token <i> …" when the reply's log-probs were
    set aside, else None."""


def _textless_tail(lps: Sequence[float], tops: Sequence[Sequence[float]] | None,
                   textless: Sequence[int] | None) -> int:
    """How many trailing entries are end-of-text entries (see the module docstring)."""
    marked = None if textless is None else {int(i) for i in textless}
    n = len(lps)
    if marked is not None and len(marked) >= n:  # no entry has text: no token strings, not end-of-text
        marked = None
    while n > 0:
        i = n - 1
        if marked is not None:
            if i not in marked:
                break
        else:
            try:
                placeholder = float(lps[i]) <= LOGPROB_SENTINEL  # −inf too
            except (TypeError, ValueError):
                break
            if not placeholder or (tops is not None and len(tops[i]) > 0):
                break
        n -= 1
    return len(lps) - n


def _alternatives_problem(tops: Sequence[Sequence[float]]) -> str | None:
    """The first NaN, +inf or positive (> tolerance) alternative, or None."""
    for t, alts in enumerate(tops):
        for v in alts:
            x = float("nan") if v is None else float(v)
            if math.isnan(x) or x > LOGPROB_POSITIVE_TOL:
                return f"{'NaN' if math.isnan(x) else f'{x:+.4g}'} among the alternatives of token {t}"
    return None


def check_server_logprobs(token_logprobs: Sequence[float], top_logprobs: Sequence[Sequence[float]] | None = None,
                          textless: Sequence[int] | None = None) -> ServerLogprobs:
    """Validate one reply's log-probs and compute its per-token top-k entropies.

    Args:
        token_logprobs: the T log-probs of the produced tokens, as the server sent them.
        top_logprobs: per produced token, the log-probs of the alternatives returned (T lists of
            ≤ k), or None when none were asked for. A list count other than T gives no entropies.
        textless: positions whose token has neither text nor bytes (from the provider's token
            strings); None when the provider gave none (then a trailing placeholder without
            alternatives counts as end-of-text).
    Returns:
        ``ServerLogprobs`` (see the module docstring for what is dropped and what is set aside).
    Source: OpenAI chat completions ``logprobs`` (−9999.0 for a token outside the top 20);
    vllm-project/vllm PR #17637 (the end-of-text entry); SAGO (arXiv 2610.01428) §Axes (Δ-Prob
    sums the produced tokens' log-probs, Δ-Ent averages their entropies).
    """
    lps = list(token_logprobs)
    tops = None if top_logprobs is None else [list(t or ()) for t in top_logprobs]
    if tops is not None and len(tops) != len(lps):
        tops = None
    drop = _textless_tail(lps, tops, textless)
    n = len(lps) - drop
    lps = lps[:n]
    tops = None if tops is None else tops[:n]
    why = logprob_problem(lps) or (None if tops is None else _alternatives_problem(tops))
    if why is not None:
        return ServerLogprobs(None, None, drop, f"{INVALID_FROM_SERVER}: {why}")
    if n == 0:  # nothing but end-of-text entries: no token to measure
        return ServerLogprobs(None, None, drop, None)
    lp = np.minimum(np.asarray(lps, dtype=np.float64), 0.0)
    ent = None
    if tops is not None and any(len(t) for t in tops):
        ent = np.array([topk_entropy([t])[0] if len(t) else np.nan for t in tops], dtype=np.float64)
    return ServerLogprobs(lp, ent, drop, None)
