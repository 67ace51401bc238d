"""Model against model (sago_engine.scoring.pairwise): the signed-rank test and the paired bootstrap against independent
computations (sign flips enumerated by hand, Pratt's normal approximation by hand, numpy's resampling)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from sago_engine.scoring import pairwise, signflip
from sago_engine.scoring.stats import holm


def _two_sided(null: np.ndarray, obs: float) -> float:
    """Two-sided p of ``obs`` under an enumerated null distribution: 2 · min(P(T ≤ t), P(T ≥ t)), at most 1."""
    tol = 1e-9
    return float(min(1.0, 2 * min(np.mean(null <= obs + tol), np.mean(null >= obs - tol))))


def _pratt_rplus_null(d: np.ndarray) -> tuple[float, np.ndarray]:
    """W+ of ``d`` (Pratt: zeros ranked, then left out) and W+ under every sign assignment of the non-zero d."""
    ranks = sps.rankdata(np.abs(d))
    nz = ranks[d != 0]
    obs = float(ranks[d > 0].sum())
    null = np.array([sum(r for r, s in zip(nz, signs) if s) for signs in itertools.product((0, 1), repeat=len(nz))])
    return obs, null


def test_exact_p_equals_all_sign_flips_without_ties():
    d = np.array([0.31, -0.12, 0.45, 0.08, -0.27, 0.52, 0.19, 0.66, -0.04, 0.38])
    t = pairwise.signed_rank_test(d)
    obs, null = _pratt_rplus_null(d)
    assert t["method"] == "exact (all 2^10 sign flips)" and t["r_plus"] == obs
    assert t["p"] == pytest.approx(_two_sided(null, obs), abs=1e-12)
    assert t["p"] == pytest.approx(sps.wilcoxon(d).pvalue, abs=1e-12)


def test_small_sample_with_zeros_and_ties_enumerates_sign_flips():
    d = np.array([0.0, 0.0, 0.2, 0.2, -0.1, 0.35, 0.0, 0.5, 0.2, -0.05, 0.4])  # 3 zeros, a tie at 0.2
    t = pairwise.signed_rank_test(d)
    obs, null = _pratt_rplus_null(d)
    assert t["method"] == "exact (all 2^8 sign flips)" and t["n_zero"] == 3
    assert t["p"] == pytest.approx(_two_sided(null, obs), abs=1e-12)


#: Δ-MR, alpaca, gemma-3-270m − qwen2.5-coder-0.5b-instruct in the demo store (16 prompts, 3 zeros, ties).
DEMO_MR_ALPACA = np.array([0.1149, 0.3922, 0.1149, 0.0, 0.6202, 0.0, 0.3922, 0.2774, 0.1625, 0.0, 0.1149, 0.5547,
                           0.1625, 0.2774, 0.203, 0.1149])


def test_signed_rank_at_n16_with_zeros_and_ties_is_exact_pratt():
    """The normal approximation said p = 0.00071 here; every positive: W+ is the largest of 2^13 sign sums."""
    d = DEMO_MR_ALPACA
    t = pairwise.signed_rank_test(d)
    obs, null = _pratt_rplus_null(d)
    assert t["n_zero"] == 3 and t["r_minus"] == 0 and t["method"] == "exact (all 2^13 sign flips)"
    assert t["p"] == pytest.approx(_two_sided(null, obs), abs=1e-15) == 2 / 2 ** 13
    ranks = sps.rankdata(np.abs(d))  # sign flips keep |d|: W+ = Σ rank · [d > 0]
    perm = sps.permutation_test((d,), lambda x, axis: np.sum(ranks * (x > 0), axis=axis), permutation_type="samples",
                                n_resamples=np.inf).pvalue
    assert t["p"] == pytest.approx(perm, abs=1e-15)


def test_signed_rank_null_at_n40_with_zeros_is_exact():
    """28 non-zero differences: the law of 2·W+ from two enumerated halves, convolved (independent of signflip)."""
    rng = np.random.default_rng(7)
    d = np.round(rng.normal(0.05, 0.1, 40), 2)  # rounding makes ties
    d[:9] = 0.0
    t = pairwise.signed_rank_test(d)
    r2 = np.rint(2 * sps.rankdata(np.abs(d))[d != 0]).astype(int)
    halves = []
    for part in (r2[:15], r2[15:]):
        sums = np.array(list(itertools.product((0, 1), repeat=len(part)))) @ part
        halves.append(np.bincount(sums) / len(sums))
    law = np.convolve(*halves)
    w2 = int(round(2 * t["r_plus"]))
    p = min(1.0, 2 * min(law[: w2 + 1].sum(), law[w2:].sum()))
    n_zero = int(np.sum(d == 0))
    assert t["method"] == f"exact (all 2^{40 - n_zero} sign flips)" and t["n_zero"] == n_zero >= 9
    assert t["p"] == pytest.approx(p, rel=1e-9)


def _mean_flip_p(d: np.ndarray) -> float:
    """P(|Σ ±d| ≥ |Σ d|) over every sign assignment, enumerated with itertools."""
    obs = abs(d.sum())
    sums = np.array([abs(np.dot(s, d)) for s in itertools.product((-1.0, 1.0), repeat=len(d))])
    return float(np.mean(sums >= obs - 1e-12))


def test_mean_sign_flip_test_is_exact_and_matches_scipy():
    d = signflip.paired_differences(DEMO_MR_ALPACA - np.array([0.0] * 15 + [0.3]), np.zeros(16))
    t = pairwise.paired_test(d, "mean")
    assert t["method"] == "exact (all 2^13 sign flips)" and t["mc_se"] == 0
    assert t["p"] == pytest.approx(_mean_flip_p(d[d != 0]), abs=1e-15)
    perm = sps.permutation_test((d,), lambda x, axis: np.sum(x, axis=axis), permutation_type="samples",
                                n_resamples=np.inf).pvalue
    assert t["p"] == pytest.approx(perm, abs=1e-12)


def test_mean_sign_flip_test_above_the_exact_limit_is_monte_carlo_with_its_error(monkeypatch):
    d = np.array([0.21, -0.05, 0.33, 0.12, -0.18, 0.07, 0.26, -0.11, 0.15, 0.04, 0.3, -0.09, 0.22, 0.01])
    exact = _mean_flip_p(d)
    monkeypatch.setattr(signflip, "EXACT_MEAN_MAX_N", 10)
    t = pairwise.paired_test(d, "mean", np.random.default_rng(5))
    assert t["method"].startswith("Monte Carlo (100,000 sign flips, ±") and 0 < t["mc_se"] < 0.002
    assert abs(t["p"] - exact) < 4 * t["mc_se"]
    with pytest.raises(ValueError, match="seeded generator"):
        pairwise.paired_test(d, "mean")


def _sums_in_two_orders(n_prompts: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-prompt means of the same 13 values summed forwards and backwards (identical data, two orders)."""
    rng = np.random.default_rng(seed)
    vals = rng.uniform(0, 1, (n_prompts, 13)) ** 3
    fwd = np.array([sum(v) / 13 for v in vals])
    bwd = np.array([sum(v[::-1]) / 13 for v in vals])
    return vals, fwd, bwd


