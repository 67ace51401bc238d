"""Every summary page's numbers against an independent recomputation in this file.

The reference reads only raw rows (plain SQL on ``deltas`` ⋈ ``runs`` ⋈ ``variants``) and
recomputes with numpy / pandas / scipy: s_X(i) = sqrt(mean Δ̃²) over a prompt's kept, available
variants, SGS = mean over prompts, std ddof = 1, one-sided t-test, the paper's markers and cell
text, ranks, max/min ratios, Pareto dominance, finite-population std, histograms, mean |Δ̃|.
Nothing here calls ``sago_engine.views.report``, ``scoring`` or ``ablations``. Each page value is
matched to its reference by its labels (model, axis, dataset, variant), never by sorting values,
and every chart must hold exactly the expected number of points (an empty chart fails).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import plotly.io as pio
import pyarrow as pa
import pytest
from scipy import stats
from streamlit.testing.v1 import AppTest

from tests.integration.pages.test_pages_detail import _arr
from tests.support.factories import make_store

ROOT = Path(__file__).resolve().parents[3]
AXES = ["cos", "bleu", "bert", "prob", "ent", "mr"]  # the paper's order
PAPER_R = {"cos": 2.0, "bleu": 100.0, "bert": 1.0, "prob": 250.0, "ent": 10.0, "mr": 1.0}  # the paper's R_X table
LABEL = {"cos": "Δ-Cos", "bleu": "Δ-BLEU", "bert": "Δ-BERT", "prob": "Δ-Prob", "ent": "Δ-Ent", "mr": "Δ-MR"}
TOL = 1e-9  # both sides are float64 sums of the same values in another order


# ---------------------------------------------------------------- the independent reference
def raw_rows(store) -> pd.DataFrame:
    """Raw Δ̃ rows of the kept variants (plain SQL), one per (model, prompt, variant, axis)."""
    con = duckdb.connect(str(store), read_only=True)
    try:
        return con.execute("""
            SELECT r.model, d.dataset, d.prompt_id, d.variant_id, d.axis, d.delta_norm, d.available,
                   v.family, v.subtype, v.strength, v.position, v.kept, v.semantic_score, v.meta
            FROM deltas d JOIN runs r USING (run_id) JOIN variants v USING (variant_id)
            WHERE d.axis IN ('cos', 'bleu', 'bert', 'prob', 'ent', 'mr')""").df()
    finally:
        con.close()


def per_prompt(raw: pd.DataFrame) -> pd.DataFrame:
    ok = raw[raw["kept"].astype(bool) & raw["available"].astype(bool) & raw["delta_norm"].notna()]
    return (ok.groupby(["model", "dataset", "prompt_id", "axis"])["delta_norm"]
            .apply(lambda x: math.sqrt(float(np.mean(np.square(x.to_numpy(dtype=float))))))
            .rename("s").reset_index())


def p_greater(s: np.ndarray, eps: float) -> float:
    if len(s) < 2:
        return float("nan")
    if np.all(s == s[0]):
        return 0.0 if s[0] > eps else 1.0
    return float(stats.ttest_1samp(s - eps, 0.0, alternative="greater").pvalue)


def mark(p: float) -> str:
    return "" if not p == p else "†" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else ""


def sgs_table(ps: pd.DataFrame, by: list[str], eps: float = 0.05) -> pd.DataFrame:
    rows = []
    for key, g in ps.groupby(by):
        s = g["s"].to_numpy(dtype=float)
        p = p_greater(s, eps)
        sd = float(np.std(s, ddof=1)) if len(s) > 1 else float("nan")
        cell = f"{s.mean():.3f}" + ("" if sd != sd else f"±{sd:.3f}") + mark(p)
        rows.append({**dict(zip(by, key)), "sgs": float(s.mean()), "std": sd, "n": len(s), "p": p, "cell": cell})
    return pd.DataFrame(rows).set_index(by)


# ---------------------------------------------------------------- page helpers
@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    """Three models × three datasets × 6 prompts × 6 variants; model-c lacks Δ-Cos and Δ-Prob."""
    p = tmp_path_factory.mktemp("indep") / "synth.duckdb"
    return make_store(p, models=("model-a", "model-b", "model-c"), datasets=("truthfulqa", "nq_open", "alpaca"),
                      n_prompts=6, n_variants=6, seed=5, missing_axes={"model-c": ["cos", "prob"]})


def reference(store) -> dict:
    """The store's raw rows, per-prompt scores s_X(i), and total / per-dataset SGS tables, from the rows."""
    raw = raw_rows(store)
    ps = per_prompt(raw)
    return {"raw": raw, "ps": ps, "total": sgs_table(ps, ["model", "axis"]),
            "per": sgs_table(ps, ["model", "dataset", "axis"])}


