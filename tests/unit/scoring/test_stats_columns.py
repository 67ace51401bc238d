"""sago_engine.scoring.stats, every output column and edge case against scipy / numpy or a hand computation.

Fast (no store, no page) so that the mutation run of stats.py can select it (docs/TESTING.md).
"""

from __future__ import annotations

import math
import warnings
import zlib

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from sago_engine.scoring import sample_size, stats
from sago_engine.scoring.scores import marker
from tests.unit.scoring.test_stats import t_needed

X = np.array([0.12, 0.31, 0.05, 0.22, 0.18, 0.40, 0.09])


def _rng(seed, key):
    """The generator stats.group_rng documents: seeded from seed and crc32 of repr(key)."""
    return np.random.default_rng([seed, zlib.crc32(repr(key).encode())])


def _scipy_ci(x, n, level, rng, method="percentile"):
    r = sps.bootstrap((np.asarray(x, dtype=float),), np.mean, n_resamples=n, confidence_level=level, method=method,
                      random_state=rng, vectorized=True)
    return r.confidence_interval.low, r.confidence_interval.high


def _boot_t(x, n, level, rng):
    """Bootstrap-t interval (Efron & Tibshirani 1993, §12.5) in plain numpy, clipped to [min x, max x]."""
    x = np.asarray(x, dtype=float)
    k = len(x)
    xb = x[rng.integers(0, k, size=(n, k))]
    sb = xb.std(axis=1, ddof=1) / np.sqrt(k)
    t = np.where(sb > 0, (xb.mean(axis=1) - x.mean()) / np.where(sb > 0, sb, 1), np.sign(xb.mean(axis=1) - x.mean()) * 1e12)
    se = x.std(ddof=1) / np.sqrt(k)
    q_hi, q_lo = np.quantile(t, [1 - (1 - level) / 2, (1 - level) / 2])
    return (pytest.approx(np.clip(x.mean() - q_hi * se, x.min(), x.max()), abs=1e-12),
            pytest.approx(np.clip(x.mean() - q_lo * se, x.min(), x.max()), abs=1e-12))


# ---------------------------------------------------------------- bootstrap_mean_ci
def test_bootstrap_mean_ci_defaults_and_level():
    m, lo, hi, st = stats.bootstrap_mean_ci(X)  # 1000 resamples, 95 %, studentized, default_rng(0)
    assert (lo, hi) == _boot_t(X, 1000, 0.95, np.random.default_rng(0)) and st == "ok"
    assert m == pytest.approx(float(np.mean(X)))
    m, lo, hi, st = stats.bootstrap_mean_ci(X, 300, 0.8, np.random.default_rng(3))
    assert (lo, hi) == _boot_t(X, 300, 0.8, np.random.default_rng(3))
    m, lo, hi, st = stats.bootstrap_mean_ci(X, 300, 0.8, np.random.default_rng(3), method="percentile")
    assert (lo, hi) == _scipy_ci(X, 300, 0.8, np.random.default_rng(3))
    with pytest.raises(ValueError, match="studentized, percentile, BCa"):
        stats.bootstrap_mean_ci(X, method="basic")


def test_bootstrap_mean_ci_missing_tiny_and_flat():
    for empty in ([], [np.nan, np.nan]):
        out = stats.bootstrap_mean_ci(empty)
        assert all(math.isnan(v) for v in out[:3]) and out[3] == "too few prompts"
    m, lo, hi, st = stats.bootstrap_mean_ci([0.4])
    assert m == 0.4 and math.isnan(lo) and math.isnan(hi) and st == "too few prompts"
    # None is a missing score like NaN; two scores are enough for an interval
    m, lo, hi, st = stats.bootstrap_mean_ci([0.1, None, 0.3])
    assert m == pytest.approx(0.2) and st == "ok"
    assert (lo, hi) == _boot_t([0.1, 0.3], 1000, 0.95, np.random.default_rng(0))
    assert stats.bootstrap_mean_ci([0.25, 0.25, 0.25]) == (0.25, 0.25, 0.25, "no variation")  # exact in binary


# ---------------------------------------------------------------- bootstrap_sgs
def _sgs_frame():
    a = [0.10, 0.35, 0.22, 0.41, 0.18]  # SMALL_N = 5 prompts: not small
    b = [0.30, 0.12, 0.27, np.nan, 0.05]  # 4 prompts with a score
    df = pd.DataFrame({"model": ["b"] * 5 + ["a"] * 5, "axis": "cos", "s": b + a})
    df["model"] = pd.Categorical(df["model"], categories=["z", "a", "b"])  # "z" has no rows
    return df, {"a": np.array(a), "b": np.array(b)[~np.isnan(b)]}


