"""Scoring: normalise Δ by R_X, per-prompt RMS s_X(i), SGS, one-sided t-tests (SAGO §Notation, §Significance).

s_X(i) and SGS are each computed in one function (``prompt_score``, ``sgs_of``) by a named aggregation
of the registry ``AGGREGATIONS`` (``PROMPT_AGGREGATION``, ``SGS_AGGREGATION``; docs/EXTENDING.md
"Change the aggregation").

Pure functions over pandas DataFrames; nothing here touches the store or a model. The store
keeps raw signed Δ, so every number can be recomputed under other R_X or ε.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from sago_engine.axis_spec import AXIS_SPECS
from sago_engine.registry import suggest

#: ε values the paper reports; 0.05 is the operating point, 0.10 a stress test.
EPSILONS: tuple[float, ...] = (0.01, 0.05, 0.10)
MAIN_EPSILON = 0.05


def normalize(delta: np.ndarray | float, r: float) -> np.ndarray:
    """Δ̃ = clip(Δ / R_X, −1, 1) (SAGO §Notation). NaN stays NaN. Raises ValueError if R_X ≤ 0."""
    if not r > 0:
        raise ValueError(f"normalizer R_X must be > 0, got {r}")
    return np.clip(np.asarray(delta, dtype=np.float64) / r, -1.0, 1.0)


def resolve_normalizers(overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """The paper's R_X (each axis's ``AxisSpec.normalizer``) updated by ``overrides``; ValueError on an
    unknown axis (the message suggests close names) or R ≤ 0."""
    out = {name: spec.normalizer for name, spec in AXIS_SPECS.items()}
    for k, v in (overrides or {}).items():
        if k not in AXIS_SPECS:
            raise ValueError(f"unknown axis {k!r} in normalizers{suggest(str(k), AXIS_SPECS)}; "
                             f"valid: {', '.join(AXIS_SPECS)}")
        if not float(v) > 0:
            raise ValueError(f"normalizer for {k} must be > 0, got {v}")
        out[k] = float(v)
    return out


def rms(n: np.ndarray | float, sum_sq: np.ndarray | float) -> np.ndarray:
    """The per-prompt score s_X(i) = sqrt(mean_v Δ̃X(i, v)²) from its sufficient statistics (SAGO §Notation).

    The one place of this formula in sago: the store aggregates n and ΣΔ̃² per group in SQL,
    ``prompt_scores`` and ``stats.rms_scores`` aggregate them in pandas; all call this.

    Args:
        n: number of Δ̃ values per group (≥ 1), shape (k,) or scalar.
        sum_sq: ΣΔ̃² per group, same shape.
    Returns:
        s = sqrt(sum_sq / n), float64, in [0, 1] for Δ̃ in [−1, 1]; NaN where n is 0.
    """
    n = np.asarray(n, dtype=np.float64)
    sq = np.asarray(sum_sq, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sqrt(np.where(n > 0, sq / np.where(n > 0, n, 1.0), np.nan))


# ====================================================================== named aggregations
@dataclass(frozen=True)
class Aggregation:
    """A named reduction of scores, registered in ``AGGREGATIONS`` (as lm-eval registers its metric
    aggregations: ``lm_eval.api.registry.register_aggregation``, name → function).

    Attributes:
        name: the registry key (``"mean"``, ``"rms"``, ``"mean_abs"``, …).
        of_values: 1-D float64 array (NaN already dropped, length ≥ 1) → float.
        of_stats: ``(n, sum_norm, sum_sq, sum_abs)`` arrays (the store's sufficient statistics,
            ``sufficient_stats``) → float64 array, NaN where n is 0; None when the statistic cannot
            be computed from sums (e.g. a median): such an aggregation can reduce prompts (SGS)
            but not a prompt's variants, which the store keeps as sums only.
        doc: one line saying what it computes (shown by ``describe_aggregations``).
    """

    name: str
    of_values: Callable[[np.ndarray], float]
    of_stats: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None
    doc: str


#: name → ``Aggregation``; fill it with ``register_aggregation`` only.
AGGREGATIONS: dict[str, Aggregation] = {}


def register_aggregation(name: str, of_values: Callable[[np.ndarray], float],
                         of_stats: Callable[..., np.ndarray] | None = None, doc: str = "") -> Aggregation:
    """Add an ``Aggregation`` under ``name`` and return it. Raises ValueError when ``name`` is taken
    (an aggregation is never replaced behind a caller's back)."""
    if name in AGGREGATIONS:
        raise ValueError(f"aggregation {name!r} is already registered")
    AGGREGATIONS[name] = agg = Aggregation(name, of_values, of_stats, doc)
    return agg


def get_aggregation(name: str) -> Aggregation:
    """The registered ``Aggregation`` called ``name``; ValueError naming the valid ones (and close names)."""
    try:
        return AGGREGATIONS[name]
    except KeyError:
        raise ValueError(f"unknown aggregation {name!r}{suggest(str(name), AGGREGATIONS)}; "
                         f"valid: {', '.join(AGGREGATIONS)}") from None


def describe_aggregations() -> dict[str, str]:
    """name → one-line description of every registered aggregation."""
    return {k: a.doc for k, a in AGGREGATIONS.items()}


def _per_n(total: np.ndarray, n: np.ndarray) -> np.ndarray:
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, np.asarray(total, dtype=np.float64) / np.where(n > 0, n, 1.0), np.nan)


