"""Tables and chart data for the dashboard, computed from a store (pages only render these)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sago_engine.scoring import stats as stats_mod
from sago_engine.scoring.sample_size import (  # noqa: F401  (re-exported: pages reach them through report)
    CELL,
    n_for_halfwidth,
    pooled_sgs_spread,
    sample_size_std,
    sample_size_summary,
)
from sago_engine.scoring.scores import MAIN_EPSILON, format_cell, significance
from sago_engine.scoring.stats import (  # noqa: F401  (re-exported: pages reach them through report)
    REVERSAL_THRESHOLD,
    data_driven_normalizers,
    rx_pooling,
)
from sago_engine.types import AXES, axes_shown, axis_label, axis_sort_key


def wide_cells(long: pd.DataFrame, index: list[str]) -> pd.DataFrame:
    """Pivot to one column per axis (paper's labels, paper's order), cells "mean±std marker"; missing → "n/a".

    Columns: the six plain axes, then any option axes in ``long`` (``types.axes_shown``).
    """
    w = long.pivot_table(index=index, columns="axis", values="cell", aggfunc="first")
    w = w.reindex(columns=axes_shown(long["axis"])).astype(object).fillna("n/a")
    w.columns = [axis_label(a) for a in w.columns]
    return w.reset_index()


# ====================================================================== summary pages
# Pure functions over the per-prompt scores ``Store.prompt_scores(filters)`` returns (columns
# run_id, model, dataset, prompt_id, axis, s, n_variants). Formulas come from
# ``sago_engine.scoring.scores``; nothing here re-implements RMS, SGS or the t-test.

#: Significance levels of the paper's threshold-robustness table (SAGO §Significance, appendix B).
ALPHAS: tuple[float, ...] = (0.05, 0.01, 0.001)


def _with_cells(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df["cell"] = [format_cell(m, s, k) for m, s, k in zip(df["sgs"], df["std"], df["marker"])]
    return df


def score_tables(scores: pd.DataFrame, eps: float = MAIN_EPSILON, correction: str = "none") -> dict[str, pd.DataFrame]:
    """Total and per-dataset SGS ± std with one-sided t-test markers at ``eps`` from per-prompt scores.

    Total: every prompt of every dataset weighs the same (SAGO §Notation). Returns
    ``{"total": model, axis, ...; "per_dataset": model, dataset, axis, ...}`` with columns sgs,
    std, n_prompts, t, p (raw), p_adj, correction, marker (follows p_adj), eps, cell. Axes never
    add together. ``correction`` ("none" | "holm" | "bh") adjusts each table over all its rows
    (the family = the tests that table shows: models × axes, resp. models × datasets × axes).
    """
    return {"total": _with_cells(stats_mod.apply_correction(significance(scores, eps, by=("model", "axis")),
                                                            correction)),
            "per_dataset": _with_cells(stats_mod.apply_correction(
                significance(scores, eps, by=("model", "dataset", "axis")), correction))}


def axis_order(df: pd.DataFrame, col: str = "axis") -> pd.DataFrame:
    """Sort rows by the paper's axis order (Δ-Cos … Δ-MR; an option axis right after its base axis)."""
    return df.assign(_o=df[col].map(axis_sort_key)).sort_values([c for c in ("model", "dataset") if c in df] + ["_o"]).drop(columns="_o")