@pytest.mark.parametrize("test", sorted(pairwise.TESTS))
def test_identical_scores_summed_in_another_order_are_no_difference(test):
    _, fwd, bwd = _sums_in_two_orders(16, 11)
    assert (fwd != bwd).any()  # the float noise this test is about
    t = pairwise.paired_test(signflip.paired_differences(fwd, bwd), test)
    assert (t["n_zero"], t["p"], t["method"]) == (16, 1.0, "no difference")
    rows = [{"model": m, "dataset": "d", "prompt_id": f"d:{i}", "axis": "bleu", "s": float(v)}
            for m, col in (("one", fwd), ("two", bwd)) for i, v in enumerate(col)]
    row = pairwise.paired_table(pd.DataFrame(rows), test=test).iloc[0]
    assert row["n_zero"] == 16 and row["p"] == 1.0 and row["verdict"] == "none"


@pytest.mark.parametrize("test", sorted(pairwise.TESTS))
def test_a_constant_shift_written_in_two_orders_is_one_tie(test):
    vals, fwd, _ = _sums_in_two_orders(16, 12)
    shifted = np.array([sum((v + 0.05)[::-1]) / 13 for v in vals])  # each prompt exactly 0.05 higher, other order
    d = signflip.paired_differences(shifted, fwd)
    assert len(np.unique(d)) == 1
    t = pairwise.paired_test(d, test)
    assert t["p"] == pytest.approx(2 / 2 ** 16, abs=1e-15) and t["r_minus"] == 0


def test_degenerate_differences_have_defined_p():
    assert pairwise.signed_rank_test(np.zeros(12))["p"] == 1.0
    assert pairwise.signed_rank_test(np.zeros(12))["method"] == "no difference"
    one = pairwise.signed_rank_test([0.3])
    assert np.isnan(one["p"]) and one["method"] == "too few prompts"


