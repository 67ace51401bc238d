"""Paired sign-flip tests: the exact null of the mean difference and of Pratt's signed-rank statistic.

Under H0 (the two models are exchangeable on each prompt) every paired difference d(i) is as likely
to carry either sign, so the null distribution of any statistic of d is its distribution over the
2^n sign assignments (Fisher 1935; Pratt 1959 for zeros in the signed-rank test). This module
computes that distribution exactly where it can and by seeded Monte Carlo where it cannot, and
says which (the ``method`` string every page shows):

* **mean** (``mean_flip_test``): T = Σ d(i). Exact up to ``EXACT_MEAN_MAX_N`` non-zero
  differences by meet-in-the-middle (the 2^n sums as two halves of 2^(n/2), counted with
  ``numpy.searchsorted``: milliseconds at n = 20, well under a second at 34); above that
  ``MC_RESAMPLES`` random sign assignments, p = (1 + k)/(1 + B) (Phipson & Smyth 2010) with its
  Monte Carlo standard error stated.
* **signed rank** (``signed_rank_flip_test``): W+ = Σ rank(|d(i)|) over d(i) > 0, zeros ranked
  and then left out (Pratt), ties at their average rank. Ranks are multiples of ½, so the null
  of 2·W+ is a sum of independent {0, 2·r(i)} terms: its exact distribution at any n up to
  ``EXACT_RANK_MAX_N`` by convolution (dynamic programming over integer sums), with or without
  ties and zeros. scipy.stats.wilcoxon(method=PermutationMethod()) enumerates the same
  distribution up to n = 13 only by default.

**What counts as zero, decided once** (``paired_differences``): per-prompt scores reach here
through sums over variants in whatever order the store returns them, so two models with
identical replies can differ by 1e-17. A difference with |d| ≤ ``ZERO_RTOL``·max(1, |s_A|,
|s_B|) is exactly 0, and |d| values closer than that tolerance are one tie (they share the
smallest value of their run). Every test here takes ``paired_differences`` output, and compares
a null statistic with the observed one up to ``STAT_RTOL`` of its scale, so the same data
written in another order gives the same p.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

#: |d| at or below this times max(1, |s_A|, |s_B|) is a zero difference (float noise of sums).
ZERO_RTOL = 1e-12
#: A null statistic within this share of the statistic's scale of the observed one counts as equal.
STAT_RTOL = 1e-9
#: Up to this many non-zero differences the mean test enumerates every sign assignment.
EXACT_MEAN_MAX_N = 34
#: Up to this many differences the signed-rank null is exact (convolution over 2·ranks).
EXACT_RANK_MAX_N = 400
#: Random sign assignments of a Monte Carlo null.
MC_RESAMPLES = 100_000


@dataclass(frozen=True)
class FlipTest:
    """One paired test: n (differences), n_zero, statistic (observed T or W+), p (two-sided),
    method (how the null was computed, as the pages show it), mc_se (Monte Carlo standard
    error of p; 0 when exact, NaN without a test)."""

    n: int
    n_zero: int
    statistic: float
    p: float
    method: str
    mc_se: float


def paired_differences(a, b) -> np.ndarray:
    """d = a − b with float noise removed: zeros and ties decided once for every test.

    Args:
        a, b: per-prompt scores of two models on the same prompts, shape (n,); a pair with a NaN
            is dropped.
    Returns:
        d, shape (≤ n,), float64: |d(i)| ≤ ``ZERO_RTOL``·max(1, |a(i)|, |b(i)|) set to 0.0; among
        the rest, |d| values whose sorted neighbours lie within that tolerance of each other
        share the smallest |d| of their run (sign kept), so rank ties are real ties.
    Raises:
        ValueError: shapes differ.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired scores must have one shape, got {a.shape} and {b.shape}")
    keep = ~(np.isnan(a) | np.isnan(b))
    a, b = a[keep], b[keep]
    d = a - b
    tol = ZERO_RTOL * np.maximum(1.0, np.maximum(np.abs(a), np.abs(b)))
    d[np.abs(d) <= tol] = 0.0
    return _merge_ties(d, tol)