def test_bootstrap_sgs_every_column_with_defaults():
    df, vals = _sgs_frame()
    out = stats.bootstrap_sgs(df)
    assert list(out.columns) == ["model", "axis", "sgs", "lo", "hi", "n_prompts", "n_resamples", "level", "status",
                                 "small_n"]
    assert list(out["model"]) == ["a", "b"]  # sorted, the unused category left out
    for r in out.itertuples():
        x = vals[r.model]
        assert r.sgs == pytest.approx(float(np.mean(x)))
        assert (r.lo, r.hi) == _boot_t(x, 1000, 0.95, _rng(0, (r.model, "cos")))
    assert list(out["n_prompts"]) == [5, 4] and list(out["small_n"]) == [False, True]
    assert (out["n_resamples"] == 1000).all() and (out["level"] == 0.95).all() and (out["status"] == "ok").all()


def test_bootstrap_sgs_bca_level_seed_and_empty():
    df, vals = _sgs_frame()
    out = stats.bootstrap_sgs(df, by=("model",), n_resamples=300, level=0.9, seed=2, method="BCa")
    for r in out.itertuples():
        assert (r.lo, r.hi) == _scipy_ci(vals[r.model], 300, 0.9, _rng(2, (r.model,)), method="BCa")
    assert (out["n_resamples"] == 300).all() and (out["level"] == 0.9).all()
    # an object column (None for a missing score) is read as floats
    obj = pd.DataFrame({"model": "m", "axis": "cos", "s": pd.Series([0.1, None, 0.3, 0.6], dtype=object)})
    one = stats.bootstrap_sgs(obj, n_resamples=200)
    assert one.loc[0, "n_prompts"] == 3 and one.loc[0, "sgs"] == pytest.approx(1.0 / 3)
    empty = stats.bootstrap_sgs(df.iloc[:0])
    assert len(empty) == 0 and list(empty.columns) == ["model", "axis", "sgs", "lo", "hi", "n_prompts", "n_resamples",
                                                       "level", "status", "small_n"]


# ---------------------------------------------------------------- Holm / BH / adjust_pvalues / apply_correction
def test_holm_and_bh_edges_by_hand():
    assert stats.holm([0.2]).tolist() == [0.2]
    assert stats.holm([]).shape == (0,) and np.isnan(stats.holm([np.nan])).all()
    h = stats.holm([0.01, None, 0.04])  # None is no test, like NaN: m = 2
    assert h[0] == pytest.approx(0.02) and np.isnan(h[1]) and h[2] == pytest.approx(0.04)
    np.testing.assert_allclose(stats.holm([0.01, 0.01, 0.03]), [0.03, 0.03, 0.03])  # ties: same value
    b = stats.benjamini_hochberg([0.01, None, 0.04])
    assert b[0] == pytest.approx(0.02) and np.isnan(b[1]) and b[2] == pytest.approx(0.04)
    assert stats.benjamini_hochberg([]).shape == (0,)


def test_adjust_pvalues_each_correction():
    p = [0.01, 0.04, 0.03, 0.005]
    raw = stats.adjust_pvalues([0.1, None, 0.3])  # default: none
    assert raw.dtype == np.float64 and raw[0] == 0.1 and np.isnan(raw[1]) and raw[2] == 0.3
    np.testing.assert_allclose(stats.adjust_pvalues(p, "holm"), [0.03, 0.06, 0.06, 0.02])
    np.testing.assert_allclose(stats.adjust_pvalues(p, "bh"), sps.false_discovery_control(p, method="bh"))
    np.testing.assert_allclose(stats.adjust_pvalues(p, "bh"), [0.02, 0.04, 0.04, 0.02])  # m p_(i) / i, step-up
    with pytest.raises(ValueError, match=r"^unknown correction 'BH'; valid: none, holm, bh$"):
        stats.adjust_pvalues(p, "BH")


def test_apply_correction_columns():
    sig = pd.DataFrame({"model": ["a", "b", "c"], "p": [0.001, 0.02, 0.3]})
    raw = stats.apply_correction(sig)
    assert raw["p_adj"].tolist() == [0.001, 0.02, 0.3] and (raw["correction"] == "none").all()
    assert raw["marker"].tolist() == [marker(0.001), marker(0.02), marker(0.3)]
    bh = stats.apply_correction(sig, "bh")
    np.testing.assert_allclose(bh["p_adj"], [0.003, 0.03, 0.3])
    assert (bh["correction"] == "bh").all() and list(sig.columns) == ["model", "p"]  # a copy
    empty = stats.apply_correction(pd.DataFrame(), "holm")  # no test at all: not even a p column
    assert len(empty) == 0 and empty["p_adj"].dtype == np.float64 and list(empty.columns) == ["p_adj", "correction",
                                                                                               "marker"]


