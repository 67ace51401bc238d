"""Statistics beyond the paper (sago_engine.scoring.stats): each statistic against a direct scipy / numpy computation."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from streamlit.testing.v1 import AppTest

from sago_engine.scoring import sample_size, stats
from sago_engine.scoring.scores import marker, significance
from sago_engine.store import open_store
from sago_engine.views import report
from tests.support.factories import make_store

ROOT = Path(__file__).resolve().parents[3]
FIXED = np.array([0.12, 0.31, 0.05, 0.22, 0.18, 0.40, 0.09, 0.27, 0.15, 0.33, 0.02, 0.21])


def t_needed(sd: float, h: float, level: float) -> int:
    """Fewest n ≥ 2 with t_(1−α/2, n−1)·sd/√n ≤ h, counted up from 2."""
    n = 2
    while sps.t.ppf(1 - (1 - level) / 2, n - 1) * sd / math.sqrt(n) > h:
        n += 1
    return n


# ---------------------------------------------------------------- 1. bootstrap
def test_bootstrap_ci_equals_scipy_and_is_deterministic():
    rng = stats.group_rng(7, ("m", "bleu"))
    m, lo, hi, st = stats.bootstrap_mean_ci(FIXED, 2000, 0.95, rng, method="percentile")
    ref = sps.bootstrap((FIXED,), np.mean, n_resamples=2000, method="percentile", vectorized=True,
                        random_state=np.random.default_rng([7, __import__("zlib").crc32(repr(("m", "bleu")).encode())]))
    assert (lo, hi) == (ref.confidence_interval.low, ref.confidence_interval.high) and st == "ok"
    assert m == pytest.approx(FIXED.mean()) and lo < m < hi
    df = pd.DataFrame({"model": "m", "axis": "bleu", "s": FIXED})
    a = stats.bootstrap_sgs(df, seed=7, n_resamples=500)
    b = stats.bootstrap_sgs(df, seed=7, n_resamples=500)
    c = stats.bootstrap_sgs(df, seed=8, n_resamples=500)
    pd.testing.assert_frame_equal(a, b)
    assert a.loc[0, "lo"] != c.loc[0, "lo"]
    # report.bootstrap_ci is the same bootstrap (unified), and BCa is available
    pd.testing.assert_frame_equal(report.bootstrap_ci(df, n_resamples=500, seed=7), a)
    bca = stats.bootstrap_sgs(df, seed=7, n_resamples=500, method="BCa")
    assert bca.loc[0, "lo"] < FIXED.mean() < bca.loc[0, "hi"]


def test_bootstrap_degenerate_no_variation_and_tiny_n():
    df = pd.DataFrame({"model": ["z"] * 6 + ["t"] * 3 + ["one"], "axis": "mr",
                       "s": [0.0] * 6 + [0.1, 0.2, 0.3] + [0.5]})
    out = stats.bootstrap_sgs(df, by=("model",)).set_index("model")
    assert out.loc["z", "status"] == "no variation" and out.loc["z", ["lo", "hi", "sgs"]].tolist() == [0, 0, 0]
    assert out.loc["t", "small_n"] and out.loc["t", "status"] == "ok" and not out.loc["z", "small_n"]
    assert out.loc["one", "status"] == "too few prompts" and np.isnan(out.loc["one", "lo"])
    assert report.ci_cell(0.0, 0.0, 0.0, "", "no variation") == "0.000 (no variation)"
    need = sample_size.n_for_halfwidth(df, 0.05, by=("model",)).set_index("model")
    assert need.loc["z", "n_needed"] == 2 and need.loc["z", "status"] == "no variation"


def _studentized_by_hand(x: np.ndarray, b: int, rng: np.random.Generator) -> tuple[float, float]:
    """Bootstrap-t 95 % interval of the mean (Efron & Tibshirani 1993, §12.5), one resample at a time."""
    n, m = len(x), x.mean()
    se = x.std(ddof=1) / math.sqrt(n)
    t = []
    for _ in range(b):
        xb = x[rng.integers(0, n, size=n)]
        sb = xb.std(ddof=1) / math.sqrt(n)
        t.append((xb.mean() - m) / sb if sb > 0 else (0.0 if xb.mean() == m else math.copysign(math.inf, xb.mean() - m)))
    q_hi, q_lo = np.quantile(t, [0.975, 0.025])
    return max(m - q_hi * se, x.min()), min(m - q_lo * se, x.max())


def test_studentized_bootstrap_by_hand():
    m, lo, hi, st = stats.bootstrap_mean_ci(FIXED, 400, 0.95, np.random.default_rng(3))
    want = _studentized_by_hand(FIXED, 400, np.random.default_rng(3))
    assert (lo, hi) == pytest.approx(want, abs=1e-12) and st == "ok" and lo < m < hi


#: Coverage simulation: scores like the store's per-prompt s (40 % exact zeros, the rest Beta(0.5, 3),
#: mean 0.6 · 0.5/3.5 known), 600 datasets per n. Band: 95 % ± 2.5 points (3 binomial s.e. at 600).
COVERAGE_BAND = (0.925, 0.975)


def _coverage(n: int, k: int = 600, b: int = 1000) -> float:
    rng = np.random.default_rng([2026, n])
    x = rng.beta(0.5, 3, (k, n)) * (rng.random((k, n)) >= 0.4)
    mu = 0.6 * 0.5 / 3.5
    hits = 0
    for i in range(k):
        _, lo, hi, _ = stats.bootstrap_mean_ci(x[i], b, 0.95, np.random.default_rng([n, i]))
        hits += lo <= mu <= hi
    return hits / k


@pytest.mark.parametrize("n", [16, 96])
def test_95_percent_intervals_cover_95_percent_of_known_means(n):
    """The pages' bootstrap CI at 16 and 96 prompts covers the true mean within COVERAGE_BAND (the percentile
    interval covered ~89 % at 16 prompts)."""
    cov = _coverage(n)
    assert COVERAGE_BAND[0] <= cov <= COVERAGE_BAND[1], cov


def test_a_ci_call_near_zero_is_borderline_not_a_coin_flip():
    """An interval whose end sits at 0 within the seed's error says "borderline"; clear cases say which."""
    x = np.array([0.31, -0.12, 0.45, 0.08, -0.27, 0.52, 0.19, 0.66, -0.04, 0.38, 0.1, -0.2, 0.25, 0.05, -0.1, 0.3])
    calls = {}
    for shift in np.linspace(-0.2, 0.2, 81):
        calls[round(float(shift), 3)] = stats.bootstrap_mean_ci_call(x - x.mean() + shift, 1000, 0.95,
                                                                    np.random.default_rng(1))[4]
    assert calls[0.0] == "includes 0" and calls[0.2] == calls[-0.2] == "excludes 0"
    border = [k for k, v in calls.items() if v == "borderline"]
    assert border and all(0.05 < abs(k) < 0.2 for k in border)
    for k in border:  # a borderline shift: some seeds exclude 0, some do not
        ends = [stats.bootstrap_mean_ci(x - x.mean() + k, 1000, 0.95, np.random.default_rng(s)) for s in range(40)]
        excl = {bool(lo > 0 or hi < 0) for _, lo, hi, _ in ends}
        if excl == {True, False}:
            break
    else:
        pytest.fail(f"no borderline shift {border} moves across 0 with the seed")


