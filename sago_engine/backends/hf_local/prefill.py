"""Everything before the first decoding step: a shared prefix prefilled once, the rest in length buckets.

Shared prefix: the token prefix every prompt of a batch shares (the chat template's system turn,
≈ 24 of ≈ 50 tokens for smollm2) is prefilled once at batch size 1 and its KV cache repeated over
the batch, so only each prompt's own tokens are prefilled per row (``shared_prefix``: at least
``HFLocalBackend.MIN_SHARED_PREFIX`` tokens; greedy tokens identical to a full prefill in the
benchmark, hidden states within float noise — see benchmarks/README.md). Not for a
sliding-window model (``attention_window``) whose batch could outgrow its window: its cache is cut
to the window, and a repeated prefix followed by left padding would shift what each row sees
(test: gemma-3 with a 700-token shared prefix); such a batch gets one padded prefill.

Length buckets: a decoding batch is best large (a decode step streams every weight once for all
its rows), but one prefill over a large batch pads every row to the longest prompt: at batch 112
of the benchmark's prompts half the prefill positions were padding. So the rows' own tokens (all
but the last) are prefilled in buckets of similar length (``length_buckets``), each padded only to
its own longest row, and their KV caches are laid side by side, left-padded to a common length
with zeros at the masked positions, as one cache (``left_padded_layers``); ``generate`` then
starts from every row's last prompt token. Masked cache positions get attention weight exactly 0,
so what a row attends to is what a single padded prefill gives; the numbers differ from it only by
the order of float32 sums (different matrix shapes): greedy replies identical in the benchmark and
tests, log-probs and hidden states within float noise (tests/integration/backends/test_prefill.py, benchmarks/README.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .engine import LocalEngine
from .kvcache import preallocated_cache

__all__ = ["NewCache", "Prefill", "prefill_batch", "attention_window", "shared_prefix", "pad_left", "length_buckets",
           "left_padded_layers", "bucketed_prefill"]

#: ``(model, reserve) -> empty KV cache`` (``kvcache.preallocated_cache``; tests pass transformers'
#: ``DynamicCache`` to compare).
NewCache = Callable[[Any, int], Any]


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


def shared_prefix(seqs: list[list[int]], min_len: int) -> int:
    """Length of the token prefix all ``seqs`` share, leaving each row ≥ 1 token of its own;
    0 for a single row or a prefix shorter than ``min_len``."""
    if len(seqs) < 2:
        return 0
    n = min(len(s) for s in seqs) - 1
    first = seqs[0]
    for s in seqs[1:]:
        k = 0
        while k < n and s[k] == first[k]:
            k += 1
        n = k
    return n if n >= min_len else 0


def pad_left(seqs: list[list[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows left-padded to the longest: ``(ids, mask)``, both long (B, S) on ``device``
    (``pad_id`` at padding; mask 1 at real tokens)."""
    n = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), n), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), n), dtype=torch.long)
    for i, s in enumerate(seqs):
        if s:
            ids[i, n - len(s) :] = torch.tensor(s, dtype=torch.long)
            mask[i, n - len(s) :] = 1
    return ids.to(device), mask.to(device)


@dataclass
class Prefill:
    """A batch prefilled up to its first decoding step (``prefill_batch``).

    Attributes:
        ids, mask: (B, S) long: the whole input as ``generate`` takes it (``[prefix | left padding
            | own tokens]``); ``generate`` feeds the columns the cache does not hold yet.
        cache: the KV cache (B rows) over the prefilled columns, with room for the reply.
        own_hidden: L+1 tensors (B, W, H) over the bucketed part (W = the longest own part but its
            last token; zeros at padding), or None (one padded prefill, or nothing bucketed).
        prefix_hidden: L+1 tensors (1, P, H) of the shared prefix, or None without one.
    """

    ids: torch.Tensor
    mask: torch.Tensor
    cache: Any
    own_hidden: list[torch.Tensor] | None
    prefix_hidden: Sequence[torch.Tensor] | None


