"""Ablations (SAGO §Ablations) and the detail queries: store aggregates + pure functions vs direct numpy/scipy on raw deltas."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sago_engine.filters import Filters
from sago_engine.scoring.ablations import (
    dose_response,
    length_factor,
    semantic_audit,
    semantic_histogram,
    tone_asymmetry,
)
from sago_engine.store import open_store
from sago_engine.views.detail import heatmap_frame, responses_side_by_side
from sago_engine.views.textdiff import diff_html, diff_segments, tokenize

ROOT = Path(__file__).resolve().parents[3]


def _bench():
    spec = importlib.util.spec_from_file_location("dashboard_scale", ROOT / "benchmarks" / "dashboard_scale.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    """A synthetic store (benchmark writer, small): 3 models (the last without white-box axes), 2 datasets,
    12 prompts each, 60 variants per prompt (some rejected by the semantic filter)."""
    p = tmp_path_factory.mktemp("abl") / "synth.duckdb"
    return _bench().build_store(p, n_models=3, datasets=("truthfulqa", "alpaca"), n_prompts=12, n_variants=60,
                                seed=3, verbose=False)


@pytest.fixture(scope="module")
def raw(synth):
    """Raw kept, available deltas with tone and target ratio read from each variant's meta (independent of SQL)."""
    with open_store(synth) as st:
        d = st.deltas(kept_only=True)
        v = st.variants()
    meta = v.set_index("variant_id")["meta"].map(json.loads)
    d = d[d["available"]].copy()
    d["tone"] = d["variant_id"].map(lambda x: meta[x].get("tone"))
    d["target_ratio"] = d["variant_id"].map(lambda x: meta[x].get("target_ratio"))
    return d


def _abl(path, f=None):
    with open_store(path) as st:
        return st.ablation_frame(f or Filters())


def test_dose_response_by_strength_matches_numpy(synth, raw):
    got = dose_response(_abl(synth)["cells"], by="strength", level="subtype")
    assert len(got) == raw.groupby(["model", "axis", "family", "subtype", "strength"]).ngroups
    for (m, a, fam, sub, s), grp in raw.groupby(["model", "axis", "family", "subtype", "strength"]):
        x = grp["delta_norm"].to_numpy()
        r = got[(got.model == m) & (got.axis == a) & (got.family == fam) & (got.subtype == sub) & (got.strength == s)]
        assert len(r) == 1
        r = r.iloc[0]
        assert r["n"] == len(x)
        assert r["mean_abs"] == pytest.approx(np.mean(np.abs(x)), abs=1e-12)
        assert r["rms"] == pytest.approx(np.sqrt(np.mean(x ** 2)), abs=1e-12)
        assert r["mean_signed"] == pytest.approx(np.mean(x), abs=1e-12)
        if len(x) > 1:
            assert r["se_abs"] == pytest.approx(np.std(np.abs(x), ddof=1) / np.sqrt(len(x)), abs=1e-9)


def test_dose_response_by_position_per_family_matches_numpy(synth, raw):
    got = dose_response(_abl(synth)["cells"], by="position", level="family")
    for (m, a, fam, p), grp in raw.groupby(["model", "axis", "family", "position"]):
        x = grp["delta_norm"].to_numpy()
        r = got[(got.model == m) & (got.axis == a) & (got.family == fam) & (got.position == p)].iloc[0]
        assert r["n"] == len(x) and r["mean_abs"] == pytest.approx(np.mean(np.abs(x)), abs=1e-12)


def test_unavailable_axes_are_absent_not_zero(synth, raw):
    cells = _abl(synth)["cells"]
    api = sorted(cells["model"].unique())[-1]
    assert set(cells[cells.model == api]["axis"]) == {"bleu", "bert", "mr"}
    assert set(cells[cells.model != api]["axis"]) == {"cos", "bleu", "bert", "prob", "ent", "mr"}


def test_tone_asymmetry_is_welch_one_sided(synth, raw):
    got = tone_asymmetry(_abl(synth)["cells"]).set_index(["model", "axis"])
    soc = raw[raw["family"] == "social_register"]
    assert len(got) == soc.groupby(["model", "axis"]).ngroups
    for (m, a), grp in soc.groupby(["model", "axis"]):
        neg = np.abs(grp[grp.tone == "negative"]["delta_norm"].to_numpy())
        pol = np.abs(grp[grp.tone == "polite"]["delta_norm"].to_numpy())
        ref = stats.ttest_ind(neg, pol, equal_var=False, alternative="greater")
        r = got.loc[(m, a)]
        assert (r["n_negative"], r["n_polite"]) == (len(neg), len(pol))
        assert r["mean_negative"] == pytest.approx(neg.mean(), abs=1e-12)
        assert r["mean_polite"] == pytest.approx(pol.mean(), abs=1e-12)
        assert r["t"] == pytest.approx(ref.statistic, rel=1e-7)
        assert r["p"] == pytest.approx(ref.pvalue, rel=1e-6, abs=1e-300)
    # the synthetic writer gives negative tone a larger effect: most cells are significant
    assert (got["p"] < 0.05).mean() > 0.5