# ---------------------------------------------------------------- 2. Holm / BH
BH95 = [0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344, 0.0459, 0.3240, 0.4262, 0.5719, 0.6528,
        0.7590, 1.000]  # Benjamini & Hochberg (1995), §4: 15 p-values


def test_holm_textbook_examples():
    np.testing.assert_allclose(stats.holm([0.01, 0.04, 0.03, 0.005]), [0.03, 0.06, 0.06, 0.02])
    adj = stats.holm(BH95)
    assert int((adj <= 0.05).sum()) == 3  # Holm rejects 3 of the 15 at 0.05 (BH rejects 4)
    # direct step-down computation
    p = np.sort(BH95)
    m = len(p)
    ref = np.maximum.accumulate(np.minimum(1, (m - np.arange(m)) * p))
    np.testing.assert_allclose(adj, ref)
    nan = stats.holm([0.01, np.nan, 0.04])
    assert np.isnan(nan[1]) and nan[0] == pytest.approx(0.02) and nan[2] == pytest.approx(0.04)


def test_benjamini_hochberg_textbook_and_scipy():
    adj = stats.benjamini_hochberg(BH95)
    assert int((adj <= 0.05).sum()) == 4  # the paper's worked example rejects the 4 smallest
    np.testing.assert_allclose(adj, sps.false_discovery_control(BH95, method="bh"))
    p = np.array(BH95)
    m = len(p)
    ref = np.minimum.accumulate((m * p / np.arange(1, m + 1))[::-1])[::-1]
    np.testing.assert_allclose(adj, np.minimum(ref, 1))
    sig = pd.DataFrame({"p": [0.001, 0.02, 0.04, np.nan]})
    out = stats.apply_correction(sig, "holm")
    assert out["marker"].tolist() == [marker(0.003), marker(0.04), marker(0.04), ""]
    assert out["p"].tolist()[:3] == [0.001, 0.02, 0.04]  # raw p kept
    with pytest.raises(ValueError):
        stats.adjust_pvalues([0.1], "bonferonni")


