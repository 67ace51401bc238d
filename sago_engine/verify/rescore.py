"""Recompute a stored run's text axes from its stored replies, without generating anything.

The text axes (Δ-BLEU, Δ-BERT, Δ-MR and their options such as ``bert@rescaled``) need only the
base and variant reply texts, which a store keeps exactly as decoded. When the rules of what can
be measured change (``pipeline.budget_spent``: a reply of whitespace is a reply, only no
characters or hidden reasoning tokens are "no visible reply"), a run's stored rows can be brought
up to the current rules from its stored replies: ``rescore_run`` rebuilds each variant from the
``variants`` table and each reply from ``responses`` (with ``api_responses.reasoning_tokens``),
scores them with ``pipeline.compute_rows`` — the function a run uses — under the run's own
R_X and axis options (``runs.normalizers``, ``runs.config["axis_options"]``: option axes and the
``bert@rescaled`` baseline b), and replaces the rows that change. Judge verdicts of social-register
variants (``mirroring_verdicts``) stay as the run recorded them. White-box axes (Δ-Cos, Δ-Prob,
Δ-Ent) are never touched. A sampled run's ``sample_deltas`` (each sample's Δ against base sample 0)
are recomputed the same way from its stored samples by ``sample_deltas.sample_delta_rows``, the
function the run uses (text axes only; ``RescoreResult.sample_rows_replaced``).

By default only rows whose availability differs under the current rules are replaced; with
``all_rows`` every text-axis row whose availability or label differs, or whose recomputed Δ differs
by more than the axis's float noise (``NOISE_TOL``: BERTScore recomputed in another process may
differ from the stored value by a float32 rounding step, 2.4e-7), is. A row unavailable before and
after keeps its stored reason. A second rescore changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from sago_engine.axes.noise import NOISE_TOL
from sago_engine.axis_spec import OPTION_AXIS_SPECS
from sago_engine.measure.pipeline import TEXT_AXES, Unit, compute_rows, text_unavailable_reason
from sago_engine.measure.sample_deltas import SAMPLED_AXES, SampledUnit, sample_delta_rows
from sago_engine.measure.samples import Sample
from sago_engine.measure.storerows import variant_from_record
from sago_engine.types import GenerationResult, base_axis

#: What the rescore record in the store's meta says was done.
RULE = ("text axes recomputed from the stored replies by pipeline.compute_rows under the current availability "
        "rules (a blank reply is a reply; only no characters or hidden reasoning tokens are 'no visible reply')")
#: What the rescore record says was done to a sampled run's ``sample_deltas``.
SAMPLE_RULE = ("text axes of each stored sample against base sample 0 recomputed by sample_deltas.sample_delta_rows "
               "under the current availability rules")
#: The ``meta["no_output"]`` of a stored API reply that is blank after hidden reasoning tokens (the
#: API backend's own wording is not stored; such rows stay unavailable and keep their stored reason).
HIDDEN_NO_OUTPUT = "token budget spent with no visible text ({n} hidden reasoning tokens, api_responses)"


@dataclass
class RescoreResult:
    """What ``rescore_run`` did to one run."""

    run_id: str
    model: str
    axes: tuple[str, ...]
    """The text axes considered (plain and option axes the run stores)."""
    variants_scored: int = 0
    """Variants recomputed (those whose stored rows might change; all with replies under ``all_rows``)."""
    variants_without_replies: int = 0
    """Variants with text-axis rows but no stored base or variant reply (left as stored)."""
    rows_replaced: int = 0
    became_available: int = 0
    became_unavailable: int = 0
    per_axis: dict[str, int] = field(default_factory=dict)
    """Rows replaced per axis."""
    sample_rows_replaced: int = 0
    """``sample_deltas`` rows replaced (a sampled run's samples against base sample 0)."""
    sample_per_axis: dict[str, int] = field(default_factory=dict)
    """``sample_deltas`` rows replaced per axis."""

    def as_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "model": self.model, "axes": list(self.axes),
                "variants_scored": self.variants_scored, "variants_without_replies": self.variants_without_replies,
                "rows_replaced": self.rows_replaced, "became_available": self.became_available,
                "became_unavailable": self.became_unavailable, "per_axis": dict(self.per_axis),
                "sample_rows_replaced": self.sample_rows_replaced, "sample_per_axis": dict(self.sample_per_axis)}


