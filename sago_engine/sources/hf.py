"""Prompt records from a Hugging Face ``datasets`` dataset: a ``save_to_disk`` folder, local data
files through a builder (``json``, ``csv``, ``parquet``), or a hub id where the machine has a network."""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Any

from sago_engine.datasets import DatasetError


def _looks_like_path(ref: str) -> bool:
    """A reference meant as a local folder (not a hub id ``org/name``): absolute, relative with ``./``
    or ``../``, ``~``, or with more than one ``/``."""
    return ref.startswith(("/", ".", "~")) or ref.count("/") > 1 or os.sep != "/" and os.sep in ref


def _pick_split(obj: Any, split: str | None, where: str):
    """The ``Dataset`` of ``obj`` (a Dataset, or a DatasetDict and its ``split``)."""
    from datasets import DatasetDict

    if not isinstance(obj, DatasetDict):
        if split is not None and getattr(obj, "split", None) not in (None, split):
            raise DatasetError(f"{where}: holds the split {str(obj.split)!r}, not {split!r}")
        return obj, None if getattr(obj, "split", None) is None else str(obj.split)
    names = list(obj)
    if split is None:
        if len(names) == 1:
            return obj[names[0]], names[0]
        raise DatasetError(f"{where}: has the splits {', '.join(names)}; choose one with split = \"…\"")
    if split not in obj:
        raise DatasetError(f"{where}: no split {split!r}; its splits: {', '.join(names)}")
    return obj[split], split


def hf_records(ref: str, base: Path, *, split: str | None = None, revision: str | None = None,
               subset: str | None = None, data_files: str | list[str] | None = None,
               rows: tuple[int, int] | None = None) -> tuple[list[tuple[int, dict]], list[str], dict]:
    """The rows of a Hugging Face dataset with their row numbers (0-based, as ``ds[i]``).

    Args:
        ref: a ``save_to_disk`` folder (relative to ``base``), a builder name (``json``, ``csv``,
            ``parquet``) with ``data_files``, or a hub id (``org/name``; needs the network).
        split: which split (required when there are several); revision/subset: of a hub dataset.
        rows: ``(start, stop)``, the half-open row range to use (None = all).
    Returns:
        (records, column names, the record of what was read: ``{"hf", "split", "revision",
        "subset", "data_files", "rows", "num_rows", "fingerprint"}``).
    Raises:
        DatasetError: a folder that does not exist (named as missing), a hub id on a machine
            set offline, an unknown split, a row range outside the dataset, ``datasets`` not
            installed (the ``hf`` extra).
    """
    try:
        import datasets
    except ImportError:
        raise DatasetError(f"hf = {ref!r} needs the package datasets: pip install 'sago[hf]'") from None

    folder = base / ref
    where = str(folder if folder.exists() or _looks_like_path(ref) else ref)
    if folder.is_dir() and any((folder / f).exists() for f in ("dataset_dict.json", "state.json")):
        obj = datasets.load_from_disk(str(folder))
        kind = "save_to_disk"
    elif _looks_like_path(ref) and not folder.exists():
        raise DatasetError(f"{folder}: no such folder (hf = {ref!r}, relative to {base})")
    else:
        kwargs: dict[str, Any] = {"split": split}
        if data_files is not None:
            files = [data_files] if isinstance(data_files, str) else list(data_files)
            missing = [f for f in files if not glob.glob(str(base / f))]
            if missing:
                raise DatasetError(f"data_files: no such file {', '.join(str(base / f) for f in missing)}")
            kwargs["data_files"] = [str(base / f) for f in files]
        elif not folder.exists() and os.environ.get("HF_HUB_OFFLINE") == "1":
            raise DatasetError(f"hf = {ref!r}: not a folder in {base}; as a hub id it needs the network, and "
                               "HF_HUB_OFFLINE=1 is set (save the dataset with save_to_disk and give its folder)")
        if revision is not None:
            kwargs["revision"] = revision
        try:
            obj = datasets.load_dataset(str(folder) if folder.exists() else ref, subset, **kwargs)
        except (FileNotFoundError, ValueError, ConnectionError, OSError) as e:
            raise DatasetError(f"{where}: cannot load as a Hugging Face dataset ({type(e).__name__}: {e})") from None
        kind = "files" if data_files is not None or folder.exists() else "hub"
    ds, used_split = _pick_split(obj, split, where)
    n = len(ds)
    start, stop = rows if rows is not None else (0, n)
    if start >= n:
        raise DatasetError(f"{where}: rows = [{start}, {stop}] starts past its {n} rows")
    stop = min(stop, n)
    part = ds.select(range(start, stop)) if (start, stop) != (0, n) else ds
    records = list(enumerate(part.to_list(), start=start))
    info = {"hf": ref, "kind": kind, "split": used_split, "revision": revision, "subset": subset,
            "data_files": data_files, "rows": [start, stop], "num_rows": n,
            "fingerprint": getattr(ds, "_fingerprint", None)}
    return records, list(ds.column_names), info