def prefill_batch(be: LocalEngine, seqs: list[list[int]], max_new_tokens: int, *, one_prefill: bool = False,
            new_cache: NewCache = preallocated_cache) -> Prefill:
    """Prefill a decoding batch: its shared prefix once, then every row's own tokens but the last in
    length buckets (see the module doc), leaving the last prompt token of every row to ``generate``.

    Args:
        be: the backend (its model, device, pad id, ``MIN_SHARED_PREFIX``, ``PREFILL_PAD_FRACTION``,
            ``PREFILL_MIN_ROWS``, ``attention_window``).
        seqs: the batch's token ids (B rows, each ≥ 1 token); max_new_tokens: the reply cap (room
            reserved in the cache; with the window, decides whether a sliding-window batch fits).
        one_prefill: True leaves every prompt token but a shared prefix to ``generate``'s own padded
            prefill (the reference the bucketed path is tested against; also what a sliding-window
            batch that could outgrow its window gets).
        new_cache: the empty-cache factory.
    Returns:
        ``Prefill``.
    """
    n_shared = shared_prefix(seqs, be.MIN_SHARED_PREFIX)
    fits = be.attention_window is None or max(map(len, seqs)) + max_new_tokens <= be.attention_window
    if n_shared and not fits:
        # a sliding-window model's cache is cut to the window: a prefix cache repeated and then
        # left-padded would shift what each row's window sees (wrong replies); prefill in full
        n_shared = 0
    prefix_hidden = None
    cache = None
    if n_shared:
        # prefill the shared prefix once; rows are [prefix | left padding | own tokens],
        # positions follow the attention mask.
        prefix = torch.tensor([seqs[0][:n_shared]], dtype=torch.long, device=be.device)
        cache = new_cache(be.model, max_new_tokens)
        out = be.model(input_ids=prefix, use_cache=True, output_hidden_states=True, cache=cache)
        prefix_hidden = out.hidden_states  # user tokens can lie in the shared prefix
        own, own_mask = pad_left([s[n_shared:] for s in seqs], be.pad_id, be.device)
        ids = torch.cat([prefix.expand(len(seqs), -1), own], dim=1)
        mask = torch.cat([torch.ones_like(prefix).expand(len(seqs), -1), own_mask], dim=1)
    else:
        ids, mask = pad_left(seqs, be.pad_id, be.device)
    own_hidden = None
    if fits and not one_prefill:
        # own tokens but the last prefilled in length buckets (sliding window: only while the
        # cache is never cut), then decoding starts from every row's last prompt token
        cache, own_hidden = bucketed_prefill(be, seqs, n_shared, cache, max_new_tokens, new_cache)
    elif cache is not None:
        cache.batch_repeat_interleave(len(seqs))
    else:
        cache = new_cache(be.model, max_new_tokens)
    return Prefill(ids, mask, cache, own_hidden, prefix_hidden)


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


def bucketed_prefill(be: LocalEngine, seqs: list[list[int]], n_shared: int, prefix_cache: Any, reserve: int,
                     new_cache: NewCache = preallocated_cache) -> tuple[Any, list[torch.Tensor] | None]:
    """Prefill every row's own tokens but the last in length buckets (``length_buckets`` with the
    backend's ``PREFILL_PAD_FRACTION`` and ``PREFILL_MIN_ROWS``) and lay their caches side by side
    (``left_padded_layers``).

    Args:
        be: the backend (model, device, pad id, bucket settings).
        seqs: the batch's token ids (B rows); n_shared: tokens of the shared prefix (0: none);
        prefix_cache: the prefix's cache at batch 1 (None without a prefix); reserve: room
            for the reply in the returned cache; new_cache: the empty-cache factory.
    Returns:
        ``(cache, own_hidden)``: a cache (B rows) over ``[prefix | left padding | own tokens
        but the last]``, which is ``Prefill.ids`` minus its last column, and L+1 hidden-state
        tensors (B, W, H) over the own part (W = the longest own part but its last token; zeros at
        padding), or None when no row has such tokens (W = 0).
    """
    B, P = len(seqs), n_shared
    own = [s[P:-1] for s in seqs]
    width = max(map(len, own))
    if width == 0:
        if prefix_cache is None:
            return new_cache(be.model, reserve), None
        prefix_cache.batch_repeat_interleave(B)
        return prefix_cache, None
    kv: list[tuple[list, list]] = []
    hid: list[list] = []
    no_logits = torch.zeros(0, dtype=torch.long, device=be.device)  # hidden states only: no LM head
    for bucket in length_buckets([len(o) for o in own], be.PREFILL_PAD_FRACTION, be.PREFILL_MIN_ROWS):
        b = len(bucket)
        b_ids, b_mask = pad_left([own[r] for r in bucket], be.pad_id, be.device)
        # with a prefix, room for the bucket's tokens after it (no regrowth, no second copy)
        c = new_cache(be.model, b_ids.shape[1] if prefix_cache is not None else 0)
        if prefix_cache is not None:
            for li, layer in enumerate(prefix_cache.layers):
                c.update(layer.keys.expand(b, *layer.keys.shape[1:]),
                         layer.values.expand(b, *layer.values.shape[1:]), li)
        full_mask = torch.cat([torch.ones((b, P), dtype=b_mask.dtype, device=b_mask.device), b_mask], dim=1)
        pos = P + (b_mask.cumsum(-1) - 1).clamp(min=0)
        out = be.model(input_ids=b_ids, attention_mask=full_mask, position_ids=pos, cache=c,
                       use_cache=True, output_hidden_states=True, logits_to_keep=no_logits)
        rows = torch.tensor(bucket, dtype=torch.long, device=be.device)
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
    cache = new_cache(be.model, reserve)
    for li, (kp, vp) in enumerate(kv):
        cache.update(left_padded_layers(kp, B, width, keep_left=P), left_padded_layers(vp, B, width, keep_left=P), li)
    return cache, [left_padded_layers(hp, B, width) for hp in hid]
