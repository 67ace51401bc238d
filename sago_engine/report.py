"""Tables and chart data for the dashboard, computed from a store (pages only render these)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sago_engine.scoring import MAIN_EPSILON, format_cell, prompt_scores, significance
from sago_engine.store import open_store
from sago_engine.types import AXES, AXIS_LABELS

DEMO_STORE = Path(__file__).resolve().parent.parent / "data" / "sago_demo.duckdb"


def snapshot_caption(meta: dict[str, str]) -> str:
    """One line on how fresh a store is, from its ``meta`` (published_at, status, progress).

    The runner publishes consistent snapshots while it runs; readers see the last one.
    """
    when = meta.get("published_at")
    status = meta.get("status")
    if not when:
        return "Store written without snapshot publishing (no timestamp recorded)."
    if status == "running":
        return f"Snapshot of a run in progress ({meta.get('progress', '?')} generations) published {when} UTC."
    return f"Complete store, published {when} UTC."


def find_stores(folder: str | Path) -> list[Path]:
    """DuckDB files in ``folder`` (sorted; the demo store first when present)."""
    folder = Path(folder)
    found = sorted(folder.glob("*.duckdb"))
    return sorted(found, key=lambda p: (p.name != DEMO_STORE.name, p.name))


def load_store_frames(path: str | Path) -> dict[str, pd.DataFrame]:
    """Read everything the summary pages need from a store, read-only, in one go.

    Returns ``{"runs", "deltas", "prompts"}`` DataFrames. Raises ``StoreError`` /
    ``FileNotFoundError`` from ``open_store``.
    """
    with open_store(path, read_only=True) as st:
        return {"runs": st.runs(), "deltas": st.deltas(kept_only=True), "prompts": st.prompts()}


def profile_tables(deltas: pd.DataFrame, eps: float = MAIN_EPSILON) -> dict[str, pd.DataFrame]:
    """Total and per-dataset SGS ± std with t-test markers, per model and axis.

    Returns ``{"total": long, "per_dataset": long}`` with columns model, [dataset,] axis, sgs,
    std, n_prompts, t, p, marker, eps, cell. An axis a model lacks is absent (shown as n/a).
    """
    ps = prompt_scores(deltas, group=("model", "dataset", "prompt_id", "axis"))
    total = significance(ps, eps, by=("model", "axis"))
    per = significance(ps, eps, by=("model", "dataset", "axis"))
    for df in (total, per):
        df["cell"] = [format_cell(m, s, k) for m, s, k in zip(df["sgs"], df["std"], df["marker"])]
    return {"total": total, "per_dataset": per}


def wide_cells(long: pd.DataFrame, index: list[str]) -> pd.DataFrame:
    """Pivot to one column per axis (paper's labels, paper's order), cells "mean±std marker"; missing → "n/a"."""
    w = long.pivot_table(index=index, columns="axis", values="cell", aggfunc="first")
    w = w.reindex(columns=list(AXES)).astype(object).fillna("n/a")
    w.columns = [AXIS_LABELS[a] for a in w.columns]
    return w.reset_index()


#: Colour-blind-safe qualitative palette (Okabe–Ito); a model keeps its colour on every page.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442", "#000000")


def model_colors(models) -> dict[str, str]:
    """Stable model → colour map: sorted model names take the palette in order (cycling)."""
    return {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(sorted(set(models)))}


def radar_frame(total: pd.DataFrame) -> pd.DataFrame:
    """Radar data: model, axis label, SGS (NaN where the axis is unavailable), in the paper's axis order."""
    rows = []
    for model, grp in total.groupby("model", sort=True):
        vals = dict(zip(grp["axis"], grp["sgs"]))
        for a in AXES:
            rows.append({"model": model, "axis": AXIS_LABELS[a], "sgs": vals.get(a, float("nan"))})
    return pd.DataFrame(rows, columns=["model", "axis", "sgs"])


# ====================================================================== summary pages
# Pure functions over the per-prompt scores ``Store.prompt_scores(filters)`` returns (columns
# run_id, model, dataset, prompt_id, axis, s, n_variants). Formulas come from
# ``sago_engine.scoring``; nothing here re-implements RMS, SGS or the t-test.

#: Significance levels of the paper's threshold-robustness table (SAGO §Significance, appendix B).
ALPHAS: tuple[float, ...] = (0.05, 0.01, 0.001)