def _text_options(record: dict[str, Any], stored_axes: set[str]) -> tuple[tuple[str, ...], float | None]:
    """The run's text option axes (its ``config["axis_options"]["axes"]`` whose base axis is a text
    axis, and that it stores) and the ``bert@rescaled`` baseline b it recorded.

    Raises:
        ValueError: the run stores rows of an option that needs ``"bert_baseline"``
            (``OPTION_AXIS_SPECS``) but recorded no baseline.
    """
    opts = ((record.get("config") or {}).get("axis_options") or {})
    axes = tuple(a for a in opts.get("axes") or () if base_axis(a) in TEXT_AXES and a in stored_axes)
    b = opts.get("bert_rescaled_baseline")
    needs_b = [a for a in axes if a in OPTION_AXIS_SPECS and "bert_baseline" in OPTION_AXIS_SPECS[a].needs]
    if needs_b and b is None:
        raise ValueError(f"run {record['run_id']} stores {needs_b[0]} but its record has no bert_rescaled_baseline")
    return axes, (None if b is None else float(b))


def _result(r: Any) -> GenerationResult:
    """A stored reply as the ``GenerationResult`` the availability rules read: text, finish, error and,
    for an API reply that is blank after hidden reasoning tokens, the ``no_output`` the backend set."""
    text = "" if r.response is None else str(r.response)
    n = 0 if pd.isna(r.reasoning_tokens) else int(r.reasoning_tokens)
    meta = {"reasoning_tokens": n}
    if r.finish_reason == "length" and not text.strip() and n > 0:
        meta["no_output"] = HIDDEN_NO_OUTPUT.format(n=n)
    return GenerationResult(text=text, finish_reason=r.finish_reason or "stop",
                            error=None if pd.isna(r.error) else str(r.error), meta=meta)


def judged_overrides(verdicts: pd.DataFrame) -> dict[str, tuple[float, str]]:
    """``compute_rows``' ``mr_overrides`` from stored ``mirroring_verdicts`` rows, as the run decided them.

    Per variant: ΔMR = judge verdict(variant reply) − judge verdict(base reply) when both are
    0/1, else the recorded heuristic verdicts' difference (``judge.judged_delta_mr``'s fallback),
    labelled with the recorded ``detector``. Variants without both rows are left out.
    """
    out: dict[str, tuple[float, str]] = {}
    for vid, g in verdicts.groupby("variant_id"):
        by = g.set_index("response_of")
        if not {"variant", "base"} <= set(by.index):
            continue
        jv, jb = by.loc["variant", "verdict"], by.loc["base", "verdict"]
        if pd.notna(jv) and pd.notna(jb):
            delta = float(jv) - float(jb)
        else:
            delta = float(by.loc["variant", "heuristic_verdict"]) - float(by.loc["base", "heuristic_verdict"])
        out[str(vid)] = (delta, str(by.loc["variant", "detector"]))
    return out


def _same(a: Any, b: Any, tol: float = 0.0) -> bool:
    """Equal, both NULL, or (numbers) within ``tol``."""
    if pd.isna(a) and pd.isna(b):
        return True
    if pd.isna(a) or pd.isna(b):
        return False
    return a == b if isinstance(a, str) or isinstance(b, str) else abs(float(a) - float(b)) <= tol


