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

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from sago_engine.types import VariantSpec
from sago_engine.untrusted_files import UntrustedFileError, confined, csv_records, decode_utf8, read_once

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

#: The authors' model keys → the names their paper (and ``sago_engine.external.paper``) uses.
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


#: Largest |value| read from a numeric column (Δ in the axis' own unit: nats, BLEU points…); a value
#: beyond it, or not finite, is refused: stored unavailable with the reason, counted and shown.
MAX_ABS_VALUE = 1e6
#: Why a value is refused (the stored reason starts with it).
REFUSED = "not a finite number within"

#: Columns whose cells are numbers (or empty): text in one is a format error naming its line.
NUMERIC_COLUMNS = frozenset(AXIS_COLUMNS.values()) | {"entropy_shift"}


class AuthorsFormatError(UntrustedFileError):
    """A file or row that is not in the authors' format (or a file that is refused: a link out of
    the folder), with the file and line named."""


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
    root: Path | None = None
    """The imported folder: the file is read only if its real path lies inside it."""


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


def _inside(path: Path, top: Path, base: Path) -> Path:
    """``path`` (a folder or file found under ``top``), refused when its real path leaves ``top``."""
    try:
        confined(path, top, path.relative_to(base).as_posix())
    except UntrustedFileError as e:
        raise AuthorsFormatError(str(e)) from None
    return path


def _entry(p: Path) -> bool:
    """Whether ``p`` is there and not a folder: a file, a link (even a dangling one), a FIFO —
    each is read (or refused by name) by ``read_rows``, never skipped without a word."""
    return (p.is_symlink() or p.exists()) and not p.is_dir()


def _run_files(run_dir: Path) -> list[tuple[Path, bool]]:
    full = run_dir / FULL_FILE
    if _entry(full):
        return [(full, True)]
    return [(p, False) for p in sorted(run_dir.glob("*_results.csv")) if _entry(p)]


def discover(root: str | Path, passed_over: list[dict] | None = None) -> list[SourceFile]:
    """Every results file under ``root`` (a clone of the authors' repository, or its ``results/``).

    The clone is untrusted: a folder or file on the way whose real path leaves ``root`` (a
    symlink, ``..``) is refused, naming it; nothing under it is read.

    Args:
        passed_over: receives ``{"path", "reason"}`` for each folder under ``results/`` that is
            not read: a style or run folder outside the authors' layout, a run folder without a
            results file (``trash`` and ``empty_results`` are skipped as the authors' aggregation does).
    Raises:
        FileNotFoundError: no ``results/`` folder.
        AuthorsFormatError: a link (or ``..``) that leads outside ``root``.
    """
    top = Path(root)
    res = _results_dir(top)
    base = res.parent
    _inside(res, top, base)
    out: list[SourceFile] = []
    skip = passed_over.append if passed_over is not None else (lambda _: None)
    for style_dir in sorted(p for p in res.iterdir() if p.is_dir() and p.name not in SKIP_DIRS):
        closed = style_dir.name == CLOSED_DIR
        if not closed and style_dir.name not in STYLES:
            skip({"path": style_dir.relative_to(base).as_posix(), "reason": "not a style the importer knows "
                  f"({', '.join([*STYLES, CLOSED_DIR])})"})
            continue
        _inside(style_dir, top, base)
        for run_dir in sorted(p for p in style_dir.iterdir() if p.is_dir()):
            m = (_CLOSED_RUN if closed else _OPEN_RUN).match(run_dir.name)
            if not m:
                skip({"path": run_dir.relative_to(base).as_posix(), "reason": "not a run folder of the authors' "
                      "layout (" + ("run_<model>_<dataset>_<style>" if closed else "run_multi_<dataset>")
                      + "_<YYYYMMDD>_<HHMMSS>)"})
                continue
            _inside(run_dir, top, base)
            style = m.group("style") if closed else style_dir.name
            files = _run_files(run_dir)
            if not files:
                skip({"path": run_dir.relative_to(base).as_posix(),
                      "reason": f"no results file ({FULL_FILE} or *_results.csv)"})
            for path, combined in files:
                out.append(SourceFile(_inside(path, top, base), path.relative_to(base).as_posix(),
                                      "closed" if closed else "open", style, m.group("dataset"), run_dir.name,
                                      m.group("ts"), combined, top))
    return out


