"""Prefill in length buckets (sago_engine/backends/hf_local/prefill.py): the buckets, the side-by-side
cache, and generation that gives the tokens of one padded prefill."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sago_engine.backends.hf_local.prefill import left_padded_layers, length_buckets
from tests.integration.backends.test_backend import HIDDEN_ATOL, LOGPROB_ATOL, PROMPTS


def test_buckets_cover_every_row_once_and_bound_padding():
    lengths = [30, 5, 6, 31, 7, 50, 5, 29, 8, 9, 33, 6, 0, 48, 7, 30, 6, 5]
    buckets = length_buckets(lengths, max_pad_fraction=0.1, min_rows=4)
    assert sorted(i for b in buckets for i in b) == list(range(len(lengths)))
    for b in buckets:
        n = [lengths[i] for i in b]
        assert n == sorted(n)
        if len(b) > 4:  # beyond min_rows a bucket holds at most 10 % padding
            assert max(n) * len(n) - sum(n) <= 0.1 * max(n) * len(n)
    assert len(buckets) > 1


def test_buckets_min_rows_and_errors():
    assert length_buckets([1, 100, 1000], min_rows=8) == [[0, 1, 2]]  # too few rows to split
    assert length_buckets([], min_rows=2) == []
    assert length_buckets([3, 3, 3, 3], max_pad_fraction=0.0, min_rows=1) == [[0, 1, 2, 3]]
    for bad in ({"min_rows": 0}, {"max_pad_fraction": 1.0}, {"max_pad_fraction": -0.1}):
        with pytest.raises(ValueError):
            length_buckets([1, 2], **bad)
    with pytest.raises(ValueError):
        length_buckets([1, -1])


def test_empty_rows_never_make_a_bucket_of_their_own():
    # without the rule: [[0, 1, 2], [3, 4, 5]], a prefill forward over no tokens
    assert length_buckets([0, 0, 0, 5, 5, 5], max_pad_fraction=0.1, min_rows=2) == [[0, 1, 2, 3, 4, 5]]
    assert length_buckets([0, 0], min_rows=1) == [[0, 1]]  # nothing to prefill at all: one bucket


def test_left_padded_layers_places_rows_and_zeros_masked_positions():
    """Two buckets (rows 2, 0 and row 1) → one batch: prefix columns copied, own tokens
    right-aligned, masked and padded positions exactly 0 (even where the bucket held NaN)."""
    P = 2
    a = torch.arange(2 * 1 * (P + 3) * 2, dtype=torch.float32).reshape(2, 1, P + 3, 2) + 1
    a[1, :, P, :] = float("nan")  # a padding position of row 0 (its mask is 0 there)
    mask_a = torch.tensor([[1, 1, 1], [0, 1, 1]])
    b = -torch.ones(1, 1, P + 1, 2)
    mask_b = torch.tensor([[1]])
    out = left_padded_layers([(torch.tensor([2, 0]), a, mask_a), (torch.tensor([1]), b, mask_b)], batch=3,
                             width=4, keep_left=P)
    assert out.shape == (3, 1, P + 4, 2)
    assert torch.equal(out[2, :, :P], a[0, :, :P]) and torch.equal(out[2, :, P + 1:], a[0, :, P:])
    assert torch.equal(out[2, :, P], torch.zeros(1, 2))
    assert torch.equal(out[0, :, P + 2:], a[1, :, P + 1:]) and torch.equal(out[0, :, P:P + 2], torch.zeros(1, 2, 2))
    assert torch.equal(out[1, :, P + 3:], b[0, :, P:]) and not torch.isnan(out).any()


def _compare(x, y, atol=LOGPROB_ATOL):
    assert x.token_ids == y.token_ids and x.text == y.text and x.finish_reason == y.finish_reason
    np.testing.assert_allclose(x.token_logprobs, y.token_logprobs, atol=atol)
    np.testing.assert_allclose(x.token_entropies, y.token_entropies, atol=atol)
    np.testing.assert_allclose(x.hidden_last, y.hidden_last, atol=HIDDEN_ATOL)
    for u, v in ((x.hidden_user_last, y.hidden_user_last), (x.hidden_user_mean, y.hidden_user_mean)):
        assert (u is None) == (v is None)
        if u is not None:
            np.testing.assert_allclose(u, v, atol=HIDDEN_ATOL)


def _both(be, monkeypatch, decode_path, run):
    """``run()`` bucketed (several buckets even in a small batch), then with one padded prefill."""
    monkeypatch.setattr(be, "PREFILL_MIN_ROWS", 2)
    a = run()
    decode_path(be, one_prefill=True)
    b = run()
    return a, b


def test_tiny_bucketed_prefill_equals_one_padded_prefill(tiny_backend, monkeypatch, decode_path):
    bucket_passes: list[int] = []  # prefill passes that keep no logits, per run

    def count(m, a, kw):
        ltk = kw.get("logits_to_keep")
        if torch.is_tensor(ltk) and ltk.numel() == 0:
            bucket_passes[-1] += 1

    def run():
        bucket_passes.append(0)
        return tiny_backend.generate(PROMPTS, max_new_tokens=10)

    hook = tiny_backend.model.register_forward_pre_hook(count, with_kwargs=True)
    try:
        a, b = _both(tiny_backend, monkeypatch, decode_path, run)
    finally:
        hook.remove()
    n_batches = -(-len(PROMPTS) // tiny_backend.batch_size)
    bucketed, one = bucket_passes
    assert one == 0 and bucketed > n_batches  # several buckets per batch
    for x, y in zip(a, b):
        _compare(x, y)


def test_tiny_row_with_nothing_to_prefill_next_to_long_rows(tiny_backend, monkeypatch, decode_path):
    """No shared prefix; a one-token row shares its bucket with long rows (its bucket row is all
    padding): its cache positions are zeros, not NaN, and every row decodes as unbucketed."""
    seqs = [[7], [9, 8], [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15], [40] * 12]
    monkeypatch.setattr(tiny_backend, "PREFILL_PAD_FRACTION", 0.9)
    a, b = _both(tiny_backend, monkeypatch, decode_path, lambda: tiny_backend.generate_batch(seqs, 6))
    for x, y in zip(a, b):
        assert np.isfinite(x.token_logprobs).all()
        _compare(x, y)


def test_tiny_rows_with_nothing_to_prefill_beside_a_bucket_of_long_rows(tiny_backend, monkeypatch, decode_path):
    """Three one-token rows (nothing of their own to prefill) and three long rows, buckets of
    two: no forward pass over zero tokens, every row decodes as one padded prefill does."""
    seqs = [[7], [9], [11], [5, 6, 7, 8, 9, 10, 11, 12], [40] * 8, [41] * 8]
    widths: list[int] = []
    hook = tiny_backend.model.register_forward_pre_hook(
        lambda m, a, kw: widths.append(kw["input_ids"].shape[-1]), with_kwargs=True)
    try:
        a, b = _both(tiny_backend, monkeypatch, decode_path, lambda: tiny_backend.generate_batch(seqs, 5))
    finally:
        hook.remove()
    assert 0 not in widths
    for x, y in zip(a, b):
        _compare(x, y)


@pytest.mark.slow
def test_smollm_bucketed_prefill_equals_one_padded_prefill(smollm_backend, monkeypatch, decode_path):
    """Real model, chat template (shared system-turn prefix): same replies, log-probs and
    hidden states within float noise."""
    a, b = _both(smollm_backend, monkeypatch, decode_path, lambda: smollm_backend.generate(PROMPTS, max_new_tokens=24))
    for x, y in zip(a, b):
        _compare(x, y)
