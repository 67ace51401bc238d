"""Prefill in length buckets, decode as one batch (``HFLocalBackend``, issue #17).

A decoding batch is best large (a decode step streams every weight once for all its rows), but
one prefill over a large batch pads every row to the longest prompt: at batch 112 of the
benchmark's prompts half the prefill positions were padding. So the rows' own tokens (all but the
last) are prefilled in buckets of similar length, each padded only to its own longest row, and
their KV caches are laid side by side, left-padded to a common length with zeros at the masked
positions, as one cache; ``generate`` then starts from every row's last prompt token. Masked cache
positions get attention weight exactly 0, so what a row attends to is what a single padded prefill
gives; the numbers differ from it only by the order of float32 sums (different matrix shapes):
greedy replies identical in the benchmark and tests, log-probs and hidden states within float
noise (tests/test_backend.py, benchmarks/README.md).
"""

from __future__ import annotations

from typing import Sequence

import torch


def length_buckets(lengths: Sequence[int], max_pad_fraction: float = 0.1, min_rows: int = 8) -> list[list[int]]:
    """Split rows into prefill buckets of similar length.

    Rows are taken shortest first; a row joins the current bucket while that bucket has fewer than
    ``min_rows`` rows or its padding (positions added to reach the bucket's longest row) stays at
    most ``max_pad_fraction`` of its positions; otherwise it starts a new bucket. Empty rows
    (length 0) never make a bucket of their own when a longer row exists: they join the first
    bucket that has tokens.

    Args:
        lengths: tokens to prefill per row (≥ 0).
        max_pad_fraction: in [0, 1): the padding a bucket may hold.
        min_rows: a bucket's smallest size before padding is considered (≥ 1; small matrix
            products run far below the machine's peak).
    Returns:
        Buckets of row indices (each sorted by length, then index); together every row once.
    Raises:
        ValueError: a negative length, ``min_rows < 1`` or ``max_pad_fraction`` outside [0, 1).
    """
    if min_rows < 1 or not 0 <= max_pad_fraction < 1:
        raise ValueError(f"min_rows must be >= 1 and max_pad_fraction in [0, 1), got {min_rows}, {max_pad_fraction}")
    if any(n < 0 for n in lengths):
        raise ValueError("lengths must be >= 0")
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    buckets: list[list[int]] = []
    cur: list[int] = []
    total = 0
    for i in order:
        n = lengths[i]
        positions = n * (len(cur) + 1)  # the new row is the longest so far
        if cur and len(cur) >= min_rows and positions - (total + n) > max_pad_fraction * positions:
            buckets.append(cur)
            cur, total = [], 0
        cur.append(i)
        total += n
    if cur:
        buckets.append(cur)
    if len(buckets) > 1 and lengths[buckets[0][-1]] == 0:
        # a bucket of empty rows would be a forward pass over no tokens: they join the next one
        buckets[:2] = [buckets[0] + buckets[1]]
    return buckets


def left_padded_layers(parts: Sequence[tuple[torch.Tensor, torch.Tensor, torch.Tensor]], batch: int,
                       width: int, keep_left: int = 0) -> torch.Tensor:
    """Lay buckets' tensors side by side as one left-padded batch.

    Args:
        parts: per bucket ``(rows, x, mask)``: ``rows`` (b,) long, the batch rows it fills;
            ``x`` (b, ..., keep_left + T, E) with the sequence on dim -2 (a KV cache layer
            (b, heads, P + T, head_dim) or hidden states (b, T, E) with ``keep_left=0``);
            ``mask`` (b, T) 1 at real tokens (right-aligned).
        batch: rows of the result; width: its T (≥ every bucket's T).
        keep_left: leading positions copied as they are (a shared prefix), not masked.
    Returns:
        (batch, ..., keep_left + width, E): bucket ``j``'s own part right-aligned, zeros at masked
        and padded positions (never what a padding token computed — it could be NaN for a row
        with no real token in its bucket).
    """
    x0 = parts[0][1]
    out = x0.new_zeros((batch, *x0.shape[1:-2], keep_left + width, x0.shape[-1]))
    for rows, x, mask in parts:
        T = x.shape[-2] - keep_left
        m = mask.bool().reshape(mask.shape[0], *([1] * (x.dim() - 3)), T, 1)
        own = torch.where(m, x[..., keep_left:, :], x.new_zeros(()))
        out[rows, ..., keep_left + width - T:, :] = own
        if keep_left:
            out[rows, ..., :keep_left, :] = x[..., :keep_left, :]
    return out
