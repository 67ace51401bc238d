"""Load the bundled dataset samples (JSONL: id, prompt, reference, category, meta) with clear errors."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    meta: Any = None
    """The row's ``meta`` object as read (e.g. TruthfulQA's ``incorrect_answers``); None if absent."""


def load_dataset(path: str | Path, n: int | None = None, dataset: str | None = None) -> list[Prompt]:
    """Read the first ``n`` usable prompts of a JSONL file, in file order.

    Args:
        path: a JSONL file with objects holding at least ``id`` and ``prompt``.
        n: how many prompts (None = all). Files are already shuffled (data/datasets/SOURCES.md),
            so the first n are a seeded random sample.
        dataset: the dataset name (default: the file stem).
    Returns:
        list of ``Prompt`` (length ≤ n).
    Raises:
        FileNotFoundError: no such file.
        DatasetError: invalid UTF-8 or JSON, a missing/empty ``prompt`` or ``id``, a NUL byte, a
            prompt over ``MAX_PROMPT_CHARS``, or a duplicate id — naming the file and line.
    """
    path = Path(path)
    name = dataset or path.stem
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
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DatasetError(f"{path}:{lineno}: broken JSON ({e.msg})") from e
        if not isinstance(obj, dict):
            raise DatasetError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
        for field in ("id", "prompt"):
            if field not in obj:
                raise DatasetError(f"{path}:{lineno}: missing field {field!r}")
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
        out.append(Prompt(f"{name}:{sid}", name, sid, prompt, obj.get("reference"), obj.get("category"), obj.get("meta")))
        if n is not None and len(out) >= n:
            break
    return out