@pytest.fixture(scope="module")
def ref(synth):
    return reference(synth)


def _app(store, page: str | None = None, **state) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["app_store_custom"] = str(store)
    for k, v in state.items():
        at.session_state[k] = v
    at.run()
    if page:
        at.switch_page(f"pages/{page}.py")
        at.run()
    assert not at.exception, at.exception
    return at


def _plotly(at, key: str):
    [el] = [e for e in at.get("plotly_chart") if e.proto.id and key in e.proto.id]
    return pio.from_json(el.proto.spec)


def _vega(at, *columns: str) -> pd.DataFrame:
    """The data of the one Vega-Lite chart whose dataset has all of ``columns``."""
    found = []
    for el in at.get("vega_lite_chart"):
        for ds in el.proto.datasets:
            df = pa.ipc.open_stream(ds.data.data).read_pandas()
            if set(columns) <= set(df.columns):
                found.append(df)
    [df] = found
    return df


CELL = re.compile(r"^(n/a|\d\.\d{3}(±\d\.\d{3})?(\*|\*\*|†)?)$")


def _cells_table(at, index: list[str]) -> pd.DataFrame:
    """The first table whose columns are ``index`` + the six axis labels and whose cells are "mean±std marker"."""
    want = [*index, *LABEL.values()]
    for d in at.dataframe:
        t = d.value
        if list(t.columns) == want and t[list(LABEL.values())].astype(str).apply(lambda c: c.str.match(CELL)).all().all():
            return t
    raise AssertionError(f"no table of cells indexed by {index}")


def _table_with(at, *columns: str) -> pd.DataFrame:
    """The first table that has all of ``columns``."""
    for d in at.dataframe:
        if set(columns) <= set(d.value.columns):
            return d.value
    raise AssertionError(f"no table with columns {columns}")


# ---------------------------------------------------------------- Profiles
def test_profiles_radar_and_tables_equal_the_recomputation(synth, ref):
    at = _app(synth, profiles_ci="off")
    fig = _plotly(at, "profiles_radar")
    total = ref["total"]
    models = sorted(ref["raw"]["model"].unique())
    lines = {t.name: t for t in fig.data if t.name in models}
    assert sorted(lines) == models
    n_checked = 0
    for m, t in lines.items():
        for label, r in zip(t.theta[:6], t.r[:6]):
            axis = next(a for a, lab in LABEL.items() if lab == label)
            if (m, axis) in total.index:
                assert r == pytest.approx(total.loc[(m, axis), "sgs"], abs=TOL)
                n_checked += 1
            else:
                assert r is None  # a gap, never 0
    assert n_checked == len(total) == 3 * 6 - 2
    # the total table: one row per model, one "mean±std marker" cell per axis
    tab = _cells_table(at, ["model"]).set_index("model")
    for (m, axis), row in total.iterrows():
        assert tab.loc[m, LABEL[axis]] == row["cell"], (m, axis)
    assert tab.loc["model-c", "Δ-Cos"] == "n/a" and tab.loc["model-c", "Δ-Prob"] == "n/a"
    per = _cells_table(at, ["model", "dataset"]).set_index(["model", "dataset"])
    assert len(per) == 9
    for (m, d, axis), row in ref["per"].iterrows():
        assert per.loc[(m, d), LABEL[axis]] == row["cell"], (m, d, axis)


# ---------------------------------------------------------------- Pareto
def _dominated(pts: dict, m: str) -> bool:
    x, y = pts[m]
    return any((a <= x and b <= y) and (a < x or b < y) for n, (a, b) in pts.items() if n != m)