def test_holm_markers_in_report_tables():
    rng = np.random.default_rng(1)
    scores = pd.DataFrame([{"model": m, "dataset": "d", "axis": a, "prompt_id": i, "s": abs(rng.normal(mu, 0.05))}
                           for m, mu in (("a", 0.08), ("b", 0.06)) for a in ("bleu", "mr") for i in range(16)])
    raw = report.score_tables(scores, 0.05)["total"]
    adj = report.score_tables(scores, 0.05, correction="holm")["total"]
    np.testing.assert_allclose(adj["p_adj"], stats.holm(raw["p"]))
    assert adj["marker"].tolist() == [marker(p) for p in stats.holm(raw["p"])]
    assert (adj["p"] == raw["p"]).all()


# ---------------------------------------------------------------- 3. sample size
def test_sample_size_known_variance():
    """Synthetic population with known σ: std of the mean of N drawn without replacement = σ/√N·√((M−N)/(M−1))."""
    M = 64
    x = np.random.default_rng(0).normal(0.3, 0.1, M)
    cells = pd.DataFrame({"model": "m", "axis": "bleu", "family": "surface_noise", "subtype": "case", "strength": 1.0,
                          "position": "GLOBAL", "prompt_id": range(M), "s": x})
    out = sample_size.sample_size_std(cells, sizes=(4, 16, 32, 64, 128), n_repeats=4000, seed=1)
    assert out["n"].tolist() == [4, 16, 32, 64]  # 128 capped at M
    sigma = np.std(x)
    for r in out.itertuples():
        exact = sigma / math.sqrt(r.n) * math.sqrt((M - r.n) / (M - 1))
        assert r.expected_std == pytest.approx(exact)
        assert r.std_mean == pytest.approx(exact, rel=0.06, abs=1e-12)
    # direct numpy re-computation of one N with the same generator
    rng = stats.group_rng(1, ("m", "bleu", "surface_noise", "case", 1.0, "GLOBAL"))
    perm = np.argsort(rng.random((4000, M)), axis=1)
    assert out.iloc[1]["std_mean"] == pytest.approx(np.std(x[perm[:, :16]].mean(axis=1), ddof=1))


def test_sample_size_on_synthetic_store(tmp_path):
    p = make_store(tmp_path / "s.duckdb", datasets=("truthfulqa", "nq_open", "alpaca"), n_prompts=10, n_variants=3)
    with open_store(p) as st:
        cells = st.cell_prompt_scores()
        d = st.deltas(kept_only=True)
    assert len(cells) == len(d.dropna(subset=["delta_norm"]))  # one variant per (prompt, cell) in the factory
    out = sample_size.sample_size_std(cells, n_repeats=300, seed=0)
    assert set(out["n"]) == {4, 8, 16, 30} and (out["n_available"] == 30).all()
    summ = sample_size.sample_size_summary(out)
    for _, g in summ.groupby(["model", "axis"]):
        v = g.sort_values("n")["median_std"].to_numpy()
        assert v[-1] == 0 and (np.diff(v) < 0).all()  # shrinks with N, 0 when every prompt is drawn
    s = np.array([0.1, 0.3, 0.2, 0.4])
    need = sample_size.n_for_halfwidth(pd.DataFrame({"model": "m", "axis": "a", "s": s}), 0.05, 0.95)
    assert need.loc[0, "n_needed"] == t_needed(np.std(s, ddof=1), 0.05, 0.95)