# ---------------------------------------------------------------- sample_size_summary
def test_sample_size_summary_every_column():
    curve = pd.DataFrame({"model": ["b", "b", "b", "a", "a", "a"], "axis": "cos", "n": [8, 4, 4, 4, 4, 4],
                          "std_mean": [0.01, 0.04, 0.02, 0.05, 0.07, 0.03],
                          "expected_std": [0.011, 0.041, 0.021, 0.051, 0.071, 0.031]})
    curve["model"] = pd.Categorical(curve["model"], categories=["z", "b", "a"])
    out = sample_size.sample_size_summary(curve)
    assert list(out.columns) == ["model", "axis", "n", "median_std", "max_std", "n_groups", "median_expected"]
    assert list(out["model"]) == ["b", "b", "a"] and list(out["n"]) == [4, 8, 4]  # category order, then N
    np.testing.assert_allclose(out["median_std"], [0.03, 0.01, 0.05])
    np.testing.assert_allclose(out["max_std"], [0.04, 0.01, 0.07])
    assert list(out["n_groups"]) == [2, 1, 3]
    np.testing.assert_allclose(out["median_expected"], [0.031, 0.011, 0.051])


# ---------------------------------------------------------------- reversal_probabilities (and _boot_means)
REV_COLS = ["axis", "model_a", "model_b", "dataset_a", "dataset_b", "diff_a", "diff_b", "observed_flip",
            "p_reversal", "reversal", "n_resamples", "threshold"]


def _frame(axis, dataset, per_model):
    return pd.DataFrame([{"model": m, "dataset": dataset, "axis": axis, "prompt_id": f"{dataset}{i}", "s": v}
                         for m, vals in per_model.items() for i, v in enumerate(vals)])


def _numpy_p(sc, axis, da, db, a, b, n, seed):
    """P(reversal) recomputed: paired bootstrap of each dataset's prompts, sign of SGS_a − SGS_b opposite."""
    def boot(d):
        w = sc[(sc["axis"] == axis) & (sc["dataset"] == d)].pivot_table(index="prompt_id", columns="model", values="s")
        x = w[[a, b]].to_numpy(dtype=float)
        idx = _rng(seed, (axis, d)).integers(0, len(x), size=(n, len(x)))
        m = x[idx].mean(axis=1)
        return np.sign(m[:, 0] - m[:, 1])
    return float(np.mean(boot(da) * boot(db) < 0))


def test_reversal_probabilities_defaults_against_numpy():
    rng = np.random.default_rng(5)
    sc = pd.concat([_frame("cos", "A", {"a": 0.30 + rng.normal(0, 0.05, 12), "b": 0.31 + rng.normal(0, 0.05, 12)}),
                    _frame("cos", "B", {"a": 0.50 + rng.normal(0, 0.05, 12), "b": 0.20 + rng.normal(0, 0.05, 12)})])
    out = stats.reversal_probabilities(sc)  # 1000 resamples, seed 0, threshold 0.95
    assert list(out.columns) == REV_COLS and len(out) == 1
    r = out.iloc[0]
    p = _numpy_p(sc, "cos", "A", "B", "a", "b", 1000, 0)
    assert 0 < p < 1 and r["p_reversal"] == pytest.approx(p)
    assert (r["n_resamples"], r["threshold"], r["reversal"]) == (1000, 0.95, False)
    mean = sc.groupby(["dataset", "model"])["s"].mean()
    assert r["diff_a"] == pytest.approx(mean["A", "a"] - mean["A", "b"])
    assert r["diff_b"] == pytest.approx(mean["B", "a"] - mean["B", "b"])
    assert r["observed_flip"] == (r["diff_a"] * r["diff_b"] < 0)