register_aggregation("mean", lambda x: float(np.mean(x)), lambda n, s, sq, a: _per_n(s, n),
                     "arithmetic mean (SAGO §Notation: SGS_X is the mean of s_X(i) over prompts)")
register_aggregation("rms", lambda x: float(np.sqrt(np.mean(x * x))), lambda n, s, sq, a: rms(n, sq),
                     "root mean square (SAGO §Notation: s_X(i) over a prompt's variants)")
register_aggregation("mean_abs", lambda x: float(np.mean(np.abs(x))), lambda n, s, sq, a: _per_n(a, n),
                     "mean absolute value")

#: How s_X(i) reduces Δ̃ over prompt i's variants (SAGO §Notation: RMS); must have ``of_stats``.
PROMPT_AGGREGATION = "rms"
#: How SGS_X reduces s_X(i) over prompts (SAGO §Notation: the mean). The t-test (``ttest_greater``)
#: and the bootstrap CI (``stats.bootstrap_mean_ci``) are of the mean whatever this says.
SGS_AGGREGATION = "mean"


def prompt_score(n: np.ndarray, sum_norm: np.ndarray, sum_sq: np.ndarray, sum_abs: np.ndarray) -> np.ndarray:
    """s_X(i) per group from its sufficient statistics, by ``PROMPT_AGGREGATION`` (SAGO §Notation: RMS).

    Args: arrays of shape (k,): n (Δ̃ values per group), Σ Δ̃, Σ Δ̃², Σ |Δ̃|.
    Returns: float64 array (k,), in [0, 1] for Δ̃ in [−1, 1] (RMS); NaN where n is 0.
    """
    return get_aggregation(PROMPT_AGGREGATION).of_stats(n, sum_norm, sum_sq, sum_abs)


def sgs_of(s: np.ndarray | Sequence[float], aggregation: str | None = None) -> float:
    """SGS of one group: ``SGS_AGGREGATION`` (SAGO §Notation: the mean) of per-prompt scores s_X(i).

    The one place SGS is computed from scores (tables, tests, gates, the noise floor and the
    audit all call it). Args: s, shape (n,), NaN dropped; ``aggregation`` another registered name.
    Returns: float; NaN for a group with no value left.
    """
    x = np.asarray(s, dtype=np.float64)
    x = x[~np.isnan(x)]
    if not len(x):
        return float("nan")
    return float(get_aggregation(aggregation or SGS_AGGREGATION).of_values(x))


def sgs_by(scores: pd.DataFrame, by: Sequence[str], value: str = "s", name: str = "sgs") -> pd.DataFrame:
    """``sgs_of`` of column ``value`` per group of ``by`` (sorted, observed groups only).

    Returns ``by`` + ``name`` (SGS) + ``n_prompts`` (non-NaN values), one row per group.
    """
    g = scores.groupby(list(by), sort=True, observed=True)[value]
    return g.agg([(name, sgs_of), ("n_prompts", "count")]).reset_index()


def sufficient_stats(df: pd.DataFrame, value: str = "delta_norm",
                     group: tuple[str, ...] = ("run_id", "dataset", "prompt_id", "axis")) -> pd.DataFrame:
    """Per group: n, sum_norm (Σx), sum_sq (Σx²), sum_abs (Σ|x|) of column ``value``; NaN rows dropped.

    The pandas twin of the store's statistics tables (``sago_engine.store.suffstats``).
    Returns ``group`` + n (int64), sum_norm, sum_sq, sum_abs, sorted by ``group``.
    """
    d = df.dropna(subset=[value])
    x = d[value].to_numpy(dtype=np.float64)
    g = d[list(group)].assign(_x=x, _sq=x * x, _abs=np.abs(x)).groupby(list(group), sort=True, observed=True)
    out = g.agg(n=("_x", "size"), sum_norm=("_x", "sum"), sum_sq=("_sq", "sum"), sum_abs=("_abs", "sum"))
    return out.reset_index()


def scores_from_stats(stats: pd.DataFrame, keep: tuple[str, ...] | None = None) -> pd.DataFrame:
    """Per-prompt scores from sufficient statistics: ``keep`` columns (default: all but the sums) +
    ``s`` (``rms``) + ``n_variants`` (= n, int32). Rows keep their order."""
    sums = ("n", "n_rows", "sum_norm", "sum_sq", "sum_abs")
    cols = list(keep) if keep is not None else [c for c in stats.columns if c not in sums]
    out = stats[cols].copy()
    out["s"] = prompt_score(*(stats[c].to_numpy() for c in ("n", "sum_norm", "sum_sq", "sum_abs")))
    out["n_variants"] = stats["n"].to_numpy().astype(np.int32)
    return out


