"""Scoring (SAGO §Notation, §Significance): normalisation, per-prompt RMS, SGS, t-tests, markers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sago_engine.scoring.scores import (
    EPSILONS,
    MAIN_EPSILON,
    format_cell,
    marker,
    normalize,
    prompt_scores,
    resolve_normalizers,
    sgs,
    significance,
    ttest_greater,
)
from sago_engine.types import DEFAULT_NORMALIZERS


# ------------------------------------------------------------------ normalize
def test_normalize_divides_and_clips():
    out = normalize(np.array([-300.0, -125.0, 0.0, 50.0, 1000.0]), 250.0)
    assert out.tolist() == [-1.0, -0.5, 0.0, 0.2, 1.0]
    assert float(normalize(-46.0, 100.0)) == pytest.approx(-0.46)
    assert math.isnan(float(normalize(float("nan"), 2.0)))


@pytest.mark.parametrize("r", [0.0, -1.0, float("nan")])
def test_normalize_bad_r(r):
    with pytest.raises(ValueError):
        normalize(1.0, r)


def test_resolve_normalizers():
    assert resolve_normalizers() == DEFAULT_NORMALIZERS
    assert resolve_normalizers(None) == {"cos": 2.0, "bleu": 100.0, "bert": 1.0, "prob": 250.0, "ent": 10.0, "mr": 1.0}
    r = resolve_normalizers({"prob": 100, "ent": 5.5})
    assert r["prob"] == 100.0 and r["ent"] == 5.5 and r["cos"] == 2.0
    assert DEFAULT_NORMALIZERS["prob"] == 250.0  # defaults not mutated
    with pytest.raises(ValueError, match="unknown axis 'bogus'"):
        resolve_normalizers({"bogus": 1.0})
    with pytest.raises(ValueError, match="must be > 0"):
        resolve_normalizers({"bleu": 0})
    with pytest.raises(ValueError):
        resolve_normalizers({"bleu": -5})
    with pytest.raises(ValueError):
        resolve_normalizers({"bleu": float("nan")})


def test_epsilons():
    assert EPSILONS == (0.01, 0.05, 0.10)
    assert MAIN_EPSILON == 0.05


# ------------------------------------------------------------------ prompt_scores
def _rows(prompt, dataset, values, axis="bleu", run="r1"):
    return [{"run_id": run, "dataset": dataset, "prompt_id": prompt, "axis": axis, "delta_norm": v} for v in values]


def test_prompt_scores_rms_by_hand_and_numpy():
    df = pd.DataFrame(
        _rows("a", "d1", [0.3, -0.4])          # sqrt((0.09+0.16)/2) = sqrt(0.125)
        + _rows("b", "d1", [0.0, 0.0, 0.0])    # 0
        + _rows("c", "d2", [1.0, -1.0])        # 1
        + _rows("a", "d1", [-0.6], axis="mr")  # 0.6
    )
    ps = prompt_scores(df).set_index(["prompt_id", "axis"])
    assert ps.loc[("a", "bleu"), "s"] == pytest.approx(math.sqrt(0.125))  # 0.35355339
    assert ps.loc[("a", "bleu"), "s"] == pytest.approx(0.3535534, abs=1e-7)
    assert ps.loc[("a", "bleu"), "s"] == pytest.approx(np.sqrt(np.mean(np.array([0.3, -0.4]) ** 2)))
    assert ps.loc[("b", "bleu"), "s"] == 0.0
    assert ps.loc[("c", "bleu"), "s"] == 1.0
    assert ps.loc[("a", "mr"), "s"] == pytest.approx(0.6)
    assert ps.loc[("a", "bleu"), "n_variants"] == 2
    assert ps.loc[("b", "bleu"), "n_variants"] == 3
    assert len(ps) == 4
    assert {"run_id", "dataset", "prompt_id", "axis", "s", "n_variants"} <= set(prompt_scores(df).columns)


def test_prompt_scores_drop_nan_instead_of_counting_zero():
    df = pd.DataFrame(_rows("a", "d1", [0.3, -0.4, float("nan"), None]))
    ps = prompt_scores(df)
    assert len(ps) == 1
    assert ps["s"].iloc[0] == pytest.approx(math.sqrt(0.125))  # not sqrt(0.25/4) = 0.25
    assert ps["n_variants"].iloc[0] == 2


def test_prompt_scores_all_nan_prompt_disappears():
    df = pd.DataFrame(_rows("a", "d1", [float("nan")] * 3, axis="cos") + _rows("a", "d1", [0.5], axis="bleu"))
    ps = prompt_scores(df)
    assert ps["axis"].tolist() == ["bleu"]  # an unavailable axis has no score, not a score of 0


def test_prompt_scores_separate_runs():
    df = pd.DataFrame(_rows("a", "d1", [0.5], run="r1") + _rows("a", "d1", [0.1], run="r2"))
    ps = prompt_scores(df).set_index("run_id")
    assert ps.loc["r1", "s"] == pytest.approx(0.5)
    assert ps.loc["r2", "s"] == pytest.approx(0.1)


# ------------------------------------------------------------------ sgs
def _scores():
    # d1 has ONE prompt with s = 0.9; d2 has THREE prompts with s = 0.1.
    return pd.DataFrame([
        {"run_id": "r1", "dataset": "d1", "prompt_id": "p1", "axis": "bleu", "s": 0.9},
        {"run_id": "r1", "dataset": "d2", "prompt_id": "p2", "axis": "bleu", "s": 0.1},
        {"run_id": "r1", "dataset": "d2", "prompt_id": "p3", "axis": "bleu", "s": 0.1},
        {"run_id": "r1", "dataset": "d2", "prompt_id": "p4", "axis": "bleu", "s": 0.1},
    ])


def test_sgs_total_is_prompt_weighted():
    tot = sgs(_scores())
    assert len(tot) == 1
    # prompt-weighted: (0.9 + 3·0.1)/4 = 0.3; the mean of dataset means would be 0.5
    assert tot["sgs"].iloc[0] == pytest.approx(0.3)
    assert tot["sgs"].iloc[0] != pytest.approx(0.5)
    assert tot["n_prompts"].iloc[0] == 4
    # sample std of [0.9, 0.1, 0.1, 0.1]: mean 0.3, squares 0.36+3·0.04=0.48, /3 = 0.16 → 0.4
    assert tot["std"].iloc[0] == pytest.approx(0.4)


def test_sgs_per_dataset():
    per = sgs(_scores(), by=("run_id", "dataset", "axis")).set_index("dataset")
    assert per.loc["d1", "sgs"] == pytest.approx(0.9)
    assert math.isnan(per.loc["d1", "std"])  # a single prompt has no sample std
    assert per.loc["d1", "n_prompts"] == 1
    assert per.loc["d2", "sgs"] == pytest.approx(0.1)
    assert per.loc["d2", "std"] == pytest.approx(0.0, abs=1e-12)
    assert per.loc["d2", "n_prompts"] == 3


# ------------------------------------------------------------------ t-test
def test_ttest_matches_scipy_and_hand():
    s = np.array([0.1, 0.2, 0.3, 0.4])
    t, p = ttest_greater(s, 0.05)
    ref = stats.ttest_1samp(s - 0.05, 0.0, alternative="greater")
    assert t == pytest.approx(ref.statistic)
    assert p == pytest.approx(ref.pvalue)
    # hand: mean(s-ε) = 0.2, sd = sqrt(0.05/3) = 0.1290994, se = sd/2 → t = 3.0983867
    assert t == pytest.approx(0.2 / (math.sqrt(0.05 / 3) / 2))
    assert t == pytest.approx(3.0983867, abs=1e-6)
    assert p == pytest.approx(stats.t.sf(3.0983867, 3), rel=1e-5)
    assert 0.02 < p < 0.03  # p ≈ 0.0266 (df 3)


def test_ttest_various_eps_and_direction():
    s = np.array([0.02, 0.03, 0.01, 0.04, 0.05])
    for eps in EPSILONS:
        t, p = ttest_greater(s, eps)
        ref = stats.ttest_1samp(s - eps, 0.0, alternative="greater")
        assert (t, p) == pytest.approx((ref.statistic, ref.pvalue))
    t, p = ttest_greater(s, 0.10)
    assert t < 0 and p > 0.99  # well below ε: not significant


def test_ttest_drops_nan():
    a = ttest_greater(np.array([0.1, np.nan, 0.2, 0.3, 0.4]), 0.05)
    b = ttest_greater(np.array([0.1, 0.2, 0.3, 0.4]), 0.05)
    assert a == pytest.approx(b)


def test_ttest_degenerate():
    t, p = ttest_greater(np.array([0.3]), 0.05)
    assert math.isnan(t) and math.isnan(p)
    t, p = ttest_greater(np.array([]), 0.05)
    assert math.isnan(t) and math.isnan(p)
    t, p = ttest_greater(np.array([0.3, np.nan]), 0.05)  # one finite value left
    assert math.isnan(t) and math.isnan(p)
    assert ttest_greater(np.array([0.2, 0.2, 0.2]), 0.05) == (math.inf, 0.0)
    assert ttest_greater(np.array([0.0, 0.0]), 0.05) == (-math.inf, 1.0)
    assert ttest_greater(np.array([0.05, 0.05]), 0.05) == (0.0, 1.0)


# ------------------------------------------------------------------ markers and cells
@pytest.mark.parametrize(
    "p, m",
    [
        (0.0, "†"), (0.0009999, "†"), (0.001, "**"), (0.0099999, "**"), (0.01, "*"),
        (0.0499999, "*"), (0.05, ""), (0.5, ""), (1.0, ""),
        (float("nan"), ""), (None, ""), (float("inf"), ""),
    ],
)
def test_marker_boundaries(p, m):
    assert marker(p) == m


def test_format_cell():
    assert format_cell(0.1234, 0.0456, "†") == "0.123±0.046†"
    assert format_cell(0.5, 0.1, "") == "0.500±0.100"
    assert format_cell(0.5, float("nan"), "*") == "0.500*"
    assert format_cell(0.5, None, "") == "0.500"
    assert format_cell(float("nan"), 0.1, "†") == "n/a"
    assert format_cell(None, 0.1, "") == "n/a"
    assert format_cell(0.12345, 0.01, "**", digits=2) == "0.12±0.01**"


# ------------------------------------------------------------------ significance / score_tables
def test_significance_table():
    sc = pd.DataFrame({"run_id": "r1", "axis": "mr", "s": [0.1, 0.2, 0.3, 0.4]})
    sig = significance(sc, eps=0.05)
    assert len(sig) == 1
    row = sig.iloc[0]
    assert row["sgs"] == pytest.approx(0.25)
    assert row["std"] == pytest.approx(math.sqrt(0.05 / 3))
    assert row["n_prompts"] == 4
    assert row["t"] == pytest.approx(3.0983867, abs=1e-6)
    assert row["marker"] == "*"
    assert row["eps"] == 0.05


def test_score_tables_end_to_end():
    df = pd.DataFrame(
        _rows("p1", "d1", [0.3, -0.4]) + _rows("p2", "d1", [0.1, 0.1])
        + _rows("p3", "d2", [0.2, float("nan")]) + _rows("p4", "d2", [-0.6, 0.8])
    )
    from sago_engine.views.report import score_tables

    scores = prompt_scores(df).rename(columns={"run_id": "model"})
    tab = score_tables(scores, eps=0.05)
    # s: p1 √0.125, p2 0.1, p3 0.2 (NaN dropped), p4 √0.5
    s = [math.sqrt(0.125), 0.1, 0.2, math.sqrt(0.5)]
    assert tab["total"]["sgs"].iloc[0] == pytest.approx(sum(s) / 4)
    per = tab["per_dataset"].set_index("dataset")
    assert per.loc["d1", "sgs"] == pytest.approx((s[0] + s[1]) / 2)
    assert per.loc["d2", "sgs"] == pytest.approx((s[2] + s[3]) / 2)
    assert (tab["total"]["eps"] == 0.05).all() and (per["eps"] == 0.05).all()


def test_rms_is_the_one_formula_of_s():
    """s = sqrt(ΣΔ̃² / n): [Δ̃ = (0.6, 0.8)] → sqrt(0.5); n = 0 → NaN; prompt_scores and rms_scores agree."""
    from sago_engine.scoring.scores import rms, sufficient_stats
    from sago_engine.scoring.stats import rms_scores

    np.testing.assert_allclose(rms([2, 1, 4], [0.36 + 0.64, 0.01, 0.0]), [math.sqrt(0.5), 0.1, 0.0])
    assert np.isnan(rms(0, 0.0))
    d = pd.DataFrame({"run_id": "r", "dataset": "d", "prompt_id": ["p", "p", "q"], "axis": "bleu",
                      "delta_norm": [0.6, -0.8, np.nan]})
    st = sufficient_stats(d)
    assert st[["n", "sum_norm", "sum_sq", "sum_abs"]].iloc[0].tolist() == pytest.approx([2, -0.2, 1.0, 1.4])
    assert len(st) == 1  # q has no Δ̃: no row, never 0
    assert prompt_scores(d)["s"].tolist() == pytest.approx([math.sqrt(0.5)])
    raw = pd.DataFrame({"model": "m", "dataset": "d", "prompt_id": "p", "delta": [6.0, -20.0]})
    assert rms_scores(raw, r=10.0)["s"].tolist() == pytest.approx([math.sqrt((0.36 + 1.0) / 2)])


# ------------------------------------------------------------------ contracts pinned by mutation testing (docs/TESTING.md)
def test_normalize_and_normalizers_accept_r_below_one_and_say_why_not_otherwise():
    assert float(normalize(0.3, 0.5)) == pytest.approx(0.6)  # R_X may be < 1 (Δ-BERT's R is 1)
    out = normalize(np.array([0.25, -2.0], dtype=np.float32), 0.5)
    assert out.dtype == np.float64 and out.tolist() == [0.5, -1.0]
    with pytest.raises(ValueError, match=r"normalizer R_X must be > 0, got 0"):
        normalize(1.0, 0)
    assert resolve_normalizers({"bert": 0.5})["bert"] == 0.5
    with pytest.raises(ValueError, match=r"valid: cos, bleu, bert, prob, ent, mr$"):
        resolve_normalizers({"bogus": 1.0})


def test_rms_returns_float64_for_any_input_dtype():
    from sago_engine.scoring.scores import rms

    out = rms(np.array([2, 1], dtype=np.int32), np.array([0.5, 0.25], dtype=np.float32))
    assert out.dtype == np.float64 and out.tolist() == [0.5, 0.5]


def _unsorted_with_noise_columns() -> pd.DataFrame:
    """Rows out of group order, a NaN in an unrelated column (``reason`` is None where available),
    a categorical key with an unused category, float32 values."""
    df = pd.DataFrame({"run_id": "r", "dataset": ["d2", "d2", "d1", "d1"], "prompt_id": ["q", "q", "p", "p"],
                       "axis": "bleu", "delta_norm": np.array([0.5, -0.5, 0.25, 0.75], dtype=np.float32),
                       "reason": [None, "x", None, None]})
    df["dataset"] = pd.Categorical(df["dataset"], categories=["d0", "d1", "d2"])
    return df


def test_sufficient_stats_sorted_observed_float64_and_blind_to_other_nans():
    from sago_engine.scoring.scores import scores_from_stats, sufficient_stats

    st = sufficient_stats(_unsorted_with_noise_columns())
    assert list(st["prompt_id"]) == ["p", "q"]  # sorted by group; the unused category d0 has no row
    assert list(st["n"]) == [2, 2]  # the NaN in `reason` does not drop a row
    assert st["sum_sq"].dtype == np.float64 and st["sum_sq"].tolist() == [0.625, 0.5]
    sc = scores_from_stats(st)  # keep=None: every column but the sums
    assert list(sc.columns) == ["run_id", "dataset", "prompt_id", "axis", "s", "n_variants"]
    assert sc["n_variants"].dtype == np.int32
    assert sc["s"].tolist() == pytest.approx([math.sqrt(0.3125), 0.5])
    assert list(scores_from_stats(st, keep=("prompt_id",)).columns) == ["prompt_id", "s", "n_variants"]


def test_prompt_scores_with_another_grouping():
    df = pd.DataFrame({"model": ["m", "m", "n"], "prompt_id": "p", "axis": "cos", "delta_norm": [0.3, 0.4, 0.1]})
    ps = prompt_scores(df, group=("model", "prompt_id", "axis"))
    assert list(ps.columns) == ["model", "prompt_id", "axis", "s", "n_variants"]
    assert ps["s"].tolist() == pytest.approx([math.sqrt(0.125), 0.1])


def test_sgs_and_significance_sorted_observed_no_warnings_small_groups():
    import warnings

    sc = pd.DataFrame({"run_id": ["r2", "r1", "r1", "r3"], "axis": "bleu", "s": [0.4, 0.1, 0.3, 0.2]})
    sc["run_id"] = pd.Categorical(sc["run_id"], categories=["r0", "r1", "r2", "r3"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a one-prompt group gives NaN std silently, never a numpy warning
        tot = sgs(sc)
        sig = significance(sc, eps=0.05)
    for t in (tot, sig):
        assert list(t["run_id"]) == ["r1", "r2", "r3"]  # sorted, the unused category left out
        assert t["std"].iloc[0] == pytest.approx(math.sqrt(0.02))  # two prompts have a sample std
        assert math.isnan(t["std"].iloc[1]) and math.isnan(t["std"].iloc[2])
    assert tot["sgs"].tolist() == pytest.approx([0.2, 0.4, 0.2])
    ref = stats.ttest_1samp(np.array([0.1, 0.3]) - 0.05, 0.0, alternative="greater").pvalue
    assert sig["p"].iloc[0] == pytest.approx(ref) and math.isnan(sig["p"].iloc[1])
    empty = significance(sc.iloc[:0], eps=0.05)
    assert list(empty.columns) == ["run_id", "axis", "sgs", "std", "n_prompts", "t", "p", "marker", "eps"]


def test_ttest_takes_none_as_missing():
    assert ttest_greater([0.1, None, 0.2, 0.3, 0.4], 0.05) == pytest.approx(ttest_greater([0.1, 0.2, 0.3, 0.4], 0.05))


def test_scores_from_sql_stats_drop_every_sum_column():
    from sago_engine.scoring.scores import scores_from_stats

    st = pd.DataFrame({"run_id": "r", "prompt_id": ["p", "q"], "axis": "cos", "n_rows": [3, 2], "n": [2, 2],
                       "sum_norm": [0.1, 0.0], "sum_sq": [0.5, 0.0], "sum_abs": [0.9, 0.0]})
    out = scores_from_stats(st)  # the store's statistics tables also carry n_rows (rows incl. unavailable)
    assert list(out.columns) == ["run_id", "prompt_id", "axis", "s", "n_variants"]
    assert out["s"].tolist() == [0.5, 0.0]
