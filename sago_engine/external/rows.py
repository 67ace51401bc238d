"""One model's released rows → the frames of two labelled runs (pure: nothing here touches the store).

The *authors' run* holds their numbers: per row, each of the six axes as ``<axis>@authors``
(their Δ / their R_X, not clipped), the raw and cleaned replies, and the row itself (every column
as text, ``imported_rows``). The *recomputed run* scores the same pairs with sago's own Δ-BLEU,
Δ-BERT and Δ-MR (``sago_engine.measure.pipeline.compute_rows``): on the cleaned replies as the plain axes,
on the replies as released as ``<axis>@leaked`` — so the leak's effect is one difference under one
definition. A pair whose two replies are token salad is stored unavailable in the recomputed run
("degenerate pair"), never scored.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

import pandas as pd

from sago_engine.external import salad
from sago_engine.external.authors_format import (
    AUTHORS_NORMALIZERS,
    AXIS_COLUMNS,
    DATASETS,
    MAX_ABS_VALUE,
    REFUSED,
    RowRole,
    SourceFile,
    authors_value,
    row_role,
)
from sago_engine.external.degenerate import SALAD, reply_kind
from sago_engine.external.leak import Leak, TemplateText, find_leak
from sago_engine.measure.pipeline import Unit, compute_rows, response_id
from sago_engine.scoring.scores import resolve_normalizers
from sago_engine.seeds import stable_hash
from sago_engine.types import AUTHORS_OPTION, AXES, GenerationResult, Variant

LEAKED_OPTION = "leaked"
RECOMPUTED_AXES = ("bleu", "bert", "mr")
NOT_RECOMPUTED = "not recomputed: the released rows hold replies, not model states"
DEGENERATE = "degenerate pair: token salad on both sides (sago_engine.external.salad)"
SKIP_REASONS = {
    "baseline": "the authors' baseline row: the base prompt itself (their deltas are taken against it)",
    "excluded": "the authors' Form/original row (the unrewritten prompt), left out of V by their sgs_core",
}


def prompt_key(dataset: str, text: str) -> str:
    """sago prompt id of an authors' base prompt: ``authors:<dataset>:<hash of its text>``."""
    return f"authors:{dataset}:{stable_hash('authors prompt', dataset, text, length=12)}"


@dataclass
class Pair:
    """One released row as sago sees it."""

    src: SourceFile
    row_index: int
    row: pd.Series
    prompt_id: str
    dataset: str
    variant: Variant
    role: RowRole
    base: Leak
    var: Leak
    degenerate: bool
    where: str = ""
    """``<file>:<line>`` of the row."""
    repeat_of: str | None = None
    """``<file>:<line>`` of an earlier row of the same variant (this one is kept as released, not scored)."""


@dataclass
class ModelFrames:
    """Everything one model contributes: prompts, variants (shared by both runs) and per-run frames."""

    pairs: list[Pair] = field(default_factory=list)
    prompts: dict[str, dict] = field(default_factory=dict)
    variants: dict[str, dict] = field(default_factory=dict)


def build_pairs(model: str, parts: list[tuple[SourceFile, pd.DataFrame]],
                templates: tuple[TemplateText, ...]) -> ModelFrames:
    """Pairs, prompts and variants of one model from its (source, rows) parts.

    ``templates``: decoded chat templates for leak detection (empty: none is looked for, as for
    API models, whose replies are not decoded from a padded batch).
    """
    out = ModelFrames()
    first: dict[str, str] = {}
    for src, df in parts:
        dataset = DATASETS[src.dataset]
        lines = df.attrs.get("lines")
        for idx, row in df.iterrows():
            role = row_role(src.style, row["strength"], row["place"])
            pid = prompt_key(dataset, row["prompt_orig"])
            meta = {**role.meta, "authors_run": src.run, "authors_bertscore_prompt": row.get("bertscore_prompt", "")}
            vid = stable_hash("authors variant", pid, role.spec.as_dict(), row["prompt_pert"], src.run)
            variant = Variant(vid, pid, role.spec, row["prompt_pert"], 0, f"authors-code:{src.style}", meta)
            base = find_leak(row["response_orig"], row["prompt_orig"], templates) if templates else \
                Leak("", row["response_orig"])
            var = find_leak(row["response_pert"], row["prompt_pert"], templates) if templates else \
                Leak("", row["response_pert"])
            degenerate = (reply_kind(base.cleaned) == SALAD) and (reply_kind(var.cleaned) == SALAD)
            where = f"{src.rel}:{lines[int(idx)] if lines else f'row {int(idx) + 1}'}"
            out.pairs.append(Pair(src, int(idx), row, pid, dataset, variant, role, base, var, degenerate, where,
                                  first.get(vid)))
            first.setdefault(vid, where)
            out.prompts.setdefault(pid, {"prompt_id": pid, "dataset": dataset, "source_id": str(row["prompt_id"]),
                                         "text": row["prompt_orig"], "reference": None,
                                         "category": row.get("category") or None})
            out.variants.setdefault(vid, {
                "variant_id": vid, "prompt_id": pid, **role.spec.as_dict(), "text": row["prompt_pert"], "seed": 0,
                "generator": variant.generator, "meta": json.dumps(meta, sort_keys=True, ensure_ascii=False),
                "semantic_score": None, "passes_filter": None, "kept": role.role == "variant",
                "skip_reason": SKIP_REASONS.get(role.role)})
    return out


