"""Kendall's τ-b with a p-value that is exact or says which approximation it is.

``scipy.stats.kendalltau`` computes an exact small-sample p-value only when neither variable has
ties; with ties it falls back to the normal approximation, which is anti-conservative at the 3–11
models a store holds (several models at the same SGS, e.g. Δ-MR SGS 0.0, are common). Here, with
ties, the p-value comes from the permutation distribution of τ-b under H0 (every pairing of the
two variables equally likely): all n! orders for n ≤ ``EXACT_MAX_N``, above that
``scipy.stats.permutation_test`` with a seeded generator. The tie pattern of each variable is the
same in every permutation, so τ-b's denominator is fixed and the test compares the integer
numerator S = Σ_{i<j} sign(xᵢ − xⱼ)·sign(yᵢ − yⱼ) (no float comparisons).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from sago_engine.seeds import derive_seed

#: Largest n whose permutation p-value enumerates all n! orders (8! = 40,320).
EXACT_MAX_N = 8
#: Resamples of the Monte-Carlo permutation test above ``EXACT_MAX_N`` (p resolution 1e-4).
N_RESAMPLES = 9_999

METHOD_EXACT = "exact (scipy, no ties)"
METHOD_ENUMERATED = "exact permutation (all n! orders; ties)"
METHOD_MONTE_CARLO = f"permutation, {N_RESAMPLES:,} seeded resamples (ties)"


@dataclass(frozen=True)
class KendallResult:
    """τ-b in [−1, 1], two-sided p in (0, 1] for H0: τ = 0, and the method that gave p."""

    tau: float
    p: float
    method: str


def _numerators(x: np.ndarray, y_perms: np.ndarray) -> np.ndarray:
    """S for each row of ``y_perms`` (shape (k, n)) against ``x`` (n,); int64 array (k,)."""
    i, j = np.triu_indices(len(x), k=1)
    sx = np.sign(x[i] - x[j]).astype(np.int64)
    sy = np.sign(y_perms[..., i] - y_perms[..., j]).astype(np.int64)
    return sy @ sx


def kendall_tau(x: Sequence[float], y: Sequence[float], seed_parts: Sequence[Any] = ()) -> KendallResult:
    """Kendall's τ-b of ``x`` and ``y`` with a two-sided p-value (H0: τ = 0).

    Args:
        x, y: equal-length finite sequences, n ≥ 2, neither constant.
        seed_parts: extra parts of the Monte-Carlo seed (``seeds.derive_seed`` of these and the
            data), so one call site gets reproducible, distinct draws.
    Returns:
        ``KendallResult``. Without ties: scipy's exact p (``method="exact"``). With ties:
        the fraction of permutations of y whose |S| ≥ the observed |S| — every permutation for
        n ≤ ``EXACT_MAX_N``, else ``scipy.stats.permutation_test`` (``N_RESAMPLES`` pairings,
        p = (b + 1) / (N_RESAMPLES + 1)).
    Raises:
        ValueError: different lengths, n < 2, non-finite values, or a constant variable.
    Source: Kendall (1945) τ-b; permutation p as in scipy/scipy #5755 (``kendalltau`` keeps
    the asymptotic variance with ties).
    """
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xa.shape != ya.shape or xa.ndim != 1 or len(xa) < 2:
        raise ValueError(f"x and y must be 1-D of the same length ≥ 2, got shapes {xa.shape} and {ya.shape}")
    if not (np.isfinite(xa).all() and np.isfinite(ya).all()):
        raise ValueError("x and y must be finite")
    if np.ptp(xa) == 0 or np.ptp(ya) == 0:
        raise ValueError("τ-b is undefined when one variable is constant")
    n = len(xa)
    tau = float(stats.kendalltau(xa, ya).statistic)
    if len(np.unique(xa)) == n and len(np.unique(ya)) == n:
        return KendallResult(tau, float(stats.kendalltau(xa, ya, method="exact").pvalue), METHOD_EXACT)
    observed = abs(int(_numerators(xa, ya[None, :])[0]))
    if n <= EXACT_MAX_N:
        perms = np.array(list(itertools.permutations(range(n))), dtype=np.int64)
        p = float(np.mean(np.abs(_numerators(xa, ya[perms])) >= observed))
        return KendallResult(tau, p, METHOD_ENUMERATED)
    rng = np.random.default_rng(derive_seed("kendall_tau_permutation", *seed_parts, xa.tolist(), ya.tolist()))
    res = stats.permutation_test((ya,), lambda yp, axis=-1: np.abs(_numerators(xa, np.moveaxis(yp, axis, -1))),
                                 permutation_type="pairings", n_resamples=N_RESAMPLES, vectorized=True,
                                 alternative="greater", rng=rng)
    return KendallResult(tau, float(res.pvalue), METHOD_MONTE_CARLO)
