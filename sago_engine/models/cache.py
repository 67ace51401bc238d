"""sago's cache folder ``${SAGO_CACHE_DIR:-~/.cache/sago}`` (``sago_cache_dir``, the one place it is
resolved) and the model cache below it (``cache_root``).

Layout::

    models/                                       the model cache (cache_root):
      digests.json                                sha256 of source files, keyed by path/size/mtime
      gguf/<key>.gguf                             assembled GGUF for multi-part packages
      <key>-<sha256[:12]>-<dtype>/                dequantized model + tokenizer (safetensors)
      tokenizers/<key>-<sha256[:12]>/             tokenizer only (used by the tiny random model)
    api_cache/                                    the API reply cache (backends.caching.default_cache_dir)
    probes.duckdb                                 the Live page's user store (live_save.default_user_store)
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_root", "sago_cache_dir"]


def sago_cache_dir() -> Path:
    """sago's cache folder: ``$SAGO_CACHE_DIR`` when set (``~`` expanded), else ``~/.cache/sago``;
    not created here."""
    return Path(os.environ.get("SAGO_CACHE_DIR") or Path.home() / ".cache" / "sago").expanduser()


def cache_root() -> Path:
    """The model cache folder: ``sago_cache_dir()/models`` (created if missing).

    Returns:
        Absolute path of the folder.
    """
    root = sago_cache_dir().resolve() / "models"
    root.mkdir(parents=True, exist_ok=True)
    return root