@pytest.mark.parametrize("x_axis, y_axis", [("bleu", "mr"), ("cos", "ent")])
def test_pareto_points_and_frontier_equal_the_recomputation(synth, ref, x_axis, y_axis):
    at = _app(synth, "pareto", pareto_x=x_axis, pareto_y=y_axis)
    fig = _plotly(at, "pareto_scatter")
    total = ref["total"]
    want = {m: (total.loc[(m, x_axis), "sgs"], total.loc[(m, y_axis), "sgs"])
            for m in sorted(ref["raw"]["model"].unique()) if (m, x_axis) in total.index and (m, y_axis) in total.index}
    got = {t.name: (t.x[0], t.y[0]) for t in fig.data if t.name in want or t.name.startswith("model-")}
    assert sorted(got) == sorted(want) and len(want) == (3 if x_axis == "bleu" else 2)
    for m, (x, y) in want.items():
        assert got[m] == pytest.approx((x, y), abs=TOL), m
    [front] = [t for t in fig.data if t.name == "Pareto frontier"]
    on_front = sorted((x, y) for m, (x, y) in want.items() if not _dominated(want, m))
    got_front = sorted(zip(front.x, front.y))
    assert len(got_front) == len(on_front) > 0
    for g, w in zip(got_front, on_front):
        assert g == pytest.approx(w, abs=TOL)
    tab = _table_with(at, "on Pareto frontier").set_index("model")
    for m in want:
        assert tab.loc[m, f"SGS {LABEL[x_axis]}"] == total.loc[(m, x_axis), "cell"]
        assert bool(tab.loc[m, "on Pareto frontier"]) is (not _dominated(want, m))


# ---------------------------------------------------------------- Rankings
@pytest.mark.parametrize("axis", ["cos", "bleu"])
def test_rankings_ranks_and_ratios_equal_the_recomputation(synth, ref, axis):
    at = _app(synth, "rankings", rankings_axis=axis)
    bump = _vega(at, "rank", "n_models", "dataset")
    per = ref["per"].reset_index()
    sub = per[per["axis"] == axis].copy()
    sub["rank"] = sub.groupby("dataset")["sgs"].rank(method="min").astype(int)  # 1 = lowest SGS = most stable
    want = sub.set_index(["model", "dataset"])
    got = bump.set_index(["model", "dataset"])
    assert len(got) == len(want) == (6 if axis == "cos" else 9)
    for (m, d), row in want.iterrows():
        assert int(got.loc[(m, d), "rank"]) == row["rank"], (m, d)
        assert got.loc[(m, d), "sgs"] == pytest.approx(row["sgs"], abs=TOL)
    ratio = _table_with(at, "max_dataset", "ratio").set_index(["model", "axis"])
    expected = 0
    for (m, a), g in per.groupby(["model", "axis"]):
        hi, lo = g.loc[g["sgs"].idxmax()], g.loc[g["sgs"].idxmin()]
        row = ratio.loc[(m, LABEL[a])]
        assert (row["max_dataset"], row["min_dataset"]) == (hi["dataset"], lo["dataset"])
        assert row["max_sgs"] == pytest.approx(hi["sgs"], abs=TOL) and row["min_sgs"] == pytest.approx(lo["sgs"], abs=TOL)
        assert row["ratio"] == pytest.approx(hi["sgs"] / lo["sgs"], rel=1e-9)
        expected += 1
    assert len(ratio) == expected == 16


# ---------------------------------------------------------------- Significance
@pytest.mark.parametrize("eps", [0.05, 0.18])
def test_significance_cells_and_counts_equal_the_recomputation(synth, ref, eps):
    at = _app(synth, "significance", significance_eps=eps)
    total = sgs_table(ref["ps"], ["model", "axis"], eps=eps)
    tab = _cells_table(at, ["model"]).set_index("model")
    for (m, axis), row in total.iterrows():
        assert tab.loc[m, LABEL[axis]] == row["cell"], (m, axis, eps)
    assert (tab.loc["model-c", ["Δ-Cos", "Δ-Prob"]] == "n/a").all()
    counts = _table_with(at, "p<0.001", "n_models").set_index("axis")
    for axis in AXES:
        g = total.xs(axis, level="axis")
        assert counts.loc[LABEL[axis], "p<0.05"] == int((g["p"] < 0.05).sum()), (axis, eps)
        assert counts.loc[LABEL[axis], "p<0.001"] == int((g["p"] < 0.001).sum()), (axis, eps)
    assert {r["cell"][-1] for _, r in total.iterrows()} != {"*"}  # the store gives both rejected and kept H0s