# ---------------------------------------------------------------- the table
def _scores() -> pd.DataFrame:
    """Three models on two datasets × 15 prompts: "low" clearly below "high"; "twin" is "high" plus noise."""
    rng = np.random.default_rng(3)
    rows = []
    for ds in ("alpaca", "nq_open"):
        for i in range(15):
            base = rng.uniform(0.2, 0.8)
            vals = {"low": base - 0.15 - rng.uniform(0, 0.05), "high": base, "twin": base + rng.normal(0, 0.03)}
            if i == 0:
                vals["twin"] = base  # a zero difference
            for m, v in vals.items():
                if m == "twin" and ds == "nq_open" and i == 14:
                    continue  # a prompt "twin" has no score for: not shared
                rows.append({"model": m, "dataset": ds, "prompt_id": f"{ds}:{i}", "axis": "bleu", "s": float(v)})
    return pd.DataFrame(rows)


def _mean_flip_p_mc(d: np.ndarray, b: int = 200_000) -> float:
    """Monte Carlo P(|Σ ±d| ≥ |Σ d|) with numpy's own draws (an independent estimate, s.e. ≤ 0.0012)."""
    signs = np.random.default_rng(99).choice([-1.0, 1.0], size=(b, len(d)))
    return float(np.mean(np.abs(signs @ d) >= abs(d.sum()) - 1e-12))


def test_paired_table_matches_numpy_bootstrap_and_scipy():
    sc = _scores()
    t = pairwise.paired_table(sc, correction="holm", n_resamples=500, seed=4)
    assert list(t[["model_a", "model_b"]].itertuples(index=False, name=None)) == [
        ("high", "low"), ("high", "twin"), ("low", "twin")]
    row = t[(t["model_a"] == "high") & (t["model_b"] == "twin")].iloc[0]
    w = sc.pivot_table(index=["dataset", "prompt_id"], columns="model", values="s").dropna(subset=["high", "twin"])
    d = (w["high"] - w["twin"]).to_numpy()
    assert row["n_prompts"] == 29 == len(d) and row["n_zero"] == 2  # prompt 0 of each dataset
    assert row["diff"] == pytest.approx(d.mean(), abs=1e-12)
    rng = np.random.default_rng(pairwise.pair_seed(4, "bleu", None, "high", "twin"))
    xb = d[rng.integers(0, len(d), (500, len(d)))]  # bootstrap-t (Efron & Tibshirani 1993, §12.5)
    se = d.std(ddof=1) / np.sqrt(len(d))
    tb = (xb.mean(axis=1) - d.mean()) / (xb.std(axis=1, ddof=1) / np.sqrt(len(d)))
    lo, hi = d.mean() - np.quantile(tb, 0.975) * se, d.mean() - np.quantile(tb, 0.025) * se
    assert (row["ci_low"], row["ci_high"]) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))
    flips = pairwise.paired_test(d, "mean", np.random.default_rng([pairwise.pair_seed(4, "bleu", None, "high", "twin"), 1]))
    assert row["p"] == flips["p"] and row["method"] == "exact (all 2^27 sign flips)" and row["mc_se"] == 0
    assert row["test"] == pairwise.TESTS["mean"] and abs(row["p"] - _mean_flip_p_mc(d)) < 0.006  # 5 MC s.e.
    ranked = pairwise.paired_table(sc, correction="holm", n_resamples=500, seed=4, test="signed_rank")
    r2 = ranked[(ranked["model_a"] == "high") & (ranked["model_b"] == "twin")].iloc[0]
    assert r2["method"] == "exact (all 2^27 sign flips)" and r2["test"] == pairwise.TESTS["signed_rank"]
    assert r2["p"] == pytest.approx(sps.wilcoxon(d, zero_method="pratt").pvalue, abs=0.02)  # normal approx. near it
    np.testing.assert_allclose(t["p_adj"], holm(t["p"]), rtol=0, atol=1e-15)
    clear = t[(t["model_a"] == "high") & (t["model_b"] == "low")].iloc[0]
    assert clear["verdict"] == "b" and clear["better"] == "low" and clear["diff"] > 0 and clear["marker"] == "†"


def test_a_pairs_interval_does_not_depend_on_other_models():
    sc = _scores()
    full = pairwise.paired_table(sc, n_resamples=300)
    two = pairwise.paired_table(sc[sc["model"] != "twin"], n_resamples=300)
    a = full[(full["model_a"] == "high") & (full["model_b"] == "low")].iloc[0]
    b = two.iloc[0]
    assert (a["ci_low"], a["ci_high"], a["p"]) == (b["ci_low"], b["ci_high"], b["p"])


def test_per_dataset_family_and_matrix_cells():
    t = pairwise.paired_table(_scores(), per_dataset=True, correction="bh", n_resamples=200)
    assert len(t) == 6 and set(t["dataset"]) == {"alpaca", "nq_open"}
    np.testing.assert_allclose(t["p_adj"], sps.false_discovery_control(t["p"], method="bh"), atol=1e-15)
    cells = pairwise.matrix_cells(t, "bleu", "alpaca")
    assert len(cells) == 6  # 3 models → 6 ordered pairs, no diagonal
    fw = cells.set_index(["row", "col"])
    assert fw.loc[("low", "high"), "diff"] == -fw.loc[("high", "low"), "diff"]
    assert fw.loc[("low", "high"), "row_better"] and not fw.loc[("high", "low"), "row_better"]
    assert "p " in fw.loc[("low", "high"), "label"] and "−" in fw.loc[("low", "high"), "label"]


