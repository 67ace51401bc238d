"""Loading a zoo model or a local folder for white-box use, dequantized once into a safetensors cache.

Nothing here downloads from a hub: every path is a package folder found with
``importlib.util.find_spec`` (without importing the package), a local folder, or a Hub snapshot
already in the local cache (``resolve.hub_snapshot``). The first load of a zoo key dequantizes its
GGUF and saves it under ``cache.cache_root()`` (docs/MODELS.md).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from .cache import cache_root
from .devices import check_device, torch_versions
from .digests import checked_digest, local_digest
from .entries import LocalModel, ModelEntry
from .gguf import gguf_path, source_files
from .resolve import resolve_model
from .tiny import tiny_random_model
from .tokenizers import prepare_tokenizer

__all__ = ["load_model"]


def load_model(
    key_or_path: str, dtype: str = "float32", device: str = "auto"
) -> tuple[Any, Any, dict]:
    """Load a zoo model (or local folder) for white-box use: model, tokenizer, and a record.

    First load of a zoo key dequantizes its GGUF with transformers
    (``AutoModelForCausalLM.from_pretrained(folder, gguf_file=..., dtype=...)``), drops the
    GGUF quantizer (``model.hf_quantizer = None; del model.config.quantization_config``, per
    docs/MODELS.md) and saves model + tokenizer as safetensors to
    ``<cache>/models/<key>-<gguf sha256[:12]>-<dtype>/`` (written to a temp folder, then
    ``os.replace``d). Later loads read that folder (< 1 s for smollm2).

    Args:
        key_or_path: zoo key, ``"tiny-random"`` or a local Hugging Face model folder.
        dtype: ``"float32"``, ``"bfloat16"`` or ``"float16"`` (weights and compute dtype).
        device: ``"auto"`` (cuda if available else cpu), ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or
            ``"mps"``; the pair must pass ``check_device``.
    Returns:
        ``(model, tokenizer, info)``: an eval-mode ``PreTrainedModel`` on ``device``; a
        tokenizer with left padding and a pad token (eos if missing); ``info`` with keys
        key, source, gguf_sha256 (None for local folders), weights_sha256, dtype, device,
        n_layers, hidden, chat, loaded_from ("gguf" | "cache" | "local" | "random"),
        cache_dir, linear_kernel (``"onednn"`` | ``"torch"``, ``kernels.use_linear_kernel``),
        load_s, transformers, torch.
    Raises:
        ValueError: unknown key, bad dtype/device, an assembled GGUF of the wrong size, or weights
            whose sha256 differs from the entry's pin.
        ModelUnavailableError: the zoo model's weight packages are not installed.
    """
    import torch  # lazy: importing the zoo never imports torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    m = resolve_model(key_or_path)
    if isinstance(m, ModelEntry) and m.source == "random":
        return tiny_random_model(0, dtype=dtype, device=device)
    dev = check_device(dtype, device)
    tdtype = getattr(torch, dtype)
    t0 = time.perf_counter()

    if isinstance(m, LocalModel):
        sha = local_digest(m.path)
        model = AutoModelForCausalLM.from_pretrained(m.path, dtype=tdtype)
        tok = AutoTokenizer.from_pretrained(m.path)
        source, gguf_sha, loaded_from, cdir = str(m.path), None, "local", None
        chat = m.chat if m.chat is not None else bool(getattr(tok, "chat_template", None))
    else:
        srcs = source_files(m)
        sha = checked_digest(m, srcs)
        gguf_sha = sha
        cdir = cache_root() / f"{m.key}-{sha[:12]}-{dtype}"
        chat = m.chat
        if (cdir / "config.json").is_file():
            model = AutoModelForCausalLM.from_pretrained(cdir, dtype=tdtype)
            tok = AutoTokenizer.from_pretrained(cdir)
            loaded_from = "cache"
        else:
            gguf = gguf_path(m)
            tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(
                gguf.parent, gguf_file=gguf.name, dtype=tdtype
            )
            model.hf_quantizer = None
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
            tmp = Path(tempfile.mkdtemp(dir=cdir.parent, prefix=cdir.name + ".tmp"))
            try:
                model.save_pretrained(tmp)
                tok.save_pretrained(tmp)
                os.replace(tmp, cdir)
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
                if not (cdir / "config.json").is_file():
                    raise
            loaded_from = "gguf"
        source = str(srcs[0]) if len(srcs) == 1 else f"{len(srcs)} parts: {srcs[0]} …"
    model = model.to(dev).eval()
    from sago_engine.runtime.kernels import use_linear_kernel  # lazy: kernels imports torch

    kernel = use_linear_kernel(model, dtype, dev)
    tok = prepare_tokenizer(tok)
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tok.pad_token_id
    cfg = model.config
    text_cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    info = {
        "key": m.key,
        "source": source,
        "gguf_sha256": gguf_sha,
        "weights_sha256": sha,
        "dtype": dtype,
        "device": dev,
        "n_layers": int(text_cfg.num_hidden_layers),
        "hidden": int(text_cfg.hidden_size),
        "chat": bool(chat),
        "loaded_from": loaded_from,
        "cache_dir": str(cdir) if cdir else None,
        "linear_kernel": kernel,
        "load_s": time.perf_counter() - t0,
        **torch_versions(),
    }
    return model, tok, info