# ---------------------------------------------------------------- Sample size
def sample_size_reference(ps: pd.DataFrame, model: str) -> pd.DataFrame:
    """Per (axis, N): the exact std of the mean of N of the model's M per-prompt scores drawn without
    replacement, σ/√N·√((M−N)/(M−1)) (NaN above M), and σ̂/√N for N new prompts."""
    rows = []
    for axis, g in ps[ps["model"] == model].groupby("axis"):
        x = g["s"].to_numpy(dtype=float)
        m = len(x)
        for n in sorted({4, 8, 16, 32, 64, 128, m}):
            within = float(np.std(x)) / math.sqrt(n) * math.sqrt((m - n) / (m - 1)) if n <= m else float("nan")
            rows.append({"axis": axis, "n": n, "sd_within": within, "sd_new": float(np.std(x, ddof=1)) / math.sqrt(n)})
    return pd.DataFrame(rows).set_index(["axis", "n"])


def test_sample_size_points_equal_the_recomputation(synth, ref):
    at = _app(synth, "sample_size", sample_size_model="model-b")
    got = _vega(at, "sd_within", "sd_new").assign(axis=lambda d: d["axis"]).set_index(["axis", "n"])
    want = sample_size_reference(ref["ps"], "model-b")
    assert sorted(got.index) == sorted(want.index) and len(want) == 6 * 7  # 18 prompts: N = 4…128 and M = 18
    for k, row in want.iterrows():
        assert got.loc[k, "sd_within"] == pytest.approx(row["sd_within"], abs=1e-12, nan_ok=True), k
        assert got.loc[k, "sd_new"] == pytest.approx(row["sd_new"], abs=1e-12), k


# ---------------------------------------------------------------- Prompts and Variants (the real engine's store)
def test_prompts_heatmap_cells_equal_raw_deltas_by_label(tiny_store):
    at = _app(tiny_store, "prompts")
    pid = at.selectbox(key="prompts_prompt").value
    heat = _vega(at, "delta_norm", "label", "axis_label")
    raw = raw_rows(tiny_store)
    raw = raw[raw["prompt_id"] == pid]
    raw = raw.assign(label=[f"{f} · {u} · {float(x):g} · {p}" for f, u, x, p in
                            zip(raw["family"], raw["subtype"], raw["strength"], raw["position"])])
    assert raw.drop_duplicates("variant_id")["label"].is_unique  # each cell is named by its (F, u, s, p)
    assert len(heat) == len(raw) > 0
    for r in raw.itertuples(index=False):
        [cell] = heat[(heat["model"] == r.model) & (heat["label"] == r.label) & (heat["axis_label"] == LABEL[r.axis])
                      ].to_dict("records")
        if r.available:
            assert cell["delta_norm"] == pytest.approx(r.delta_norm, abs=1e-12), (r.label, r.axis)
        else:
            assert cell["delta_norm"] is None or math.isnan(cell["delta_norm"])


def test_variants_histogram_dose_and_tone_equal_the_recomputation(tiny_store):
    at = _app(tiny_store, "variants")
    axis = at.selectbox(key="variants_axis").value
    raw = raw_rows(tiny_store)
    # semantic-score histogram: 40 equal bins on [0, 1] per family × kept, one row per non-empty bin
    hist = _vega(at, "bin_start", "count")
    var = raw.drop_duplicates("variant_id").dropna(subset=["semantic_score"])
    want = {}
    for r in var.itertuples(index=False):
        b = min(int(r.semantic_score * 40), 39)
        k = (r.family, "kept" if r.kept else "rejected", b / 40)
        want[k] = want.get(k, 0) + 1
    got = {(r.family, r.kept, round(r.bin_start, 9)): int(r.count) for r in hist.itertuples(index=False)}
    assert got == {(f, k, round(b, 9)): n for (f, k, b), n in want.items()} and sum(got.values()) == len(var) > 0
    # dose-response by position: mean |Δ̃| per model × family × position of the chosen axis
    ok = raw[raw["kept"] & raw["available"] & (raw["axis"] == axis)]
    fig = _plotly(at, "variants_dose_position")
    n_bars = 0
    for t in fig.data:
        fam = re.search(r"family=([^<]+)", t.hovertemplate).group(1)
        for x, y in zip(_arr(t.x), _arr(t.y).astype(float)):
            vals = ok[(ok["model"] == t.name) & (ok["family"] == fam) & (ok["position"] == x)]["delta_norm"]
            assert y == pytest.approx(float(np.mean(np.abs(vals))), abs=TOL), (t.name, fam, x)
            n_bars += 1
    assert n_bars == ok.groupby(["model", "family", "position"]).ngroups > 0
    # tone asymmetry: mean |Δ̃| of negative vs polite social-register variants, per axis
    tone = raw.assign(tone=[json.loads(m or "{}").get("tone") for m in raw["meta"]])
    tone = tone[(tone["family"] == "social_register") & tone["kept"] & tone["available"]
                & tone["tone"].isin(["negative", "polite"])]
    fig = _plotly(at, "variants_tone")
    n_bars = 0
    for t in fig.data:
        label = re.search(r"axis=([^<]+)", t.hovertemplate).group(1)
        a = next(k for k, v in LABEL.items() if v == label)
        for x, y in zip(_arr(t.x), _arr(t.y).astype(float)):
            vals = tone[(tone["model"] == x) & (tone["axis"] == a) & (tone["tone"] == t.name)]["delta_norm"]
            assert y == pytest.approx(float(np.mean(np.abs(vals))), abs=TOL), (x, a, t.name)
            n_bars += 1
    assert n_bars == tone.groupby(["model", "axis", "tone"]).ngroups > 0


