"""What API usage costs: billed tokens at per-million-token prices → USD.

Below both the store (``store.writes`` recomputes a run's cost from its cumulative tokens) and the
API backends (``ApiBackend.take_usage`` reports the cost of a chunk), so neither imports the other.
"""

from __future__ import annotations

__all__ = ["cost_usd"]


def cost_usd(prompt_tokens: int, completion_tokens: int, price_in_per_mtok: float | None,
             price_out_per_mtok: float | None, cached_tokens: int = 0,
             price_cached_in_per_mtok: float | None = None) -> float | None:
    """Cost in USD of the billed tokens at the configured prices (USD per million tokens).

    ``prompt_tokens`` and ``completion_tokens`` are every billed class (reasoning/thinking
    tokens are output; cached and cache-write tokens are input). Cached input tokens are priced
    at ``price_cached_in_per_mtok`` when given, else at the input price (an upper bound)::

        cost = ((prompt − cached)·p_in + cached·p_cached + completion·p_out) / 1e6

    ``cached_tokens`` above ``prompt_tokens`` counts as ``prompt_tokens``.

    Returns:
        USD (float ≥ 0 for non-negative counts and prices), or None if the input or output price
        is unset (cost unknown, never a guess). Example (Gemini): two replies of 9 prompt + 47
        thought tokens at 0.30 / 2.50 → (18·0.30 + 94·2.50)/1e6 = 2.404e-4.
    """
    if price_in_per_mtok is None or price_out_per_mtok is None:
        return None
    cached = min(int(cached_tokens or 0), int(prompt_tokens or 0))
    p_cached = price_in_per_mtok if price_cached_in_per_mtok is None else price_cached_in_per_mtok
    return ((prompt_tokens - cached) * price_in_per_mtok + cached * p_cached
            + completion_tokens * price_out_per_mtok) / 1e6
