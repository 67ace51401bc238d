"""A zoo model's tokenizer without its weights, read from the GGUF once and cached on disk."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from .cache import cache_root
from .digests import checked_digest
from .entries import LocalModel
from .gguf import gguf_path, source_files
from .resolve import resolve_model

__all__ = ["prepare_tokenizer", "load_tokenizer"]


def prepare_tokenizer(tok: Any) -> Any:
    """``tok`` set up for batched generation: left padding, a pad token (its EOS if it has none)."""
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def load_tokenizer(key_or_path: str = "smollm2-135m-instruct") -> Any:
    """Load only the tokenizer of a zoo model or folder, cached on disk after the first time.

    Reading a tokenizer from a GGUF takes seconds; the result is saved under
    ``<cache>/models/tokenizers/<key>-<sha12>/`` (or taken from an existing model cache folder).

    Args:
        key_or_path: zoo key (not ``"tiny-random"``) or a local model folder.
    Returns:
        A fast tokenizer with ``padding_side="left"`` and a pad token (eos if it had none).
    Raises:
        ValueError / ModelUnavailableError: as ``resolve_model`` / missing packages; ValueError
            also for weights whose sha256 differs from the entry's pin.
    """
    from transformers import AutoTokenizer  # lazy: importing the zoo never imports torch

    m = resolve_model(key_or_path)
    if isinstance(m, LocalModel):
        return prepare_tokenizer(AutoTokenizer.from_pretrained(m.path))
    if m.source == "random":
        raise ValueError("tiny-random has no tokenizer of its own (it uses smollm2's)")
    sha = checked_digest(m, source_files(m))
    root = cache_root()
    for d in sorted(root.glob(f"{m.key}-{sha[:12]}-*")) + [
        root / "tokenizers" / f"{m.key}-{sha[:12]}"
    ]:
        if (d / "tokenizer_config.json").is_file():
            return prepare_tokenizer(AutoTokenizer.from_pretrained(d))
    gguf = gguf_path(m)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    out = root / "tokenizers" / f"{m.key}-{sha[:12]}"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=out.name + ".tmp"))
    tok.save_pretrained(tmp)
    try:
        os.replace(tmp, out)
    except OSError:  # another process won the race
        shutil.rmtree(tmp, ignore_errors=True)
    return prepare_tokenizer(tok)
