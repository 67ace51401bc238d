"""A release gate: which runs' SGS, or paired increase against a baseline run, pass a threshold.

A team releasing a model wants CI to fail when prompt-style stability regresses. Two checks,
per run and axis, over ``Store.prompt_scores`` frames (pure functions; the store is read by
``precompute.check``):

- **level**: SGS_X (SAGO, arXiv 2610.01428, §Notation: the mean of s_X(i) over prompts) above
  ``max_sgs[X]`` fails;
- **change**: against a baseline run of the same prompts, the paired difference
  d(i) = s_X^new(i) − s_X^base(i) over the prompts both scored (the pairing of
  ``sago_engine.scoring.pairwise``): its mean above ``max_increase[X]`` fails when the two-sided
  Wilcoxon signed-rank test (``pairwise.signed_rank_test``) rejects "no change" at ``alpha``
  (``alpha = 1`` gates on the mean increase alone). A percentile-bootstrap CI of the mean
  difference (``stats.bootstrap_mean_ci``, seeded by ``seeds.derive_seed``) is reported with it.

An axis a run did not measure is reported as not measured, never as 0 and never as a failure.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from sago_engine.axis_spec import AXIS_SPECS, OPTION_AXIS_SPECS
from sago_engine.registry import suggest
from sago_engine.scoring import stats
from sago_engine.scoring.pairwise import signed_rank_test
from sago_engine.scoring.scores import sgs_of
from sago_engine.seeds import derive_seed
from sago_engine.types import axis_sort_key

#: Level of the signed-rank test a change must pass to fail the gate (``alpha``'s default).
ALPHA = 0.05
#: Tag of the bootstrap seeds of the change check (``seeds.derive_seed``).
SEED_TAG = "sago gate v1"

PASS, FAIL, NOT_MEASURED = "pass", "FAIL", "not measured"
COLUMNS = ["label", "run_id", "axis", "check", "value", "threshold", "n_prompts", "ci_low", "ci_high", "p", "result"]


class GateError(ValueError):
    """A threshold list that cannot be read (the message names the item and the valid axes)."""


def parse_thresholds(text: str, flag: str = "--max-sgs") -> dict[str, float]:
    """``"bleu=0.4,mr=0.2"`` → ``{"bleu": 0.4, "mr": 0.2}``.

    Axis names are the six axes and their options (``axis_spec.OPTION_AXIS_SPECS``); values are
    floats in [0, 1] (SGS and its paired change live on the Δ̃ scale). Raises ``GateError``
    naming ``flag`` and the item: no ``=``, an unknown axis (with close names), a value that
    is not a number in [0, 1], an axis given twice, an empty list.
    """
    valid = [*AXIS_SPECS.names(), *OPTION_AXIS_SPECS.names()]
    out: dict[str, float] = {}
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        raise GateError(f"{flag} needs AXIS=VALUE items, e.g. {flag} bleu=0.4,mr=0.2")
    for item in items:
        axis, sep, value = item.partition("=")
        axis = axis.strip()
        if not sep:
            raise GateError(f"{flag}: {item!r} is not AXIS=VALUE (e.g. bleu=0.4)")
        if axis not in valid:
            raise GateError(f"{flag}: unknown axis {axis!r}{suggest(axis, valid)}; valid: {', '.join(valid)}")
        try:
            v = float(value)
        except ValueError:
            v = float("nan")
        if not 0.0 <= v <= 1.0:
            raise GateError(f"{flag}: {axis}={value.strip()!r} is not a number in [0, 1]")
        if axis in out:
            raise GateError(f"{flag}: axis {axis!r} is given twice")
        out[axis] = v
    return out


def _row(label: str, run_id: str, axis: str, check: str, value: float, threshold: float, n: int,
         lo: float = float("nan"), hi: float = float("nan"), p: float = float("nan"), result: str = PASS) -> dict:
    return {"label": label, "run_id": run_id, "axis": axis, "check": check, "value": value, "threshold": threshold,
            "n_prompts": n, "ci_low": lo, "ci_high": hi, "p": p, "result": result}


def _frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=COLUMNS)
    if df.empty:
        return df
    key = df["axis"].map(axis_sort_key)
    return df.assign(_k=key).sort_values(["label", "_k", "check"], kind="stable").drop(columns="_k").reset_index(drop=True)


def level_checks(scores: pd.DataFrame, labels: Mapping[str, str], max_sgs: Mapping[str, float]) -> pd.DataFrame:
    """SGS_X of each run against ``max_sgs[X]``.

    Args:
        scores: per-prompt scores (``Store.prompt_scores``: run_id, dataset, prompt_id, axis, s).
        labels: run_id → the name printed for it (the runs to check; others are ignored).
        max_sgs: axis → the highest SGS that passes (in [0, 1]).
    Returns:
        ``COLUMNS`` rows with check ``"sgs"``: value = SGS (NaN when the run has no score on the
        axis: result ``NOT_MEASURED``), result ``FAIL`` when value > threshold, else ``PASS``.
    """
    rows = []
    for rid, label in labels.items():
        mine = scores[scores["run_id"] == rid]
        for axis, thr in max_sgs.items():
            s = mine.loc[mine["axis"] == axis, "s"].to_numpy(dtype=np.float64)
            s = s[~np.isnan(s)]
            if not len(s):
                rows.append(_row(label, rid, axis, "sgs", float("nan"), thr, 0, result=NOT_MEASURED))
                continue
            v = sgs_of(s)
            rows.append(_row(label, rid, axis, "sgs", v, thr, len(s), result=FAIL if v > thr else PASS))
    return _frame(rows)


def change_checks(scores: pd.DataFrame, base_scores: pd.DataFrame, pairs: Mapping[str, tuple[str, str]],
                  max_increase: Mapping[str, float], alpha: float = ALPHA, n_resamples: int = 1000,
                  seed: int = 0) -> pd.DataFrame:
    """The paired change of each run's per-prompt scores against its baseline run.

    Args:
        scores, base_scores: per-prompt scores of the new and the baseline store (may be the
            same frame), columns run_id, dataset, prompt_id, axis, s.
        pairs: run_id (new) → (label, baseline run_id).
        max_increase: axis → the largest mean increase d̄ = mean(s_new − s_base) that passes.
        alpha: level of the two-sided signed-rank test; a change fails only when d̄ > threshold
            and p < alpha (``alpha = 1``: d̄ > threshold alone fails).
        n_resamples, seed: the percentile bootstrap of d̄ over the shared prompts.
    Returns:
        ``COLUMNS`` rows with check ``"change"``: value = d̄ over the prompts both runs scored
        (paired on dataset and prompt id), ci_low/ci_high, p, n_prompts; ``NOT_MEASURED`` when
        no prompt is shared on the axis.
    """
    rows = []
    key = ["dataset", "prompt_id"]
    for rid, (label, base_rid) in pairs.items():
        for axis, thr in max_increase.items():
            a = scores[(scores["run_id"] == rid) & (scores["axis"] == axis)][[*key, "s"]]
            b = base_scores[(base_scores["run_id"] == base_rid) & (base_scores["axis"] == axis)][[*key, "s"]]
            m = a.merge(b, on=key, suffixes=("_new", "_base")).dropna()
            if m.empty:
                rows.append(_row(label, rid, axis, "change", float("nan"), thr, 0, result=NOT_MEASURED))
                continue
            d = (m["s_new"] - m["s_base"]).to_numpy(dtype=np.float64)
            rng = np.random.default_rng(derive_seed(SEED_TAG, int(seed), axis, rid, base_rid))
            mean, lo, hi, _ = stats.bootstrap_mean_ci(d, n_resamples=n_resamples, rng=rng)
            p = signed_rank_test(d)["p"]
            significant = alpha >= 1.0 or (np.isfinite(p) and p < alpha)
            rows.append(_row(label, rid, axis, "change", mean, thr, len(d), lo, hi, p,
                             FAIL if mean > thr and significant else PASS))
    return _frame(rows)


def failures(checks: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``checks`` whose result is ``FAIL``."""
    return checks[checks["result"] == FAIL].reset_index(drop=True)
