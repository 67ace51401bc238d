"""Model against model (sago_engine.pairwise): the signed-rank test and the paired bootstrap against independent
computations (sign flips enumerated by hand, Pratt's normal approximation by hand, numpy's resampling)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from sago_engine import pairwise
from sago_engine.stats import holm


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
    assert t["method"] == "exact" and t["r_plus"] == obs
    assert t["p"] == pytest.approx(_two_sided(null, obs), abs=1e-12)
    assert t["p"] == pytest.approx(sps.wilcoxon(d).pvalue, abs=1e-12)


def test_small_sample_with_zeros_and_ties_enumerates_sign_flips():
    d = np.array([0.0, 0.0, 0.2, 0.2, -0.1, 0.35, 0.0, 0.5, 0.2, -0.05, 0.4])  # 3 zeros, a tie at 0.2
    t = pairwise.signed_rank_test(d)
    obs, null = _pratt_rplus_null(d)
    assert t["method"] == "exact (all 2^n sign flips)" and t["n_zero"] == 3
    assert t["p"] == pytest.approx(_two_sided(null, obs), abs=1e-12)


def test_larger_sample_with_zeros_uses_pratts_normal_approximation():
    rng = np.random.default_rng(7)
    d = np.round(rng.normal(0.05, 0.1, 40), 2)  # rounding makes ties
    d[:9] = 0.0
    t = pairwise.signed_rank_test(d)
    # Pratt's approximation by hand (Cureton 1967): zeros ranked, left out of W+, mean and variance adjusted
    n, z0 = len(d), int(np.sum(d == 0))
    ranks = sps.rankdata(np.abs(d))
    w = ranks[d > 0].sum()
    mean = n * (n + 1) / 4 - z0 * (z0 + 1) / 4
    _, counts = np.unique(np.abs(d[d != 0]), return_counts=True)
    var = (n * (n + 1) * (2 * n + 1) - z0 * (z0 + 1) * (2 * z0 + 1)) / 24 - np.sum(counts ** 3 - counts) / 48
    p = 2 * sps.norm.sf(abs(w - mean) / np.sqrt(var))
    assert t["method"] == "normal approximation" and t["n_zero"] == z0 >= 9
    assert t["p"] == pytest.approx(p, rel=1e-9)
    assert t["p"] == pytest.approx(sps.wilcoxon(d, zero_method="pratt").pvalue, rel=1e-9)


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
    means = d[rng.integers(0, len(d), (500, len(d)))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    assert (row["ci_low"], row["ci_high"]) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))
    assert row["p"] == pytest.approx(sps.wilcoxon(d, zero_method="pratt").pvalue, rel=1e-9)
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
    assert r.sentence.startswith("low is more stable than ") and "on Δ-BLEU (p" in r.sentence
    t = pairwise.paired_table(sc, n_resamples=200)
    twin = t[(t["model_a"] == "high") & (t["model_b"] == "twin")].iloc[0]
    if twin["verdict"] == "none":
        s = pairwise.pair_sentence(twin, first="twin")
        assert s.startswith("twin and high are not distinguishable on Δ-BLEU (p = ")
    flat = sc.assign(s=0.4)
    s = pairwise.leader_sentences(flat, n_resamples=100)["sentence"].iloc[0]
    assert "not distinguishable" in s and "p = 1" in s


def test_a_pair_the_test_does_not_call_but_whose_ci_excludes_zero_says_why():
    """The signed-rank verdict and the bootstrap CI of the mean can disagree: the sentence says both."""
    from sago_engine.pairwise import VERDICT_NONE, pair_sentence

    row = {"model_a": "a", "model_b": "b", "axis_label": "Δ-BERT", "dataset": None, "verdict": VERDICT_NONE,
           "sgs_a": 0.38, "sgs_b": 0.43, "diff": -0.052, "ci_low": -0.097, "ci_high": -0.009, "p_adj": 0.29,
           "correction": "holm", "n_prompts": 96, "better": None}
    s = pair_sentence(row)
    assert s.startswith("a and b are not distinguishable on Δ-BERT by the signed-rank test (p = 0.29")
    assert "bootstrap CI of the mean difference excludes 0" in s and "[95% CI −0.0970, −0.00900]" in s
    row.update(ci_low=-0.09, ci_high=0.01)
    assert "excludes 0" not in pair_sentence(row)