def test_pooled_sgs_spread_is_the_exact_std_over_every_subset():
    """Seven prompts: the std of the mean over all C(7, N) subsets equals the finite-population formula."""
    import itertools

    x = np.array([0.0, 0.0, 0.0, 0.05, 0.3, 0.0, 0.6])  # mostly zeros, like Δ-MR
    sc = pd.DataFrame({"model": "m", "axis": "mr", "s": x})
    out = sample_size.pooled_sgs_spread(sc, sizes=(2, 4, 8)).set_index("n")
    assert list(out.index) == [2, 4, 7, 8] and (out["n_available"] == 7).all()
    for n in (2, 4, 7):
        means = [x[list(c)].mean() for c in itertools.combinations(range(7), n)]
        assert out.loc[n, "sd_within"] == pytest.approx(np.std(means), abs=1e-12)
        assert out.loc[n, "sd_new"] == pytest.approx(np.std(x, ddof=1) / math.sqrt(n), abs=1e-15)
    assert np.isnan(out.loc[8, "sd_within"]) and out.loc[4, "sd_within"] > 0.05  # the cells' median said 0
    v = out["sd_within"].dropna().to_numpy()
    assert (np.diff(v) < 0).all() and v[-1] == 0 and (np.diff(out["sd_new"].to_numpy()) < 0).all()
    flat = sample_size.pooled_sgs_spread(sc.assign(s=0.2), sizes=(2,))
    assert (flat["status"] == "no variation").all() and (flat[["sd_within", "sd_new"]] == 0).all().all()
    tiny = sample_size.pooled_sgs_spread(sc.iloc[:1])
    assert tiny["status"].tolist() == ["too few prompts"]


def test_prompts_for_halfwidth_is_at_least_two_and_uses_t():
    assert sample_size.prompts_for_halfwidth(0.0, 0.02) == 2
    assert sample_size.prompts_for_halfwidth(0.001, 0.02) == 2 == t_needed(0.001, 0.02, 0.95)  # normal approx.: 1
    assert sample_size.prompts_for_halfwidth(0.003, 0.02) == 3 == t_needed(0.003, 0.02, 0.95)  # normal approx.: 1
    for sd, h, lv in ((0.1, 0.05, 0.9), (0.135, 0.02, 0.95), (0.03, 0.01, 0.99)):
        assert sample_size.prompts_for_halfwidth(sd, h, lv) == t_needed(sd, h, lv)
    with pytest.raises(ValueError, match="σ must be finite"):
        sample_size.prompts_for_halfwidth(float("nan"), 0.02)


# ---------------------------------------------------------------- 4. reversals
def _rev_scores():
    rng = np.random.default_rng(5)
    rows = []
    for d, (ma, mb) in {"A": (0.2, 0.5), "B": (0.5, 0.2), "C": (0.30, 0.31)}.items():
        for i in range(20):
            for m, mu in (("a", ma), ("b", mb)):
                rows.append({"model": m, "dataset": d, "axis": "cos", "prompt_id": f"{d}{i}", "s": mu + rng.normal(0, 0.05)})
    return pd.DataFrame(rows)


def test_reversal_probability_against_numpy():
    sc = _rev_scores()
    r = stats.reversal_probabilities(sc, n_resamples=500, seed=3).set_index(["dataset_a", "dataset_b"])
    assert r.loc[("A", "B"), "reversal"] and r.loc[("A", "B"), "p_reversal"] == 1.0
    assert not r.loc[("A", "C"), "reversal"] and r.loc[("A", "C"), "p_reversal"] < 0.95
    # direct numpy computation for (A, C)
    def boot(d):
        w = sc[sc["dataset"] == d].pivot_table(index="prompt_id", columns="model", values="s").to_numpy()
        idx = stats.group_rng(3, ("cos", d)).integers(0, len(w), size=(500, len(w)))
        return np.nanmean(w[idx], axis=1)
    ba, bc = boot("A"), boot("C")
    ref = np.mean(np.sign(ba[:, 0] - ba[:, 1]) * np.sign(bc[:, 0] - bc[:, 1]) < 0)
    assert r.loc[("A", "C"), "p_reversal"] == pytest.approx(ref)
    again = stats.reversal_probabilities(sc, n_resamples=500, seed=3)
    assert (again["p_reversal"].to_numpy() == r["p_reversal"].to_numpy()).all()


