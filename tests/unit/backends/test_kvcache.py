"""The preallocated KV cache holds exactly what transformers' DynamicCache holds, and generation
through it gives bit-identical replies, log-probs, entropies and hidden states."""

from __future__ import annotations

import numpy as np
import torch

from sago_engine.backends.hf_local.kvcache import preallocated_cache
from tests.integration.backends.test_backend import PROMPTS


def _pair(tiny_backend):
    from transformers.cache_utils import DynamicCache

    return preallocated_cache(tiny_backend.model, reserve=3), DynamicCache(config=tiny_backend.model.config)


def _kv(layer):
    return layer.keys.clone(), layer.values.clone()


def test_layer_updates_equal_concatenation_through_select_repeat_and_crop(tiny_backend):
    """Prefill, steps past the reserve (the buffer grows), batch_select_indices,
    batch_repeat_interleave and crop: keys / values equal DynamicLayer's after every step."""
    pre, dyn = _pair(tiny_backend)
    g = torch.Generator().manual_seed(0)
    H, D = 2, 8

    def step(B, T):
        k, v = torch.randn(B, H, T, D, generator=g), torch.randn(B, H, T, D, generator=g)
        for c in (pre, dyn):
            out = c.layers[0].update(k, v)
            assert out[0].shape == (B, H, c.layers[0].get_seq_length(), D)
        assert torch.equal(pre.layers[0].keys, dyn.layers[0].keys)
        assert torch.equal(pre.layers[0].values, dyn.layers[0].values)

    step(4, 5)
    for _ in range(6):  # reserve 3: the buffer is outgrown and remade
        step(4, 1)
    idx = torch.tensor([0, 2, 3])
    for c in (pre, dyn):
        c.layers[0].batch_select_indices(idx)
    step(3, 1)
    for c in (pre, dyn):
        c.layers[0].batch_repeat_interleave(2)
    step(6, 2)
    for c in (pre, dyn):
        c.layers[0].crop(-3)
    step(6, 1)
    assert pre.layers[0].get_seq_length() == dyn.layers[0].get_seq_length() == 5 + 6 + 1 + 2 - 3 + 1
    pre.layers[0].reset()
    assert pre.layers[0].get_seq_length() == 0 and pre.layers[0]._kbuf is None


def test_step_writes_in_place(tiny_backend):
    """A decoding step writes into the buffer: the returned keys share its storage (no copy)."""
    pre, _ = _pair(tiny_backend)
    layer = pre.layers[0]
    layer.update(torch.zeros(2, 1, 4, 8), torch.zeros(2, 1, 4, 8))
    ptr = layer.keys.data_ptr()
    k, _ = layer.update(torch.ones(2, 1, 1, 8), torch.ones(2, 1, 1, 8))
    assert k.data_ptr() == ptr and k.shape[-2] == 5 and float(k[..., -1, :].sum()) == 16.0


def test_generation_bit_identical_to_dynamic_cache(tiny_backend, decode_path):
    """Whole generate (shared prefix, left padding): the same tokens, log-probs, entropies and
    hidden states, to the bit, with either cache (rows leaving the batch: the layer-level test
    above and tests/unit/benchmarks/test_bench_meter.py)."""
    from transformers.cache_utils import DynamicCache

    made = []

    def dynamic(model, reserve):
        made.append(reserve)
        return DynamicCache(config=model.config)

    a = tiny_backend.generate(PROMPTS, max_new_tokens=12)
    assert tiny_backend.info()["kv_cache"] == "preallocated"
    decode_path(tiny_backend, new_cache=dynamic)
    b = tiny_backend.generate(PROMPTS, max_new_tokens=12)
    assert made  # every cache of the second run came from the factory
    for x, y in zip(a, b):
        assert x.token_ids == y.token_ids and x.text == y.text
        assert np.array_equal(x.token_logprobs, y.token_logprobs)
        assert np.array_equal(x.token_entropies, y.token_entropies)
        assert np.array_equal(x.hidden_last, y.hidden_last)