def rescore_run(store, run_id: str, all_rows: bool = False) -> RescoreResult:
    """Recompute the text axes of one stored run from its replies and replace the rows that change.

    Args:
        store: a writable ``sago_engine.store.Store``.
        run_id: the run.
        all_rows: replace every text-axis row whose availability or detector label differs, or
            whose recomputed Δ differs by more than ``NOISE_TOL`` (default: only rows whose
            availability differs under the current rules).
    Returns:
        A ``RescoreResult``; when rows were replaced, the store's meta ``rescore:<run_id>`` gains
        an entry (``store.rescoring.RESCORE_META_PREFIX``) and the statistics tables are current.
    Raises:
        StoreError: unknown run, or a read-only store with rows to replace.
        ValueError: the run stores ``bert@rescaled`` but recorded no baseline.
    """
    record = store.run_record(run_id)
    stored_axes = set(store.axis_names())
    options, baseline = _text_options(record, stored_axes)
    axes = tuple(sorted(TEXT_AXES)) + options
    out = RescoreResult(run_id, record["model"], axes)
    _rescore_deltas(store, record, axes, options, baseline, out, all_rows)
    _rescore_samples(store, record, out, all_rows)
    return out


def _rescore_deltas(store, record: dict[str, Any], axes: tuple[str, ...], options: tuple[str, ...],
                    baseline: float | None, out: RescoreResult, all_rows: bool) -> None:
    """The ``deltas`` part of ``rescore_run`` (fills ``out``)."""
    run_id = record["run_id"]
    stored = store.deltas(kept_only=False, run_ids=[run_id], axes=list(axes))
    if stored.empty:
        return
    replies = store.stored_replies(run_id)
    base = {r.prompt_id: _result(r) for r in replies[replies["variant_id"].isna()].itertuples(index=False)}
    res = {r.variant_id: _result(r) for r in replies[replies["variant_id"].notna()].itertuples(index=False)}
    vids = sorted(set(stored["variant_id"]))
    prompt_of = dict(zip(stored["variant_id"], stored["prompt_id"]))
    have = [v for v in vids if v in res and prompt_of[v] in base]
    out.variants_without_replies = len(vids) - len(have)
    if all_rows:
        todo = set(have)
    else:
        avail = stored.groupby("variant_id")["available"].agg(lambda s: set(map(bool, s)))
        todo = {v for v in have if avail[v] != {text_unavailable_reason(base[prompt_of[v]], res[v]) is None}}
    out.variants_scored = len(todo)
    if not todo:
        return
    variants = {r.variant_id: variant_from_record(r) for r in store.variant_records(sorted(todo)).itertuples(index=False)}
    dataset = dict(zip(stored["prompt_id"], stored["dataset"]))
    by_prompt: dict[str, list[str]] = {}
    for v in sorted(todo):
        by_prompt.setdefault(prompt_of[v], []).append(v)
    units = [Unit(pid, dataset[pid], base[pid], [variants[v] for v in vs], [res[v] for v in vs], base_row=False)
             for pid, vs in sorted(by_prompt.items())]
    verdicts = store.mirroring_verdicts([run_id])
    overrides = judged_overrides(verdicts[verdicts["variant_id"].isin(todo)]) if not verdicts.empty else {}
    _, new = compute_rows(run_id, units, record["normalizers"] or {}, frozenset(), mr_overrides=overrides,
                          options=options, bert_baseline=baseline)
    new = new[new["axis"].isin(axes)]
    old = stored.set_index(["variant_id", "axis"])
    keep = []
    for k, r in enumerate(new.itertuples(index=False)):
        if (r.variant_id, r.axis) not in old.index:  # an axis the run did not store for this variant
            continue
        o = old.loc[(r.variant_id, r.axis)]
        if bool(r.available) != bool(o["available"]):
            keep.append(k)
        elif all_rows and r.available and not (_same(r.delta, o["delta"], NOISE_TOL[base_axis(r.axis)])
                                               and _same(r.detector, o["detector"])):
            keep.append(k)
    rows = new.iloc[keep]
    if rows.empty:
        return
    out.rows_replaced = len(rows)
    out.became_available = int(rows["available"].sum())
    out.became_unavailable = int((~rows["available"].astype(bool)).sum())
    out.per_axis = {str(a): int(n) for a, n in rows["axis"].value_counts().sort_index().items()}
    store.replace_deltas(rows, {"rule": RULE, "mode": "all" if all_rows else "availability", **out.as_dict()})