def test_reversal_probabilities_ties_threshold_and_axis_order():
    low, high = [0.10, 0.12, 0.11, 0.13], [0.40, 0.42, 0.41, 0.43]
    sc = pd.concat([
        _frame("mr", "P", {"a": low, "b": high}),  # a below b on every resample
        _frame("mr", "Q", {"a": high, "b": low}),  # a above b on every resample: a sure reversal
        _frame("mr", "T", {"a": low, "b": low}),  # a tie on every resample: no order, never a reversal
        _frame("bleu", "P", {"a": low, "b": high}),  # one dataset only: no pair of datasets
        _frame("cos", "P", {"a": low, "b": high}), _frame("cos", "Q", {"a": high, "b": low}),
    ])
    out = stats.reversal_probabilities(sc, n_resamples=50, seed=1, threshold=1.0)
    assert list(out["axis"]) == ["cos", "mr", "mr", "mr"]  # sorted
    o = out[out["axis"] == "mr"].set_index(["dataset_a", "dataset_b"])
    assert (o.loc[("P", "Q"), "p_reversal"], o.loc[("P", "Q"), "reversal"]) == (1.0, True)  # P >= threshold
    assert bool(o.loc[("P", "Q"), "observed_flip"])
    assert o.loc[("P", "Q"), "diff_a"] == pytest.approx(-0.3) and o.loc[("P", "Q"), "diff_b"] == pytest.approx(0.3)
    for pair in (("P", "T"), ("Q", "T")):
        assert o.loc[pair, "diff_b"] == 0.0 and o.loc[pair, "p_reversal"] == 0.0
        assert not o.loc[pair, "observed_flip"] and not o.loc[pair, "reversal"]
    assert not o.loc[("P", "T"), "observed_flip"]
    assert (out["model_a"] == "a").all() and (out["model_b"] == "b").all()
    assert (out["n_resamples"] == 50).all() and (out["threshold"] == 1.0).all()
    # two datasets only (and the axis sorted first has one): still a pair
    two = stats.reversal_probabilities(sc[sc["dataset"] != "T"], n_resamples=20)
    assert list(two["axis"]) == ["cos", "mr"] and list(two["dataset_b"]) == ["Q", "Q"]


def test_reversal_probabilities_model_missing_on_a_dataset():
    rng = np.random.default_rng(2)
    sc = pd.concat([
        _frame("cos", "A", {m: mu + rng.normal(0, 0.02, 6) for m, mu in (("a", 0.2), ("b", 0.3), ("c", 0.4))}),
        _frame("cos", "B", {m: mu + rng.normal(0, 0.02, 6) for m, mu in (("b", 0.5), ("c", 0.1))}),  # no "a"
        _frame("cos", "C", {m: mu + rng.normal(0, 0.02, 6) for m, mu in (("a", 0.4), ("b", 0.3), ("c", 0.2))}),
    ])
    sc["s"] = sc["s"].astype(object)  # read as floats
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the empty model column of B warns nowhere
        out = stats.reversal_probabilities(sc, n_resamples=40, seed=0)
    got = list(zip(out["model_a"], out["model_b"], out["dataset_a"], out["dataset_b"]))
    assert got == [("a", "b", "A", "C"), ("a", "c", "A", "C"),
                   ("b", "c", "A", "B"), ("b", "c", "A", "C"), ("b", "c", "B", "C")]
    mean = sc.groupby(["dataset", "model"])["s"].mean()
    for r in out.itertuples():
        assert r.diff_a == pytest.approx(mean[r.dataset_a, r.model_a] - mean[r.dataset_a, r.model_b])
        assert r.diff_b == pytest.approx(mean[r.dataset_b, r.model_a] - mean[r.dataset_b, r.model_b])
        assert r.p_reversal == pytest.approx(_numpy_p(sc, "cos", r.dataset_a, r.dataset_b, r.model_a, r.model_b, 40, 0))


def test_reversal_probabilities_nothing_to_compare():
    one_model = _frame("cos", "A", {"a": [0.1, 0.2]})
    out = stats.reversal_probabilities(one_model, n_resamples=10)
    assert len(out) == 0 and list(out.columns) == REV_COLS


# ---------------------------------------------------------------- rms_scores
def test_rms_scores_default_column_and_missing_elsewhere():
    d = pd.DataFrame({"model": "m", "dataset": "x", "prompt_id": ["p", "p", "q", "q"],
                      "delta": [1.0, -3.0, 5.0, np.nan], "note": [None, "x", None, "y"]})
    out = stats.rms_scores(d, 2.0)  # value="delta"; NaN in another column keeps the row
    assert list(out.columns) == ["model", "dataset", "prompt_id", "s", "n_variants"]
    np.testing.assert_allclose(out["s"], [math.sqrt((0.25 + 1.0) / 2), 1.0])
    assert out["n_variants"].tolist() == [2, 1]


