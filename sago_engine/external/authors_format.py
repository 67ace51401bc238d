"""The SAGO authors' released per-row results: where the files are, what their rows mean, which run counts.

Layout of a clone of their repository (``Styled-Prompts-Shifted-Behavior-v2``):

* open models: ``results/<style>/run_multi_<dataset>_<YYYYMMDD>_<HHMMSS>/full_results_all_models.csv``
  (one file per run, every model of the run; the per-model ``<model>_results.csv`` beside it lacks
  the mirroring columns and is read only when the combined file is missing);
* closed models: ``results/closed_models/run_<model>_<dataset>_<style>_<YYYYMMDD>_<HHMMSS>/
  full_results_all_models.csv``.

Folders ``trash`` and ``empty_results`` are skipped (the authors' aggregation skips them too).

One row = one (model, prompt, place, strength): the base prompt and its reply, the varied prompt
and its reply, and the measurements. A cell is (open/closed, style, dataset, model); a cell run more
than once keeps its latest run by the folder's timestamp (``select_latest``), or every run
(``all_runs``, as the authors' ``aggregate_results.py`` concatenates every folder).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from sago_engine.types import VariantSpec

FULL_FILE = "full_results_all_models.csv"
SKIP_DIRS = frozenset({"trash", "empty_results"})
CLOSED_DIR = "closed_models"

#: The authors' dataset slugs → sago's dataset names (the prompts are the authors' own samples).
DATASETS: dict[str, str] = {
    "truthful_qa": "truthfulqa", "natural_questions": "nq_open", "alpaca": "alpaca",
    "simpleqa_verified": "simpleqa_verified", "trivia_qa": "triviaqa", "hotpot_qa": "hotpotqa",
}


@dataclass(frozen=True)
class Style:
    """How one of the authors' style folders maps to a sago variant: family, subtype and the
    strength of the row that repeats the base prompt (the baseline the deltas are taken against)."""

    family: str
    subtype: str
    baseline: str


STYLES: dict[str, Style] = {
    "politeness": Style("social_register", "politeness", "0"),
    "spacing": Style("surface_noise", "spacing", "0"),
    "punctuation": Style("surface_noise", "punctuation", "0"),
    "letter_case": Style("surface_noise", "case", "0"),
    "length_variation": Style("structural", "length", "1.0"),
    "inter_vs_imper": Style("structural", "mood", "interrogative"),
}

#: The authors' model keys → the names their paper (and ``sago_engine.paper``) uses.
MODELS: dict[str, str] = {
    "L3.2-3B": "Llama-3.2-3B-Instruct", "L3.1-8B": "Llama-3.1-8B-Instruct",
    "G-2B": "Gemma-2B-IT", "G-7B": "Gemma-7B-IT", "G4-E4B": "Gemma-4-E4B-IT",
    "Q2.5-1.5B": "Qwen2.5-1.5B-Instruct", "Q2.5-7B": "Qwen2.5-7B-Instruct", "Q3.5-9B": "Qwen3.5-9B",
    "gpt-5.4": "GPT-5.4", "gemini-2.5-flash": "Gemini-2.5-Flash", "claude-sonnet-4-6": "Claude-Sonnet-4.6",
}

#: Columns every row must have.
REQUIRED = ("model", "prompt_id", "place", "strength", "prompt_orig", "prompt_pert", "response_orig", "response_pert")

#: sago axis → the authors' column it is read from (Δ-Ent: ``delta_entropy`` when the file has it,
#: else ``entropy_shift`` re-anchored at the baseline row, as their ``sgs_core`` describes).
AXIS_COLUMNS: dict[str, str] = {
    "cos": "delta_activation_similarity", "bleu": "delta_bleu", "bert": "delta_bertscore_response",
    "prob": "delta_log_prob", "ent": "delta_entropy", "mr": "delta_mirroring_rate",
}

#: R_X of the authors' ``sgs_core`` (same values as sago's defaults); their deltas are not clipped.
AUTHORS_NORMALIZERS: dict[str, float] = {"cos": 2.0, "bleu": 100.0, "bert": 1.0, "prob": 250.0, "ent": 10.0, "mr": 1.0}

#: What each ``<axis>@authors`` value is (stored in the run's origin; docs/METHOD.md says the same).
AUTHORS_DEFINITIONS: dict[str, str] = {
    "cos@authors": "column delta_activation_similarity: cos(h(x^v), h(x)) of the last hidden layer "
                   "(hidden_states[-1]) at token index sum(attention_mask) - 1 of a padded batch, minus the "
                   "baseline row's; float16; R = 2, not clipped",
    "bleu@authors": "column delta_bleu: sacrebleu corpus_bleu([y^v], [[y]]) (13a, exp smoothing, no effective "
                    "order) minus the baseline row's, on the replies as released (leaked prompt tails included); "
                    "R = 100, not clipped",
    "bert@authors": "column delta_bertscore_response: bert-score F1 (roberta-large, no idf, no baseline "
                    "rescaling) of (y^v, y) minus the baseline row's, on the replies as released; R = 1",
    "prob@authors": "column delta_log_prob: summed log-prob of the BASE reply y (its released text re-tokenised) "
                    "teacher-forced after the variant prompt vs after the base prompt, both cut to the shorter "
                    "target span; float16; sign as released (files differ); R = 250, not clipped",
    "ent@authors": "column delta_entropy (else entropy_shift minus the baseline row's): mean full-vocabulary "
                   "entropy (nats) over the BASE reply's positions after the variant prompt minus after the "
                   "base prompt; R = 10, not clipped",
    "mr@authors": "column delta_mirroring_rate: a pairwise verdict on (y, y^v) minus the baseline row's — "
                  "surface noise: increase of extra spaces / repeated punctuation / abnormal-case words over "
                  "strength-dependent thresholds; politeness: a GPT-4o-mini judge comparing y^v with y; length: "
                  "1 when the reply length ratio matches the target multiple (the baseline row is always 1, so "
                  "a reply that does not scale is -1); form: none; R = 1",
}


class AuthorsFormatError(ValueError):
    """A file or row that is not in the authors' format, with the file named."""