def test_sentences_name_the_more_stable_model_or_say_not_distinguishable():
    sc = _scores()
    lead = pairwise.leader_sentences(sc, n_resamples=200)
    [r] = lead.itertuples(index=False)
    assert r.leader == "low" and r.verdict in ("a", "b")
    assert r.sentence.startswith("low is more stable than ") and "on Δ-BLEU (paired sign-flip permutation test on " \
        "the mean difference: p" in r.sentence
    t = pairwise.paired_table(sc, n_resamples=200)
    twin = t[(t["model_a"] == "high") & (t["model_b"] == "twin")].iloc[0]
    if twin["verdict"] == "none":
        s = pairwise.pair_sentence(twin, first="twin")
        assert s.startswith("twin and high are not distinguishable on Δ-BLEU (paired sign-flip permutation test on the "
                            "mean difference: p = ")
    flat = sc.assign(s=0.4)
    s = pairwise.leader_sentences(flat, n_resamples=100)["sentence"].iloc[0]
    assert "not distinguishable" in s and "p = 1" in s


def test_a_pair_the_test_does_not_call_but_whose_ci_excludes_zero_says_why():
    """The signed-rank verdict and the bootstrap CI of the mean can disagree: the sentence says both."""
    from sago_engine.scoring.pairwise import VERDICT_NONE, pair_sentence

    row = {"model_a": "a", "model_b": "b", "axis_label": "Δ-BERT", "dataset": None, "verdict": VERDICT_NONE,
           "sgs_a": 0.38, "sgs_b": 0.43, "diff": -0.052, "ci_low": -0.097, "ci_high": -0.009, "p_adj": 0.29,
           "correction": "holm", "n_prompts": 96, "better": None, "test": pairwise.TESTS["signed_rank"]}
    s = pair_sentence(row)
    assert s.startswith("a and b are not distinguishable on Δ-BERT by the Wilcoxon signed-rank test (Pratt's zeros) "
                        "(p = 0.29")
    mean = pair_sentence({**row, "test": pairwise.TESTS["mean"]})
    assert "by the paired sign-flip permutation test on the mean difference (p = 0.29" in mean and "borderline" in mean
    assert "bootstrap CI of the mean difference excludes 0" in s and "[95% CI −0.0970, −0.00900]" in s
    row.update(ci_low=-0.09, ci_high=0.01)
    assert "excludes 0" not in pair_sentence(row)


def test_a_borderline_ci_call_is_said_so():
    row = {"model_a": "a", "model_b": "b", "axis_label": "Δ-Prob", "dataset": "truthfulqa", "verdict": "none",
           "sgs_a": 0.061, "sgs_b": 0.043, "diff": 0.018, "ci_low": 0.00016, "ci_high": 0.033, "p_adj": 1.0,
           "correction": "holm", "n_prompts": 16, "better": None, "test": pairwise.TESTS["mean"], "ci_call": "borderline"}
    s = pairwise.pair_sentence(row)
    assert "excludes 0 is borderline" in s and "though the bootstrap CI" not in s
    assert "though the bootstrap CI" in pairwise.pair_sentence({**row, "ci_call": "excludes 0"})


def test_the_paired_test_choice_lists_the_verdicts_that_differ():
    """Nine small positive differences and one large negative: the ranks call it, the mean is near 0."""
    d = [0.02, 0.03, 0.025, 0.04, 0.035, 0.03, 0.045, 0.05, 0.02, -0.35] * 2
    rows = [{"model": m, "dataset": "ds", "prompt_id": f"ds:{i}", "axis": "bleu", "s": 0.5 + (x if m == "a" else 0.0)}
            for i, x in enumerate(d) for m in ("a", "b")]
    t = pairwise.tests_compared(pd.DataFrame(rows), correction="holm")
    assert list(t["scope"]) == ["all datasets", "per dataset"]
    assert list(t["verdict_mean"]) == ["none"] * 2 and list(t["verdict_signed_rank"]) == ["mixed"] * 2
    assert (t["p_adj_signed_rank"] < 0.05).all() and (t["p_adj_mean"] > 0.5).all()
    same = pairwise.tests_compared(pd.DataFrame(rows).assign(s=lambda x: x["s"] + (x["model"] == "a") * 0.5),
                                   correction="holm")
    assert same.empty and "verdict_mean" in same.columns
