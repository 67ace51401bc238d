"""The Right-or-wrong page's data: the store's correctness verdicts beside s_X(i), under the dashboard's filters."""

from __future__ import annotations

from typing import Any

import pandas as pd

from sago_engine.correctness import compare
from sago_engine.correctness.inspect_scorers import NOT_RUN
from sago_engine.filters import Filters

#: Bootstrap resamples of the AUROC intervals the page shows.
PAGE_BOOT = 500


def filtered_frame(store, f: Filters | None) -> pd.DataFrame:
    """``Store.correctness_frame`` with one scorer per dataset (``compare.one_scorer``), restricted by ``f``
    (``filtered_frame_of``)."""
    return filtered_frame_of(compare.one_scorer(store.correctness_frame()), f)


def filtered_frame_of(fr: pd.DataFrame, f: Filters | None) -> pd.DataFrame:
    """Verdict rows restricted by ``f``: models and datasets on every row, the variant fields (F, u, s, p)
    on variant rows only (a base reply has none and stays)."""
    if f is None or fr.empty:
        return fr
    keep = pd.Series(True, index=fr.index)
    for col, vals in (("model", f.models), ("dataset", f.datasets)):
        if vals is not None:
            keep &= fr[col].isin(vals)
    base = fr["variant_id"].isna()
    for col, vals in (("family", f.families), ("subtype", f.subtypes), ("strength", f.strengths),
                      ("position", f.positions)):
        if vals is not None:
            keep &= base | fr[col].isin(vals)
    return fr[keep]


def quadrant_view(store, f: Filters | None, *, axis: str, by: str = "base",
                  threshold: float | None = None) -> dict[str, Any]:
    """Everything the quadrant view shows for one axis.

    Returns:
        ``{"points", "counts", "threshold", "accuracy", "scorers", "not_run"}``: points and counts of
        ``compare.quadrants`` (points also carry the prompt's ``text`` and ``y``, its height on the
        chart: ``plot_y``), the threshold used, the
        per-model ``compare.accuracy_table``, the scorer read per dataset (dataset → scorer), and the
        Inspect task scorers sago could not run (``Store.scorers_not_run`` rows whose reason starts
        ``inspect_scorers.NOT_RUN``: dataset, scorer, reason, n).
        Empty frames when the store has no verdicts.
    """
    fr = filtered_frame(store, f)
    scorers = {str(d): str(g["scorer"].iloc[0]) for d, g in fr.groupby("dataset")} if len(fr) else {}
    out = compare.prompt_outcomes(fr)
    pts, counts, thr = compare.quadrants(out, store.prompt_scores(f), axis, threshold=threshold, by=by)
    texts = store.prompts()[["prompt_id", "text"]]
    pts = pts.merge(texts, on="prompt_id", how="left")
    pts["y"] = plot_y(pts, by)
    gone = store.scorers_not_run()
    if f is not None and f.datasets is not None:
        gone = gone[gone["dataset"].isin(f.datasets)]
    return {"points": pts, "counts": counts, "threshold": thr, "accuracy": compare.accuracy_table(fr, ("model",)),
            "scorers": scorers, "not_run": gone[gone["reason"].fillna("").str.startswith(NOT_RUN)]}


#: Half the vertical spread of the right / wrong rows on the chart when placed by the base verdict.
JITTER = 0.12


def plot_y(points: pd.DataFrame, by: str) -> list[float]:
    """Each point's height on the quadrant chart: the variant accuracy (``by="variants"``), or the base
    verdict 1 / 0 spread evenly within ±``JITTER`` by the prompt's order (so equal dots do not hide each
    other; the spread carries no meaning)."""
    if by == "variants":
        return [float(v) for v in points["var_acc"]]
    order = points.groupby(["model", "base_ok"]).cumcount().to_numpy()
    size = points.groupby(["model", "base_ok"])["prompt_id"].transform("size").to_numpy()
    return [float(b) + JITTER * (2 * (o + 0.5) / n - 1) for b, o, n in zip(points["base_ok"], order, size)]


def predicts_view(store, f: Filters | None, *, n_boot: int = PAGE_BOOT) -> pd.DataFrame:
    """``compare.instability_predicts`` per model × axis for the filtered store (the six plain axes)."""
    fr = filtered_frame(store, f)
    return compare.instability_predicts(compare.prompt_outcomes(fr), store.prompt_scores(f), n_boot=n_boot)


def breakdown_view(store, f: Filters | None, *, by: tuple[str, ...] = ("model", "dataset", "family")) -> pd.DataFrame:
    """``compare.accuracy_table`` of the filtered store grouped by ``by``."""
    return compare.accuracy_table(filtered_frame(store, f), by)


def model_pairs_view(store, f: Filters | None) -> pd.DataFrame:
    """``compare.model_vs_model`` of the filtered store."""
    return compare.model_vs_model(filtered_frame(store, f))


def scorer_choice_view(store, f: Filters | None) -> pd.DataFrame:
    """How the choice of scorer moves accuracy: per model × scorer, ``compare.accuracy_table`` over the
    datasets that hold that scorer's verdicts beside another scorer's (e.g. after ``rescore
    --correctness --all-scorers``: contains, exact, F1 on the short-answer datasets).

    Returns:
        Columns: scorer, datasets (comma-joined), then ``accuracy_table``'s columns by model; empty
        when no dataset holds two scorers.
    """
    fr = store.correctness_frame()
    if fr.empty:
        return pd.DataFrame()
    per = fr.groupby("dataset")["scorer"].unique()
    multi = sorted(d for d, sc in per.items() if len(sc) > 1)
    out = []
    for name in sorted({s for d in multi for s in per[d]}):
        ds = [d for d in multi if name in per[d]]
        sub = filtered_frame_of(fr[fr["dataset"].isin(ds) & (fr["scorer"] == name)], f)
        t = compare.accuracy_table(sub, ("model",))
        out.append(t.assign(scorer=name, datasets=", ".join(ds)))
    if not out:
        return pd.DataFrame()
    res = pd.concat(out, ignore_index=True)
    return res[["scorer", "datasets", *[c for c in res.columns if c not in ("scorer", "datasets")]]]