def bootstrap_ci(scores: pd.DataFrame, by: tuple[str, ...] = ("model", "axis"), n_resamples: int = 1000,
                 level: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Studentized-bootstrap CI of SGS (the mean of s_X(i)) over prompts, per group.

    Delegates to ``sago_engine.scoring.stats.bootstrap_sgs`` (the one bootstrap of sago): bootstrap-t
    (``stats.bootstrap_mean_ci``), resampling prompts with replacement
    ``n_resamples`` times; each group's generator is seeded from ``seed`` and the group's key
    (crc32), so a CI does not change when other groups are filtered in or out.
    Returns ``by`` + sgs, lo, hi, n_prompts, n_resamples, level, status, small_n. Groups with
    < 2 prompts get NaN bounds ("too few prompts"); groups whose scores are all equal get
    lo = hi = sgs ("no variation").
    """
    return stats_mod.bootstrap_sgs(scores, by, n_resamples=n_resamples, level=level, seed=seed)


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
                rows.append({"model": m, "axis": a, "axis_label": axis_label(a), "sgs": r["sgs"], "lo": r["lo"],
                             "hi": r["hi"], "n_prompts": int(r["n_prompts"]), "available": True})
            else:
                rows.append({"model": m, "axis": a, "axis_label": axis_label(a), "sgs": float("nan"),
                             "lo": float("nan"), "hi": float("nan"), "n_prompts": 0, "available": False})
    return pd.DataFrame(rows, columns=["model", "axis", "axis_label", "sgs", "lo", "hi", "n_prompts", "available"])


def pareto_points(total: pd.DataFrame, x_axis: str = "bleu", y_axis: str = "mr") -> pd.DataFrame:
    """One point per model: SGS on two axes with std and markers (from ``score_tables(...)["total"]``).

    Returns model, x, y, x_std, y_std, x_marker, y_marker, x_cell, y_cell. Models lacking
    either axis are left out (an unavailable axis is never plotted as 0).
    """
    def side(a, p):
        d = total[total["axis"] == a].set_index("model")
        out = pd.DataFrame({p: d["sgs"], f"{p}_std": d["std"], f"{p}_marker": d["marker"],
                            f"{p}_cell": d["cell"] if "cell" in d else ""})
        for c in ("lo", "hi"):  # bootstrap bounds, when the table carries them (``sgs_ci_table``)
            if c in d:
                out[f"{p}_{c}"] = d[c]
        return out

    out = side(x_axis, "x").join(side(y_axis, "y"), how="inner").dropna(subset=["x", "y"])
    return out.reset_index().rename(columns={"index": "model"}).sort_values("model").reset_index(drop=True)


def zoom_range(points: pd.DataFrame, side: str, pad: float = 0.08) -> list[float]:
    """Axis range that spans the plotted points of ``pareto_points`` on ``side`` ("x" | "y").

    Covers each point and its bootstrap CI / ± std bar (``{side}_lo``/``{side}_hi`` when present,
    else ``{side}`` ± ``{side}_std``), padded by ``pad`` × the span on both ends (a single value
    gets ± 5 % of itself, or ± 0.01 at 0). Returns ``[low, high]`` in SGS units (low may be < 0
    only when a bar reaches below 0).
    """
    v = points[side].astype(float)
    lo = points[f"{side}_lo"].astype(float) if f"{side}_lo" in points else v - points[f"{side}_std"].fillna(0)
    hi = points[f"{side}_hi"].astype(float) if f"{side}_hi" in points else v + points[f"{side}_std"].fillna(0)
    low, high = float(pd.concat([v, lo]).min()), float(pd.concat([v, hi]).max())
    span = high - low
    if span <= 0:
        span = abs(high) * 0.1 or 0.02
        return [low - span / 2, high + span / 2]
    return [low - pad * span, high + pad * span]


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
                    rows.append({"axis": axis, "axis_label": axis_label(axis), "model_a": a, "model_b": b,
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
        rows.append({"model": m, "axis": a, "axis_label": axis_label(a), "max_dataset": hi["dataset"],
                     "max_sgs": float(hi["sgs"]), "min_dataset": lo["dataset"], "min_sgs": float(lo["sgs"]),
                     "ratio": ratio, "n_datasets": int(len(grp))})
    out = pd.DataFrame(rows, columns=["model", "axis", "axis_label", "max_dataset", "max_sgs", "min_dataset",
                                      "min_sgs", "ratio", "n_datasets"])
    return axis_order(out).reset_index(drop=True) if len(out) else out


def significance_table(scores: pd.DataFrame, eps: float, per_dataset: bool = False,
                       correction: str = "none") -> pd.DataFrame:
    """SGS mean ± std with the one-sided t-test against ``eps`` per model × axis (× dataset), with cells.

    ``correction`` ("none" | "holm" | "bh") adjusts p over every row of the table (the family of
    tests the page shows); ``p`` stays raw, ``p_adj`` is adjusted and ``marker`` / ``cell`` follow it.
    """
    by = ("model", "dataset", "axis") if per_dataset else ("model", "axis")
    return _with_cells(stats_mod.apply_correction(significance(scores, eps, by=by), correction))


def rejection_counts(sig: pd.DataFrame, alphas: tuple[float, ...] = ALPHAS) -> pd.DataFrame:
    """Per axis: how many models reject H0: E[s] ≤ ε at each α (the paper's threshold-robustness table).

    Input: ``significance_table(scores, eps)`` (model, axis, p, ...). Returns axis, axis_label,
    one column ``p<α`` per α, n_models (models with a test on that axis), eps.
    """
    rows = []
    for a in axes_shown(sig["axis"]):
        g = sig[sig["axis"] == a]
        if g.empty:
            continue
        row = {"axis": a, "axis_label": axis_label(a)}
        for al in alphas:
            row[f"p<{al:g}"] = int((g["p"] < al).sum())
        row["n_models"] = int(g["p"].notna().sum())
        row["eps"] = float(g["eps"].iloc[0])
        rows.append(row)
    return pd.DataFrame(rows, columns=["axis", "axis_label", *[f"p<{al:g}" for al in alphas], "n_models", "eps"])


def threshold_table(scores: pd.DataFrame, epsilons=(0.01, 0.05, 0.10), alphas: tuple[float, ...] = ALPHAS,
                    correction: str = "none") -> pd.DataFrame:
    """Rejection counts for several ε at once (appendix B): axis_label × "ε=…" cells "n/n/n" over ``alphas``.

    With a ``correction`` the counts use the adjusted p (each ε's table is its own family).
    """
    out = None
    for e in epsilons:
        sig = significance_table(scores, e, correction=correction)
        rc = rejection_counts(sig.assign(p=sig["p_adj"]), alphas)
        col = rc[["axis_label"]].copy()
        col[f"ε={e:g}"] = ["/".join(str(r[f"p<{al:g}"]) for al in alphas) for _, r in rc.iterrows()]
        out = col if out is None else out.merge(col, on="axis_label", how="outer", sort=False)
    order = {axis_label(a): i for i, a in enumerate(axes_shown(scores["axis"]))}
    return out.sort_values("axis_label", key=lambda c: c.map(order)).reset_index(drop=True)


def significance_heatmap(sig: pd.DataFrame, cap: float = 10.0) -> pd.DataFrame:
    """Heatmap data for a ``significance_table``: adds axis_label, row (model[ · dataset]), label
    ("mean" + marker) and neglog10p = −log10 p (``p_adj`` when present) capped at ``cap`` (p = 0 → cap; NaN p stays NaN)."""
    p = sig["p_adj" if "p_adj" in sig else "p"].astype(float).to_numpy()  # adjusted when a correction is on
    with np.errstate(divide="ignore"):
        nl = np.where(p > 0, -np.log10(np.where(p > 0, p, 1.0)), cap)
    nl = np.where(np.isnan(p), np.nan, np.minimum(nl, cap))
    row = sig["model"] + (" · " + sig["dataset"] if "dataset" in sig else "")
    return sig.assign(axis_label=sig["axis"].map(axis_label), row=row,
                      label=[f"{m:.3f}{k}" for m, k in zip(sig["sgs"], sig["marker"])], neglog10p=nl)


def ratio_heatmap(ratio: pd.DataFrame, cap: float = 10.0) -> pd.DataFrame:
    """Heatmap data for ``dataset_ratio``: ratio_label ("3.7×", "∞", "n/a") and ratio_capped (colour scale)."""
    lab = ["∞" if np.isinf(v) else ("n/a" if np.isnan(v) else f"{v:.1f}×") for v in ratio["ratio"].astype(float)]
    return ratio.assign(ratio_label=lab, ratio_capped=ratio["ratio"].clip(upper=cap))


# ====================================================================== statistics beyond the paper
# Intervals, corrections, reversal probabilities, normalizer sensitivity (sago_engine.scoring.stats);
# docs/METHOD.md §Statistics.

def ci_cell(mean: float, lo: float, hi: float, mark: str, status: str = "ok", digits: int = 3) -> str:
    """``"0.123 [0.101, 0.145]†"``; ``"0.000 (no variation)"``; ``"n/a"`` when mean is NaN."""
    if mean is None or not np.isfinite(mean):
        return "n/a"
    if status == stats_mod.STATUS_FLAT:
        return f"{mean:.{digits}f} (no variation){mark}"
    if lo is None or not np.isfinite(lo):
        return f"{mean:.{digits}f} [n/a]{mark}"
    return f"{mean:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]{mark}"


def sgs_ci_table(scores: pd.DataFrame, eps: float = MAIN_EPSILON, per_dataset: bool = False,
                 correction: str = "none", n_resamples: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Significance table (raw p, adjusted p, marker after correction) joined with studentized-bootstrap CIs.

    Columns: model, [dataset,] axis, sgs, std, n_prompts, t, p, p_adj, correction, marker, eps,
    cell ("mean±std marker"), lo, hi, status, small_n, ci_cell ("mean [lo, hi] marker").
    """
    by = ["model", "dataset", "axis"] if per_dataset else ["model", "axis"]
    sig = significance_table(scores, eps, per_dataset=per_dataset, correction=correction)
    ci = stats_mod.bootstrap_sgs(scores, by, n_resamples=n_resamples, seed=seed)
    out = sig.merge(ci[[*by, "lo", "hi", "status", "small_n"]], on=by, how="left")
    out["ci_cell"] = [ci_cell(m, lo, hi, k, st) for m, lo, hi, k, st in
                      zip(out["sgs"], out["lo"], out["hi"], out["marker"], out["status"])]
    return out


def wide_ci_cells(long: pd.DataFrame, index: list[str]) -> pd.DataFrame:
    """``wide_cells`` over the ``ci_cell`` column of ``sgs_ci_table``."""
    return wide_cells(long.assign(cell=long["ci_cell"]), index)


def pvalue_table(sig: pd.DataFrame) -> pd.DataFrame:
    """Long table of raw and adjusted p per test of a ``sgs_ci_table`` (axis labels, paper's order)."""
    cols = [c for c in ("model", "dataset") if c in sig] + ["axis_label", "sgs", "lo", "hi", "n_prompts", "p",
                                                            "p_adj", "marker", "status", "correction", "eps"]
    out = axis_order(sig.assign(axis_label=sig["axis"].map(axis_label)))
    return out[cols].rename(columns={"p": "p_raw"}).reset_index(drop=True)


def reversal_table(scores: pd.DataFrame, n_resamples: int = 1000, seed: int = 0,
                   threshold: float = REVERSAL_THRESHOLD) -> pd.DataFrame:
    """``stats.reversal_probabilities`` with axis labels, in the paper's axis order, likeliest first per axis."""
    r = stats_mod.reversal_probabilities(scores, n_resamples=n_resamples, seed=seed, threshold=threshold)
    r.insert(1, "axis_label", r["axis"].map(axis_label))
    if r.empty:
        return r
    return r.assign(_o=r["axis"].map(axis_sort_key)).sort_values(["_o", "p_reversal"], ascending=[True, False]).drop(
        columns="_o").reset_index(drop=True)


def normalizer_comparison(paper_scores: pd.DataFrame, data_scores: pd.DataFrame, normalizers: pd.DataFrame,
                          eps: float = MAIN_EPSILON) -> pd.DataFrame:
    """Total SGS per model × axis under the paper's R_X and under the data-driven R_X, with markers.

    Args:
        paper_scores / data_scores: per-prompt scores under each set of R_X.
        normalizers: ``stats.data_driven_normalizers`` (axis, r_paper, r_data, source).
    Returns model, axis_label, r_paper, r_data, source, sgs_paper, sgs_data, ratio (data/paper), cell_paper,
    cell_data, std_paper, std_data, p_paper, p_data, marker_paper, marker_data.
    """
    a = significance_table(paper_scores, eps)
    b = significance_table(data_scores, eps)
    keep = ["model", "axis", "sgs", "cell", "std", "p", "marker"]
    m = a[keep].merge(b[keep], on=["model", "axis"], suffixes=("_paper", "_data"), how="outer")
    m = m.merge(normalizers[["axis", "r_paper", "r_data", "source"]], on="axis", how="left")
    m["ratio"] = m["sgs_data"] / m["sgs_paper"].where(m["sgs_paper"] > 0)
    m["axis_label"] = m["axis"].map(axis_label)
    m = axis_order(m)
    return m[["model", "axis_label", "r_paper", "r_data", "source", "sgs_paper", "sgs_data", "ratio", "cell_paper",
              "cell_data", "std_paper", "std_data", "p_paper", "p_data", "marker_paper", "marker_data"]].reset_index(
        drop=True)


def per_token_scores(per_token: pd.DataFrame, q: float = 0.95) -> tuple[float, pd.DataFrame]:
    """Per-prompt scores of the length-normalized Δ-Prob (nats per token) and the R they use.

    Args:
        per_token: ``Store.per_token_logprob_deltas`` (model, dataset, prompt_id, delta_per_token, …).
        q: R = the q-quantile of |Δ per token| over these rows (data-driven; the paper fixes no
            constant); when that is 0, the max |Δ per token|, and 1.0 when that is 0 too.
    Returns:
        (R, scores): scores has model, dataset, prompt_id, s (RMS of clip(Δ/R, −1, 1), in [0, 1]),
        n_variants (``stats.rms_scores``). Empty scores and R = NaN when no row has a Δ.
    """
    d = per_token.dropna(subset=["delta_per_token"])
    if d.empty:
        return float("nan"), pd.DataFrame(columns=["model", "dataset", "prompt_id", "s", "n_variants"])
    r = float(np.quantile(np.abs(d["delta_per_token"].to_numpy(dtype=float)), q))
    if not r > 0:
        r = float(np.abs(d["delta_per_token"]).max()) or 1.0
    return r, stats_mod.rms_scores(d, r, value="delta_per_token")


def per_token_prob(per_token: pd.DataFrame, q: float = 0.95, n_resamples: int = 1000, seed: int = 0) -> dict:
    """Length-normalized Δ-Prob (nats per token) beside the paper's Δ-Prob.

    Args:
        per_token: ``Store.per_token_logprob_deltas`` (model, dataset, prompt_id, delta_per_token, delta_seq).
        q: R for the per-token view = the q-quantile of |Δ per token| over these rows (data-driven;
            the paper fixes no constant for it).
    Returns ``{"r": R, "table": model, axis_label, sgs, lo, hi, n_prompts, status, mean_abs_delta}``
    — one row per model for "Δ-Prob / token"; empty when no log-probs are stored.
    """
    cols = ["model", "axis_label", "sgs", "lo", "hi", "n_prompts", "status", "mean_abs_delta", "r"]
    d = per_token.dropna(subset=["delta_per_token"])
    if d.empty:
        return {"r": float("nan"), "table": pd.DataFrame(columns=cols)}
    r, ps = per_token_scores(d, q)
    ci = stats_mod.bootstrap_sgs(ps, ("model",), n_resamples=n_resamples, seed=seed)
    mad = d.groupby("model")["delta_per_token"].apply(lambda x: float(np.mean(np.abs(x))))
    ci["axis_label"] = "Δ-Prob / token"
    ci["mean_abs_delta"] = ci["model"].map(mad)
    ci["r"] = r
    return {"r": r, "table": ci[cols]}


# ====================================================================== sample size (appendix D), plotted by requested N
# ====================================================================== radar scale
def radar_axis_scales(radar: pd.DataFrame, use_ci: bool = True, extra: pd.DataFrame | None = None) -> dict[str, float]:
    """Per-axis radar scale: the largest value shown on each spoke, so small axes are not lost in the centre.

    Args:
        radar: ``radar_data`` (model, axis, sgs, lo, hi, available).
        use_ci: include the CI upper bounds ``hi`` (when the chart draws them).
        extra: other values drawn on the spokes (axis, sgs), e.g. the paper overlay.
    Returns:
        ``{axis: max}`` for each of the six axes; 1.0 where nothing positive is shown (so a
        spoke with only zeros or n/a stays at the centre, never divides by 0). Dividing a value
        by its axis's scale maps it to [0, 1] on that spoke; the common (paper's) scale is
        the plain SGS and needs no scales.
    """
    cols = ["sgs", "hi"] if use_ci else ["sgs"]
    out = {}
    for a in AXES:
        vals = radar.loc[radar["axis"] == a, cols].to_numpy(dtype=float).ravel()
        if extra is not None and len(extra):
            vals = np.concatenate([vals, extra.loc[extra["axis"] == a, "sgs"].to_numpy(dtype=float)])
        vals = vals[np.isfinite(vals)]
        m = float(vals.max()) if len(vals) else 0.0
        out[a] = m if m > 0 else 1.0
    return out