def _merge_ties(d: np.ndarray, tol: np.ndarray) -> np.ndarray:
    nz = np.flatnonzero(d)
    if len(nz) < 2:
        return d
    mag = np.abs(d[nz])
    order = np.argsort(mag, kind="stable")
    m = mag[order]
    t = tol[nz][order]
    new_run = np.concatenate([[True], np.diff(m) > np.maximum(t[1:], t[:-1])])
    run_start = np.maximum.accumulate(np.where(new_run, np.arange(len(m)), 0))
    out = d.copy()
    out[nz[order]] = np.sign(d[nz[order]]) * m[run_start]
    return out


def _two_sided_from_tails(le: float, ge: float) -> float:
    return float(min(1.0, 2.0 * min(le, ge)))


def mean_flip_test(d, rng: np.random.Generator | None = None, n_resamples: int = MC_RESAMPLES,
                   alternative: str = "two-sided") -> FlipTest:
    """Paired sign-flip permutation test of H0: d is symmetric about 0, on T = Σ d.

    Args:
        d: ``paired_differences`` output, shape (n,). Zeros carry no sign and are left out of
            the enumeration (they add 0 to every T).
        rng: generator of the Monte Carlo null (above ``EXACT_MEAN_MAX_N`` non-zero d).
        n_resamples: B of the Monte Carlo null.
        alternative: "two-sided" (p = P(|T*| ≥ |T|)) or "greater" (one-sided, p = P(T* ≥ T): mean d > 0).
    Returns:
        ``FlipTest``: p = P(|T*| ≥ |T|) (or P(T* ≥ T)) over the sign assignments (exact), or (1 + k)/(1 + B)
        (Monte Carlo, mc_se = √(p(1−p)/B)). n < 2 → p NaN (method "too few prompts"); every
        d = 0 → p = 1 ("no difference").
    Source: Fisher (1935) §21; Good, *Permutation Tests* (2000) §3.1; Phipson & Smyth (2010).
    """
    if alternative not in ("two-sided", "greater"):
        raise ValueError(f"alternative must be 'two-sided' or 'greater', not {alternative!r}")
    x = np.asarray(d, dtype=np.float64)
    n, n_zero = len(x), int(np.sum(x == 0))
    if n < 2:
        return FlipTest(n, n_zero, float("nan"), float("nan"), "too few prompts", float("nan"))
    t_obs = float(x.sum())
    if n_zero == n:
        return FlipTest(n, n_zero, 0.0, 1.0, "no difference", 0.0)
    v = np.abs(x[x != 0])
    m = len(v)
    tol = STAT_RTOL * float(v.sum())
    thr = abs(t_obs) - tol
    if m <= EXACT_MEAN_MAX_N:
        lo, hi = _subset_sums(v[: m // 2]), np.sort(_subset_sums(v[m // 2:]))
        # Σ s_i v_i with s_i = ±1 is 2·(sum of the + subset) − Σ v: count |2(L+H) − S| ≥ thr
        total = float(v.sum())
        if alternative == "greater":  # count 2(L+H) − S ≥ T − tol
            k = int((len(hi) - np.searchsorted(hi, (t_obs - tol + total) / 2 - lo, side="left")).sum())
            return FlipTest(n, n_zero, t_obs, min(1.0, k / float(len(lo) * len(hi))),
                            f"exact (all 2^{m} sign flips)", 0.0)
        up = len(hi) - np.searchsorted(hi, (thr + total) / 2 - lo, side="left")
        down = np.searchsorted(hi, (total - thr) / 2 - lo, side="right")
        k = int(up.sum() + down.sum()) if thr > 0 else len(lo) * len(hi)
        p = min(1.0, k / float(len(lo) * len(hi)))
        return FlipTest(n, n_zero, t_obs, p, f"exact (all 2^{m} sign flips)", 0.0)
    if rng is None:
        raise ValueError("a Monte Carlo sign-flip test needs a seeded generator (rng)")
    k, done = 0, 0
    while done < n_resamples:
        b = min(20_000, n_resamples - done)
        signs = rng.integers(0, 2, size=(b, m), dtype=np.int8) * 2 - 1
        k += int(np.sum(signs @ v >= t_obs - tol)) if alternative == "greater" else int(np.sum(np.abs(signs @ v) >= thr))
        done += b
    p = (1 + k) / (1 + n_resamples)
    return FlipTest(n, n_zero, t_obs, p, mc_label(n_resamples, p), math.sqrt(p * (1 - p) / n_resamples))


def mc_label(n_resamples: int, p: float) -> str:
    """``"Monte Carlo (100,000 sign flips, ±0.0007)"``: the method with its standard error of p."""
    return f"Monte Carlo ({n_resamples:,} sign flips, ±{math.sqrt(p * (1 - p) / n_resamples):.2g})"


def _subset_sums(v: np.ndarray) -> np.ndarray:
    """Sums of every subset of ``v`` (shape (2^len(v),)), by doubling."""
    s = np.zeros(1)
    for x in v:
        s = np.concatenate([s, s + x])
    return s


def signed_rank_flip_test(d, rng: np.random.Generator | None = None, n_resamples: int = MC_RESAMPLES) -> FlipTest:
    """Two-sided Wilcoxon signed-rank test with Pratt's zeros, its null exact by convolution.

    Ranks of |d| over all n (zeros included, ties at their average: ``scipy.stats.rankdata``);
    W+ = Σ rank over d > 0. Under H0 each non-zero d carries either sign with probability ½, so
    2·W+ is a sum of independent terms {0, 2·rank}: its distribution is the convolution of those
    two-point laws (integers up to n(n+1)), computed exactly up to ``EXACT_RANK_MAX_N``.
    p = min(1, 2·min(P(W+ ≤ w), P(W+ ≥ w))), scipy's two-sided rule.

    Args:
        d: ``paired_differences`` output, shape (n,).
        rng, n_resamples: the Monte Carlo null above ``EXACT_RANK_MAX_N`` differences.
    Returns:
        ``FlipTest`` (statistic = W+). n < 2 → p NaN; every d = 0 → p = 1 ("no difference").
    Source: Pratt (1959) JASA 54:655; scipy.stats.wilcoxon(zero_method="pratt") for the statistic.
    """
    x = np.asarray(d, dtype=np.float64)
    n, n_zero = len(x), int(np.sum(x == 0))
    if n < 2:
        return FlipTest(n, n_zero, float("nan"), float("nan"), "too few prompts", float("nan"))
    ranks = sps.rankdata(np.abs(x))
    w = float(ranks[x > 0].sum())
    if n_zero == n:
        return FlipTest(n, n_zero, w, 1.0, "no difference", 0.0)
    r2 = np.rint(2 * ranks[x != 0]).astype(np.int64)  # average ranks are multiples of ½
    w2 = int(round(2 * w))
    if n <= EXACT_RANK_MAX_N:
        dist = np.zeros(int(r2.sum()) + 1)
        dist[0] = 1.0
        top = 0
        for r in r2:  # law of Σ {0, r} with probability ½ each
            dist[r: top + r + 1] += dist[: top + 1].copy()
            dist[: top + r + 1] *= 0.5
            top += r
        le, ge = float(dist[: w2 + 1].sum()), float(dist[w2:].sum())
        return FlipTest(n, n_zero, w, _two_sided_from_tails(le, ge), f"exact (all 2^{len(r2)} sign flips)", 0.0)
    if rng is None:
        raise ValueError("a Monte Carlo signed-rank test needs a seeded generator (rng)")
    le = ge = 0
    done = 0
    while done < n_resamples:
        b = min(20_000, n_resamples - done)
        sums = rng.integers(0, 2, size=(b, len(r2)), dtype=np.int8) @ r2
        le, ge, done = le + int(np.sum(sums <= w2)), ge + int(np.sum(sums >= w2)), done + b
    p = _two_sided_from_tails((1 + le) / (1 + n_resamples), (1 + ge) / (1 + n_resamples))
    return FlipTest(n, n_zero, w, p, mc_label(n_resamples, p), math.sqrt(p * (1 - p) / n_resamples))
