"""Load the bundled dataset samples (JSONL: id, prompt, reference, category) with clear errors."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sago_engine.untrusted_files import UntrustedFileError, confined

#: The six datasets of SAGO (arXiv 2610.01428) §Datasets, by file stem in data/datasets/.
DATASETS: tuple[str, ...] = ("truthfulqa", "nq_open", "alpaca", "simpleqa_verified", "triviaqa", "hotpotqa")

#: Prompts longer than this (characters) are refused with a clear error (not truncated).
MAX_PROMPT_CHARS = 4000


class DatasetError(ValueError):
    """A dataset file that cannot be used, with the file and line named."""


@dataclass(frozen=True)
class Prompt:
    """One base prompt x_i."""

    prompt_id: str
    """``"<dataset>:<source id>"`` — unique across datasets."""
    dataset: str
    source_id: str
    text: str
    reference: Any
    category: str | None


class _BadValue(ValueError):
    """A JSON value a store cannot hold (raised inside ``json.loads``; becomes a ``DatasetError``)."""


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
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in items:
        if isinstance(k, str) and _surrogate_field(k):
            return f"{where}.{k!r}" if where else repr(k)
        hit = _surrogate_field(v, f"{where}.{k}" if where else str(k))
        if hit:
            return hit
    return None


def load_dataset(path: str | Path, n: int | None = None, dataset: str | None = None,
                 root: str | Path | None = None) -> list[Prompt]:
    """Read the first ``n`` usable prompts of a JSONL file, in file order.

    Args:
        path: a JSONL file with objects holding at least ``id`` and ``prompt``.
        n: how many prompts (None = all). Files are already shuffled (data/datasets/SOURCES.md),
            so the first n are a seeded random sample.
        dataset: the dataset name (default: the file stem).
        root: the dataset folder (``data.dir``): the file's real path must lie inside it (a
            symlink or ``..`` leading out is refused). None: no such check.
    Returns:
        list of ``Prompt`` (length ≤ n).
    Raises:
        FileNotFoundError: no such file.
        DatasetError: the file leads outside ``root``; invalid UTF-8 or JSON, a missing/empty
            ``prompt`` or ``id``, an ``id`` that is not text or a number, a ``category`` that is not
            text, a NUL byte, a prompt over ``MAX_PROMPT_CHARS``, a duplicate id, a number that is not
            finite (``NaN``, ``Infinity``, ``1e400``) or a lone UTF-16 surrogate in any string (a
            store cannot hold one) — naming the file and line.
    """
    path = Path(path)
    name = dataset or path.stem
    if root is not None:
        try:
            confined(path, root, str(path))
        except UntrustedFileError as e:
            raise DatasetError(str(e)) from None
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise DatasetError(f"{path}:{line}: not valid UTF-8 ({e.reason})") from e
    out: list[Prompt] = []
    seen: set[str] = set()
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line, parse_constant=_constant, parse_float=_finite)
        except json.JSONDecodeError as e:
            raise DatasetError(f"{path}:{lineno}: broken JSON ({e.msg})") from e
        except ValueError as e:  # a value a store cannot hold (_BadValue), an integer of over 4300 digits
            raise DatasetError(f"{path}:{lineno}: {e}") from None
        if not isinstance(obj, dict):
            raise DatasetError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
        for field in ("id", "prompt"):
            if field not in obj:
                raise DatasetError(f"{path}:{lineno}: missing field {field!r}")
        bad = _surrogate_field(obj)
        if bad:
            raise DatasetError(f"{path}:{lineno}: field {bad} holds a lone surrogate (half of a UTF-16 pair, "
                               "not text a store can hold)")
        if isinstance(obj["id"], bool) or not isinstance(obj["id"], (str, int, float)):
            raise DatasetError(f"{path}:{lineno}: id must be text or a number, got {type(obj['id']).__name__}")
        if obj.get("category") is not None and not isinstance(obj["category"], str):
            raise DatasetError(f"{path}:{lineno}: category must be text, got {type(obj['category']).__name__}")
        prompt = obj["prompt"]
        if not isinstance(prompt, str) or not prompt.strip():
            raise DatasetError(f"{path}:{lineno}: empty or non-text prompt")
        if "\x00" in prompt:
            raise DatasetError(f"{path}:{lineno}: prompt contains a NUL byte")
        if len(prompt) > MAX_PROMPT_CHARS:
            raise DatasetError(f"{path}:{lineno}: prompt has {len(prompt)} characters (limit {MAX_PROMPT_CHARS})")
        sid = str(obj["id"])
        if not sid.strip():
            raise DatasetError(f"{path}:{lineno}: empty id")
        if sid in seen:
            raise DatasetError(f"{path}:{lineno}: duplicate id {sid!r}")
        seen.add(sid)
        out.append(Prompt(f"{name}:{sid}", name, sid, prompt, obj.get("reference"), obj.get("category")))
        if n is not None and len(out) >= n:
            break
    return out