def test_length_factor_is_std_over_prompts_of_per_prompt_rms(synth, raw):
    got = length_factor(_abl(synth)["length"]).set_index(["model", "axis", "target_ratio"])
    ln = raw[raw["subtype"] == "length"]
    s_i = ln.groupby(["model", "axis", "target_ratio", "prompt_id"])["delta_norm"].apply(
        lambda x: np.sqrt(np.mean(np.square(x))))
    ref = s_i.groupby(["model", "axis", "target_ratio"]).agg(["size", "mean", lambda x: np.std(x, ddof=1)])
    assert set(got.index) == set(ref.index) and set(got.index.get_level_values(2)) <= {0.5, 0.75, 1.5, 2.0}
    for k, r in ref.iterrows():
        assert got.loc[k, "n_prompts"] == r["size"]
        assert got.loc[k, "mean_instability"] == pytest.approx(r["mean"], abs=1e-12)
        if r["size"] > 1:
            assert got.loc[k, "std_instability"] == pytest.approx(r.iloc[2], abs=1e-9)


def test_filters_reach_the_ablation_query(synth, raw):
    m0 = sorted(raw["model"].unique())[0]
    f = Filters(models=(m0,), datasets=("alpaca",), families=("social_register",), positions=("PREFIX",))
    cells = _abl(synth, f)["cells"]
    assert set(cells["model"]) == {m0} and set(cells["family"]) == {"social_register"}
    assert set(cells["position"]) == {"PREFIX"}
    sel = raw[(raw.model == m0) & (raw.dataset == "alpaca") & (raw.family == "social_register") & (raw.position == "PREFIX")]
    assert cells["n"].sum() == len(sel)
    assert _abl(synth, Filters(families=()))["cells"].empty


def test_semantic_audit_and_histogram(synth):
    with open_store(synth) as st:
        audit = st.variant_audit(Filters())
        v = st.variants()
    assert len(audit) == len(v)  # kept and rejected variants both listed
    summ = semantic_audit(audit, threshold=0.5).set_index("family")
    for fam, grp in v.groupby("family"):
        assert summ.loc[fam, "n_kept"] == grp["kept"].sum() and summ.loc[fam, "n_rejected"] == (~grp["kept"]).sum()
        assert summ.loc[fam, "n_below"] == (grp["semantic_score"] <= 0.5).sum()
        assert summ.loc[fam, "median"] == pytest.approx(grp["semantic_score"].median())
    h = semantic_histogram(audit, bins=20)
    for fam, grp in v.groupby("family"):
        ref, _ = np.histogram(grp["semantic_score"], bins=20, range=(0, 1))
        got = h[h.family == fam].groupby("bin_start")["count"].sum()
        assert got.sum() == ref.sum() and np.allclose(sorted(got[got > 0]), sorted(ref[ref > 0]))


def test_tone_asymmetry_degenerate_cases():
    base = {"model": "m", "axis": "bleu", "family": "social_register", "subtype": "politeness", "position": "GLOBAL",
            "target_ratio": np.nan}
    cells = pd.DataFrame([
        {**base, "strength": -3.0, "tone": "negative", "n": 4, "sum_abs": 2.0, "sum_sq": 1.0, "sum": -2.0},
        {**base, "strength": 2.0, "tone": "polite", "n": 4, "sum_abs": 1.0, "sum_sq": 0.25, "sum": -1.0},
    ])
    r = tone_asymmetry(cells).iloc[0]  # both sides constant (|Δ̃| = 0.5 vs 0.25): defined, not NaN
    assert r["p"] == 0.0 and r["t"] == np.inf and r["diff"] == pytest.approx(0.25) and r["ratio"] == pytest.approx(2.0)
    one_side = tone_asymmetry(cells.iloc[:1]).iloc[0]
    assert one_side["n_polite"] == 0 and np.isnan(one_side["p"]) and one_side["marker"] == ""
    with pytest.raises(ValueError):
        dose_response(cells, by="tone")