def _rescore_samples(store, record: dict[str, Any], out: RescoreResult, all_rows: bool) -> None:
    """The ``sample_deltas`` part of ``rescore_run``: each stored sample's text-axis Δ against base sample 0
    recomputed by ``sample_deltas.sample_delta_rows`` (the function the run uses) from the stored
    replies, under the run's R_X; rows replaced as ``rescore_run`` replaces ``deltas`` rows (their
    availability differs, or with ``all_rows`` their Δ beyond ``NOISE_TOL``). Fills ``out``."""
    run_id = record["run_id"]
    axes = [a for a in SAMPLED_AXES if a in TEXT_AXES]
    stored = store.stored_sample_deltas(run_id, axes)
    samples = store.stored_samples(run_id)
    if stored.empty or samples.empty:
        return
    replies = store.stored_replies(run_id)
    base = {r.prompt_id: _result(r) for r in replies[replies["variant_id"].isna()].itertuples(index=False)}
    res = {r.variant_id: _result(r) for r in replies[replies["variant_id"].notna()].itertuples(index=False)}
    with_rows = set(stored["variant_id"].dropna())
    variants = {r.variant_id: variant_from_record(r)
                for r in store.variant_records(sorted(with_rows)).itertuples(index=False)}
    dataset = dict(zip(stored["prompt_id"], stored["dataset"]))
    units = []
    for pid, g in samples.groupby("prompt_id", sort=True):
        if pid not in base or pid not in dataset:
            continue
        vs = [variants[v] for v in sorted(with_rows) if v in variants and variants[v].prompt_id == pid and v in res]
        extra = [Sample(None if pd.isna(r.variant_id) else r.variant_id, int(r.sample), int(r.seed), _result(r))
                 for r in g.itertuples(index=False)]
        units.append(SampledUnit(pid, dataset[pid], base[pid], vs, [res[v.variant_id] for v in vs], extra))
    new = sample_delta_rows(run_id, units, record["normalizers"] or {}, frozenset(record.get("capabilities") or ()))
    new = new[new["axis"].isin(axes)]
    old = stored.set_index(["response_id", "axis"])
    keep = []
    for k, r in enumerate(new.itertuples(index=False)):
        if (r.response_id, r.axis) not in old.index:
            continue
        o = old.loc[(r.response_id, r.axis)]
        if bool(r.available) != bool(o["available"]) or (
                all_rows and r.available and not _same(r.delta, o["delta"], NOISE_TOL[r.axis])):
            keep.append(k)
    rows = new.iloc[keep]
    if rows.empty:
        return
    out.sample_rows_replaced = len(rows)
    out.sample_per_axis = {str(a): int(n) for a, n in rows["axis"].value_counts().sort_index().items()}
    store.replace_sample_deltas(rows, {"rule": SAMPLE_RULE, "mode": "all" if all_rows else "availability",
                                       "run_id": run_id, "sample_rows_replaced": out.sample_rows_replaced,
                                       "sample_per_axis": out.sample_per_axis})


def rescore_store(path: str | Path, run_id: str | None = None, all_rows: bool = False) -> list[RescoreResult]:
    """``rescore_run`` for one run (``run_id``) or every run of the store at ``path`` (opened writable,
    each run in its own transaction; the file is checkpointed at the end).

    Raises:
        FileNotFoundError / StoreError: as ``open_store``; StoreError for an unknown ``run_id``.
    """
    from sago_engine.store import open_store

    with open_store(path, read_only=False) as st:
        ids = [run_id] if run_id is not None else list(st.runs()["run_id"])
        results = [rescore_run(st, rid, all_rows=all_rows) for rid in ids]
        st.checkpoint()
    return results

