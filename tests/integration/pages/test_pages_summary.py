"""Summary pages headless (AppTest): chart data equals sago_engine's numbers, ε flips markers as scipy says,
filters change what is shown, n/a axes, the paper overlay is a separate labelled trace; the SQL aggregates."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from scipy import stats
from streamlit.testing.v1 import AppTest

from sago_engine.external import paper
from sago_engine.filters import Filters
from sago_engine.scoring.scores import MAIN_EPSILON, marker, prompt_scores, sgs
from sago_engine.store import open_store
from sago_engine.types import AXES, AXIS_LABELS
from sago_engine.views import report
from tests.support.factories import make_store
from tests.support.rendered import shown

ROOT = Path(__file__).resolve().parents[3]


# ---------------------------------------------------------------- helpers
@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    """Three models × three datasets; model-c lacks Δ-Cos and Δ-Prob (stored unavailable)."""
    p = tmp_path_factory.mktemp("synth") / "synth.duckdb"
    return make_store(p, models=("model-a", "model-b", "model-c"), datasets=("truthfulqa", "nq_open", "alpaca"),
                      n_prompts=6, n_variants=6, seed=3, missing_axes={"model-c": ["cos", "prob"]})


def _app(store, page: str | None = None, state: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state["app_store_custom"] = str(store)
    for k, v in (state or {}).items():
        at.session_state[k] = v
    at.run()
    if page:
        at.switch_page(f"pages/{page}.py")
        at.run()
    assert not at.exception, at.exception
    return at


def _fig(at, key: str) -> dict:
    assert not at.exception, at.exception
    for el in at.get("plotly_chart"):
        if key in el.proto.id:  # the element id carries the user key
            return json.loads(el.proto.spec)
    raise AssertionError(f"no plotly chart with key {key}")


def _vega_data(at, index: int = 0) -> pd.DataFrame:
    assert not at.exception, at.exception
    el = at.get("vega_lite_chart")[index]
    return pa.ipc.open_stream(el.proto.datasets[0].data.data).read_pandas()


def _scores(store, f: Filters | None = None) -> pd.DataFrame:
    with open_store(store) as st:
        return st.prompt_scores(f)


def _traces(fig: dict, name: str) -> list[dict]:
    return [t for t in fig["data"] if t.get("name") == name]


# ---------------------------------------------------------------- store queries (SQL) vs scoring (pandas)
def test_sql_prompt_scores_equal_scoring_on_real_store(tiny_store):
    with open_store(tiny_store) as st:
        sql = st.prompt_scores()
        d = st.deltas(kept_only=True)
        total_view = st.view("sgs_total")
    ref = prompt_scores(d, group=("run_id", "dataset", "prompt_id", "axis"))
    m = sql.merge(ref, on=["run_id", "dataset", "prompt_id", "axis"], suffixes=("", "_ref"))
    assert len(m) == len(sql) == len(ref) == 6 * len(AXES)
    np.testing.assert_allclose(m["s"], m["s_ref"], rtol=1e-12, atol=1e-12)
    assert (m["n_variants"] == m["n_variants_ref"]).all()
    tot = sgs(sql, by=("run_id", "axis")).merge(total_view, on=["run_id", "axis"])
    np.testing.assert_allclose(tot["sgs_x"], tot["sgs_y"], rtol=1e-12)


def test_filters_restrict_sql_and_are_hashable(tiny_store):
    f = Filters(families=["surface_noise"], strengths=[3, 1.0])
    assert f.strengths == (1.0, 3.0) and hash(f.key()) == hash(Filters(families=("surface_noise",), strengths=(3.0, 1.0)).key())
    with open_store(tiny_store) as st:
        d = st.deltas(kept_only=True)
        sub = d[(d["family"] == "surface_noise") & d["strength"].isin([1.0, 3.0])]
        ref = prompt_scores(sub, group=("run_id", "dataset", "prompt_id", "axis"))
        got = st.prompt_scores(f)
        assert len(got) == len(ref) > 0
        np.testing.assert_allclose(got.sort_values(["prompt_id", "axis"])["s"], ref.sort_values(["prompt_id", "axis"])["s"])
        assert st.prompt_scores(Filters(models=())).empty  # an empty selection is "nothing", not "all"
        dm = st.delta_matrix(f)
        assert len(dm) == len(sub) and set(dm["family"]) == {"surface_noise"}
        opts = st.filter_options()
        assert opts["models"] == ["tiny-random"] and opts["datasets"] == ["alpaca", "truthfulqa"]
        assert set(opts["positions"]) <= {"PREFIX", "SUFFIX", "GLOBAL"}
        rr = st.run_records()
        assert rr.loc[0, "fingerprint"] and "bleu" in rr.loc[0, "normalizers"]


# ---------------------------------------------------------------- Profiles
def test_profiles_radar_equals_engine_on_real_store(tiny_store):
    at = _app(tiny_store)
    fig = _fig(at, "profiles_radar")
    [line] = _traces(fig, "tiny-random")
    labels = [AXIS_LABELS[a] for a in AXES]
    assert line["theta"][:6] == labels
    expect = report.radar_data(_scores(tiny_store), dataset=None, n_resamples=1000, seed=0)
    np.testing.assert_allclose(line["r"][:6], expect["sgs"], rtol=1e-12)
    # and the same as the stored SQL view sgs_total
    with open_store(tiny_store) as st:
        view = st.view("sgs_total").set_index("axis")["sgs"]
    np.testing.assert_allclose(line["r"][:6], [view[a] for a in AXES], rtol=1e-12)
    # the CI band is a separate trace whose outer ring is the bootstrap upper bound
    [band] = _traces(fig, "tiny-random 95% CI")
    np.testing.assert_allclose(band["r"][:6], expect["hi"], rtol=1e-12)
    assert (expect["lo"] <= expect["sgs"]).all() and (expect["sgs"] <= expect["hi"]).all()
    # no cross-axis total anywhere in the tables
    for df in at.dataframe:
        assert not any(str(c).lower() in ("total", "sum", "sago") for c in df.value.columns)


def test_profiles_per_dataset_scope_and_filters(tiny_store):
    at = _app(tiny_store)
    at.selectbox(key="profiles_scope").set_value("alpaca").run()
    [line] = _traces(_fig(at, "profiles_radar"), "tiny-random")
    expect = report.radar_data(_scores(tiny_store), dataset="alpaca")
    np.testing.assert_allclose(line["r"][:6], expect["sgs"], rtol=1e-12)
    # a sidebar filter (family) changes the numbers shown, to exactly the filtered engine numbers
    at.multiselect(key="filter_families").set_value(["structural"]).run()
    assert not at.exception
    [line2] = _traces(_fig(at, "profiles_radar"), "tiny-random")
    expect2 = report.radar_data(_scores(tiny_store, Filters(families=("structural",))), dataset="alpaca")
    np.testing.assert_allclose(line2["r"][:6], expect2["sgs"], rtol=1e-12)
    assert not np.allclose(line2["r"][:6], line["r"][:6])


def test_profiles_unavailable_axes_na_and_model_filter(synth):
    at = _app(synth)
    fig = _fig(at, "profiles_radar")
    [c] = _traces(fig, "model-c")
    r = dict(zip(c["theta"][:6], c["r"][:6]))
    assert r["Δ-Cos"] is None and r["Δ-Prob"] is None and r["Δ-BLEU"] is not None  # a gap, never 0
    avail = next(df.value for df in at.dataframe if "Δ-Cos" in df.value.columns and
                 df.value.astype(str).apply(lambda s: s.str.contains("available")).any().any()).set_index("model")
    assert avail.loc["model-c", "Δ-Cos"].startswith("n/a") and avail.loc["model-a", "Δ-Cos"] == "available"
    assert {t["name"] for t in fig["data"] if "CI" not in t["name"]} == {"model-a", "model-b", "model-c"}
    at.multiselect(key="filter_models").set_value(["model-b"]).run()
    names = {t["name"] for t in _fig(at, "profiles_radar")["data"] if "CI" not in t["name"]}
    assert names == {"model-b"}


def test_profiles_paper_overlay_is_separate_labelled_dashed(synth):
    at = _app(synth)
    local = {t["name"]: t["r"] for t in _fig(at, "profiles_radar")["data"]}
    at.toggle(key="profiles_paper").set_value(True).run()
    fig = _fig(at, "profiles_radar")
    rep = [t for t in fig["data"] if paper.PAPER_SOURCE in t["name"]]
    assert len(rep) == 11  # 8 open models (Figure 2a) + 3 closed (Table 1)
    assert all(t["line"]["dash"] == "dash" for t in rep)
    llama = next(t for t in rep if t["name"].startswith("Llama-3.1-8B-Instruct"))
    assert llama["r"][:6] == [0.27, 0.63, 0.08, 0.04, 0.01, 0.57]
    gpt = next(t for t in rep if t["name"].startswith("GPT-5.4"))
    assert gpt["r"][0] is None and gpt["r"][1] == 0.414  # closed model: Δ-Cos n/a, not 0
    # local traces are unchanged by the overlay
    for t in fig["data"]:
        if t["name"] in local:
            assert t["r"] == local[t["name"]]


# ---------------------------------------------------------------- Pareto
def test_pareto_points_frontier_ideal(synth):
    at = _app(synth, "pareto")
    fig = _fig(at, "pareto_scatter")
    total = report.score_tables(_scores(synth), MAIN_EPSILON)["total"]
    pts = report.pareto_points(total, "bleu", "mr").set_index("model")
    for m in ("model-a", "model-b", "model-c"):
        [t] = _traces(fig, m)
        assert t["x"][0] == pytest.approx(pts.loc[m, "x"], rel=1e-12)
        assert t["y"][0] == pytest.approx(pts.loc[m, "y"], rel=1e-12)
        assert pts.loc[m, "x_cell"] in t["hovertemplate"] and pts.loc[m, "y_cell"] in t["hovertemplate"]
    [ideal] = _traces(fig, "Ideal (0, 0)")
    assert ideal["x"] == [0] and ideal["y"] == [0]
    [front] = _traces(fig, "Pareto frontier")
    expect = report.pareto_frontier(pts.reset_index())
    np.testing.assert_allclose(front["x"], expect["x"])
    assert fig["layout"]["xaxis"]["title"]["text"] == "SGS Δ-BLEU" and fig["layout"]["yaxis"]["title"]["text"] == "SGS Δ-MR"
    # another axis: model-c has no Δ-Cos → not plotted (never as 0)
    at.selectbox(key="pareto_x").set_value("cos").run()
    fig2 = _fig(at, "pareto_scatter")
    assert not _traces(fig2, "model-c") and _traces(fig2, "model-a")
    assert any("model-c" in shown(i.value) for i in at.info)  # the model name, Markdown-escaped
    # paper overlay: one separate trace, labelled as reported
    at.selectbox(key="pareto_x").set_value("bleu").run()
    at.toggle(key="pareto_paper").set_value(True).run()
    rep = [t for t in _fig(at, "pareto_scatter")["data"] if (t.get("meta") or {}).get("source") == paper.PAPER_SOURCE]
    assert len(rep) == 1 and len(rep[0]["x"]) == 11 and rep[0]["name"] == "Reported in arXiv 2610.01428"


def test_pareto_frontier_minimises_both():
    pts = pd.DataFrame({"model": list("abcd"), "x": [0.1, 0.2, 0.3, 0.25], "y": [0.5, 0.2, 0.1, 0.3]})
    assert list(report.pareto_frontier(pts)["model"]) == ["a", "b", "c"]  # d is dominated by b


# ---------------------------------------------------------------- Rankings
def test_rankings_bump_reversals_ratio(synth):
    at = _app(synth, "rankings")
    per = report.score_tables(_scores(synth), MAIN_EPSILON)["per_dataset"]
    ranks = report.rankings(per)
    bump = _vega_data(at, 0).sort_values(["model", "dataset"]).reset_index(drop=True)
    exp = ranks[ranks["axis"] == "cos"].sort_values(["model", "dataset"]).reset_index(drop=True)
    assert list(bump["rank"]) == list(exp["rank"]) and set(bump["model"]) == {"model-a", "model-b"}
    np.testing.assert_allclose(bump["sgs"], exp["sgs"])
    ratio = report.dataset_ratio(per)
    shown = next(df.value for df in at.dataframe if "ratio" in df.value.columns)
    np.testing.assert_allclose(shown["ratio"].to_numpy(), ratio["ratio"].to_numpy())
    # ratio = max/min over datasets, computed independently here
    g = per[(per["model"] == "model-a") & (per["axis"] == "bleu")]["sgs"]
    assert ratio.set_index(["model", "axis"]).loc[("model-a", "bleu"), "ratio"] == pytest.approx(g.max() / g.min())
    rev = report.reversals(per)
    for _, r in rev.iterrows():  # every listed reversal really flips
        w = per[per["axis"] == r["axis"]].pivot_table(index="dataset", columns="model", values="sgs")
        d1, d2 = r["a_better_on"].split(", ")[0], r["b_better_on"].split(", ")[0]
        assert w.loc[d1, r["model_a"]] < w.loc[d1, r["model_b"]] and w.loc[d2, r["model_b"]] < w.loc[d2, r["model_a"]]
    at.selectbox(key="rankings_axis").set_value("bleu").run()
    assert set(_vega_data(at, 0)["axis"]) == {"bleu"} and set(_vega_data(at, 0)["model"]) == {"model-a", "model-b", "model-c"}


# ---------------------------------------------------------------- Significance
def _marker_scipy(s: np.ndarray, eps: float) -> str:
    return marker(stats.ttest_1samp(s - eps, 0.0, alternative="greater").pvalue)


def test_significance_epsilon_flips_markers_as_scipy_says(tiny_store):
    ps = _scores(tiny_store)
    # pick the (axis, ε) where a marker at ε differs from ε = 0.05 (a flip), in the slider's range
    grid = np.round(np.arange(0.0, 0.2001, 0.001), 3)
    found = None
    for a in AXES:
        s = ps[ps["axis"] == a]["s"].to_numpy()
        if np.ptp(s) == 0:
            continue
        m0 = _marker_scipy(s, MAIN_EPSILON)
        for e in grid:
            if _marker_scipy(s, e) != m0:
                found = (a, float(e), m0, _marker_scipy(s, e))
                break
        if found:
            break
    assert found, "no ε in [0, 0.2] flips a marker on this store"
    axis, eps, m_before, m_after = found
    at = _app(tiny_store, "significance")
    table = at.dataframe[0].value.set_index("model")
    assert table.loc["tiny-random", AXIS_LABELS[axis]].endswith(m_before) or m_before == ""
    at.slider(key="significance_eps").set_value(eps).run()
    assert not at.exception
    cell = at.dataframe[0].value.set_index("model").loc["tiny-random", AXIS_LABELS[axis]]
    s = ps[ps["axis"] == axis]["s"].to_numpy()
    assert cell == f"{s.mean():.3f}±{s.std(ddof=1):.3f}{m_after}"
    # every cell of the table agrees with scipy at this ε
    row = at.dataframe[0].value.set_index("model").loc["tiny-random"]
    for a in AXES:
        s = ps[ps["axis"] == a]["s"].to_numpy()
        mk = _marker_scipy(s, eps) if np.ptp(s) > 0 else ("†" if s.mean() > eps else "")
        assert row[AXIS_LABELS[a]] == f"{s.mean():.3f}±{s.std(ddof=1):.3f}{mk}"


def test_significance_presets_counts_and_per_dataset(synth):
    at = _app(synth, "significance")
    at.button(key="significance_preset_0.1").click().run()
    assert at.slider(key="significance_eps").value == pytest.approx(0.10)
    ps = _scores(synth)
    sig = report.significance_table(ps, 0.10)
    counts = next(df.value for df in at.dataframe if "p<0.001" in df.value.columns).set_index("axis")
    for a in AXES:
        g = sig[sig["axis"] == a]
        assert counts.loc[AXIS_LABELS[a], "p<0.05"] == int((g["p"] < 0.05).sum())
        assert counts.loc[AXIS_LABELS[a], "n_models"] == (2 if a in ("cos", "prob") else 3)
    at.toggle(key="significance_per_dataset").set_value(True).run()
    t = at.dataframe[0].value
    assert list(t.columns[:2]) == ["model", "dataset"] and len(t) == 9
    assert (t.set_index(["model", "dataset"]).loc[("model-c", "alpaca"), "Δ-Cos"]) == "n/a"


# ---------------------------------------------------------------- Paper reference, exports, presentation
def test_paper_reference_page_labels_source(synth):
    at = _app(synth, "paper_reference")
    fig = _fig(at, "paper_fig2a")
    assert paper.PAPER_SOURCE in fig["layout"]["title"]["text"]
    tables = [df.value for df in at.dataframe]
    assert all((t["source"] == paper.PAPER_SOURCE).all() for t in tables)
    t1 = tables[1].set_index("model")
    assert t1.loc["GPT-5.4", "Δ-BLEU"] == "0.414±0.13†" and t1.loc["Claude-Sonnet-4.6", "Δ-Cos"] == "n/a"


def test_delta_matrix_export_matches_filter(tiny_store):
    from dashboard import data, exports

    f = Filters(positions=("GLOBAL",))
    mt = data._mtime(str(tiny_store))
    csv = pd.read_csv(io.BytesIO(exports._delta_csv(str(tiny_store), mt, f.key())))
    pq = pd.read_parquet(io.BytesIO(exports._delta_parquet(str(tiny_store), mt, f.key())))
    with open_store(tiny_store) as st:
        ref = st.delta_matrix(f)
    assert len(csv) == len(pq) == len(ref) > 0 and set(pq["position"]) == {"GLOBAL"}
    assert {"model", "dataset", "prompt_id", "variant_id", "family", "subtype", "strength", "position", "axis",
            "delta", "delta_norm"} <= set(pq.columns)
    np.testing.assert_allclose(pq["delta_norm"].to_numpy(dtype=float), ref["delta_norm"].to_numpy(dtype=float))


def test_presentation_mode_hides_downloads_and_collapses(synth):
    at = _app(synth, "pareto", state={"app_presentation": True})
    assert len(at.get("plotly_chart")) == 1
    assert not [b for b in at.get("download_button") if b.proto.id and "pareto_scatter" in b.proto.id]


@pytest.mark.parametrize("page", ["pareto", "rankings", "significance", "paper_reference"])
def test_summary_pages_render_on_real_store(tiny_store, page):
    at = _app(tiny_store, page)
    assert not at.error and (at.get("plotly_chart") or at.get("vega_lite_chart"))
    if page == "pareto":
        [t] = _traces(_fig(at, "pareto_scatter"), "tiny-random")
        total = report.score_tables(_scores(tiny_store), MAIN_EPSILON)["total"].set_index("axis")
        assert t["x"][0] == pytest.approx(total.loc["bleu", "sgs"]) and t["y"][0] == pytest.approx(total.loc["mr", "sgs"])
    if page == "rankings":
        assert set(_vega_data(at, 0)["rank"]) == {1}  # one model: rank 1 on every dataset


# ---------------------------------------------------------------- sample size: one population per curve
def test_sample_size_page_plots_the_pooled_sgs_spread(synth):
    at = _app(synth, "sample_size")
    data = _vega_data(at)
    # 6 prompts x 3 datasets = 18 prompts per model and axis: N = 4, 8, 16, 18 (= M, std 0), 32, 64, 128 (new only)
    assert set(data["n"]) == {4, 8, 16, 18, 32, 64, 128} and (data["n_available"] == 18).all()
    for _, g in data.groupby("axis"):
        g = g.sort_values("n")
        within = g["sd_within"].dropna().to_numpy()
        assert len(within) == 4 and within[-1] == 0 and (np.diff(within) < 0).all()  # monotone, 0 at N = M
        assert (np.diff(g["sd_new"].to_numpy()) < 0).all()


# ---------------------------------------------------------------- per-axis radar scale
def test_radar_axis_scales_take_the_largest_value_shown():
    radar = pd.DataFrame({"model": ["a", "b", "a", "b"], "axis": ["cos", "cos", "bleu", "bleu"],
                          "sgs": [0.01, 0.004, 0.8, 0.5], "hi": [0.02, 0.006, 0.9, 0.6], "available": True})
    sc = report.radar_axis_scales(radar, use_ci=True)
    assert sc["cos"] == 0.02 and sc["bleu"] == 0.9 and sc["mr"] == 1.0  # nothing shown on Δ-MR: no division by 0
    assert report.radar_axis_scales(radar, use_ci=False)["cos"] == 0.01
    extra = pd.DataFrame({"axis": ["cos"], "sgs": [0.05]})
    assert report.radar_axis_scales(radar, use_ci=False, extra=extra)["cos"] == 0.05


def test_profiles_per_axis_scale_divides_each_spoke_by_its_max(synth):
    common_fig = _fig(_app(synth, state={"profiles_ci": "off"}), "profiles_radar")
    fig = _fig(_app(synth, state={"profiles_ci": "off", "profiles_scale": "per axis"}), "profiles_radar")
    scores = _scores(synth)
    ref = report.radar_data(scores, n_resamples=1000, seed=0)
    mx = ref.groupby("axis")["sgs"].max()
    for model in ("model-a", "model-b"):
        [tr] = _traces(fig, model)
        [tc] = _traces(common_fig, model)
        for a, label, r, rc in zip(AXES, tr["theta"], tr["r"], tc["r"]):
            assert label == f"{AXIS_LABELS[a]} (max {mx[a]:.3g})"
            sgs = ref.set_index(["model", "axis"]).loc[(model, a), "sgs"]
            assert r == pytest.approx(sgs / mx[a]) and rc == pytest.approx(sgs)
    shown = [v for t in fig["data"] if t.get("name", "").startswith("model-") for v in t["r"] if v is not None]
    assert max(shown) == pytest.approx(1.0)
    assert "PER-AXIS SCALE" in fig["layout"]["title"]["text"]


# ---------------------------------------------------------------- a view travels as a link
def _app_url(store, page: str, params: dict) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state["app_store_custom"] = str(store)
    for k, v in params.items():
        at.query_params[k] = v
    at.switch_page(f"pages/{page}.py")  # the link's page is the first one this session runs
    at.run()
    assert not at.exception, at.exception
    return at


def test_pareto_link_reopens_the_clicked_view(synth):
    clicked = _app(synth, "pareto")
    clicked.selectbox(key="pareto_x").set_value("bleu").run()
    clicked.selectbox(key="pareto_y").set_value("mr").run()
    clicked.multiselect(key="filter_datasets").set_value(["nq_open"]).run()
    clicked.selectbox(key="pareto_correction").set_value("holm").run()
    assert not clicked.exception, clicked.exception
    link = {k: (v if isinstance(v, list) else [v]) for k, v in clicked.query_params.items()}
    assert link["x"] == ["bleu"] and link["y"] == ["mr"] and link["datasets"] == ["nq_open"]
    assert link["correction"] == ["holm"]
    opened = _app_url(synth, "pareto", {"x": "bleu", "y": "mr", "datasets": "nq_open", "correction": "holm"})
    assert opened.selectbox(key="pareto_y").value == "mr"
    assert _fig(opened, "pareto_scatter") == _fig(clicked, "pareto_scatter")
    assert _fig(opened, "pareto_scatter") != _fig(_app(synth, "pareto"), "pareto_scatter")  # the link changed the view


def test_link_values_a_page_does_not_offer_are_dropped(synth):
    at = _app_url(synth, "pareto", {"x": "nonsense", "datasets": ["nq_open", "../../etc"], "present": "1"})
    assert at.selectbox(key="pareto_x").value == "bleu"
    assert at.multiselect(key="filter_datasets").value == ["nq_open"]
    assert at.toggle(key="app_presentation").value is True  # presentation mode survives in the link


# ---------------------------------------------------------------- what a careful reader of every chart needs
def test_pareto_zoom_spans_the_models_and_their_bars(synth):
    pts = pd.DataFrame({"model": ["a", "b"], "x": [0.22, 0.23], "x_lo": [0.21, 0.225], "x_hi": [0.228, 0.24],
                        "y": [0.2, 0.2], "y_std": [0.01, 0.0]})
    lo, hi = report.zoom_range(pts, "x")
    assert lo == pytest.approx(0.21 - 0.08 * 0.03) and hi == pytest.approx(0.24 + 0.08 * 0.03)
    assert report.zoom_range(pts, "y") == pytest.approx([0.19 - 0.08 * 0.02, 0.21 + 0.08 * 0.02])  # ± std
    same = pd.DataFrame({"model": ["a"], "x": [0.0], "x_std": [0.0]})
    assert report.zoom_range(same, "x") == pytest.approx([-0.01, 0.01])  # one value at 0: still a range
    at = _app(synth, "pareto")
    wide = _fig(at, "pareto_scatter")["layout"]["xaxis"]["range"]
    at.toggle(key="pareto_zoom").set_value(True).run()
    fig = _fig(at, "pareto_scatter")
    xr = fig["layout"]["xaxis"]["range"]
    xs = [x for t in fig["data"] if t.get("name", "").startswith("model-") for x in t["x"]]
    assert wide[0] < 0 < xr[0] <= min(xs) and max(xs) <= xr[1] and (xr[1] - xr[0]) < (wide[1] - wide[0])
    assert at.query_params["zoom"] in ("1", ["1"], "true", ["true"])  # the zoom travels in the link


def test_variants_audit_table_says_why_a_cell_is_empty(synth):
    at = _app(synth, "variants")
    [audit] = [df.value for df in at.dataframe if "n_below" in df.value.columns]
    assert not audit.isna().any().any()
    assert set(audit["n_below"]) == {"no single threshold"}  # the synthetic store records no filter threshold


@pytest.mark.parametrize("page, key", [("profiles", "profiles_radar"), ("pareto", "pareto_scatter")])
def test_a_chart_title_names_the_datasets_the_filter_keeps(synth, page, key):
    """Scope "Total" with the sidebar keeping one dataset: the title names that dataset, not all of them."""
    def title(at):
        return _fig(at, key)["layout"]["title"]["text"]

    assert title(_app(synth, page)).endswith("Total (all datasets)")
    assert title(_app_url(synth, page, {"datasets": "nq_open"})).endswith("Total (nq_open)")
