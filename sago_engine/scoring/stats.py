"""Statistics beyond the paper: bootstrap CIs, Holm / BH control, sample size, reversal probabilities, R_X choice.

SAGO (arXiv 2610.01428) rests on N = 16 prompts per dataset and one-sided t-tests with stars;
this module adds what a statistician asks for next. Pure functions over pandas DataFrames
(scipy / numpy only, every random draw from a seeded ``numpy.random.Generator``); nothing
here touches the store or Streamlit. docs/METHOD.md §Statistics states every choice.
"""

from __future__ import annotations

import math
import warnings
import zlib
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from sago_engine.scoring.scores import marker, normalize, scores_from_stats, sgs_of, sufficient_stats

#: Below this many prompts a group's interval and test are flagged as unreliable.
SMALL_N = 5
#: Multiple-comparison corrections a page can switch between.
CORRECTIONS: tuple[str, ...] = ("none", "holm", "bh")
CORRECTION_LABELS = {"none": "none (raw p)", "holm": "Holm (FWER)", "bh": "Benjamini–Hochberg (FDR)"}
#: A pair of models is *called* a ranking reversal only when the bootstrap probability that its
#: order differs between two datasets is at least this.
REVERSAL_THRESHOLD = 0.95

STATUS_OK, STATUS_FLAT, STATUS_TINY = "ok", "no variation", "too few prompts"


def group_rng(seed: int, key) -> np.random.Generator:
    """Generator for one group: seeded from ``seed`` and crc32 of the group key, so a group's draws
    do not change when other groups are filtered in or out."""
    return np.random.default_rng([int(seed), zlib.crc32(repr(key).encode())])


# ====================================================================== 1. bootstrap CIs
#: Bootstrap CI methods: ``"studentized"`` (bootstrap-t; the default: it covers at 16 prompts),
#: and scipy.stats.bootstrap's ``"percentile"`` and ``"BCa"``.
CI_METHODS: tuple[str, ...] = ("studentized", "percentile", "BCa")
DEFAULT_CI_METHOD = "studentized"
#: CI calls relative to 0 (``bootstrap_mean_ci_call``).
CALL_EXCLUDES, CALL_INCLUDES, CALL_BORDERLINE = "excludes 0", "includes 0", "borderline"
#: t* of a resample without spread (s* = 0, x̄* ≠ x̄): "infinite", finite so quantiles interpolate.
T_CAP = 1e12