def prompt_scores(deltas: pd.DataFrame, group: tuple[str, ...] = ("run_id", "dataset", "prompt_id", "axis")) -> pd.DataFrame:
    """Per-prompt RMS s_X(i) = sqrt(mean_v Δ̃X(i, v)²) (SAGO §Notation), via ``sufficient_stats`` and ``rms``.

    Args:
        deltas: one row per (run, prompt, variant, axis) with columns ``group`` + ``delta_norm``;
            rows with NaN ``delta_norm`` (axis unavailable) are dropped, never counted as 0.
    Returns:
        DataFrame with ``group`` + ``s`` (in [0, 1]; 0 iff every Δ̃ is 0) + ``n_variants``.
    """
    return scores_from_stats(sufficient_stats(deltas, "delta_norm", group), keep=group)


def sgs(scores: pd.DataFrame, by: tuple[str, ...] = ("run_id", "axis")) -> pd.DataFrame:
    """SGS_X = ``sgs_of`` (the mean) of s_X(i) over the prompts in each group (SAGO §Notation).

    With ``by=("run_id", "axis")`` every prompt of every dataset weighs the same (the paper's
    total); add ``"dataset"`` for SGS_X(d). Returns ``by`` + ``sgs``, ``std`` (sample, ddof=1),
    ``n_prompts``.
    """
    g = scores.groupby(list(by), sort=True, observed=True)["s"]
    out = g.agg(sgs=sgs_of, std=lambda x: float(np.std(x, ddof=1)) if len(x) > 1 else float("nan"), n_prompts="size")
    return out.reset_index()


def ttest_greater(s: np.ndarray, eps: float) -> tuple[float, float]:
    """One-sided one-sample t-test of H0: E[s] ≤ ε vs H1: E[s] > ε (SAGO §Significance).

    Args:
        s: per-prompt scores s_X(i), shape (n,), NaNs dropped.
        eps: the threshold ε ≥ 0.
    Returns:
        (t, p). Degenerate cases are defined instead of NaN: n < 2 → (nan, nan); zero variance
        → t = ±inf / p = 0.0 if mean > ε, else (0 or −inf) / p = 1.0.
    Source: scipy.stats.ttest_1samp(s − ε, 0, alternative="greater").
    """
    x = np.asarray(s, dtype=np.float64)
    x = x[~np.isnan(x)]
    if len(x) < 2:
        return float("nan"), float("nan")
    if np.ptp(x) == 0:
        m = float(x[0])
        if m > eps:
            return float("inf"), 0.0
        return (0.0 if m == eps else float("-inf")), 1.0
    res = stats.ttest_1samp(x - eps, 0.0, alternative="greater")
    return float(res.statistic), float(res.pvalue)


def marker(p: float) -> str:
    """Significance marker: ``†`` p<0.001, ``**`` p<0.01, ``*`` p<0.05, else ``""`` (SAGO §Significance)."""
    if p is None or not np.isfinite(p):
        return ""
    if p < 0.001:
        return "†"
    if p < 0.01:
        return "**"
    if p < 0.05:
        return "*"
    return ""


def significance(scores: pd.DataFrame, eps: float = MAIN_EPSILON, by: tuple[str, ...] = ("run_id", "axis")) -> pd.DataFrame:
    """SGS with mean ± std and the one-sided t-test against ε per group.

    Returns ``by`` + ``sgs``, ``std``, ``n_prompts``, ``t``, ``p``, ``marker``, ``eps``.
    """
    rows = []
    for key, grp in scores.groupby(list(by), sort=True, observed=True):
        key = key if isinstance(key, tuple) else (key,)
        s = grp["s"].to_numpy(dtype=np.float64)
        t, p = ttest_greater(s, eps)
        rows.append({
            **dict(zip(by, key)),
            "sgs": sgs_of(s),
            "std": float(np.std(s, ddof=1)) if len(s) > 1 else float("nan"),
            "n_prompts": int(len(s)),
            "t": t,
            "p": p,
            "marker": marker(p),
            "eps": eps,
        })
    return pd.DataFrame(rows, columns=[*by, "sgs", "std", "n_prompts", "t", "p", "marker", "eps"])


def format_cell(mean: float, std: float, mark: str, digits: int = 3) -> str:
    """``"0.123±0.045†"`` — the paper's table cell format; ``"n/a"`` when mean is NaN."""
    if mean is None or not np.isfinite(mean):
        return "n/a"
    sd = "" if std is None or not np.isfinite(std) else f"±{std:.{digits}f}"
    return f"{mean:.{digits}f}{sd}{mark}"
