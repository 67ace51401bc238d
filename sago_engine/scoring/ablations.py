"""The paper's ablations over the store's sufficient statistics: dose-response, tone asymmetry, length factor, semantic audit.

SAGO (arXiv 2610.01428) §Ablations. Pure functions over pandas DataFrames; nothing here
touches the store. Inputs are the frames of ``Store.ablation_frame`` (``cells``: additive
sums of Δ̃ per model × axis × (F, u, s, p) cell; ``length``: sums of per-prompt instability
per target ratio) and ``Store.variant_audit``. Additive sums make every pooled statistic
exact: a mean over variants is Σ/n, a variance is (Σx² − (Σx)²/n)/(n − 1).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from sago_engine.scoring.scores import marker, rms

SUMS = ("n", "sum_abs", "sum_sq", "sum")

#: What the tone test is, in words (shown beside its p-values).
TONE_TEST = ("Welch's t-test, one-sided (H1: mean |Δ̃| under negative tone > under polite tone), "
             "scipy.stats.ttest_ind_from_stats(equal_var=False, alternative='greater'); unit = variant")


def _var_from_sums(n: np.ndarray, s: np.ndarray, ss: np.ndarray) -> np.ndarray:
    """Sample variance (ddof=1) from n, Σx, Σx²; NaN where n < 2; clipped at 0 against rounding."""
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        v = (np.asarray(ss, dtype=np.float64) - np.asarray(s, dtype=np.float64) ** 2 / n) / (n - 1)
    v = np.where(n >= 2, np.maximum(v, 0.0), np.nan)
    return v


def _pool(cells: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Sum the additive columns over everything not in ``by`` (NaN keys kept as their own group)."""
    return cells.groupby(by, dropna=False, sort=True, observed=True)[list(SUMS)].sum().reset_index()


def dose_response(cells: pd.DataFrame, by: str = "strength", level: str = "family") -> pd.DataFrame:
    """Dose-response: how far Δ̃ moves as the variant's strength (or position) changes.

    SAGO (arXiv 2610.01428) §Ablations (strength and position).

    Args:
        cells: ``Store.ablation_frame(f)["cells"]`` — model, axis, family, subtype, strength,
            position, tone, target_ratio, n, sum_abs, sum_sq, sum.
        by: ``"strength"`` or ``"position"`` — the dose on the x axis.
        level: ``"family"`` (pool the family's subtypes; strengths of different subtypes share
            a number but not a scale, so prefer ``"subtype"`` for strength) or ``"subtype"``.
    Returns:
        One row per (model, axis, family[, subtype], by) with ``n`` (Δ̃ values),
        ``mean_abs`` = mean |Δ̃| ∈ [0, 1], ``se_abs`` = its standard error (std of |Δ̃| / √n,
        NaN for n < 2), ``rms`` = sqrt(mean Δ̃²) ∈ [0, 1] over those variants (= the mean of
        per-prompt RMS when each prompt has one variant per cell, as the variant grid
        guarantees), and ``mean_signed`` = mean Δ̃ ∈ [−1, 1].
    """
    if by not in ("strength", "position"):
        raise ValueError(f"by must be 'strength' or 'position', got {by!r}")
    if level not in ("family", "subtype"):
        raise ValueError(f"level must be 'family' or 'subtype', got {level!r}")
    keys = ["model", "axis", "family"] + (["subtype"] if level == "subtype" else []) + [by]
    out = _pool(cells, keys)
    n = out["n"].to_numpy(dtype=np.float64)
    out["mean_abs"] = out["sum_abs"] / n
    out["se_abs"] = np.sqrt(_var_from_sums(n, out["sum_abs"], out["sum_sq"]) / n)
    out["rms"] = rms(n, out["sum_sq"].to_numpy())  # the one RMS formula (scoring.rms)
    out["mean_signed"] = out["sum"] / n
    return out[keys + ["n", "mean_abs", "se_abs", "rms", "mean_signed"]]


