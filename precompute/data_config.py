"""``[data]``: the bundled datasets' folder and ``[[data.sources]]`` — prompt files, Hugging Face
datasets and Inspect tasks with their field mapping — checked before any work (nothing is read
here but the existence of files and folders; ``sago_engine.sources`` reads them at plan time)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from precompute.config_errors import ConfigError, unknown
from sago_engine.datasets import DATASETS, bundled_dir
from sago_engine.sources.tabular import SUFFIXES

#: Keys of one ``[[data.sources]]`` table.
SOURCE_KEYS: tuple[str, ...] = ("name", "path", "hf", "inspect", "format", "prompt", "reference", "reference_sep",
                                "id", "category", "rows", "split", "revision", "subset", "data_files")
#: The keys that say where a source's records are (exactly one per source).
WHERE_KEYS: tuple[str, ...] = ("path", "hf", "inspect")


def config_path(base: Path, value: str) -> Path:
    """A path written in a config: an absolute one as it is, a relative one joined to ``base`` (the
    config file's folder unless the caller names another) with ``..`` folded (``os.path.normpath``)."""
    return Path(os.path.normpath(base / value))


def _text(src: dict, key: str, label: str) -> None:
    v = src.get(key)
    if v is not None and not (isinstance(v, str) and v.strip()):
        raise ConfigError(f"{label}.{key} must be a non-empty string, got {v!r}")


def check_source(src: Any, i: int, base: Path) -> dict[str, Any]:
    """One ``[[data.sources]]`` table, validated; ``name`` defaults to the file stem or the task name.

    Raises:
        ConfigError: not a table, an unknown key (with a "did you mean"), none or several of
            ``path`` / ``hf`` / ``inspect``, a ``path`` that does not exist (named as missing), bad
            types of the mapping keys or of ``rows``.
    """
    label = f"data.sources[{i}]"
    if not isinstance(src, dict):
        raise ConfigError(f"{label} must be a table ([[data.sources]]), got {type(src).__name__}")
    for k in src:
        if k not in SOURCE_KEYS:
            raise unknown(f"{label} key", k, SOURCE_KEYS)
    where = [k for k in WHERE_KEYS if k in src]
    if len(where) != 1:
        raise ConfigError(f"{label} needs exactly one of path = \"file.csv|.jsonl|.parquet\", hf = \"folder or hub id\","
                          f" inspect = \"tasks.py@task\"; got {', '.join(where) or 'none'}")
    for k in ("name", "path", "hf", "inspect", "prompt", "reference_sep", "id", "category", "split", "revision",
              "subset", "format"):
        if k != "reference":
            _text(src, k, label)
    ref = src.get("reference")
    if ref is not None and not (isinstance(ref, str) and ref or isinstance(ref, list) and ref
                                and all(isinstance(r, str) and r for r in ref)):
        raise ConfigError(f"{label}.reference must be a field name or a list of field names, got {ref!r}")
    if "format" in src and src["format"] not in set(SUFFIXES.values()):
        raise unknown(f"{label} format", src["format"], sorted(set(SUFFIXES.values())))
    for k, needs in (("split", "hf"), ("revision", "hf"), ("subset", "hf"), ("data_files", "hf"), ("format", "path")):
        if k in src and needs not in src:
            raise ConfigError(f"{label}.{k} applies to {needs} = … sources only")
    rows = src.get("rows")
    if rows is not None and not (isinstance(rows, list) and len(rows) == 2 and all(type(r) is int for r in rows)
                                 and 0 <= rows[0] < rows[1]):
        raise ConfigError(f"{label}.rows must be [start, stop] with 0 ≤ start < stop (rows start..stop-1, counted "
                          f"from 0), got {rows!r}")
    out = {**src, "base": str(base)}  # relative paths resolve against it when the source is read
    if "path" in src:
        p = config_path(base, src["path"])
        if not p.exists():
            raise ConfigError(f"{label}.path: {p} does not exist")
        out.setdefault("name", p.stem)
    elif "inspect" in src:
        out.setdefault("name", src["inspect"].rsplit("@", 1)[-1].rsplit("/", 1)[-1])
    else:
        out.setdefault("name", Path(src["hf"].rstrip("/")).name)
    return out


def check_data(data: dict, base: Path) -> tuple[str, tuple[str, ...], tuple[dict[str, Any], ...]]:
    """``[data]``'s folder, bundled dataset names and sources.

    ``datasets`` defaults to the six bundled ones when no source is given, to none otherwise;
    ``dir`` (default: the bundled samples, ``datasets.bundled_dir``) must exist and hold
    ``<name>.jsonl`` for each name.

    Returns:
        (data_dir, datasets, sources).
    Raises:
        ConfigError: a ``dir`` that does not exist or holds no ``.jsonl`` (named as such), an
            unknown dataset (the folder's own files listed), a bad source (``check_source``), two
            sources or datasets of the same name.
    """
    raw_sources = data.get("sources", [])
    if not isinstance(raw_sources, list):
        raise ConfigError("data.sources must be given as [[data.sources]] tables")
    sources = tuple(check_source(s, i, base) for i, s in enumerate(raw_sources))
    datasets = data.get("datasets", [] if sources else list(DATASETS))
    if not (isinstance(datasets, list) and all(isinstance(d, str) for d in datasets)):
        raise ConfigError(f"data.datasets must be a list of names, got {datasets!r}")
    data_dir = config_path(base, data["dir"]) if "dir" in data else bundled_dir()
    if datasets or "dir" in data:
        if not data_dir.is_dir():
            raise ConfigError(f"data.dir: {data_dir} does not exist" if not data_dir.exists()
                              else f"data.dir: {data_dir} is a file, not a folder of <name>.jsonl files")
        have = [p.stem for p in sorted(data_dir.glob("*.jsonl"))]
        if not have:
            raise ConfigError(f"data.dir: {data_dir} holds no .jsonl file (one <name>.jsonl per dataset; other "
                              "formats: [[data.sources]])")
        for d in datasets:
            if d not in have:
                raise ConfigError(f"{unknown('dataset', d, have)} (the .jsonl files of data.dir {data_dir})")
    if not datasets and not sources:
        raise ConfigError("data: no prompts: list data.datasets or give [[data.sources]] (docs/CONFIG.md, \"Your prompts\")")
    names = [*datasets, *(s["name"] for s in sources)]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"data: several datasets or sources are named {', '.join(map(repr, dup))}; give each source "
                          f"its own name = \"…\" (prompt ids are <name>:<id>)")
    return str(data_dir), tuple(datasets), sources