def _studentized(x: np.ndarray, n_resamples: int, level: float, rng: np.random.Generator) -> tuple[float, float, float]:
    """Bootstrap-t interval of the mean and the one-sided bootstrap tail share of 0 (lo, hi, q0).

    t* = (x̄* − x̄)/(s*/√n) over ``n_resamples`` resamples of the n values (a resample with s* = 0
    has t* = 0 when x̄* = x̄, else ±``T_CAP``, standing for ±∞ in the quantiles); CI = [x̄ − t*_(1−α/2)·se, x̄ − t*_(α/2)·se] with se = s/√n,
    clipped to [min x, max x] (a mean lies there). q0 = min(P(t* ≥ t0), P(t* ≤ t0)) with
    t0 = x̄/se: 0 lies outside the CI about when q0 < α/2.
    Source: Efron & Tibshirani, *An Introduction to the Bootstrap* (1993) §12.5; DiCiccio & Efron (1996).
    """
    n = len(x)
    m, se = float(np.mean(x)), float(np.std(x, ddof=1)) / math.sqrt(n)
    t = np.empty(int(n_resamples))
    done = 0
    while done < len(t):  # chunks keep memory at ~8 MB whatever n
        b = min(len(t) - done, max(1, 1_000_000 // n))
        xb = x[rng.integers(0, n, size=(b, n))]
        mb, sb = xb.mean(axis=1), xb.std(axis=1, ddof=1) / math.sqrt(n)
        with np.errstate(divide="ignore", invalid="ignore"):
            tb = np.where(sb > 0, (mb - m) / np.where(sb > 0, sb, 1.0), np.sign(mb - m) * T_CAP)
        t[done: done + b] = tb
        done += b
    alpha = 1 - level
    q_hi, q_lo = np.quantile(t, [1 - alpha / 2, alpha / 2])
    lo = float(np.clip(m - q_hi * se, x.min(), x.max()))
    hi = float(np.clip(m - q_lo * se, x.min(), x.max()))
    t0 = m / se
    q0 = float(min(np.mean(t >= t0), np.mean(t <= t0)))
    return lo, hi, q0


def bootstrap_mean_ci_call(s: np.ndarray, n_resamples: int = 1000, level: float = 0.95,
                           rng: np.random.Generator | None = None,
                           method: str = DEFAULT_CI_METHOD) -> tuple[float, float, float, str, str]:
    """``bootstrap_mean_ci`` and whether the interval excludes 0, with the seed's share said.

    Returns (mean, lo, hi, status, call): call is ``"excludes 0"`` / ``"includes 0"``, or
    ``"borderline"`` when the studentized bootstrap's tail share of 0 lies within two Monte Carlo
    standard errors of α/2 (2·√(α/2·(1 − α/2)/B)): another seed could move the end across 0.
    Percentile and BCa intervals get no borderline call. "" without an interval.
    """
    m, lo, hi, status, q0 = _mean_ci(s, n_resamples, level, rng, method)
    if not np.isfinite(lo):
        return m, lo, hi, status, ""
    if status == STATUS_FLAT:
        return m, lo, hi, status, CALL_EXCLUDES if m != 0 else CALL_INCLUDES
    half = (1 - level) / 2
    if np.isfinite(q0) and abs(q0 - half) <= 2 * math.sqrt(half * (1 - half) / int(n_resamples)):
        return m, lo, hi, status, CALL_BORDERLINE
    return m, lo, hi, status, CALL_EXCLUDES if (lo > 0 or hi < 0) else CALL_INCLUDES


def _mean_ci(s, n_resamples, level, rng, method) -> tuple[float, float, float, str, float]:
    if method not in CI_METHODS:
        raise ValueError(f"unknown bootstrap CI method {method!r}; valid: {', '.join(CI_METHODS)}")
    x = np.asarray(s, dtype=np.float64)
    x = x[~np.isnan(x)]
    nan = float("nan")
    if len(x) == 0:
        return nan, nan, nan, STATUS_TINY, nan
    m = float(np.mean(x))
    if len(x) < 2:
        return m, nan, nan, STATUS_TINY, nan
    if np.ptp(x) == 0:
        return m, m, m, STATUS_FLAT, nan
    rng = rng if rng is not None else np.random.default_rng(0)
    if method == "studentized":
        lo, hi, q0 = _studentized(x, n_resamples, level, rng)
        return m, lo, hi, STATUS_OK, q0
    res = stats.bootstrap((x,), np.mean, n_resamples=int(n_resamples), confidence_level=level, method=method,
                          random_state=rng, vectorized=True)
    return m, float(res.confidence_interval.low), float(res.confidence_interval.high), STATUS_OK, nan


def bootstrap_mean_ci(s: np.ndarray, n_resamples: int = 1000, level: float = 0.95,
                      rng: np.random.Generator | None = None,
                      method: str = DEFAULT_CI_METHOD) -> tuple[float, float, float, str]:
    """Bootstrap CI of the mean of per-prompt scores (resampling prompts with replacement).

    ``method``: ``"studentized"`` (bootstrap-t, ``_studentized``; the default — its 95 % intervals
    cover 95 % ± 2 % at 16 and 96 prompts in tests/unit/scoring/test_stats.py's simulation, where the
    percentile one covers ~89 % at 16), or scipy.stats.bootstrap's ``"percentile"`` / ``"BCa"``.
    Returns (mean, lo, hi, status): status ``"ok"``; ``"no variation"`` when every score is
    equal (lo = hi = mean, instead of scipy's NaN); ``"too few prompts"`` with < 2 (NaN bounds).
    Raises ValueError for an unknown method.
    """
    return _mean_ci(s, n_resamples, level, rng, method)[:4]


def bootstrap_sgs(scores: pd.DataFrame, by: Sequence[str] = ("model", "axis"), n_resamples: int = 1000,
                  level: float = 0.95, seed: int = 0, method: str = DEFAULT_CI_METHOD) -> pd.DataFrame:
    """Bootstrap CI of SGS (the mean of s_X(i) over prompts) per group — the one bootstrap of sago.

    SAGO (arXiv 2610.01428) §Notation defines SGS; the interval is ours. Each group resamples its
    own prompts ``n_resamples`` times with a generator seeded from ``seed`` and the group key.

    Args:
        scores: per-prompt scores (``Store.prompt_scores``: ``by`` columns + ``s``).
        method: a ``CI_METHODS`` key: ``"studentized"`` (default; what the pages show), ``"percentile"``
            or ``"BCa"``.
    Returns:
        ``by`` + sgs, lo, hi, n_prompts, n_resamples, level, status (``ok`` | ``no variation`` |
        ``too few prompts``), small_n (n_prompts < ``SMALL_N``).
    """
    by = list(by)
    rows = []
    for key, grp in scores.groupby(by, sort=True, observed=True):  # a list of keys: every key is a tuple
        s = grp["s"].to_numpy(dtype=float)
        _, lo, hi, status = bootstrap_mean_ci(s, n_resamples, level, group_rng(seed, key), method)
        n = int(np.sum(~np.isnan(s)))
        rows.append({**dict(zip(by, key)), "sgs": sgs_of(s), "lo": lo, "hi": hi, "n_prompts": n,
                     "n_resamples": int(n_resamples), "level": level, "status": status, "small_n": n < SMALL_N})
    return pd.DataFrame(rows, columns=[*by, "sgs", "lo", "hi", "n_prompts", "n_resamples", "level", "status",
                                       "small_n"])


# ====================================================================== 2. multiple comparisons
def holm(p: Iterable[float]) -> np.ndarray:
    """Holm's step-down adjusted p-values (controls the family-wise error rate).

    Sort the m finite p-values ascending, p_(1) ≤ … ≤ p_(m); p̃_(i) = max_{j ≤ i} min(1, (m − j + 1) p_(j)).
    NaN p-values (no test) stay NaN and do not count in m. Returns them in input order.
    """
    p = np.asarray(list(p), dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    m = int(ok.sum())
    if m == 0:
        return out
    q = p[ok]
    order = np.argsort(q)  # tied p-values get the same adjusted value whatever their order
    adj = np.minimum(1.0, (m - np.arange(m)) * q[order])
    adj = np.maximum.accumulate(adj)
    res = np.empty(m)
    res[order] = adj
    out[ok] = res
    return out


def benjamini_hochberg(p: Iterable[float]) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values (controls the false discovery rate), via
    ``scipy.stats.false_discovery_control(method="bh")``. NaN stays NaN and does not count in m."""
    p = np.asarray(list(p), dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        out[ok] = stats.false_discovery_control(p[ok], method="bh")
    return out


def adjust_pvalues(p: Iterable[float], correction: str = "none") -> np.ndarray:
    """Adjusted p-values: ``"none"`` (raw), ``"holm"`` or ``"bh"``; raises ValueError otherwise."""
    if correction == "none":
        return np.asarray(list(p), dtype=np.float64)
    if correction == "holm":
        return holm(p)
    if correction == "bh":
        return benjamini_hochberg(p)
    raise ValueError(f"unknown correction {correction!r}; valid: {', '.join(CORRECTIONS)}")


def apply_correction(sig: pd.DataFrame, correction: str = "none") -> pd.DataFrame:
    """Adjust the ``p`` column of a significance table over ALL its rows (= the family of tests shown).

    Adds ``p_adj`` and ``correction``; ``marker`` follows ``p_adj`` (raw p when ``"none"``);
    ``p`` stays the raw p-value. Returns a copy.
    """
    out = sig.copy()
    out["p_adj"] = adjust_pvalues(out["p"].to_numpy(dtype=float), correction) if len(out) else np.array([])
    out["correction"] = correction
    out["marker"] = [marker(p) for p in out["p_adj"]]
    return out


# ====================================================================== 4. reversals with uncertainty
def _boot_means(scores: pd.DataFrame, axis: str, dataset: str, models: list[str], n_resamples: int,
                seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Observed and bootstrap SGS_X(d) per model (columns) — prompts resampled jointly across models (paired)."""
    g = scores[(scores["axis"] == axis) & (scores["dataset"] == dataset)]
    w = g.pivot_table(index="prompt_id", columns="model", values="s", aggfunc="mean").reindex(columns=models)
    x = w.to_numpy(dtype=np.float64)
    rng = group_rng(seed, (axis, dataset))
    idx = rng.integers(0, len(x), size=(int(n_resamples), len(x)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a model without prompts here: NaN mean
        boot = np.nanmean(x[idx], axis=1)  # (B, n_models)
        obs = np.nanmean(x, axis=0)
    return obs, boot


#: A difference of two SGS within this share of their size is 0 (float noise of sums in another order).
DIFF_RTOL = 1e-12


def _noise_free(a, b):
    """a − b with |a − b| ≤ ``DIFF_RTOL``·max(1, |a|, |b|) set to exactly 0 (scalars or arrays)."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    tol = DIFF_RTOL * np.maximum(1.0, np.maximum(np.abs(a), np.abs(b)))
    return np.where(np.abs(d) <= tol, 0.0, d)


def reversal_probabilities(scores: pd.DataFrame, n_resamples: int = 1000, seed: int = 0,
                           threshold: float = REVERSAL_THRESHOLD) -> pd.DataFrame:
    """Bootstrap probability that two models' order on an axis differs between two datasets.

    For each axis, dataset d, a bootstrap replicate resamples d's prompts with replacement — the
    same prompts for every model (the models answered the same prompts, so the draw is paired).
    For models a < b and datasets A < B, P(reversal) = share of replicates where
    sign(SGS_a(A) − SGS_b(A)) and sign(SGS_a(B) − SGS_b(B)) are strictly opposite (a difference within
    ``DIFF_RTOL`` of the SGS is 0: equal scores summed in another order never flip). Datasets are
    resampled independently. Only pairs with P ≥ ``threshold`` (default 0.95) are *called*
    reversals (``reversal`` True); the point-estimate flips are kept as ``observed_flip``.

    Returns:
        axis, model_a, model_b, dataset_a, dataset_b, diff_a (SGS_a − SGS_b on dataset_a),
        diff_b (on dataset_b), observed_flip, p_reversal, reversal, n_resamples, threshold.
    """
    cols = ["axis", "model_a", "model_b", "dataset_a", "dataset_b", "diff_a", "diff_b", "observed_flip",
            "p_reversal", "reversal", "n_resamples", "threshold"]
    rows = []
    for axis, ga in scores.groupby("axis", sort=True):
        models = sorted(ga["model"].unique())
        datasets = sorted(ga["dataset"].unique())
        if len(models) < 2 or len(datasets) < 2:
            continue
        bm = {d: _boot_means(ga, axis, d, models, n_resamples, seed) for d in datasets}
        for i, a in enumerate(models):
            for j in range(i + 1, len(models)):
                b = models[j]
                for k, da in enumerate(datasets):
                    for db in datasets[k + 1:]:
                        oa, ba = bm[da]
                        ob, bb = bm[db]
                        d1, d2 = _noise_free(oa[i], oa[j]), _noise_free(ob[i], ob[j])
                        if not (np.isfinite(d1) and np.isfinite(d2)):
                            continue
                        s1 = np.sign(_noise_free(ba[:, i], ba[:, j]))
                        s2 = np.sign(_noise_free(bb[:, i], bb[:, j]))
                        p = float(np.mean(s1 * s2 < 0))
                        rows.append({"axis": axis, "model_a": a, "model_b": b, "dataset_a": da, "dataset_b": db,
                                     "diff_a": float(d1), "diff_b": float(d2), "observed_flip": bool(d1 * d2 < 0),
                                     "p_reversal": p, "reversal": p >= threshold, "n_resamples": int(n_resamples),
                                     "threshold": threshold})
    return pd.DataFrame(rows, columns=cols)


# ====================================================================== 5. normalizers and per-token log-prob
def data_driven_normalizers(quantiles: pd.DataFrame, paper: Mapping[str, float] | Iterable[tuple[str, float]]) -> pd.DataFrame:
    """R_X chosen from the data next to the paper's constants.

    Args:
        quantiles: ``Store.delta_abs_quantiles`` — axis, n, q (the quantile level), q_abs (that
            quantile of |Δ|), max_abs.
        paper: the paper's / run's R_X per axis.
    Returns:
        axis, n, q, q_abs, max_abs, r_paper, r_data, source. r_data = q_abs; if that is 0 (e.g.
        Δ-MR where most Δ are 0) the max |Δ| is used (source "max |Δ|"); if that is 0 too, the
        paper's R (source "paper (no variation)").
    """
    paper = dict(paper)
    rows = []
    for r in quantiles.itertuples():  # fields read by name: the leading Index field goes unused
        rp = float(paper.get(r.axis, float("nan")))
        if r.q_abs is not None and np.isfinite(r.q_abs) and r.q_abs > 0:
            rd, src = float(r.q_abs), f"{r.q:.0%} quantile of |Δ|"
        elif r.max_abs is not None and np.isfinite(r.max_abs) and r.max_abs > 0:
            rd, src = float(r.max_abs), "max |Δ|"
        else:
            rd, src = rp, "paper (no variation)"
        rows.append({"axis": r.axis, "n": int(r.n), "q": float(r.q), "q_abs": r.q_abs, "max_abs": r.max_abs,
                     "r_paper": rp, "r_data": rd, "source": src})
    return pd.DataFrame(rows, columns=["axis", "n", "q", "q_abs", "max_abs", "r_paper", "r_data", "source"])


def rx_pooling(quantiles: pd.DataFrame) -> str:
    """Which models a data-driven R_X was pooled over, as a sentence ("" without quantiles).

    Args:
        quantiles: ``Store.delta_abs_quantiles`` (axis, …, models).
    Returns:
        "Data-driven R_X is pooled over the deltas of 3 models (a, b, c): a model's SGS under it
        changes when other models are filtered in or out; filter to one model for its own R_X."
        (per axis when the axes pool different models; "… of 1 model (a) …" needs no warning).
    """
    if quantiles.empty or "models" not in quantiles:
        return ""
    sets = {a: tuple(sorted(str(m) for m in ms)) for a, ms in zip(quantiles["axis"], quantiles["models"])}
    groups: dict[tuple[str, ...], list[str]] = {}
    for a, ms in sets.items():
        groups.setdefault(ms, []).append(str(a))
    if len(groups) == 1:
        [ms] = groups
        if len(ms) == 1:
            return f"Data-driven R_X is taken from the deltas of {ms[0]} alone: it is this model's own."
        return (f"Data-driven R_X is pooled over the deltas of {len(ms)} models ({', '.join(ms)}): a model's SGS "
                "under it changes when other models are filtered in or out; filter to one model for its own R_X.")
    parts = "; ".join(f"{', '.join(axes)}: {len(ms)} model(s) ({', '.join(ms)})" for ms, axes in groups.items())
    return (f"Data-driven R_X is pooled per axis over the models with deltas on it — {parts}. A model's SGS under it "
            "changes when other models are filtered in or out; filter to one model for its own R_X.")


def rms_scores(deltas: pd.DataFrame, r: float, value: str = "delta",
               by: Sequence[str] = ("model", "dataset", "prompt_id")) -> pd.DataFrame:
    """Per-prompt RMS s(i) = sqrt(mean clip(Δ/R, −1, 1)²) of any raw Δ column (SAGO §Notation formula).

    Used for the length-normalized (per-token) log-prob: ``value="delta_per_token"``. Δ̃ by
    ``scoring.normalize``, the score by ``scoring.sufficient_stats`` and ``scoring.rms``.
    Returns ``by`` + s, n_variants. Raises ValueError if r ≤ 0.
    """
    d = deltas.dropna(subset=[value])
    x = normalize(d[value].to_numpy(), r)  # float64 (normalize casts)
    st = sufficient_stats(d[list(by)].assign(_x=x), "_x", tuple(by))
    return scores_from_stats(st)  # keeps every non-sum column: exactly ``by``