@dataclass(frozen=True)
class SourceFile:
    """One results file: its path, path relative to the imported folder, open/closed, style,
    dataset slug, run folder name and that folder's timestamp (``YYYYMMDD_HHMMSS``)."""

    path: Path
    rel: str
    kind: str
    style: str
    dataset: str
    run: str
    timestamp: str
    combined: bool = True

    def sha256(self) -> str:
        """sha256 of the file's bytes."""
        h = hashlib.sha256()
        with open(self.path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()


_DS = "|".join(sorted(DATASETS, key=len, reverse=True))
_ST = "|".join(sorted(STYLES, key=len, reverse=True))
_OPEN_RUN = re.compile(rf"^run_multi_(?P<dataset>{_DS})_(?P<ts>\d{{8}}_\d{{6}})$")
_CLOSED_RUN = re.compile(rf"^run_(?P<model>.+?)_(?P<dataset>{_DS})_(?P<style>{_ST})_(?P<ts>\d{{8}}_\d{{6}})$")


def _results_dir(root: Path) -> Path:
    root = Path(root)
    if (root / "results").is_dir():
        return root / "results"
    if root.name == "results" and root.is_dir():
        return root
    raise FileNotFoundError(f"{root}: no results/ folder (point the importer at a clone of the authors' repository)")


def _run_files(run_dir: Path) -> list[tuple[Path, bool]]:
    full = run_dir / FULL_FILE
    if full.is_file():
        return [(full, True)]
    return [(p, False) for p in sorted(run_dir.glob("*_results.csv")) if p.is_file()]


def discover(root: str | Path) -> list[SourceFile]:
    """Every results file under ``root`` (a clone of the authors' repository, or its ``results/``).

    Raises:
        FileNotFoundError: no ``results/`` folder.
    """
    res = _results_dir(Path(root))
    base = res.parent
    out: list[SourceFile] = []
    for style_dir in sorted(p for p in res.iterdir() if p.is_dir() and p.name not in SKIP_DIRS):
        closed = style_dir.name == CLOSED_DIR
        if not closed and style_dir.name not in STYLES:
            continue
        for run_dir in sorted(p for p in style_dir.iterdir() if p.is_dir()):
            m = (_CLOSED_RUN if closed else _OPEN_RUN).match(run_dir.name)
            if not m:
                continue
            style = m.group("style") if closed else style_dir.name
            for path, combined in _run_files(run_dir):
                out.append(SourceFile(path, path.relative_to(base).as_posix(), "closed" if closed else "open",
                                      style, m.group("dataset"), run_dir.name, m.group("ts"), combined))
    return out


def read_rows(src: SourceFile) -> pd.DataFrame:
    """The file's rows, every column as text exactly as written (empty cells are ""), in file order.

    Raises:
        AuthorsFormatError: unreadable CSV or a required column missing.
    """
    try:
        df = pd.read_csv(src.path, dtype=str, keep_default_na=False, na_filter=False)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as e:
        raise AuthorsFormatError(f"{src.rel}: not a readable CSV ({e})") from e
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise AuthorsFormatError(f"{src.rel}: missing column(s) {', '.join(missing)}")
    return df


@dataclass
class Selection:
    """Which (source, model) pairs are imported, and which were passed over (with the reason)."""

    chosen: list[tuple[SourceFile, str]] = field(default_factory=list)
    superseded: list[dict] = field(default_factory=list)


def select_latest(pairs: Iterable[tuple[SourceFile, str]], all_runs: bool = False) -> Selection:
    """The latest run per cell (kind, style, dataset, model) by the run folder's timestamp.

    Args:
        pairs: (source file, model key) for every model found in every file.
        all_runs: keep every run (the authors' ``aggregate_results.py`` pools all run folders).
    Returns:
        ``Selection``; ``superseded`` lists each passed-over (path, model) with the run that replaced it.
    """
    cells: dict[tuple, list[tuple[SourceFile, str]]] = {}
    for src, model in pairs:
        cells.setdefault((src.kind, src.style, src.dataset, model), []).append((src, model))
    sel = Selection()
    for key in sorted(cells):
        runs = sorted(cells[key], key=lambda sm: (sm[0].timestamp, sm[0].combined, sm[0].rel))
        keep = runs if all_runs else runs[-1:]
        sel.chosen.extend(keep)
        for src, model in runs[:-1] if not all_runs else []:
            sel.superseded.append({"path": src.rel, "model": model, "replaced_by": runs[-1][0].rel,
                                   "reason": "a later run of the same (style, dataset, model)"})
    return sel


def _num(text: str) -> float | None:
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


@dataclass(frozen=True)
class RowRole:
    """What a row is in the authors' scoring: ``spec`` and ``meta`` of the sago variant it becomes,
    ``role`` ("variant": in V; "baseline": the base prompt repeated; "excluded": not in V)."""

    spec: VariantSpec
    meta: dict
    role: str


def row_role(style: str, strength: str, place: str) -> RowRole:
    """The sago variant (F, u, s, p) and meta of one authors' row, and its role in their V.

    Politeness strengths −10…10 become register ``rude`` (< 0), ``neutral`` (0) or ``polite``
    (> 0); letter case targets upper case (the authors upper-case s % of the letters); length keeps
    the multiple as ``target_ratio``; form rows are ``imperative`` (in V), ``interrogative`` (the
    baseline) or ``original`` (the unrewritten prompt, dropped from V by the authors' ``sgs_core``).

    Raises:
        AuthorsFormatError: an unknown style, place or a strength that is not a number where one is needed.
    """
    if style not in STYLES:
        raise AuthorsFormatError(f"unknown style {style!r}")
    st = STYLES[style]
    position = str(place).strip().upper()
    if position not in ("PREFIX", "SUFFIX", "GLOBAL"):
        raise AuthorsFormatError(f"unknown place {place!r}")
    meta: dict = {"authors_style": style, "authors_strength": strength, "authors_place": place}
    s = str(strength).strip()
    if style == "inter_vs_imper":
        value = {"interrogative": 0.0, "imperative": 1.0, "original": -1.0}.get(s)
        if value is None:
            raise AuthorsFormatError(f"form strength {strength!r} is not interrogative/imperative/original")
        meta["target"] = "imperative" if s == "imperative" else "question"
        role = "baseline" if s == st.baseline else ("excluded" if s == "original" else "variant")
        return RowRole(VariantSpec(st.family, st.subtype, value, position), meta, role)
    value = _num(s)
    if value is None:
        raise AuthorsFormatError(f"{style} strength {strength!r} is not a number")
    if style == "politeness":
        meta["register"] = "rude" if value < 0 else ("polite" if value > 0 else "neutral")
        meta["tone"] = "negative" if value < 0 else ("polite" if value > 0 else "neutral")
    elif style == "letter_case":
        meta["target"] = "upper"
    elif style == "length_variation":
        meta["target_ratio"] = value
    role = "baseline" if value == float(st.baseline) else "variant"
    return RowRole(VariantSpec(st.family, st.subtype, value, position), meta, role)


def authors_value(axis: str, row: pd.Series, baseline: pd.Series | None) -> tuple[float | None, str | None]:
    """The authors' Δ of ``axis`` for one row, as released: (value, None) or (None, why unavailable).

    Δ-Ent reads ``delta_entropy`` when present, else ``entropy_shift`` minus the baseline row's
    (``entropy_shift`` itself when the row has no baseline row).
    """
    col = AXIS_COLUMNS[axis]
    if axis == "ent" and "delta_entropy" not in row.index:
        v = _num(row.get("entropy_shift", ""))
        if v is None:
            return None, "no entropy_shift in the authors' row"
        b = _num(baseline.get("entropy_shift", "")) if baseline is not None else None
        return (v - b if b is not None else v), None
    v = _num(row.get(col, ""))
    if v is None:
        return None, f"no {col} in the authors' row" if col in row.index else f"the file has no {col} column"
    return v, None