def _with_cells(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df["cell"] = [format_cell(m, s, k) for m, s, k in zip(df["sgs"], df["std"], df["marker"])]
    return df


def score_tables(scores: pd.DataFrame, eps: float = MAIN_EPSILON) -> dict[str, pd.DataFrame]:
    """Total and per-dataset SGS ± std with one-sided t-test markers at ``eps`` from per-prompt scores.

    Total: every prompt of every dataset weighs the same (SAGO §Notation). Returns
    ``{"total": model, axis, ...; "per_dataset": model, dataset, axis, ...}`` with columns sgs,
    std, n_prompts, t, p, marker, eps, cell. Axes never add together.
    """
    return {"total": _with_cells(significance(scores, eps, by=("model", "axis"))),
            "per_dataset": _with_cells(significance(scores, eps, by=("model", "dataset", "axis")))}


def axis_order(df: pd.DataFrame, col: str = "axis") -> pd.DataFrame:
    """Sort rows by the paper's axis order (Δ-Cos … Δ-MR)."""
    order = {a: i for i, a in enumerate(AXES)}
    return df.assign(_o=df[col].map(order)).sort_values([c for c in ("model", "dataset") if c in df] + ["_o"]).drop(columns="_o")


def bootstrap_ci(scores: pd.DataFrame, by: tuple[str, ...] = ("model", "axis"), n_resamples: int = 1000,
                 level: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Percentile-bootstrap CI of SGS (the mean of s_X(i)) over prompts, per group.

    Uses ``scipy.stats.bootstrap(method="percentile")``, resampling prompts with replacement
    ``n_resamples`` times. Each group's generator is seeded from ``seed`` and the group's key
    (crc32), so a CI does not change when other groups are filtered in or out.
    Returns ``by`` + sgs, lo, hi, n_prompts, n_resamples, level. Groups with < 2 prompts get
    NaN bounds; groups whose scores are all equal get lo = hi = sgs.
    """
    import zlib

    import numpy as np
    from scipy import stats

    rows = []
    for key, grp in scores.groupby(list(by), sort=True, observed=True):
        key = key if isinstance(key, tuple) else (key,)
        s = grp["s"].to_numpy(dtype=float)
        s = s[~np.isnan(s)]
        m = float(np.mean(s)) if len(s) else float("nan")
        if len(s) < 2:
            lo = hi = float("nan")
        elif np.ptp(s) == 0:
            lo = hi = m
        else:
            rng = np.random.default_rng([seed, zlib.crc32(repr(key).encode())])
            res = stats.bootstrap((s,), np.mean, n_resamples=n_resamples, confidence_level=level,
                                  method="percentile", random_state=rng, vectorized=True)
            lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        rows.append({**dict(zip(by, key)), "sgs": m, "lo": lo, "hi": hi, "n_prompts": int(len(s)),
                     "n_resamples": n_resamples, "level": level})
    return pd.DataFrame(rows, columns=[*by, "sgs", "lo", "hi", "n_prompts", "n_resamples", "level"])


def radar_data(scores: pd.DataFrame, dataset: str | None = None, n_resamples: int = 1000, seed: int = 0,
               models=None) -> pd.DataFrame:
    """Radar data per model over the six axes (paper's order) with bootstrap CI bounds.

    Args:
        scores: per-prompt scores (``Store.prompt_scores``).
        dataset: one dataset's SGS_X(d), or ``None`` for the total SGS_X (all prompts weigh the same).
        models: models to include (default: all in ``scores``); a model with no rows for an
            axis gets NaN there and ``available=False`` (shown as n/a, never 0).
    Returns:
        model, axis, axis_label, sgs, lo, hi, n_prompts, available — 6 rows per model.
    """
    s = scores if dataset is None else scores[scores["dataset"] == dataset]
    ci = bootstrap_ci(s, ("model", "axis"), n_resamples=n_resamples, seed=seed)
    models = sorted(set(scores["model"]) if models is None else set(models))
    idx = ci.set_index(["model", "axis"])
    rows = []
    for m in models:
        for a in AXES:
            if (m, a) in idx.index:
                r = idx.loc[(m, a)]
                rows.append({"model": m, "axis": a, "axis_label": AXIS_LABELS[a], "sgs": r["sgs"], "lo": r["lo"],
                             "hi": r["hi"], "n_prompts": int(r["n_prompts"]), "available": True})
            else:
                rows.append({"model": m, "axis": a, "axis_label": AXIS_LABELS[a], "sgs": float("nan"),
                             "lo": float("nan"), "hi": float("nan"), "n_prompts": 0, "available": False})
    return pd.DataFrame(rows, columns=["model", "axis", "axis_label", "sgs", "lo", "hi", "n_prompts", "available"])


def pareto_points(total: pd.DataFrame, x_axis: str = "bleu", y_axis: str = "mr") -> pd.DataFrame:
    """One point per model: SGS on two axes with std and markers (from ``score_tables(...)["total"]``).

    Returns model, x, y, x_std, y_std, x_marker, y_marker, x_cell, y_cell. Models lacking
    either axis are left out (an unavailable axis is never plotted as 0).
    """
    def side(a, p):
        d = total[total["axis"] == a].set_index("model")
        return pd.DataFrame({p: d["sgs"], f"{p}_std": d["std"], f"{p}_marker": d["marker"],
                             f"{p}_cell": d["cell"] if "cell" in d else ""})

    out = side(x_axis, "x").join(side(y_axis, "y"), how="inner").dropna(subset=["x", "y"])
    return out.reset_index().rename(columns={"index": "model"}).sort_values("model").reset_index(drop=True)


def pareto_frontier(points: pd.DataFrame, x: str = "x", y: str = "y") -> pd.DataFrame:
    """Non-dominated points when both coordinates are minimised (the Ideal point is (0, 0)).

    A point is dominated when another is ≤ on both coordinates and < on at least one. Returns
    the frontier rows sorted by ``x`` (ascending), ready to draw as a step line.
    """
    pts = points.dropna(subset=[x, y])
    keep = []
    for i, r in pts.iterrows():
        dominated = ((pts[x] <= r[x]) & (pts[y] <= r[y]) & ((pts[x] < r[x]) | (pts[y] < r[y]))).any()
        if not dominated:
            keep.append(i)
    return pts.loc[keep].sort_values([x, y]).reset_index(drop=True)


def rankings(per_dataset: pd.DataFrame) -> pd.DataFrame:
    """Rank of each model per (axis, dataset) by SGS_X(d); 1 = most stable (lowest SGS), ties share the best rank.

    Input: ``score_tables(...)["per_dataset"]`` (model, dataset, axis, sgs, ...). Returns model,
    dataset, axis, sgs, rank (int), n_models.
    """
    d = per_dataset.dropna(subset=["sgs"])[["model", "dataset", "axis", "sgs"]].copy()
    g = d.groupby(["axis", "dataset"])["sgs"]
    d["rank"] = g.rank(method="min", ascending=True).astype(int)
    d["n_models"] = g.transform("size").astype(int)
    return axis_order(d.sort_values(["axis", "dataset", "rank", "model"])).reset_index(drop=True)


def reversals(per_dataset: pd.DataFrame) -> pd.DataFrame:
    """Pairs of models whose order on an axis flips between datasets (SAGO §Ablations, ranking reversal).

    For each axis and pair (a, b): the datasets where a is more stable (lower SGS_X(d)) and
    those where b is; a reversal needs at least one of each. Returns axis, axis_label, model_a,
    model_b, a_better_on, b_better_on (comma-joined dataset names), n_flips (product of counts).
    """
    rows = []
    d = per_dataset.dropna(subset=["sgs"])
    for axis, grp in d.groupby("axis", sort=False):
        w = grp.pivot_table(index="dataset", columns="model", values="sgs")
        ms = sorted(w.columns)
        for i, a in enumerate(ms):
            for b in ms[i + 1:]:
                both = w[[a, b]].dropna()
                a_better = sorted(both.index[both[a] < both[b]])
                b_better = sorted(both.index[both[b] < both[a]])
                if a_better and b_better:
                    rows.append({"axis": axis, "axis_label": AXIS_LABELS.get(axis, axis), "model_a": a, "model_b": b,
                                 "a_better_on": ", ".join(a_better), "b_better_on": ", ".join(b_better),
                                 "n_flips": len(a_better) * len(b_better)})
    out = pd.DataFrame(rows, columns=["axis", "axis_label", "model_a", "model_b", "a_better_on", "b_better_on", "n_flips"])
    return axis_order(out).reset_index(drop=True) if len(out) else out


def dataset_ratio(per_dataset: pd.DataFrame) -> pd.DataFrame:
    """Per model and axis: max/min of SGS_X(d) across datasets (the paper's "Llama-8B Δ-Cos varies 3.7×").

    Returns model, axis, axis_label, max_dataset, max_sgs, min_dataset, min_sgs, ratio,
    n_datasets. ratio is NaN with fewer than two datasets and inf when the minimum is 0.
    """
    rows = []
    for (m, a), grp in per_dataset.dropna(subset=["sgs"]).groupby(["model", "axis"], sort=True):
        hi = grp.loc[grp["sgs"].idxmax()]
        lo = grp.loc[grp["sgs"].idxmin()]
        if len(grp) < 2:
            ratio = float("nan")
        elif lo["sgs"] == 0:
            ratio = float("inf") if hi["sgs"] > 0 else float("nan")
        else:
            ratio = float(hi["sgs"] / lo["sgs"])
        rows.append({"model": m, "axis": a, "axis_label": AXIS_LABELS.get(a, a), "max_dataset": hi["dataset"],
                     "max_sgs": float(hi["sgs"]), "min_dataset": lo["dataset"], "min_sgs": float(lo["sgs"]),
                     "ratio": ratio, "n_datasets": int(len(grp))})
    out = pd.DataFrame(rows, columns=["model", "axis", "axis_label", "max_dataset", "max_sgs", "min_dataset",
                                      "min_sgs", "ratio", "n_datasets"])
    return axis_order(out).reset_index(drop=True) if len(out) else out


def significance_table(scores: pd.DataFrame, eps: float, per_dataset: bool = False) -> pd.DataFrame:
    """SGS mean ± std with the one-sided t-test against ``eps`` per model × axis (× dataset), with cells."""
    by = ("model", "dataset", "axis") if per_dataset else ("model", "axis")
    return _with_cells(significance(scores, eps, by=by))


def rejection_counts(sig: pd.DataFrame, alphas: tuple[float, ...] = ALPHAS) -> pd.DataFrame:
    """Per axis: how many models reject H0: E[s] ≤ ε at each α (the paper's threshold-robustness table).

    Input: ``significance_table(scores, eps)`` (model, axis, p, ...). Returns axis, axis_label,
    one column ``p<α`` per α, n_models (models with a test on that axis), eps.
    """
    rows = []
    for a in AXES:
        g = sig[sig["axis"] == a]
        if g.empty:
            continue
        row = {"axis": a, "axis_label": AXIS_LABELS[a]}
        for al in alphas:
            row[f"p<{al:g}"] = int((g["p"] < al).sum())
        row["n_models"] = int(g["p"].notna().sum())
        row["eps"] = float(g["eps"].iloc[0])
        rows.append(row)
    return pd.DataFrame(rows, columns=["axis", "axis_label", *[f"p<{al:g}" for al in alphas], "n_models", "eps"])


def threshold_table(scores: pd.DataFrame, epsilons=(0.01, 0.05, 0.10), alphas: tuple[float, ...] = ALPHAS) -> pd.DataFrame:
    """Rejection counts for several ε at once (appendix B): axis_label × "ε=…" cells "n/n/n" over ``alphas``."""
    out = None
    for e in epsilons:
        rc = rejection_counts(significance_table(scores, e), alphas)
        col = rc[["axis_label"]].copy()
        col[f"ε={e:g}"] = ["/".join(str(r[f"p<{al:g}"]) for al in alphas) for _, r in rc.iterrows()]
        out = col if out is None else out.merge(col, on="axis_label", how="outer", sort=False)
    order = {AXIS_LABELS[a]: i for i, a in enumerate(AXES)}
    return out.sort_values("axis_label", key=lambda c: c.map(order)).reset_index(drop=True)


def significance_heatmap(sig: pd.DataFrame, cap: float = 10.0) -> pd.DataFrame:
    """Heatmap data for a ``significance_table``: adds axis_label, row (model[ · dataset]), label
    ("mean" + marker) and neglog10p = −log10 p capped at ``cap`` (p = 0 → cap; NaN p stays NaN)."""
    import numpy as np

    p = sig["p"].astype(float).to_numpy()
    with np.errstate(divide="ignore"):
        nl = np.where(p > 0, -np.log10(np.where(p > 0, p, 1.0)), cap)
    nl = np.where(np.isnan(p), np.nan, np.minimum(nl, cap))
    row = sig["model"] + (" · " + sig["dataset"] if "dataset" in sig else "")
    return sig.assign(axis_label=sig["axis"].map(AXIS_LABELS), row=row,
                      label=[f"{m:.3f}{k}" for m, k in zip(sig["sgs"], sig["marker"])], neglog10p=nl)


def ratio_heatmap(ratio: pd.DataFrame, cap: float = 10.0) -> pd.DataFrame:
    """Heatmap data for ``dataset_ratio``: ratio_label ("3.7×", "∞", "n/a") and ratio_capped (colour scale)."""
    import numpy as np

    lab = ["∞" if np.isinf(v) else ("n/a" if np.isnan(v) else f"{v:.1f}×") for v in ratio["ratio"].astype(float)]
    return ratio.assign(ratio_label=lab, ratio_capped=ratio["ratio"].clip(upper=cap))