# ---------------------------------------------------------------- 5. normalizers, per-token log-prob
def test_data_driven_normalizers_and_rescaled_scores(tmp_path):
    from sago_engine.types import DEFAULT_NORMALIZERS

    p = make_store(tmp_path / "n.duckdb", n_prompts=5)
    with open_store(p) as st:
        q = st.delta_abs_quantiles(q=0.9)
        d = st.deltas(kept_only=True).dropna(subset=["delta"])
        rx = stats.data_driven_normalizers(q, DEFAULT_NORMALIZERS)
        for r in rx.itertuples():
            assert r.r_data == pytest.approx(np.quantile(np.abs(d[d["axis"] == r.axis]["delta"]), 0.9))
        same = st.prompt_scores_rescaled(normalizers=tuple(DEFAULT_NORMALIZERS.items()))
        ref = st.prompt_scores()
        np.testing.assert_allclose(same["s"], ref["s"], atol=1e-12)
        half = st.prompt_scores_rescaled(normalizers=(("bleu", 50.0),))
        assert set(half["axis"]) == {"bleu"}
    g = d[(d["axis"] == "bleu")]
    x = np.clip(g["delta"] / 50.0, -1, 1)
    exp = np.sqrt((x ** 2).groupby([g["run_id"], g["prompt_id"]]).mean()).sort_values().to_numpy()
    np.testing.assert_allclose(np.sort(half["s"].to_numpy()), exp)
    zero = stats.data_driven_normalizers(pd.DataFrame({"axis": ["mr"], "n": [3], "q": [0.95], "q_abs": [0.0],
                                                       "max_abs": [0.0]}), {"mr": 1.0})
    assert zero.loc[0, "r_data"] == 1.0 and zero.loc[0, "source"].startswith("paper")


def test_rms_scores_per_token():
    d = pd.DataFrame({"model": "m", "dataset": "x", "prompt_id": ["p", "p", "q"], "delta_per_token": [0.1, -0.3, 2.0]})
    out = stats.rms_scores(d, 0.5, value="delta_per_token")
    np.testing.assert_allclose(out["s"], [math.sqrt((0.04 + 0.36) / 2), 1.0])


# ---------------------------------------------------------------- pages
@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    p = tmp_path_factory.mktemp("stats") / "synth.duckdb"
    return make_store(p, models=("model-a", "model-b"), datasets=("truthfulqa", "nq_open"), n_prompts=6, n_variants=3,
                      seed=4)


def _app(store, page):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state["app_store_custom"] = str(store)
    at.run()
    at.switch_page(f"pages/{page}.py")
    at.run()
    assert not at.exception, at.exception
    return at


def test_significance_page_holm_switch_shows_raw_and_adjusted(synth):
    at = _app(synth, "significance")
    at.selectbox(key="significance_correction").set_value("holm").run()
    assert not at.exception, at.exception
    with open_store(synth) as st:
        ps = st.prompt_scores()
    sig = significance(ps, 0.05, by=("model", "axis"))
    pv = next(df.value for df in at.dataframe if "p_adj" in df.value.columns)
    # the page shows the paper's axis labels in its "axis" column
    m = pv.merge(sig.assign(axis=sig["axis"].map(__import__("sago_engine.types", fromlist=["x"]).AXIS_LABELS)),
                 on=["model", "axis"])
    np.testing.assert_allclose(m["p_raw"], m["p"])
    np.testing.assert_allclose(np.sort(m["p_adj"]), np.sort(stats.holm(sig["p"])))
    assert at.session_state["sago_correction"] == "holm"
    # the choice follows to Pareto (markers there use the adjusted p)
    at.switch_page("pages/pareto.py").run()
    assert not at.exception and at.selectbox(key="pareto_correction").value == "holm"


@pytest.mark.parametrize("page", ["sample_size", "rankings", "profiles"])
def test_stats_pages_render(synth, page):
    at = _app(synth, page)
    assert not at.error


