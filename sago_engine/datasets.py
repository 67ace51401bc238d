"""Prompt records → base prompts, with every problem of a file reported at once.

A record is one row of a prompt file (a JSON object, a CSV row, a Parquet or Hugging Face row,
an Inspect sample as a dict); a ``FieldMap`` says which of its fields is the prompt, the
reference answer(s), the id and the category. ``load_dataset`` reads the bundled JSONL files
(and any JSONL with the default field names); ``sago_engine.sources`` reads the other formats.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sago_engine.untrusted_files import UntrustedFileError, confined

#: The six datasets of SAGO (arXiv 2610.01428) §Datasets, by file stem in data/datasets/.
DATASETS: tuple[str, ...] = ("truthfulqa", "nq_open", "alpaca", "simpleqa_verified", "triviaqa", "hotpotqa")

def bundled_dir() -> Path:
    """The folder of the bundled dataset samples: ``data/datasets`` of a clone, else the copy an
    installed wheel puts under ``<prefix>/share/sago/datasets`` (pyproject.toml's data-files)."""
    clone = Path(__file__).resolve().parents[1] / "data" / "datasets"
    return clone if clone.is_dir() else Path(sys.prefix) / "share" / "sago" / "datasets"


#: Prompts longer than this (characters) are refused with a clear error (not truncated).
MAX_PROMPT_CHARS = 4000

#: At most this many problems of one file are listed (then their count): enough to fix a file in one go.
MAX_LISTED_PROBLEMS = 200


class DatasetError(ValueError):
    """A prompt source that cannot be used; the message names the file and the line or row of
    every problem found (one per line after the first)."""


@dataclass(frozen=True)
class Prompt:
    """One base prompt x_i."""

    prompt_id: str
    """``"<dataset>:<source id>"`` — unique across datasets."""
    dataset: str
    source_id: str
    text: str
    reference: Any
    """The accepted answer: a string, a list of accepted strings, or any JSON value; None = none."""
    category: str | None
    meta: Any = None
    """The row's ``meta`` object as read (e.g. TruthfulQA's ``incorrect_answers``); None if absent."""


@dataclass(frozen=True)
class FieldMap:
    """Which record fields hold the prompt, the reference answer(s), the id and the category.

    ``reference`` names one field, or several (``references``: each a further accepted answer);
    ``reference_sep`` splits a text reference into several accepted answers (e.g. ``"|"``).
    ``id = None``: the row's position (1-based line or row number) is its id. ``category = None``:
    no category. A field named by default but absent from a record is not a problem (``reference``,
    ``category``); one the user named (``required``) is.
    """

    prompt: str = "prompt"
    id: str | None = "id"
    reference: tuple[str, ...] = ("reference",)
    reference_sep: str | None = None
    category: str | None = "category"
    required: frozenset[str] = frozenset({"prompt", "id"})
    """Which of the mapped fields every record must have (``"prompt"``, ``"id"``, ``"reference"``, ``"category"``)."""


#: The bundled files' record format: ``id`` and ``prompt`` required, ``reference`` and ``category`` optional.
DEFAULT_FIELDS = FieldMap()


class _BadValue(ValueError):
    """A JSON value a store cannot hold (raised inside ``json.loads``; becomes a problem of its line)."""


def _constant(name: str) -> float:
    raise _BadValue(f"not a finite number ({name})")


def _finite(text: str) -> float:
    v = float(text)
    if v != v or v in (float("inf"), float("-inf")):
        raise _BadValue(f"not a finite number ({text})")
    return v


def _surrogate_field(obj: Any, where: str = "") -> str | None:
    """The field (dotted path) of the first string in ``obj`` holding a lone UTF-16 surrogate."""
    if isinstance(obj, str):
        return where or "value" if any("\ud800" <= c <= "\udfff" for c in obj) else None
    items = obj.items() if isinstance(obj, Mapping) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in items:
        if isinstance(k, str) and _surrogate_field(k):
            return f"{where}.{k!r}" if where else repr(k)
        hit = _surrogate_field(v, f"{where}.{k}" if where else str(k))
        if hit:
            return hit
    return None


def _missing(value: Any) -> bool:
    """An absent cell: None, or a float NaN (pandas / Parquet nulls)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _reference(obj: Mapping, fields: FieldMap) -> Any:
    """The record's accepted answer(s): one field as stored (split by ``reference_sep`` when it is
    text), several fields as the list of their non-empty values; None when none is present."""
    values = [obj.get(f) for f in fields.reference]
    values = [v for v in values if not _missing(v) and v != ""]
    if fields.reference_sep is not None:
        split: list[Any] = []
        for v in values:
            split.extend([s.strip() for s in v.split(fields.reference_sep) if s.strip()] if isinstance(v, str) else [v])
        values = split
        return values or None
    if len(fields.reference) == 1:
        return values[0] if values else None
    return values or None


def _check(obj: Any, fields: FieldMap, pos: int) -> tuple[tuple[str, str, Any, str | None] | None, list[str]]:
    """One record: ((source id, prompt, reference, category), []) or (None, its problems)."""
    if not isinstance(obj, Mapping):
        return None, [f"expected a JSON object (fields by name), got {type(obj).__name__}"]
    problems = []
    bad = _surrogate_field(obj)
    if bad:
        problems.append(f"field {bad} holds a lone surrogate (half of a UTF-16 pair, not text a store can hold)")
    for role in ("prompt", "id", "reference", "category"):
        names = fields.reference if role == "reference" else (getattr(fields, role),)
        if role in fields.required:
            problems += [f"missing field {n!r}" for n in names if n is not None and n not in obj]
    prompt = obj.get(fields.prompt)
    if fields.prompt in obj:
        if not isinstance(prompt, str) or not prompt.strip():
            problems.append(f"empty or non-text prompt (field {fields.prompt!r})")
        elif "\x00" in prompt:
            problems.append("prompt contains a NUL byte")
        elif len(prompt) > MAX_PROMPT_CHARS:
            problems.append(f"prompt has {len(prompt)} characters (limit {MAX_PROMPT_CHARS})")
    sid = str(pos) if fields.id is None else obj.get(fields.id)
    if fields.id is not None and fields.id in obj:
        if isinstance(sid, bool) or not (_missing(sid) or isinstance(sid, (str, int, float))):
            problems.append(f"id must be text or a number, got {type(sid).__name__} (field {fields.id!r})")
        elif _missing(sid) or not str(sid).strip():
            problems.append(f"empty id (field {fields.id!r})")
        elif isinstance(sid, float) and sid.is_integer():
            sid = int(sid)  # a CSV/Parquet integer column read as float
    cat = None if fields.category is None else obj.get(fields.category)
    if not _missing(cat) and not isinstance(cat, str):
        problems.append(f"category must be text, got {type(cat).__name__} (field {fields.category!r})")
    if problems:
        return None, problems
    return (str(sid), prompt, _reference(obj, fields), None if _missing(cat) else str(cat)), []


def problem_report(where: str, problems: list[tuple[str, str]]) -> str:
    """The message of a ``DatasetError``: ``"<where>:<pos>: <problem>"`` per problem, the first on
    the first line, at most ``MAX_LISTED_PROBLEMS`` of them and then their count."""
    lines = [f"{where}:{pos}: {msg}" for pos, msg in problems[:MAX_LISTED_PROBLEMS]]
    if len(problems) > MAX_LISTED_PROBLEMS:
        lines.append(f"… and {len(problems) - MAX_LISTED_PROBLEMS} more problems in {where}")
    if len(problems) > 1:
        lines.insert(0, f"{where}: {len(problems)} problems (fix them all, then rerun):")
    return "\n  ".join(lines)


def prompts_from_records(records: Iterable[tuple[int | str, Any]], where: str, dataset: str,
                         fields: FieldMap = DEFAULT_FIELDS, n: int | None = None,
                         problems: list[tuple[str, str]] | None = None) -> list[Prompt]:
    """Check every record and return the first ``n`` prompts, in record order.

    Args:
        records: ``(position, record)`` pairs; the position (a line or row number, or a sample
            label) names the record in messages and is its id when ``fields.id`` is None.
        where: the file (or task) named in messages.
        dataset: the dataset name; prompt ids are ``"<dataset>:<id>"``.
        problems: problems found before the records (e.g. undecodable lines) as (position, text);
            they are reported with the records' own.
    Returns:
        list of ``Prompt`` (length ≤ n).
    Raises:
        DatasetError: listing every problem of every record (missing or empty field, NUL byte, a
            prompt over ``MAX_PROMPT_CHARS``, a duplicate id) with its position — never a partial list.
    """
    problems = list(problems or [])
    out: list[Prompt] = []
    first_at: dict[str, Any] = {}
    for pos, obj in records:
        row, errs = _check(obj, fields, pos)
        problems += [(str(pos), e) for e in errs]
        if row is None:
            continue
        sid, text, ref, cat = row
        if sid in first_at:
            problems.append((str(pos), f"duplicate id {sid!r} (first at {first_at[sid]})"))
            continue
        first_at[sid] = pos
        meta = obj.get("meta")  # a JSON object beside the record's fields (TruthfulQA's incorrect answers)
        out.append(Prompt(f"{dataset}:{sid}", dataset, sid, text, ref, cat, meta if isinstance(meta, Mapping) else None))
    if problems:
        raise DatasetError(problem_report(where, problems))
    return out if n is None else out[:n]


def decoded_lines(path: Path) -> tuple[list[tuple[int, str]], list[tuple[str, str]]]:
    """The lines of a UTF-8 text file (a leading byte-order mark dropped): ((line number, text) pairs,
    problems) where every line that is not valid UTF-8 is a problem naming its line."""
    raw = path.read_bytes()
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    lines, problems = [], []
    for lineno, chunk in enumerate(raw.split(b"\n"), start=1):
        try:
            lines.append((lineno, chunk.decode("utf-8")))
        except UnicodeDecodeError as e:
            problems.append((str(lineno), f"not valid UTF-8 ({e.reason} at byte {e.start}); save the file as UTF-8"))
    return lines, problems


def jsonl_records(path: Path) -> tuple[list[tuple[int, Any]], list[tuple[str, str]]]:
    """The JSON objects of a JSONL file by line number (blank lines skipped), and the lines that
    are not valid UTF-8 or not JSON as problems."""
    lines, problems = decoded_lines(path)
    records = []
    for lineno, line in lines:
        if not line.strip():
            continue
        try:
            records.append((lineno, json.loads(line, parse_constant=_constant, parse_float=_finite)))
        except json.JSONDecodeError as e:
            problems.append((str(lineno), f"broken JSON ({e.msg})"))
        except ValueError as e:  # a value a store cannot hold (_BadValue), an integer of over 4300 digits
            problems.append((str(lineno), str(e)))
    return records, problems


def load_dataset(path: str | Path, n: int | None = None, dataset: str | None = None,
                 fields: FieldMap = DEFAULT_FIELDS, root: str | Path | None = None) -> list[Prompt]:
    """Read the first ``n`` usable prompts of a JSONL file, in file order; the whole file is checked.

    Args:
        path: a JSONL file with one object per line holding at least ``id`` and ``prompt``
            (``reference`` and ``category`` optional; ``fields`` maps other names).
        n: how many prompts (None = all). Files are already shuffled (data/datasets/SOURCES.md),
            so the first n are a seeded random sample.
        dataset: the dataset name (default: the file stem).
        root: the dataset folder (``data.dir``): the file's real path must lie inside it (a
            symlink or ``..`` leading out is refused). None: no such check.
    Returns:
        list of ``Prompt`` (length ≤ n).
    Raises:
        FileNotFoundError: no such file.
        DatasetError: the file leads outside ``root``; every line that is not UTF-8, not JSON, not
            an object, lacks ``prompt`` or ``id``, has an empty one, an ``id`` that is not text or a
            number, a ``category`` that is not text, a NUL byte, a prompt over ``MAX_PROMPT_CHARS``,
            a duplicate id, a number that is not finite (``NaN``, ``Infinity``, ``1e400``) or a lone
            UTF-16 surrogate in any string — each with the file and line.
    """
    path = Path(path)
    if root is not None:
        try:
            confined(path, root, str(path))
        except UntrustedFileError as e:
            raise DatasetError(str(e)) from None
    records, problems = jsonl_records(path)
    return prompts_from_records(records, str(path), dataset or path.stem, fields, n, problems)