def scored(mf: ModelFrames) -> list[Pair]:
    """The pairs that are scored: every row but a repeat of an earlier row's variant."""
    return [p for p in mf.pairs if p.repeat_of is None]


def repeated_summary(mf: ModelFrames) -> dict:
    """Rows that repeat an earlier row's variant (same prompt, place, strength and varied prompt):
    their count and up to five ``{"row", "first"}`` (``<file>:<line>`` each). Each is kept in
    ``imported_rows`` as released; the first row of the variant is the one scored."""
    reps = [{"row": p.where, "first": p.repeat_of} for p in mf.pairs if p.repeat_of is not None]
    return {"count": len(reps), "examples": reps[:5]}


def response_frame(run_id: str, mf: ModelFrames) -> pd.DataFrame:
    """``responses`` rows of a run: the cleaned reply, and the released one in ``raw_response`` when
    a leak was cut (NULL otherwise); one base reply per prompt (the first row's), one per variant."""
    rows: dict[str, dict] = {}
    for p in mf.pairs:
        for vid, leak in ((None, p.base), (p.variant.variant_id, p.var)):
            rid = response_id(run_id, p.prompt_id, vid)
            if rid not in rows:
                released = p.row["response_orig" if vid is None else "response_pert"]
                rows[rid] = {"response_id": rid, "run_id": run_id, "prompt_id": p.prompt_id, "variant_id": vid,
                             "response": leak.cleaned, "raw_response": released if leak.found else None}
    return pd.DataFrame(list(rows.values()))


def authors_deltas(run_id: str, mf: ModelFrames) -> pd.DataFrame:
    """``deltas`` of the authors' run: each axis as ``<axis>@authors``, Δ as released, Δ̃ = Δ / R_X
    with the authors' R_X and no clipping; unavailable (with the reason) where the row has no value."""
    base_rows = {(p.src.rel, p.row["prompt_id"], p.row["place"]): p.row for p in mf.pairs if p.role.role == "baseline"}
    out = []
    for p in scored(mf):
        baseline = base_rows.get((p.src.rel, p.row["prompt_id"], p.row["place"]))
        for axis in AXES:
            v, why = authors_value(axis, p.row, baseline)
            col = AXIS_COLUMNS[axis] if axis != "ent" or "delta_entropy" in p.row.index else "entropy_shift"
            out.append((run_id, p.dataset, p.prompt_id, p.variant.variant_id, f"{axis}@{AUTHORS_OPTION}",
                        v, None if v is None else v / AUTHORS_NORMALIZERS[axis], v is not None, why,
                        f"authors: column {col}"))
    return pd.DataFrame(out, columns=["run_id", "dataset", "prompt_id", "variant_id", "axis", "delta", "delta_norm",
                                      "available", "reason", "detector"])


def _units(mf: ModelFrames, raw: bool) -> list[Unit]:
    units: dict[tuple, Unit] = {}
    for p in scored(mf):
        base_text = p.row["response_orig"] if raw else p.base.cleaned
        var_text = p.row["response_pert"] if raw else p.var.cleaned
        u = units.setdefault((p.prompt_id, base_text), Unit(p.prompt_id, p.dataset, GenerationResult(text=base_text),
                                                           [], []))
        u.variants.append(p.variant)  # type: ignore[union-attr]
        u.results.append(GenerationResult(text=var_text))  # type: ignore[union-attr]
    return list(units.values())


