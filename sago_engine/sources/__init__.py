"""Prompts from where users keep them: JSONL, CSV/TSV and Parquet files, Hugging Face datasets and
Inspect tasks, each through a field mapping (``datasets.FieldMap``), with every problem of a source
reported at once and a record of what was read (stored with the run).

A source spec is a validated ``[[data.sources]]`` table (``precompute.data_config``): ``name`` and
one of ``path`` / ``hf`` / ``inspect``, plus the mapping (``prompt``, ``reference`` — a field or a
list of fields —, ``reference_sep``, ``id``, ``category``) and the selection (``rows``, ``split``,
``revision``, ``subset``, ``data_files``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sago_engine.datasets import DatasetError, FieldMap, Prompt, problem_report, prompts_from_records

#: The mapping keys of a source spec (field roles → record field names).
FIELD_KEYS: tuple[str, ...] = ("prompt", "reference", "reference_sep", "id", "category")


def field_map(spec: Mapping[str, Any], records: list[tuple[Any, Any]], columns: list[str] | None) -> FieldMap:
    """The ``FieldMap`` of a source: its mapping keys over the defaults (``prompt``, ``reference``,
    ``id``, ``category``). Every record needs the prompt and the id field; without ``id`` the
    row's position is the id when no record has an ``id`` field. A reference or category may be
    absent from a record (a prompt without an accepted answer); ``named_fields_absent`` catches a
    mistyped one."""
    ref = spec.get("reference", "reference")
    refs = (ref,) if isinstance(ref, str) else tuple(ref)
    has_id = "id" in columns if columns is not None else any(isinstance(r, Mapping) and "id" in r for _, r in records)
    fid = spec.get("id", "id" if has_id else None)
    required = {"prompt"} | ({"id"} if fid is not None else set())
    return FieldMap(prompt=spec.get("prompt", "prompt"), id=fid, reference=refs,
                    reference_sep=spec.get("reference_sep"), category=spec.get("category", "category"),
                    required=frozenset(required))


def named_fields_absent(spec: Mapping[str, Any], fields: FieldMap, records: list, columns: list[str] | None) -> list[str]:
    """The fields a source needs or names that its header lacks (a file with columns), or — for
    reference and category — that no record has (JSONL, Inspect): a mistyped name, said once."""
    named = {"prompt": [fields.prompt], "id": [fields.id], "reference": list(fields.reference),
             "category": [fields.category]}
    roles = sorted(fields.required | {r for r in ("reference", "category") if r in spec})
    if columns is not None:
        return [f"column {c!r} ({role}) is not in the file; its columns: {', '.join(columns) or '(none)'}"
                for role in roles for c in named[role] if c is not None and c not in columns]
    seen = {k for _, r in records if isinstance(r, Mapping) for k in r}
    return [f"field {c!r} ({role}) is in no record" for role in roles if role in ("reference", "category")
            for c in named[role] if c is not None and c not in seen]


def _select(records: list, rows) -> list:
    """Records ``rows[0]`` (inclusive) to ``rows[1]`` (exclusive), counted from 0; all when None."""
    return records if rows is None else records[rows[0]: rows[1]]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_source(spec: Mapping[str, Any], base: Path, n: int | None = None) -> tuple[list[Prompt], dict]:
    """The first ``n`` prompts of a source and the record of what was read.

    Args:
        spec: a validated ``[[data.sources]]`` table (see the module doc).
        base: the folder relative paths resolve against.
        n: prompts to keep (None = all); every selected record is checked all the same.
    Returns:
        (prompts, record): ``record`` holds ``name``, the source, its format, the field mapping,
        ``rows`` and what identifies the data read (a file's sha256, a dataset's fingerprint and
        split, an Inspect task's scorer names).
    Raises:
        DatasetError: every problem of the source (file and line or row of each), a missing file
            or folder named as missing.
    """
    name = spec["name"]
    rows = tuple(spec["rows"]) if spec.get("rows") is not None else None
    record: dict[str, Any] = {"name": name, "fields": {k: spec[k] for k in FIELD_KEYS if k in spec},
                              "rows": list(rows) if rows else None}
    if "inspect" in spec:
        from sago_engine.sources.inspect_task import inspect_records

        records, info = inspect_records(spec["inspect"], base)
        records, columns, where = _select(records, rows), None, f"{spec['inspect']} sample"
        problems: list[tuple[str, str]] = []
        record.update(info)
    elif "hf" in spec:
        from sago_engine.sources.hf import hf_records

        records, columns, info = hf_records(spec["hf"], base, split=spec.get("split"), revision=spec.get("revision"),
                                            subset=spec.get("subset"), data_files=spec.get("data_files"), rows=rows)
        where, problems = f"{info['hf']}[{info['split'] or ''}]", []
        record.update(info)
    else:
        from sago_engine.sources.tabular import SUFFIXES, file_records

        path = base / spec["path"]
        if not path.is_file():
            raise DatasetError(f"{path}: no such file" + (" (it is a folder)" if path.is_dir() else "")
                               + f" (path = {spec['path']!r}, relative to {base})")
        fmt = spec.get("format") or SUFFIXES.get(path.suffix.lower())
        if fmt is None:
            raise DatasetError(f"{path}: cannot tell its format from the suffix {path.suffix!r}; set format = "
                               f"one of {sorted(set(SUFFIXES.values()))}")
        records, problems, columns = file_records(path, fmt)
        records, where = _select(records, rows), str(path)
        record.update({"path": str(path), "format": fmt, "sha256": _sha256(path)})
    fields = field_map(spec, records, columns)
    missing = named_fields_absent(spec, fields, records, columns)
    if missing and records:
        raise DatasetError(problem_report(where, [("1" if columns is not None and "path" in record else "*", m)
                                                  for m in missing]))
    record["selected_records"] = len(records)
    return prompts_from_records(records, where, name, fields, n, problems), record