# ---------------------------------------------------------------- sample_size_std, n_for_halfwidth: edges
CELL = {"family": "surface_noise", "subtype": "typo", "strength": 1.0, "position": "GLOBAL"}


def _cells(per_model, dtype=None):
    df = pd.DataFrame([{"model": m, "axis": "cos", **CELL, "prompt_id": f"p{i}", "s": v}
                       for m, vals in per_model.items() for i, v in enumerate(vals)])
    if dtype is not None:
        df["s"] = df["s"].astype(dtype)
    return df


def test_sample_size_std_group_order_missing_scores_and_sizes():
    six = [0.1, 0.5, 0.2, 0.6, 0.3, 0.4]
    df = _cells({"c": [0.2, None], "b": six, "a": [np.nan, np.nan]}, dtype=object)  # None / NaN: no score
    df["model"] = pd.Categorical(df["model"], categories=["z", "a", "b", "c"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = sample_size.sample_size_std(df, sizes=(8, 16, 2), n_repeats=2, seed=4)
        one = sample_size.sample_size_std(df, sizes=(2,), n_repeats=1, seed=4)  # one draw: NaN std, no warning
    assert list(out["model"]) == ["b", "b", "c"]  # sorted; "a" has no score at all: no row
    b = out[out["model"] == "b"]
    assert list(b["n_requested"]) == [8, 2] and list(b["n"]) == [6, 2]  # 16 caps to 6 again: kept once
    x = np.array(six)
    perm = np.argsort(_rng(4, ("b", "cos", *CELL.values())).random((2, 6)), axis=1)
    assert b["std_mean"].iloc[1] == pytest.approx(np.std(x[perm[:, :2]].mean(axis=1), ddof=1))  # 2 draws: a std
    assert b["expected_std"].iloc[1] == pytest.approx(np.std(x) / math.sqrt(2) * math.sqrt(4 / 5))
    c = out[out["model"] == "c"].iloc[0]
    assert (c["n"], c["n_available"], c["std_mean"], c["expected_std"]) == (1, 1, 0.0, 0.0)
    assert one["std_mean"].isna().tolist() == [True, False]  # "b" at N = 2 of 6; "c" drawn whole (0)
    two = sample_size.sample_size_std(_cells({"m": [0.2, 0.6]}), sizes=(1, 2), n_repeats=50)
    assert two["expected_std"].tolist() == [pytest.approx(0.2), 0.0]  # σ·√((M−N)/(M−1)) at N = 1 of 2 is σ
    default = sample_size.sample_size_std(_cells({"m": six}), sizes=(2,))  # 500 repeats, seed 0
    perm = np.argsort(_rng(0, ("m", "cos", *CELL.values())).random((500, 6)), axis=1)
    assert default["n_repeats"].tolist() == [500]
    assert default["std_mean"].iloc[0] == pytest.approx(np.std(x[perm[:, :2]].mean(axis=1), ddof=1))


def test_n_for_halfwidth_missing_scores_no_warning():
    sc = pd.DataFrame({"model": ["a", "a", "b", "c", "c", "c"], "axis": "cos",
                       "s": pd.Series([None, np.nan, 0.4, 0.1, None, 0.3], dtype=object)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = sample_size.n_for_halfwidth(sc, halfwidth=0.1).set_index("model")
    assert out["n_now"].tolist() == [0, 1, 2] and out["status"].tolist() == ["too few prompts"] * 2 + ["ok"]
    for m in ("a", "b"):
        assert math.isnan(out.loc[m, "sigma"]) and math.isnan(out.loc[m, "halfwidth_now"])
        assert pd.isna(out.loc[m, "n_needed"])
    sd = float(np.std([0.1, 0.3], ddof=1))
    assert out.loc["c", "n_needed"] == t_needed(sd, 0.1, 0.95)
    default = sample_size.n_for_halfwidth(sc)  # h = 0.02 at 95 %
    assert default["halfwidth"].tolist() == [0.02] * 3 and default["level"].tolist() == [0.95] * 3
    assert default["n_needed"].iloc[2] == t_needed(sd, 0.02, 0.95)


# ---------------------------------------------------------------- data_driven_normalizers
def test_data_driven_normalizers_quantile_below_one_is_the_scale():
    q = pd.DataFrame({"axis": ["cos"], "n": [4], "q": [0.9], "q_abs": [0.3], "max_abs": [0.8]})
    out = stats.data_driven_normalizers(q, {"cos": 2.0})
    assert (out.loc[0, "r_data"], out.loc[0, "source"], out.loc[0, "r_paper"]) == (0.3, "90% quantile of |Δ|", 2.0)