def read_rows(src: SourceFile) -> pd.DataFrame:
    """The file's rows, every column as text exactly as written (empty cells are ""), in file order,
    from one read of the file: ``df.attrs`` holds ``sha256`` (of exactly the bytes parsed) and
    ``lines`` (the line each row starts on).

    Raises:
        AuthorsFormatError: "<file>:<line>: …" — a link out of the imported folder, a file that
            cannot be read ("<file>: cannot be read (…)"), not UTF-8, a
            malformed CSV (a quote never closed, a row with too few or too many cells, an unbalanced
            quote that swallowed the rows after it), a required column missing, text in a numeric
            column, or a row whose style, place or strength is not the authors'.
    """
    try:
        data, sha = read_once(src.path, src.root or src.path.parent, src.rel)
        header, records = csv_records(decode_utf8(data, src.rel), src.rel)
        missing = [c for c in REQUIRED if c not in header]
        if missing:
            raise AuthorsFormatError(f"{src.rel}:1: missing column(s) {', '.join(missing)}")
        numeric = [(i, c) for i, c in enumerate(header) if c in NUMERIC_COLUMNS]
        at = {c: header.index(c) for c in ("strength", "place")}
        lines, rows = [], []
        for line, row in records:
            bad = [c for i, c in numeric if row[i].strip() and _float(row[i]) is None]
            if bad:
                raise AuthorsFormatError(f"{src.rel}:{line}: column {bad[0]} holds {row[header.index(bad[0])][:60]!r}, "
                                         "not a number")
            try:
                row_role(src.style, row[at["strength"]], row[at["place"]])
            except AuthorsFormatError as e:
                raise AuthorsFormatError(f"{src.rel}:{line}: {e}") from None
            lines.append(line)
            rows.append(row)
    except UntrustedFileError as e:
        raise e if isinstance(e, AuthorsFormatError) else AuthorsFormatError(str(e)) from None
    except OSError as e:  # a dangling link, no permission
        raise AuthorsFormatError(f"{src.rel}: cannot be read ({e.strerror or e})") from None
    df = pd.DataFrame(rows, columns=header, dtype=object) if rows else pd.DataFrame(columns=header, dtype=object)
    if df.columns.duplicated().any():
        raise AuthorsFormatError(f"{src.rel}:1: repeated column(s) {sorted(set(df.columns[df.columns.duplicated()]))}")
    df.attrs.update(sha256=sha, lines=lines)
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


def _float(text: str) -> float | None:
    """``float(text)`` (``nan`` and ``inf`` included), None when ``text`` is not a number."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _num(text: str) -> float | None:
    """A finite number within ±``MAX_ABS_VALUE``, else None."""
    v = _float(text)
    return v if v is not None and math.isfinite(v) and abs(v) <= MAX_ABS_VALUE else None


def _refused(col: str, text: str) -> str | None:
    """The reason a non-empty cell of a numeric column is refused (not finite, or beyond the bound); None if not."""
    if not str(text).strip() or _num(text) is not None:
        return None
    return f"{REFUSED} ±{MAX_ABS_VALUE:g}: column {col} reads {str(text)[:40]!r}"


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
        raise AuthorsFormatError(f"{style} strength {strength!r} is not a finite number within ±{MAX_ABS_VALUE:g}")
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
        text = row.get("entropy_shift", "")
        base_text = baseline.get("entropy_shift", "") if baseline is not None else ""
        why = _refused("entropy_shift", text) or _refused("entropy_shift (baseline row)", base_text)
        if why:
            return None, why
        v = _num(text)
        if v is None:
            return None, "no entropy_shift in the authors' row"
        b = _num(base_text)
        return (v - b if b is not None else v), None
    why = _refused(col, row.get(col, ""))
    if why:
        return None, why
    v = _num(row.get(col, ""))
    if v is None:
        return None, f"no {col} in the authors' row" if col in row.index else f"the file has no {col} column"
    return v, None
