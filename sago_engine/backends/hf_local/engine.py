"""``LocalEngine``: what hf_local's helpers (generation, prefill, teacher) need of a loaded model.

The helpers take a ``LocalEngine`` argument, never the backend class: ``HFLocalBackend`` satisfies
this protocol (structural typing, PEP 544), and the helpers import nothing of ``backend.py``, so
the package's import graph has no cycle, not even one of type annotations.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import torch

from ...types import GenerationResult

__all__ = ["LocalEngine", "length_batches"]


def length_batches(lengths: Sequence[int], size: int) -> list[list[int]]:
    """Indices of ``lengths`` sorted by length (then index), cut into batches of ``size`` (≥ 1)."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    return [order[k : k + size] for k in range(0, len(order), size)]


class LocalEngine(Protocol):
    """A loaded local causal LM as the decoding, prefill and teacher-forcing helpers use it."""

    #: the transformers model (``PreTrainedModel``) and its tokenizer
    model: Any
    tokenizer: Any
    device: torch.device
    #: token ids that end a reply; the padding id (None: the first EOS pads)
    eos_ids: list[int]
    pad_id: int | None
    batch_size: int
    #: the model's context length in tokens (None: unknown) and its sliding attention window
    context_length: int | None
    attention_window: int | None
    MIN_SHARED_PREFIX: int
    DROP_FINISHED_FRACTION: float
    PREFILL_PAD_FRACTION: float
    PREFILL_MIN_ROWS: int

    def encode_prompt(self, prompt: str) -> list[int]:
        """The model's input ids of a user prompt."""

    def prompt_layout(self, prompt: str) -> tuple[list[int], tuple[int, int] | None]:
        """The input ids and the token span of the user's text among them (None: not located)."""

    def batches(self, lengths: Sequence[int]) -> list[list[int]]:
        """Indices cut into decoding batches (``length_batches`` at ``batch_size``)."""

    def pad_left(self, seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Token rows left-padded into (ids, attention mask) on ``device``."""

    def generate_batch(self, seqs: list[list[int]], max_new_tokens: int,
                       spans: Sequence[tuple[int, int] | None] | None = None, *,
                       seeds: Sequence[int] | None = None) -> list[GenerationResult]:
        """One decoding batch of token ids; ``seeds``: one per row when sampling (None: greedy)."""