def tone_asymmetry(cells: pd.DataFrame) -> pd.DataFrame:
    """Social tone asymmetry: does negative tone move the model more than polite tone?

    SAGO (arXiv 2610.01428) §Ablations, §Variants ("negative tone moves most models and axes
    more than polite tone"). Only social_register variants with tone ``negative`` or
    ``polite`` (neutral ones are left out).

    Test: Welch's t-test, **one-sided**, H0: E|Δ̃|_negative ≤ E|Δ̃|_polite vs H1: >, computed
    with ``scipy.stats.ttest_ind_from_stats(..., equal_var=False, alternative="greater")``
    from the pooled sums. The unit is the variant; variants of one prompt are not independent,
    so read p as optimistic.

    Args:
        cells: ``Store.ablation_frame(f)["cells"]``.
    Returns:
        One row per (model, axis): ``n_negative``, ``mean_negative`` (mean |Δ̃|),
        ``std_negative``, ``n_polite``, ``mean_polite``, ``std_polite``, ``diff`` (negative −
        polite, in Δ̃ units), ``ratio`` (negative / polite; NaN if polite is 0), ``t``, ``p``
        (NaN when a side has < 2 variants), ``marker`` (*, **, †).
    """
    cols = ["model", "axis", "n_negative", "mean_negative", "std_negative", "n_polite", "mean_polite",
            "std_polite", "diff", "ratio", "t", "p", "marker"]
    c = cells[(cells["family"] == "social_register") & cells["tone"].isin(["negative", "polite"])]
    if c.empty:
        return pd.DataFrame(columns=cols)
    g = _pool(c, ["model", "axis", "tone"])
    rows = []
    for (model, axis), grp in g.groupby(["model", "axis"], sort=True):
        side = {t: r for t, r in zip(grp["tone"], grp.itertuples(index=False))}
        vals = {}
        for t in ("negative", "polite"):
            r = side.get(t)
            n = float(r.n) if r is not None else 0.0
            mean = r.sum_abs / n if n else np.nan
            std = float(np.sqrt(_var_from_sums(np.array([n]), np.array([r.sum_abs]), np.array([r.sum_sq]))[0])) \
                if r is not None else np.nan
            vals[t] = (int(n), mean, std)
        (nn, mn, sn), (npo, mp, sp) = vals["negative"], vals["polite"]
        if nn >= 2 and npo >= 2 and (sn > 0 or sp > 0):
            res = stats.ttest_ind_from_stats(mn, sn, nn, mp, sp, npo, equal_var=False, alternative="greater")
            t, p = float(res.statistic), float(res.pvalue)
        elif nn >= 2 and npo >= 2:  # both sides constant: defined like scoring.ttest_greater
            t, p = (np.inf, 0.0) if mn > mp else (0.0 if mn == mp else -np.inf, 1.0)
        else:
            t, p = np.nan, np.nan
        rows.append({"model": model, "axis": axis, "n_negative": nn, "mean_negative": mn, "std_negative": sn,
                     "n_polite": npo, "mean_polite": mp, "std_polite": sp, "diff": mn - mp,
                     "ratio": mn / mp if mp and np.isfinite(mp) and mp > 0 else np.nan,
                     "t": t, "p": p, "marker": marker(p)})
    return pd.DataFrame(rows, columns=cols)


def length_factor(length: pd.DataFrame) -> pd.DataFrame:
    """Length factor: spread across prompts of the instability caused by length compression / expansion.

    SAGO (arXiv 2610.01428) §Ablations: x = target length ratio (structural/length strengths,
    e.g. 0.5, 0.75, 1.5, 2.0), y = std across prompts of per-prompt instability, per axis.
    Per-prompt instability s_i(r) = sqrt(mean Δ̃²) over prompt i's length variants of ratio r.

    Args:
        length: ``Store.ablation_frame(f)["length"]`` — model, axis, target_ratio, n_prompts,
            sum_s (Σ s_i), sum_s2 (Σ s_i²).
    Returns:
        One row per (model, axis, target_ratio): ``n_prompts``, ``mean_instability`` (mean
        s_i ∈ [0, 1]), ``std_instability`` (sample std of s_i, ddof=1; NaN for < 2 prompts).
    """
    keys = ["model", "axis", "target_ratio"]
    g = length.groupby(keys, sort=True)[["n_prompts", "sum_s", "sum_s2"]].sum().reset_index()
    n = g["n_prompts"].to_numpy(dtype=np.float64)
    g["mean_instability"] = g["sum_s"] / n
    g["std_instability"] = np.sqrt(_var_from_sums(n, g["sum_s"], g["sum_s2"]))
    g["n_prompts"] = g["n_prompts"].astype(int)
    return g[keys + ["n_prompts", "mean_instability", "std_instability"]]