def recomputed_deltas(run_id: str, mf: ModelFrames) -> pd.DataFrame:
    """``deltas`` of the recomputed run: sago's Δ-BLEU/Δ-BERT/Δ-MR on the cleaned replies (plain axes)
    and on the released ones (``<axis>@leaked``), with sago's R_X; Δ-Cos/Prob/Ent stored unavailable
    (``NOT_RECOMPUTED``); degenerate pairs unavailable on every axis (``DEGENERATE``)."""
    norms = resolve_normalizers(None)
    _, clean = compute_rows(run_id, _units(mf, raw=False), norms, frozenset())
    _, raw = compute_rows(run_id, _units(mf, raw=True), norms, frozenset())
    raw = raw[raw["axis"].isin(RECOMPUTED_AXES)].assign(axis=lambda d: d["axis"] + f"@{LEAKED_OPTION}")
    d = pd.concat([clean, raw], ignore_index=True)
    not_text = ~d["axis"].isin(RECOMPUTED_AXES + tuple(f"{a}@{LEAKED_OPTION}" for a in RECOMPUTED_AXES))
    d.loc[not_text, "reason"] = NOT_RECOMPUTED
    bad = {p.variant.variant_id for p in mf.pairs if p.degenerate}
    mask = d["variant_id"].isin(bad)
    d.loc[mask & ~not_text, ["delta", "delta_norm", "detector"]] = None
    d.loc[mask & ~not_text, "available"] = False
    d.loc[mask & ~not_text, "reason"] = DEGENERATE
    return d.drop_duplicates(["run_id", "variant_id", "axis"])


def refused_summary(deltas: pd.DataFrame) -> dict:
    """Values of the authors' run refused as not finite or beyond ±``MAX_ABS_VALUE``: their count,
    the rule and up to five examples (prompt, variant, axis, reason); each is stored unavailable."""
    bad = deltas[deltas["reason"].fillna("").str.startswith(REFUSED)]
    return {"count": int(len(bad)), "rule": f"a value must be a finite number within ±{MAX_ABS_VALUE:g}",
            "examples": bad[["prompt_id", "variant_id", "axis", "reason"]].head(5).to_dict("records")}


def imported_row_frame(run_id: str, mf: ModelFrames) -> pd.DataFrame:
    """``imported_rows`` of the authors' run: every column of every row, as text."""
    return pd.DataFrame([{"run_id": run_id, "source": p.src.rel, "row_index": p.row_index, "prompt_id": p.prompt_id,
                          "variant_id": p.variant.variant_id,
                          "columns": json.dumps({str(k): str(v) for k, v in p.row.items()}, ensure_ascii=False)}
                         for p in mf.pairs])


def leak_summary(mf: ModelFrames) -> dict:
    """Leak counts of one model: rows, leaked base / variant replies (rows), share of released
    replies with a leak, distinct base replies and how many leak, by template, mean leaked characters."""
    n = len(mf.pairs)
    base = sum(p.base.found for p in mf.pairs)
    var = sum(p.var.found for p in mf.pairs)
    distinct = {}
    for p in mf.pairs:
        distinct.setdefault((p.prompt_id, p.row["response_orig"]), p.base.found)
    lengths = [len(lk.leaked) for p in mf.pairs for lk in (p.base, p.var) if lk.found]
    by = Counter(lk.template for p in mf.pairs for lk in (p.base, p.var) if lk.found)
    return {"rows": n, "base_leaked_rows": base, "variant_leaked_rows": var,
            "reply_leak_rate": (base + var) / (2 * n) if n else None,
            "distinct_base_replies": len(distinct), "distinct_base_leaked": sum(distinct.values()),
            "mean_leaked_chars": sum(lengths) / len(lengths) if lengths else 0.0, "by_template": dict(by)}


def degenerate_summary(mf: ModelFrames) -> dict:
    """Pairs, degenerate pairs (both replies salad), their share and the model-level flag."""
    n = len(mf.pairs)
    k = sum(p.degenerate for p in mf.pairs)
    share = k / n if n else 0.0
    return {"pairs": n, "degenerate_pairs": k, "share": share, "flagged": bool(n) and share >= salad.MODEL_SHARE,
            "rule": salad.rule_record()}