# ---------------------------------------------------------------- every output column pinned (mutation testing, docs/TESTING.md)
def test_n_for_halfwidth_every_column_by_hand():
    import math

    from scipy import stats as sps

    from sago_engine.scoring.sample_size import n_for_halfwidth
    from sago_engine.scoring.stats import STATUS_FLAT, STATUS_OK, STATUS_TINY

    sc = pd.DataFrame({"model": ["b", "b", "b", "a", "a", "c", "c", "c"], "axis": "cos",
                       "s": [0.1, 0.3, 0.2, 0.5, 0.5, 0.7, float("nan"), 0.4]})
    sc["model"] = pd.Categorical(sc["model"], categories=["z", "a", "b", "c"])
    out = n_for_halfwidth(sc, halfwidth=0.05, level=0.9)
    assert list(out.columns) == ["model", "axis", "sigma", "n_now", "halfwidth_now", "n_needed", "halfwidth", "level",
                                 "status"]
    assert list(out["model"]) == ["a", "b", "c"]  # sorted, the unused category left out
    a, b, c = out.iloc[0], out.iloc[1], out.iloc[2]
    assert (a["sigma"], a["n_now"], a["halfwidth_now"], a["n_needed"], a["status"]) == (0.0, 2, 0.0, 2, STATUS_FLAT)
    assert b["sigma"] == pytest.approx(0.1) and b["n_now"] == 3 and b["status"] == STATUS_OK
    assert b["halfwidth_now"] == pytest.approx(sps.t.ppf(0.95, 2) * 0.1 / math.sqrt(3))
    # by hand: t(0.95, 10)·0.1/√11 = 0.0546, t(0.95, 11)·0.1/√12 = 0.0518, t(0.95, 12)·0.1/√13 = 0.0494 ≤ 0.05
    assert b["n_needed"] == 13 == t_needed(0.1, 0.05, 0.9)  # the normal approximation said 11
    assert c["n_now"] == 2 and c["sigma"] == pytest.approx(math.sqrt(0.045))  # the NaN is dropped
    assert (out["halfwidth"] == 0.05).all() and (out["level"] == 0.9).all()
    one = n_for_halfwidth(pd.DataFrame({"model": "m", "axis": "cos", "s": [0.3]}))
    assert one.loc[0, "status"] == STATUS_TINY and one.loc[0, "n_needed"] is None
    assert math.isnan(one.loc[0, "sigma"]) and math.isnan(one.loc[0, "halfwidth_now"])
    assert n_for_halfwidth(sc, halfwidth=1.5)["n_needed"].tolist() == [2, 2, 3]  # t(0.975, 1) = 12.7: c needs 3
    with pytest.raises(ValueError, match="half-width must be > 0, got 0"):
        n_for_halfwidth(sc, halfwidth=0)
    empty = n_for_halfwidth(sc.iloc[:0])
    assert list(empty.columns) == list(out.columns)


def test_sample_size_std_every_column_and_group_handling():
    import math

    from sago_engine.scoring.sample_size import sample_size_std

    cell = {"family": "surface_noise", "subtype": "typo", "strength": 1.0, "position": "GLOBAL"}
    rows = [{"model": "m", "axis": "bleu", **cell, "prompt_id": f"p{i}", "s": v}
            for i, v in enumerate([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])]
    rows += [{"model": "m", "axis": "bleu", **{**cell, "position": None}, "prompt_id": "q0", "s": 0.3},
             {"model": "m", "axis": "bleu", **{**cell, "position": None}, "prompt_id": "q1", "s": 0.7}]
    df = pd.DataFrame(rows)
    out = sample_size_std(df, sizes=(2, 4, 8), n_repeats=300, seed=0)
    assert list(out.columns) == ["model", "axis", "family", "subtype", "strength", "position", "n", "n_requested",
                                 "n_available", "std_mean", "pop_std", "expected_std", "n_repeats"]
    six = out[out["position"] == "GLOBAL"].set_index("n_requested")
    two = out[out["position"].isna()]  # a NULL position is a group of its own, not dropped
    assert list(six.index) == [2, 4, 8] and list(six["n"]) == [2, 4, 6] and (six["n_available"] == 6).all()
    assert list(two["n_requested"]) == [2] and list(two["n"]) == [2]  # capped at M: kept once
    x = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    assert np.allclose(six["pop_std"], float(np.std(x))) and (six["n_repeats"] == 300).all()
    for n in (2, 4):
        assert six.loc[n, "expected_std"] == pytest.approx(np.std(x) / math.sqrt(n) * math.sqrt((6 - n) / 5))
        assert six.loc[n, "std_mean"] == pytest.approx(six.loc[n, "expected_std"], rel=0.2)  # 300 seeded draws
    assert six.loc[8, "std_mean"] == 0.0 and six.loc[8, "expected_std"] == 0.0  # every prompt drawn
    assert sample_size_std(df, sizes=(2,), n_repeats=300, seed=0).equals(sample_size_std(df, sizes=(2,), n_repeats=300))
    single = sample_size_std(df.iloc[:1], sizes=(2,), n_repeats=5)
    assert single.loc[0, "n"] == 1 and single.loc[0, "expected_std"] == 0.0 and single.loc[0, "std_mean"] == 0.0
    assert math.isnan(sample_size_std(df.iloc[:6], sizes=(2,), n_repeats=1).loc[0, "std_mean"])  # one draw: no std
    assert list(sample_size_std(df.iloc[:0]).columns) == list(out.columns)


