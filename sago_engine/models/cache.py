"""The model cache folder (``${SAGO_CACHE_DIR:-~/.cache/sago}/models``).

Layout::

    digests.json                                  sha256 of source files, keyed by path/size/mtime
    gguf/<key>.gguf                               assembled GGUF for multi-part packages
    <key>-<sha256[:12]>-<dtype>/                  dequantized model + tokenizer (safetensors)
    tokenizers/<key>-<sha256[:12]>/               tokenizer only (used by the tiny random model)
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root"]


def cache_root() -> Path:
    """The model cache folder: ``${SAGO_CACHE_DIR:-~/.cache/sago}/models`` (created if missing).

    Returns:
        Absolute path of the folder.
    """
    base = os.environ.get("SAGO_CACHE_DIR") or str(Path.home() / ".cache" / "sago")
    root = Path(base).expanduser().resolve() / "models"
    root.mkdir(parents=True, exist_ok=True)
    return root
