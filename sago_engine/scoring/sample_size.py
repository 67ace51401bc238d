"""How many prompts a study needs: the spread of SGS against the number of prompts (the paper's
appendix D), for cells of the variant grid and for the pooled SGS of one population.

Pure math over frames (numpy, scipy.stats for t quantiles); the Sample size page renders it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from sago_engine.scoring.stats import STATUS_FLAT, STATUS_OK, STATUS_TINY, group_rng

#: Sample sizes of the paper's appendix D.
SAMPLE_SIZES: tuple[int, ...] = (4, 8, 16, 32, 64, 128)
#: Variant-cell keys of the sample-size view (F, u, s, p).
CELL = ("family", "subtype", "strength", "position")


def sample_size_std(cell_scores: pd.DataFrame, sizes: Sequence[int] = SAMPLE_SIZES, n_repeats: int = 500,
                    seed: int = 0, by: Sequence[str] = ("model", "axis")) -> pd.DataFrame:
    """Std across repeats of the mean over N prompts drawn without replacement, per (F, u, s, p) group.

    SAGO (arXiv 2610.01428) appendix D. For each ``by`` × (family, subtype, strength, position)
    group with M prompts and each N in ``sizes`` (capped at M; N = M is then drawn once, std 0):
    draw N of the M prompts without replacement ``n_repeats`` times, take the mean of the
    per-prompt cell score in each draw, report the sample std (ddof=1) of those means. The
    draws for different N share one random permutation per repeat (the first N of it), so the
    curve is monotone in expectation and cheap; each is still a uniform draw without replacement.

    Args:
        cell_scores: ``Store.cell_prompt_scores`` — ``by`` + family, subtype, strength, position,
            prompt_id, s (RMS of Δ̃ over that prompt's variants in the cell).
    Returns:
        ``by`` + family, subtype, strength, position, n (the N used), n_requested, n_available (M),
        std_mean, pop_std (σ of the M scores, ddof=0), expected_std = σ/√N·√((M−N)/(M−1))
        (the exact finite-population value), n_repeats.
    """
    keys = [*by, *CELL]
    rows = []
    for key, grp in cell_scores.groupby(keys, sort=True, observed=True, dropna=False):
        x = grp["s"].to_numpy(dtype=np.float64)
        x = x[~np.isnan(x)]
        m = len(x)
        if m == 0:
            continue
        rng = group_rng(seed, key)
        perm = np.argsort(rng.random((int(n_repeats), m)), axis=1)
        sigma = float(np.std(x))
        done = set()
        for n_req in sizes:
            n = min(int(n_req), m)
            if n in done and n == m:  # capped sizes repeat the same N: keep the first
                continue
            done.add(n)
            means = x[perm[:, :n]].mean(axis=1)
            if n == m:  # every prompt drawn: the mean is fixed (exactly 0, not rounding noise)
                sd = 0.0
            else:
                sd = float(np.std(means, ddof=1)) if n_repeats > 1 else float("nan")
            exp_sd = sigma / math.sqrt(n) * math.sqrt((m - n) / (m - 1)) if m > 1 else 0.0
            rows.append({**dict(zip(keys, key)), "n": n, "n_requested": int(n_req), "n_available": m,
                         "std_mean": sd, "pop_std": sigma, "expected_std": exp_sd, "n_repeats": int(n_repeats)})
    return pd.DataFrame(rows, columns=[*keys, "n", "n_requested", "n_available", "std_mean", "pop_std",
                                       "expected_std", "n_repeats"])


def sample_size_summary(curve: pd.DataFrame, by: Sequence[str] = ("model", "axis")) -> pd.DataFrame:
    """Per ``by`` and N: median (and max) over (F, u, s, p) groups of the std of the mean, for the chart."""
    g = curve.groupby([*by, "n"], sort=True, observed=True)
    out = g.agg(median_std=("std_mean", "median"), max_std=("std_mean", "max"), n_groups=("std_mean", "size"),
                median_expected=("expected_std", "median")).reset_index()
    return out


def pooled_sgs_spread(scores: pd.DataFrame, sizes: Sequence[int] = SAMPLE_SIZES,
                      by: Sequence[str] = ("model", "axis")) -> pd.DataFrame:
    """How much the pooled SGS of N prompts varies with N: one population per curve, exact, monotone.

    The population of a ``by`` group is its M per-prompt scores s_X(i) (the prompts in the filter);
    its SGS is their mean. For N of them drawn without replacement the std of that mean is exactly
    σ/√N·√((M−N)/(M−1)) (σ: the population std, ddof=0; Cochran, *Sampling Techniques* (1977)
    Thm 2.2), falling to 0 at N = M. For N new prompts from the same source it is σ̂/√N (σ̂: the
    sample std, ddof=1), defined at any N. Both fall strictly with N when σ > 0 — no cells, no
    medians, no simulation noise.

    Args:
        scores: per-prompt scores (``Store.prompt_scores``: ``by`` + s); non-finite s left out.
        sizes: the N drawn (those with 2 ≤ N < M for the within-store curve); N = M is added.
    Returns:
        ``by`` + n, n_available (M), sd_within (NaN for N > M), sd_new, sigma (σ̂), status
        (``ok`` | ``no variation`` (σ = 0: both curves are 0) | ``too few prompts`` (M < 2, no row
        per N)). One row per group and N, N ascending.
    """
    cols = [*by, "n", "n_available", "sd_within", "sd_new", "sigma", "status"]
    rows = []
    for key, grp in scores.groupby(list(by), sort=True, observed=True):
        x = grp["s"].to_numpy(dtype=float)
        x = x[np.isfinite(x)]
        m = len(x)
        if m < 2:
            rows.append({**dict(zip(by, key)), "n": m, "n_available": m, "sd_within": float("nan"),
                         "sd_new": float("nan"), "sigma": float("nan"), "status": STATUS_TINY})
            continue
        flat = np.ptp(x) == 0  # equal scores: σ is 0, not the rounding noise of their mean
        pop, sd = (0.0, 0.0) if flat else (float(np.std(x)), float(np.std(x, ddof=1)))
        status = STATUS_FLAT if flat else STATUS_OK
        for n in sorted({int(k) for k in sizes if int(k) >= 2} | {m}):
            within = pop / math.sqrt(n) * math.sqrt((m - n) / (m - 1)) if n <= m else float("nan")
            rows.append({**dict(zip(by, key)), "n": n, "n_available": m, "sd_within": within,
                         "sd_new": sd / math.sqrt(n), "sigma": sd, "status": status})
    return pd.DataFrame(rows, columns=cols)


def prompts_for_halfwidth(sigma: float, halfwidth: float, level: float = 0.95) -> int:
    """Fewest prompts n ≥ 2 whose t-interval of the mean has half-width ≤ h: t_(1−α/2, n−1)·σ/√n ≤ h.

    Starts at the normal-approximation n = ⌈(z·σ/h)²⌉ (a lower bound: t > z) and steps up until
    the t-quantile condition holds (a handful of steps). σ = 0 → 2 (the fewest prompts with an
    interval). Raises ValueError for h ≤ 0 or σ not finite and ≥ 0.
    """
    if not halfwidth > 0:
        raise ValueError(f"half-width must be > 0, got {halfwidth}")
    if not (np.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"σ must be finite and ≥ 0, got {sigma}")
    if sigma == 0:
        return 2
    z = float(stats.norm.ppf(1 - (1 - level) / 2))
    n = max(2, int(math.ceil((z * sigma / halfwidth) ** 2)))
    while float(stats.t.ppf(1 - (1 - level) / 2, n - 1)) * sigma / math.sqrt(n) > halfwidth:
        n += 1
    return n


def n_for_halfwidth(scores: pd.DataFrame, halfwidth: float = 0.02, level: float = 0.95,
                    by: Sequence[str] = ("model", "axis")) -> pd.DataFrame:
    """Prompts needed for a t-interval of SGS with half-width h (``prompts_for_halfwidth``, n ≥ 2).

    σ = sample std (ddof=1) of s_X(i) in the group. Returns ``by`` + sigma, n_now,
    halfwidth_now (t_(1−α/2, n_now−1)·σ/√n_now), n_needed (2 when σ = 0: "no variation";
    None with < 2 prompts), halfwidth, level, status. Non-finite s (NaN, ±inf in a store) are
    left out like missing ones. Raises ValueError for h ≤ 0.
    """
    if not halfwidth > 0:
        raise ValueError(f"half-width must be > 0, got {halfwidth}")
    rows = []
    for key, grp in scores.groupby(list(by), sort=True, observed=True):  # a list of keys: every key is a tuple
        s = grp["s"].to_numpy(dtype=float)
        s = s[np.isfinite(s)]
        n = len(s)
        sd = (0.0 if np.ptp(s) == 0 else float(np.std(s, ddof=1))) if n > 1 else float("nan")
        status = STATUS_TINY if n < 2 else (STATUS_FLAT if sd == 0 else STATUS_OK)
        tq = float(stats.t.ppf(1 - (1 - level) / 2, n - 1)) if n > 1 else float("nan")
        rows.append({**dict(zip(by, key)), "sigma": sd, "n_now": n,
                     "halfwidth_now": tq * sd / math.sqrt(n) if n > 1 else float("nan"),
                     "n_needed": prompts_for_halfwidth(sd, halfwidth, level) if n > 1 else None,
                     "halfwidth": halfwidth, "level": level, "status": status})
    return pd.DataFrame(rows, columns=[*by, "sigma", "n_now", "halfwidth_now", "n_needed", "halfwidth", "level",
                                       "status"])