def test_data_driven_normalizers_every_column_and_fallbacks():
    from sago_engine.scoring.stats import data_driven_normalizers

    q = pd.DataFrame({"axis": ["bleu", "mr", "ent", "cos"], "n": [10, 8, 5, 3], "q": 0.95,
                      "q_abs": [40.0, 0.0, 0.0, float("nan")], "max_abs": [90.0, 1.0, 0.0, 0.5]})
    out = data_driven_normalizers(q, [("bleu", 100.0), ("mr", 1.0), ("ent", 10.0)])
    assert list(out.columns) == ["axis", "n", "q", "q_abs", "max_abs", "r_paper", "r_data", "source"]
    o = out.set_index("axis")
    assert list(o["n"]) == [10, 8, 5, 3] and (o["q"] == 0.95).all()
    assert o.loc["bleu", "q_abs"] == 40.0 and o.loc["bleu", "max_abs"] == 90.0
    assert (o.loc["bleu", "r_data"], o.loc["bleu", "source"], o.loc["bleu", "r_paper"]) == (40.0, "95% quantile of |Δ|", 100.0)
    assert (o.loc["mr", "r_data"], o.loc["mr", "source"]) == (1.0, "max |Δ|")
    assert (o.loc["ent", "r_data"], o.loc["ent", "source"]) == (10.0, "paper (no variation)")
    assert (o.loc["cos", "r_data"], o.loc["cos", "source"]) == (0.5, "max |Δ|")  # NaN quantile: the max
    assert np.isnan(o.loc["cos", "r_paper"])  # no paper R given for cos
    small = data_driven_normalizers(q.assign(max_abs=[90.0, 0.5, 0.0, 0.5]), {"mr": 1.0})
    assert small.set_index("axis").loc["mr", "r_data"] == 0.5  # a max below 1 is still a scale
    assert list(data_driven_normalizers(q.iloc[:0], {}).columns) == list(out.columns)


def test_data_driven_rx_says_which_models_it_pools():
    q = pd.DataFrame({"axis": ["bleu", "mr"], "models": [["b", "a"], ["a", "b"]]})
    assert stats.rx_pooling(q) == ("Data-driven R_X is pooled over the deltas of 2 models (a, b): a model's SGS under "
                                   "it changes when other models are filtered in or out; filter to one model for its "
                                   "own R_X.")
    assert stats.rx_pooling(q.assign(models=[["a"], ["a"]])).endswith("of a alone: it is this model's own.")
    mixed = stats.rx_pooling(pd.DataFrame({"axis": ["bleu", "prob"], "models": [["a", "b"], ["a"]]}))
    assert "bleu: 2 model(s) (a, b); prob: 1 model(s) (a)" in mixed
    assert stats.rx_pooling(pd.DataFrame(columns=["axis", "models"])) == ""


def test_equal_scores_summed_in_another_order_never_reverse():
    """Two models with the same per-variant values, summed forwards and backwards: their SGS differ by float noise
    only, which is no order, so no reversal is observed or called (kind: float noise is no difference)."""
    rng = np.random.default_rng(2)
    rows = []
    for ds in ("d1", "d2"):
        for i in range(12):
            v = rng.uniform(0, 1, 13) ** 3
            fwd, bwd = sum(v) / 13, sum(v[::-1]) / 13
            rows += [{"model": "a", "dataset": ds, "prompt_id": f"{ds}:{i}", "axis": "bleu", "s": fwd},
                     {"model": "b", "dataset": ds, "prompt_id": f"{ds}:{i}", "axis": "bleu", "s": bwd}]
    sc = pd.DataFrame(rows)
    sgs = sc.groupby(["dataset", "model"])["s"].apply(lambda x: np.mean(x.to_numpy()))
    assert (sgs["d1", "a"] - sgs["d1", "b"]) * (sgs["d2", "a"] - sgs["d2", "b"]) < 0  # noise points opposite ways
    r = stats.reversal_probabilities(sc, n_resamples=300).iloc[0]
    assert (r["diff_a"], r["diff_b"], r["observed_flip"], r["p_reversal"]) == (0.0, 0.0, False, 0.0)