# ---------------------------------------------------------------- Method choices
def raw_all_axes(store) -> pd.DataFrame:
    """Raw Δ and Δ̃ rows of every stored axis name (plain and ``<base>@<option>``) of the kept variants."""
    con = duckdb.connect(str(store), read_only=True)
    try:
        return con.execute("""
            SELECT r.model, d.dataset, d.prompt_id, d.variant_id, d.axis, d.delta, d.delta_norm, d.available, v.kept
            FROM deltas d JOIN runs r USING (run_id) JOIN variants v USING (variant_id)""").df()
    finally:
        con.close()


def _rms_per_prompt(rows: pd.DataFrame, value: str = "delta_norm") -> pd.DataFrame:
    ok = rows[rows["kept"].astype(bool) & rows["available"].astype(bool) & rows[value].notna()]
    return (ok.groupby(["model", "dataset", "prompt_id"])[value]
            .apply(lambda x: math.sqrt(float(np.mean(np.square(x.to_numpy(dtype=float)))))).rename("s").reset_index())


def _option_scores(raw: pd.DataFrame) -> dict[tuple[str, str, str], np.ndarray]:
    """{(choice, option, base axis): per-prompt s of every model} for the option axes and the R_X choice."""
    out: dict[str, dict] = {}
    for base, options in (("cos", ("default", "user_last", "user_mean")), ("bert", ("default", "rescaled"))):
        for o in options:
            name = base if o == "default" else f"{base}@{o}"
            out[(base, o, base)] = _rms_per_prompt(raw[raw["axis"] == name])
    for a in AXES:
        rows = raw[(raw["axis"] == a) & raw["kept"].astype(bool) & raw["available"].astype(bool) & raw["delta"].notna()]
        r_data = float(np.quantile(np.abs(rows["delta"].to_numpy(dtype=float)), 0.95))  # DuckDB's quantile_cont
        out[("rx", "paper R_X", a)] = _rms_per_prompt(rows)
        out[("rx", "data-driven R_X", a)] = _rms_per_prompt(
            rows.assign(rescaled=np.clip(rows["delta"].to_numpy(dtype=float) / r_data, -1.0, 1.0)), "rescaled")
        x = rows["delta"].to_numpy(dtype=float) / PAPER_R[a]  # the clipping choice: the paper's R_X
        out[("clip", "clipped Δ̃", a)] = _rms_per_prompt(rows.assign(x=np.clip(x, -1.0, 1.0)), "x")
        out[("clip", "unclipped Δ̃", a)] = _rms_per_prompt(rows.assign(x=x), "x")
    return out


def _choice_sgs(ps: pd.DataFrame, eps: float) -> dict[str, dict]:
    """Per model: SGS (mean over prompts of s) and the one-sided p of H0: E[s] ≤ ε."""
    return {m: {"sgs": float(g["s"].mean()), "p": p_greater(g["s"].to_numpy(dtype=float), eps)}
            for m, g in ps.groupby("model")}


