"""A KV cache that does not copy itself on every decoding step.

``transformers``' ``DynamicLayer`` appends a step's keys and values with ``torch.cat``: every
step copies the whole cache of every layer. At sago's batch sizes that is most of a small model's
decode time on CPU (smollm2, batch 56, ≈ 150 positions: ≈ 300 MB copied per step, 35 % of the
profiled ``generate`` time). ``PreallocatedLayer`` keeps each layer's keys / values in a buffer
with room for the reply (``reserve`` positions beyond the current length) and writes a step into
it; attention reads a view of the filled part. The numbers are the same: the same values in the
same order, only not copied (``tests/unit/backends/test_kvcache.py`` checks bit-identical replies, log-probs and
entropies against ``DynamicLayer``).

Sliding-window layers (gemma-3) are left as ``transformers`` builds them.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer

__all__ = ["PreallocatedLayer", "preallocated_cache"]


class PreallocatedLayer(DynamicLayer):
    """``DynamicLayer`` whose keys / values live in a buffer (B, H, capacity, D).

    ``self.keys`` / ``self.values`` stay what ``DynamicLayer`` promises — tensors
    (B, H, length, D) of the cached positions — but are views of the buffer. Whatever
    replaces them from outside (``batch_select_indices``, ``batch_repeat_interleave``,
    ``crop``) is adopted into a new buffer on the next ``update`` (one copy).
    """

    #: positions allocated beyond the current length when a buffer is (re)made
    reserve: int = 64

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n, k = self.get_seq_length(), key_states.shape[-2]
        kb = getattr(self, "_kbuf", None)
        if kb is None or self.keys is not self._kview or n + k > kb.shape[-2]:
            cap = n + k + max(self.reserve, n if kb is not None and self.keys is self._kview else 0)
            shape = (*key_states.shape[:-2], cap, key_states.shape[-1])
            kb = torch.empty(shape, dtype=key_states.dtype, device=key_states.device)
            vb = torch.empty((*value_states.shape[:-2], cap, value_states.shape[-1]),
                             dtype=value_states.dtype, device=value_states.device)
            if n:
                kb[..., :n, :] = self.keys
                vb[..., :n, :] = self.values
            self._kbuf, self._vbuf = kb, vb
        vb = self._vbuf
        kb[..., n:n + k, :] = key_states
        vb[..., n:n + k, :] = value_states
        self.keys = self._kview = kb[..., :n + k, :]
        self.values = vb[..., :n + k, :]
        return self.keys, self.values

    def reset(self) -> None:
        self._kbuf = self._vbuf = self._kview = None
        super().reset()


def preallocated_cache(model: Any, reserve: int) -> DynamicCache:
    """An empty ``transformers.DynamicCache`` for ``model`` whose full-attention layers are
    ``PreallocatedLayer`` s with ``reserve`` positions of room (e.g. the reply cap).

    Args:
        model: a ``transformers`` causal LM (its config decides the layer kinds).
        reserve: positions allocated beyond the prompt (≥ 0; a layer grows past it if needed).
    Returns:
        The cache, to pass to the model's forward / ``generate`` as ``cache``.
    """
    cache = DynamicCache(config=model.config)
    for layer in cache.layers:
        if type(layer) is DynamicLayer:
            layer.__class__ = PreallocatedLayer
            layer.reserve = max(0, int(reserve))
    return cache