def test_prompt_detail_and_heatmap(synth):
    with open_store(synth) as st:
        pid = st.prompt_list(Filters())["prompt_id"].iloc[3]
        det = st.prompt_detail(Filters(), prompt_id=pid)
        raw_d = st.deltas(kept_only=False)
        only = st.prompt_detail(Filters(families=("structural",), models=("model-00",)), prompt_id=pid)
        gone = st.prompt_detail(Filters(datasets=("nope",)), prompt_id=pid)
    assert len(det["prompt"]) == 1 and len(det["variants"]) == 60
    assert det["responses"]["variant_id"].isna().sum() == 3  # one base response per model
    heat = heatmap_frame(det)
    ref = raw_d[raw_d.prompt_id == pid]
    assert len(heat) == len(ref) == 3 * 60 * 6
    m = heat.merge(ref, on=["variant_id", "axis", "model"], suffixes=("", "_ref"))
    assert np.allclose(m["delta_norm"].fillna(-9), m["delta_norm_ref"].fillna(-9))
    assert set(only["variants"]["family"]) <= {"structural"} and set(only["responses"]["model"]) <= {"model-00"}
    assert set(only["deltas"]["variant_id"]) <= set(only["variants"]["variant_id"])
    assert all(len(x) == 0 for x in gone.values())
    side = responses_side_by_side(det)
    assert list(side.columns[:2]) == ["variant", "variant_id"] and side.iloc[0]["variant"] == "base prompt"
    assert len(side) == 61 and side[["model-00", "model-01", "model-02"]].notna().all().all()


def test_prompt_list_counts_kept_variants(synth):
    with open_store(synth) as st:
        pl = st.prompt_list(Filters())
        v = st.variants()
        pl_f = st.prompt_list(Filters(datasets=("alpaca",), families=("surface_noise",)))
    ref = v[v.kept].groupby("prompt_id").size()
    assert dict(zip(pl.prompt_id, pl.n_variants)) == ref.to_dict()
    assert set(pl_f["dataset"]) == {"alpaca"}
    ref_f = v[v.kept & (v.family == "surface_noise") & v.prompt_id.str.startswith("alpaca:")].groupby("prompt_id").size()
    assert dict(zip(pl_f.prompt_id, pl_f.n_variants)) == ref_f.to_dict()


@pytest.mark.parametrize("base,variant", [
    ("What is the capital of Australia?", "Hurry up and answer this: what is the capital of AUSTRALIA?"),
    ("a  b\tc\n", "a b c"), ("", "new"), ("old", ""), ("x", "x"), ("naïve café — ok?", "naïve  café — OK!!"),
])
def test_diff_segments_reconstruct_both_texts(base, variant):
    seg = diff_segments(base, variant)
    assert "".join(t for op, t in seg if op != "insert") == base
    assert "".join(t for op, t in seg if op != "delete") == variant
    assert all(op in ("equal", "delete", "insert") and t for op, t in seg)
    assert "".join(tokenize(base)) == base


@pytest.mark.parametrize("hostile", ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>",
                                     "\"><svg onload=alert(1)>", "&lt;already escaped&gt;"])
def test_diff_html_escapes_every_data_string(hostile):
    out = diff_html(diff_segments("Plain base. " + hostile, hostile + " plain variant."))
    assert "<script" not in out and "<img" not in out and "<svg" not in out
    assert "&lt;" in out or "&amp;lt;" in out
    import html as _html
    import re
    text = _html.unescape(re.sub(r"<[^>]+>", "", out))  # what a browser shows
    assert hostile in text


def test_recorded_threshold_and_tone_bars():
    from sago_engine.scoring.ablations import recorded_threshold, tone_bars

    assert recorded_threshold(pd.DataFrame({"threshold": [0.2192, 0.21920001, None]})) == pytest.approx(0.2192)
    assert recorded_threshold(pd.DataFrame({"threshold": [0.2, 0.85]})) is None
    assert recorded_threshold(pd.DataFrame({"threshold": []})) is None
    tone = pd.DataFrame([{"model": "m", "axis": "bleu", "n_negative": 3, "mean_negative": 0.4, "n_polite": 5,
                          "mean_polite": 0.2}])
    bars = tone_bars(tone)
    assert bars.to_dict("records") == [{"model": "m", "axis": "bleu", "tone": "negative", "mean_abs": 0.4, "n": 3},
                                       {"model": "m", "axis": "bleu", "tone": "polite", "mean_abs": 0.2, "n": 5}]