@pytest.fixture(scope="module")
def choices_store(tmp_path_factory):
    """Four models × two datasets; Δ-Cos options user_last (rescaled per model: the order changes) and
    user_mean, Δ-BERT option rescaled."""
    from tests.support.factories import add_option_axes

    p = tmp_path_factory.mktemp("indep_mc") / "choices.duckdb"
    make_store(p, models=("model-a", "model-b", "model-c", "model-d"), datasets=("truthfulqa", "nq_open"),
               n_prompts=6, n_variants=6, seed=9)
    return add_option_axes(p, factors={"cos@user_last": {"model-a": 3.0, "model-b": 1.0, "model-c": 0.5,
                                                         "model-d": 2.0}})


CI_CELL = re.compile(r"^(\d\.\d{3}) \[(\d\.\d{3}), (\d\.\d{3})\](\*|\*\*|†)?$")


def test_method_choices_sgs_and_rank_agreement_equal_the_recomputation(choices_store):
    from scipy.stats import kendalltau

    at = _app(choices_store, "method_choices")
    raw = raw_all_axes(choices_store)
    ref = {k: _choice_sgs(ps, 0.05) for k, ps in _option_scores(raw).items()}
    models = ["model-a", "model-b", "model-c", "model-d"]
    sections = [("cos", ("default", "user_last", "user_mean"), ("cos",)),
                ("bert", ("default", "rescaled"), ("bert",)),
                ("rx", ("paper R_X", "data-driven R_X"), tuple(AXES)),
                ("clip", ("clipped Δ̃", "unclipped Δ̃"), tuple(AXES))]
    tables = [d.value for d in at.dataframe]
    charts = [pa.ipc.open_stream(ds.data.data).read_pandas() for el in at.get("vega_lite_chart")
              for ds in el.proto.datasets]
    assert len(charts) == len(sections)  # one interval chart per choice with options (Δ-Prob, cap: none here)
    n_cells = n_taus = 0
    for i, (choice, options, axes) in enumerate(sections):
        wide, ranks = tables[3 * i], tables[3 * i + 1]  # (the claims table between is an st.table)
        assert list(wide.columns) == ["model", "axis", *options]
        assert list(ranks.columns[:6]) == ["option", "axis", "n_models", "n_discordant", "tau", "p"]
        wide = wide.set_index(["model", "axis"])
        chart = charts[i].set_index(["option", "model", "axis_label"])
        assert len(wide) == len(models) * len(axes) and len(chart) == len(models) * len(axes) * len(options)
        for o in options:
            for a in axes:
                for m in models:
                    want = ref[(choice, o, a)][m]
                    cell = CI_CELL.match(wide.loc[(m, LABEL[a]), o])
                    assert cell, wide.loc[(m, LABEL[a]), o]
                    assert cell.group(1) == f"{want['sgs']:.3f}", (choice, o, a, m)
                    assert (cell.group(4) or "") == mark(want["p"]), (choice, o, a, m)
                    assert float(cell.group(2)) <= float(cell.group(1)) <= float(cell.group(3))
                    pt = chart.loc[(o, m, LABEL[a])]
                    assert pt["sgs"] == pytest.approx(want["sgs"], abs=TOL), (choice, o, a, m)
                    assert pt["p"] == pytest.approx(want["p"], rel=1e-9, abs=1e-300), (choice, o, a, m)
                    n_cells += 1
        # Kendall's τ-b of every option against the reference (the first option), models matched by name
        got = ranks.set_index(["option", "axis"])
        assert len(got) == (len(options) - 1) * len(axes)
        for o in options[1:]:
            for a in axes:
                x = np.array([ref[(choice, options[0], a)][m]["sgs"] for m in models])
                y = np.array([ref[(choice, o, a)][m]["sgs"] for m in models])
                row = got.loc[(o, LABEL[a])]
                res = kendalltau(x, y, variant="b", method="exact")
                assert row["n_models"] == len(models)
                assert row["tau"] == pytest.approx(res.statistic, abs=1e-12), (choice, o, a)
                assert row["p"] == pytest.approx(res.pvalue, abs=1e-12), (choice, o, a)
                flips = sum((x[j] - x[k]) * (y[j] - y[k]) < 0 for j in range(4) for k in range(j + 1, 4))
                assert row["n_discordant"] == flips, (choice, o, a)
                n_taus += 1
    assert n_cells == 4 * (3 + 2 + 2 * 6 + 2 * 6) and n_taus == 2 + 1 + 6 + 6
    # the rescaled user_last option reorders the models: a τ other than 1 is checked, not only τ = 1
    assert tables[1].set_index("option").loc["user_last", "tau"] < 1.0
