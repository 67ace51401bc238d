"""Two sources of movement separated: the dice (sampling) and rephrasing (docs/METHOD.md).

Per prompt i and axis X of a sampled run (k samples per input, ``measure.sample_deltas``), with
Δ̃ the normalised Δ against base sample 0:

* F_i — Δ̃² of base samples 1..k−1 (the dice alone; k − 1 values);
* M_i — Δ̃² of every sample of every variant (rephrasing + dice; V·k values).

The **floor** f(i) = √mean(F_i) and the **movement** m(i) = √mean(M_i) are RMS values like
s_X(i) (SAGO, arXiv 2610.01428 §Notation), so a text axis compares two sample sets by the mean
over pairs (each pair: one sample against the same reference).

**Decomposition.** mean(M_i) = mean(F_i) + (mean(M_i) − mean(F_i)): the expected squared movement
of a rephrased prompt's reply is the dice's part plus the excess rephrasing adds (for a scalar
axis with means μ, variances σ²: E(R_v − B₀)² − E(B − B₀)² = (μ_v − μ_B)² + σ_v² − σ_B², the
rephrasing's shift and its change of spread). The share due to rephrasing is
(mean M − mean F)/mean M per prompt, and over a model's prompts the ratio of sums
1 − Σ f(i)² / Σ m(i)², with a percentile bootstrap CI over prompts. Method-of-moments estimates
(as ANOVA variance components): kept unclipped, so a share can fall below 0 by chance.

**Test per prompt.** H0: rephrasing does not change the reply distribution. Given base sample 0,
every other sample is an independent draw compared with one fixed reply, so under H0 the
k − 1 + V·k values of F_i and M_i are i.i.d. and their labels exchangeable: a one-sided
two-sample permutation test of mean(M) − mean(F) > 0 (the null of
scipy.stats.permutation_test with ``permutation_type="independent"``) is exact at any k. With k − 1 = 3 floor values a t-test's
normality cannot be checked and a rank test's normal approximation fails, so the null is
enumerated over all C(V·k + k − 1, k − 1) splits up to ``EXACT_MAX_SPLITS`` and drawn by seeded
Monte Carlo above.

**Test per model.** H0: d(i) = m(i) − f(i) is symmetric about 0 over prompts: a one-sided
sign-flip test of mean d > 0 (``scoring.signflip.mean_flip_test``, one-sided: exact over the 2^n sign
assignments up to its ``EXACT_MEAN_MAX_N`` non-zero differences).

**pass^k.** All k samples agree with the base's majority (``pass_k``): labels are given (e.g.
the SQuAD-normalised reply, ``views.sampling``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

from sago_engine.scoring.signflip import STAT_RTOL, mean_flip_test, paired_differences
from sago_engine.scoring.stats import benjamini_hochberg, group_rng

__all__ = ["EXACT_MAX_SPLITS", "MC_RESAMPLES", "rephrasing_test", "prompt_movement",
           "model_movement", "pass_k", "pass_k_summary"]

#: Up to this many label splits the per-prompt null is enumerated (k = 4, V = 13: C(55, 3) = 26,235).
EXACT_MAX_SPLITS = 200_000
#: Random relabellings (or sign flips) of a Monte Carlo null; p = (1 + b)/(1 + B).
MC_RESAMPLES = 9_999


def _floor_sums(pool: np.ndarray, r: int, exact: bool, rng: np.random.Generator | None) -> np.ndarray:
    """Sums of the r values labelled floor under every split of ``pool`` (exact) or under
    ``MC_RESAMPLES`` random ones."""
    n = len(pool)
    if exact:
        small = min(r, n - r)  # enumerate the smaller side; the floor's sum is the rest of the total
        idx = np.fromiter(itertools.chain.from_iterable(itertools.combinations(range(n), small)), dtype=np.intp)
        sums = pool[idx.reshape(-1, small)].sum(axis=1) if small else np.zeros(1)
        return sums if small == r else pool.sum() - sums
    return pool[rng.permuted(np.tile(np.arange(n), (MC_RESAMPLES, 1)), axis=1)[:, :r]].sum(axis=1)


def rephrasing_test(floor_sq: Sequence[float], move_sq: Sequence[float],
                    rng: np.random.Generator | None = None) -> tuple[float, str]:
    """One-sided exact permutation test of H0 "rephrasing does not move the reply" on one prompt.

    The statistic mean(M) − mean(F) falls strictly as the floor's sum S_F rises (the pooled total
    is fixed), so p = P(S_F* ≤ S_F) over the relabellings: the same p as
    ``scipy.stats.permutation_test(permutation_type="independent", alternative="greater")`` on the
    difference of means, about 20 times faster (the sums of one side's subsets, vectorised).

    Args:
        floor_sq: F, the Δ̃² of base samples 1..k−1 against base sample 0, shape (k−1,).
        move_sq: M, the Δ̃² of every variant sample against base sample 0, shape (V·k,).
        rng: generator of a Monte Carlo null (only above ``EXACT_MAX_SPLITS`` splits).
    Returns:
        (p, method): exact p in (0, 1] with method "exact (all N splits)", or (1 + b)/(1 + B)
        with "Monte Carlo (B relabellings)". Either set empty: (NaN, "no floor" /
        "no variant samples").
    Raises:
        ValueError: a Monte Carlo null without ``rng``.
    Source: Good, *Permutation Tests* (2000) §3; Phipson & Smyth (2010) for the Monte Carlo p.
    """
    f, m = np.asarray(floor_sq, dtype=np.float64), np.asarray(move_sq, dtype=np.float64)
    if not len(f):
        return float("nan"), "no floor"
    if not len(m):
        return float("nan"), "no variant samples"
    splits = math.comb(len(f) + len(m), len(f))
    exact = splits <= EXACT_MAX_SPLITS
    if not exact and rng is None:
        raise ValueError("a Monte Carlo permutation test needs a seeded generator (rng)")
    pool = np.concatenate([f, m])
    sums = _floor_sums(pool, len(f), exact, rng)
    hits = int(np.sum(sums <= f.sum() + STAT_RTOL * max(1.0, float(np.abs(pool).sum()))))
    if exact:
        return hits / len(sums), f"exact (all {splits:,} splits)"
    return (1 + hits) / (1 + MC_RESAMPLES), f"Monte Carlo ({MC_RESAMPLES:,} relabellings)"


PROMPT_COLUMNS = ["prompt_id", "n_floor", "floor", "n_move", "move", "excess", "share", "p", "method"]


def prompt_movement(rows: pd.DataFrame, by: Sequence[str] = ("model", "axis"), seed: int = 0) -> pd.DataFrame:
    """Per prompt: the floor, the movement, the rephrasing excess and share, the exact test.

    Args:
        rows: ``Store.sample_deltas`` rows: ``by`` + prompt_id, variant_id (NaN/None for base
            samples), delta_norm, available. Unavailable rows are left out.
        by: the grouping above the prompt; seed: of the Monte Carlo nulls (with the group key).
    Returns:
        One row per ``by`` + prompt_id with both sets: n_floor, floor = √mean F, n_move,
        move = √mean M, excess = mean M − mean F (Δ̃² units), share = excess / mean M (NaN when
        mean M = 0), p and method of ``rephrasing_test``.
    """
    by = list(by)
    cols = [*by, *PROMPT_COLUMNS]
    r = rows[rows["available"].astype(bool)] if len(rows) else rows
    if not len(r):
        return pd.DataFrame(columns=cols)
    r = r.assign(sq=r["delta_norm"].astype(float) ** 2, is_base=r["variant_id"].isna())
    out = []
    for key, g in r.groupby([*by, "prompt_id"], sort=True, observed=True):
        f = g.loc[g["is_base"], "sq"].to_numpy()
        m = g.loc[~g["is_base"], "sq"].to_numpy()
        if not len(f) or not len(m):
            continue
        p, method = rephrasing_test(f, m, group_rng(seed, key))
        mf, mm = float(f.mean()), float(m.mean())
        out.append({**dict(zip([*by, "prompt_id"], key)), "n_floor": len(f), "floor": math.sqrt(mf),
                    "n_move": len(m), "move": math.sqrt(mm), "excess": mm - mf,
                    "share": (mm - mf) / mm if mm > 0 else float("nan"), "p": p, "method": method})
    return pd.DataFrame(out, columns=cols)


MODEL_COLUMNS = ["n_prompts", "floor", "move", "share", "share_lo", "share_hi", "n_exceeds", "n_exceeds_bh",
                 "p", "method"]


def _pooled_share(f2, m2, axis=-1):
    return 1.0 - np.sum(f2, axis=axis) / np.sum(m2, axis=axis)


def _share_ci(f2: np.ndarray, m2: np.ndarray, n_resamples: int, level: float,
              rng: np.random.Generator) -> tuple[float, float]:
    if len(f2) < 2 or np.ptp(f2) == 0 and np.ptp(m2) == 0 or np.any(m2 <= 0):
        return float("nan"), float("nan")
    res = sps.bootstrap((f2, m2), _pooled_share, paired=True, vectorized=True, n_resamples=int(n_resamples),
                        confidence_level=level, method="percentile", rng=rng)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def model_movement(per_prompt: pd.DataFrame, by: Sequence[str] = ("model", "axis"), alpha: float = 0.05,
                   n_resamples: int = 1000, level: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Per model × axis: mean floor and movement, the rephrasing share with its CI, the tests.

    Args:
        per_prompt: ``prompt_movement`` rows; by: the grouping; alpha: the level of the counts;
        n_resamples, level, seed: the percentile bootstrap of the share over prompts (scipy.stats.bootstrap,
            paired, a generator seeded from ``seed`` and the group key).
    Returns:
        ``by`` + n_prompts, floor (mean f(i)), move (mean m(i)), share = 1 − Σ f(i)² / Σ m(i)²
        (the share of the mean squared movement due to rephrasing; NaN when every m(i) = 0),
        share_lo / share_hi (NaN with < 2 prompts, no spread, or a prompt with m(i) = 0),
        n_exceeds (prompts whose per-prompt p < alpha), n_exceeds_bh (after Benjamini–Hochberg
        over the group's prompts), p and method of the sign-flip test of m(i) − f(i) > 0.
    """
    by = list(by)
    if per_prompt.empty:
        return pd.DataFrame(columns=[*by, *MODEL_COLUMNS])
    out = []
    for key, g in per_prompt.groupby(by, sort=True, observed=True):
        f2, m2 = g["floor"].to_numpy(float) ** 2, g["move"].to_numpy(float) ** 2
        rng = group_rng(seed, key)
        lo, hi = _share_ci(f2, m2, n_resamples, level, rng)
        res = mean_flip_test(paired_differences(g["move"], g["floor"]), rng, MC_RESAMPLES, alternative="greater")
        p, method = res.p, res.method
        pv = g["p"].to_numpy(float)
        ok = ~np.isnan(pv)
        out.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))), "n_prompts": len(g),
                    "floor": float(g["floor"].mean()), "move": float(g["move"].mean()),
                    "share": float(_pooled_share(f2, m2)) if m2.sum() > 0 else float("nan"),
                    "share_lo": lo, "share_hi": hi, "n_exceeds": int(np.sum(pv[ok] < alpha)),
                    "n_exceeds_bh": int(np.sum(benjamini_hochberg(pv[ok]) < alpha)) if ok.any() else 0,
                    "p": p, "method": method})
    return pd.DataFrame(out, columns=[*by, *MODEL_COLUMNS])