def semantic_audit(audit: pd.DataFrame, threshold: float | None = None) -> pd.DataFrame:
    """Semantic-score audit per family: how many variants were scored, passed, kept, rejected.

    SAGO (arXiv 2610.01428) §Variants (filter: BERTScore-F1 vs the base prompt > threshold for
    the non-surface families). docs/METHOD.md explains the mapped threshold.

    Args:
        audit: ``Store.variant_audit(f)`` — family, semantic_score, passes_filter, kept, …
        threshold: the threshold on the encoder's scale (for ``n_below``); None skips it.
    Returns:
        One row per family: ``n``, ``n_scored`` (non-NULL scores), ``n_kept``, ``n_rejected``,
        ``n_below`` (scores ≤ threshold; NaN without one), ``min``, ``p05``, ``median``, ``max``
        of the semantic score (NaN without scores).
    """
    rows = []
    for fam, grp in audit.groupby("family", sort=True):
        s = grp["semantic_score"].dropna().to_numpy(dtype=np.float64)
        kept = grp["kept"].fillna(False).astype(bool)
        rows.append({
            "family": fam, "n": int(len(grp)), "n_scored": int(len(s)), "n_kept": int(kept.sum()),
            "n_rejected": int((~kept).sum()),
            "n_below": float(np.sum(s <= threshold)) if threshold is not None else np.nan,
            "min": float(s.min()) if len(s) else np.nan, "p05": float(np.quantile(s, 0.05)) if len(s) else np.nan,
            "median": float(np.median(s)) if len(s) else np.nan, "max": float(s.max()) if len(s) else np.nan,
        })
    return pd.DataFrame(rows, columns=["family", "n", "n_scored", "n_kept", "n_rejected", "n_below", "min", "p05",
                                       "median", "max"])


def semantic_histogram(audit: pd.DataFrame, bins: int = 40) -> pd.DataFrame:
    """Histogram of semantic scores per family and kept flag, on fixed bins over [0, 1].

    Args:
        audit: ``Store.variant_audit(f)``.
        bins: number of equal-width bins on [0, 1] (scores outside are clipped into the end bins).
    Returns:
        family, kept ("kept" | "rejected"), bin_start, bin_end, count — only non-empty bins;
        NULL scores are not counted (see ``semantic_audit`` ``n_scored``).
    """
    a = audit.dropna(subset=["semantic_score"])
    edges = np.linspace(0.0, 1.0, bins + 1)
    if a.empty:
        return pd.DataFrame(columns=["family", "kept", "bin_start", "bin_end", "count"])
    idx = np.clip(np.floor(a["semantic_score"].to_numpy(dtype=np.float64) * bins).astype(int), 0, bins - 1)
    df = pd.DataFrame({"family": a["family"].to_numpy(),
                       "kept": np.where(a["kept"].fillna(False).astype(bool), "kept", "rejected"), "bin": idx})
    g = df.groupby(["family", "kept", "bin"], sort=True).size().reset_index(name="count")
    g["bin_start"] = edges[g["bin"]]
    g["bin_end"] = edges[g["bin"] + 1]
    return g[["family", "kept", "bin_start", "bin_end", "count"]]


def recorded_threshold(thresholds: pd.DataFrame) -> float | None:
    """The one semantic-filter threshold the store's runs recorded (``Store.semantic_thresholds``), or None.

    None when no run recorded one, or when runs used different thresholds (rounded to 4 decimals)
    — then no single line can be drawn.
    """
    levels = {round(float(x), 4) for x in thresholds["threshold"].dropna()} if len(thresholds) else set()
    return levels.pop() if len(levels) == 1 else None


def tone_bars(tone: pd.DataFrame) -> pd.DataFrame:
    """Long form of ``tone_asymmetry`` for a grouped bar chart: model, axis, tone, mean_abs, n."""
    cols = ["model", "axis", "tone", "mean_abs", "n"]
    rows = [{"model": r.model, "axis": r.axis, "tone": t, "mean_abs": getattr(r, f"mean_{t}"), "n": getattr(r, f"n_{t}")}
            for r in tone.itertuples(index=False) for t in ("negative", "polite")]
    return pd.DataFrame(rows, columns=cols)