PASS_COLUMNS = ["prompt_id", "k", "majority", "base_pass", "variants", "variants_pass"]


def pass_k(labels: pd.DataFrame, by: Sequence[str] = ("model",)) -> pd.DataFrame:
    """pass^k per prompt: do all k samples agree with the base's majority?

    Args:
        labels: ``by`` + prompt_id, variant_id (NaN/None for the base), sample, label (a hashable
            label per reply, e.g. its normalised text; None = no label, e.g. an error: it agrees
            with nothing).
    Returns:
        One row per ``by`` + prompt_id: k (base samples), majority (the label more than half of the
        base samples carry; None without one), base_pass (all k base samples carry it: the dice
        alone keep the answer), variants (variants with samples), variants_pass (how many of them
        have all their samples carrying it). Without a majority both passes are False.
    """
    by = list(by)
    out = []
    for key, g in labels.groupby([*by, "prompt_id"], sort=True, observed=True):
        base = g[g["variant_id"].isna()]["label"].tolist()
        counts = pd.Series([x for x in base if x is not None], dtype=object).value_counts()
        maj = counts.index[0] if len(counts) and counts.iloc[0] * 2 > len(base) else None
        var = g[g["variant_id"].notna()].groupby("variant_id")["label"]
        ok = [maj is not None and all(x == maj for x in s) for _, s in var]
        out.append({**dict(zip([*by, "prompt_id"], key)), "k": len(base), "majority": maj,
                    "base_pass": maj is not None and all(x == maj for x in base), "variants": len(ok),
                    "variants_pass": int(sum(ok))})
    return pd.DataFrame(out, columns=[*by, *PASS_COLUMNS])


def pass_k_summary(per_prompt: pd.DataFrame, by: Sequence[str] = ("model",)) -> pd.DataFrame:
    """Per ``by``: prompts, those with a base majority, pass^k of the dice (share of prompts whose k
    base samples all agree) and under rephrasing (share of (prompt, variant) pairs whose k samples all
    agree with the base's majority), both over every prompt (no majority counts as a failure)."""
    by = list(by)
    cols = [*by, "prompts", "with_majority", "pass_k_dice", "pass_k_rephrased"]
    if per_prompt.empty:
        return pd.DataFrame(columns=cols)
    g = per_prompt.groupby(by, sort=True, observed=True).agg(
        prompts=("prompt_id", "size"), with_majority=("majority", lambda s: int(s.notna().sum())),
        base=("base_pass", "sum"), variants=("variants", "sum"), vpass=("variants_pass", "sum")).reset_index()
    g["pass_k_dice"] = g["base"] / g["prompts"]
    g["pass_k_rephrased"] = np.where(g["variants"] > 0, g["vpass"] / g["variants"].clip(lower=1), np.nan)
    return g[cols]
