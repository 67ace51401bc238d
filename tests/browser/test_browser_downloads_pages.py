"""Every download button of the other pages, clicked in chromium: the files parse and hold the page's numbers.

Pages: Profiles, Significance, Sample size, Model vs model, Prompts, Worst cases, Variants, Method
choices, Paper reference, and the sidebar's Δ-matrix CSV / Parquet. One dashboard server, one
browser page, each page visited once, on one small synthetic store (``tests.support.factories.make_store``
with tone / target-length metadata, rejected and no-op variants, option axes, replies with
log-probs, judge verdicts and noise-floor repeats), so every conditional section with a download
is drawn. Each page's buttons must be exactly the expected set (a button that disappears fails).

Every file is checked for its format — CSV: UTF-8 with a byte-order mark, CRLF row ends, read by
pandas; Parquet: pyarrow; HTML: the Plotly figure JSON or the Vega-Lite spec inline, no external
script, the ``Source: sago · store …`` footer; SVG: lxml; PNG: PIL, something drawn — and for its
numbers, against a recomputation from the raw rows in this file (plain SQL + numpy / pandas /
scipy; never the function that built the file), matched by labels (model, axis, dataset, variant)
cell by cell. The Paper reference page is checked against values published in arXiv 2610.01428.

PNG and SVG go through the same kaleido / vl-convert calls that tests/browser/test_browser_downloads.py
exercises on Pareto (Plotly scatter) and Rankings (Altair line chart); here they are fetched for
one chart of each kind not covered there: the Model-vs-model matrix (a Plotly heatmap with cell
text: its SVG must hold the paired differences) and the Significance heatmap (a layered Altair
rect + text chart: its SVG must hold each cell's "SGS marker" text). Every other chart: HTML + CSV.

Left out: the Live page (its only download, the probe's radar, appears after a model has run a
probe) and Paper reference's audit table (needs the SAGO authors' released rows in the store).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from tests.integration.pages.test_pages_detail import _arr
from tests.integration.pages.test_pages_independent import (
    AXES,
    LABEL,
    PAPER_R,
    _option_scores,
    mark,
    p_greater,
    raw_all_axes,
    reference,
    sgs_table,
)
from tests.support import downloads_reference as ref_q
from tests.support.browser import require_chromium
from tests.support.downloads_site import (
    DELTA_KEYS,
    MODELS,
    THRESHOLD,
    _chart,
    _plotly_figure,
    _traces,
    _vega_rows,
    build_store,
    download_site,
)

pytestmark = pytest.mark.browser
UNLABEL = {v: k for k, v in LABEL.items()}
TOL = 1e-9  # both sides are float64 sums of the same values in another order


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return build_store(tmp_path_factory.mktemp("dl_pages") / "pages.duckdb")


@pytest.fixture(scope="module")
def site(store):
    require_chromium()
    with download_site(store) as visit:
        yield visit


@pytest.fixture(scope="module")
def ref(store):
    """The raw rows and the per-prompt scores s_X(i) of the store (tests/integration/pages/test_pages_independent.py)."""
    return reference(store)


# ---------------------------------------------------------------- the pages
def _sgs_rows(df: pd.DataFrame, want: pd.DataFrame, index: list[str]) -> None:
    """``df`` (axis as its label) holds exactly ``want``'s groups with the same sgs, std, n_prompts, p and marker."""
    got = df.assign(axis=df["axis"].map(lambda a: UNLABEL.get(a, a))).set_index(index)
    assert sorted(got.index) == sorted(want.index)
    for k, w in want.iterrows():
        g = got.loc[k]
        assert g["sgs"] == pytest.approx(w["sgs"], abs=TOL) and g["std"] == pytest.approx(w["std"], rel=1e-9), k
        assert g["n_prompts"] == w["n"] and g["p"] == pytest.approx(w["p"], rel=1e-9), k
        assert (g["marker"] if isinstance(g["marker"], str) else "") == mark(w["p"]), k


def _floor_rows(df: pd.DataFrame, want: pd.DataFrame) -> None:
    got = df.set_index(["model", "axis"])
    assert sorted(got.index) == sorted(want.index)
    for k, w in want.iterrows():
        g = got.loc[k]
        assert (g["n_prompts"], g["n_paired"]) == (w["n_prompts"], w["n_paired"]), k
        assert g["sgs"] == pytest.approx(w["sgs"], abs=TOL), k
        assert [g["floor"], g["t"], g["p"]] == pytest.approx([w["floor"], w["t"], w["p"]], rel=1e-9, nan_ok=True), k


def check_profiles(files: dict, store, ref: dict) -> None:
    total, raw = ref["total"], ref["raw"]
    radar = files["profiles_radar_dl_csv"].set_index(["model", "axis"])
    assert len(radar) == len(MODELS) * 6
    for (m, a), r in radar.iterrows():
        assert bool(r["available"]) is ((m, a) in total.index), (m, a)
        if (m, a) in total.index:
            assert r["sgs"] == pytest.approx(total.loc[(m, a), "sgs"], abs=TOL) and r["lo"] <= r["sgs"] <= r["hi"]
            assert r["n_prompts"] == total.loc[(m, a), "n"] and r["axis_label"] == LABEL[a]
    lines = {t["name"]: t for t in _plotly_figure(files["profiles_radar_dl_html"])[0] if t.get("name") in MODELS}
    assert sorted(lines) == list(MODELS)
    for m, t in lines.items():
        for theta, r in zip(_arr(t["theta"])[:6], _arr(t["r"])[:6]):
            a = UNLABEL[theta]
            assert (r is None) if (m, a) not in total.index else float(r) == pytest.approx(total.loc[(m, a), "sgs"],
                                                                                          abs=TOL), (m, a)
    _sgs_rows(files["profiles_total_table_csv"], total, ["model", "axis"])
    _sgs_rows(files["profiles_dataset_table_csv"], ref["per"], ["model", "dataset", "axis"])
    ci = files["profiles_ci_table_csv"]
    _sgs_rows(ci, total, ["model", "axis"])
    assert (ci["ci_low"] <= ci["sgs"]).all() and (ci["sgs"] <= ci["ci_high"]).all() and not ci["small_n"].any()
    avail = files["profiles_availability_csv"].set_index("model")
    has = set(raw[raw["available"].astype(bool)].groupby(["model", "axis"]).size().index)
    for m in MODELS:
        for a in AXES:
            assert (avail.loc[m, LABEL[a]] == "available") is ((m, a) in has), (m, a)
    health = files["profiles_reply_health_csv"].set_index("model")
    n = ref_q.query(store, "SELECT r.model, count(*) AS n FROM responses s JOIN runs r USING (run_id) GROUP BY 1"
                    ).set_index("model")["n"]
    assert health["replies"].to_dict() == n.to_dict() and (health[["errors", "empty", "refused"]] == 0).all().all()
    _floor_rows(files["profiles_noise_floor_csv"], ref_q.noise_floor(store, ref["ps"]))
    # the sidebar's Δ matrix: every (model, prompt, variant, axis) row of the kept variants, Δ and Δ̃ as stored
    want = ref_q.query(store, """SELECT r.model, d.prompt_id, d.variant_id, d.axis, d.delta, d.delta_norm, d.available
        FROM deltas d JOIN runs r USING (run_id) JOIN variants v USING (variant_id)
        WHERE v.kept AND d.axis NOT LIKE '%@%'""").set_index(["model", "prompt_id", "variant_id", "axis"]).sort_index()
    for df in (files["app_delta_csv"], files["app_delta_parquet"]):
        got = df.set_index(["model", "prompt_id", "variant_id", "axis"]).sort_index()
        assert got.index.equals(want.index)
        assert (got["available"].astype(bool).to_numpy() == want["available"].to_numpy()).all()
        for c in ("delta", "delta_norm"):
            np.testing.assert_allclose(got[c].to_numpy(float), want[c].to_numpy(float), rtol=0, atol=1e-12)


def test_profiles(site, store, ref):
    want = _chart("profiles_radar") | {f"profiles_{k}_csv" for k in ("total_table", "reply_health", "noise_floor",
                                                                      "dataset_table", "ci_table", "availability")}
    check_profiles(site("Profiles", want, DELTA_KEYS, query="?B=100"), store, ref)


def check_significance(files: dict, store, ref: dict) -> None:
    total, ps = ref["total"], ref["ps"]
    _sgs_rows(files["significance_table_csv"], total, ["model", "axis"])
    heat = files["significance_heatmap_dl_csv"]
    _sgs_rows(heat, total, ["model", "axis"])
    assert (heat.set_index(["model", "axis"])["cell"] == total["cell"]).all()
    spec = _vega_rows(files["significance_heatmap_dl_html"], "model", "axis_label", "sgs", "label")
    spec = spec.assign(axis=spec["axis_label"].map(UNLABEL)).set_index(["model", "axis"])
    assert sorted(spec.index) == sorted(total.index)
    for k, w in total.iterrows():
        assert spec.loc[k, "sgs"] == pytest.approx(w["sgs"], abs=TOL)
        assert spec.loc[k, "label"] == f"{w['sgs']:.3f}{mark(w['p'])}", k
        assert spec.loc[k, "label"] in files["significance_heatmap_dl_svg"], k  # the drawn cell text
    pv = files["significance_pvalues_csv"].set_index(["model", "axis"])
    assert len(pv) == len(total)
    for (m, a), w in total.iterrows():
        g = pv.loc[(m, LABEL[a])]
        assert g["p_raw"] == pytest.approx(w["p"], rel=1e-9) and g["lo"] <= g["sgs"] <= g["hi"], (m, a)
        assert g["sgs"] == pytest.approx(w["sgs"], abs=TOL)
    counts = files["significance_counts_csv"].set_index("axis")
    thr = files["significance_threshold_csv"].set_index(["axis", "eps", "alpha"])
    assert len(counts) == 6 and len(thr) == 6 * 3 * 3
    for a in AXES:
        g = total.xs(a, level="axis")
        for alpha in (0.05, 0.01, 0.001):
            assert counts.loc[LABEL[a], f"p<{alpha:g}"] == int((g["p"] < alpha).sum()), (a, alpha)
        assert counts.loc[LABEL[a], "n_models"] == len(g)
        for eps in (0.01, 0.05, 0.1):
            p = sgs_table(ps[ps["axis"] == a], ["model"], eps=eps)["p"]
            for alpha in (0.05, 0.01, 0.001):
                row = thr.loc[(LABEL[a], eps, alpha)]
                assert (row["n_rejected"], row["n_models"]) == (int((p < alpha).sum()), len(p)), (a, eps, alpha)
    # R_X: the paper's constants against the 95 % quantile of |Δ| over the store's kept, available rows
    nrm = files["significance_normalizers_csv"].set_index(["model", "axis"])
    raw_all = raw_all_axes(store)
    opt = _option_scores(raw_all)
    ok = raw_all[raw_all["kept"].astype(bool) & raw_all["available"].astype(bool)]
    rx = {a: float(np.quantile(np.abs(ok[ok["axis"] == a]["delta"]), 0.95)) for a in AXES}
    assert len(nrm) == len(total)
    for (m, a), w in total.iterrows():
        g = nrm.loc[(m, LABEL[a])]
        data = opt[("rx", "data-driven R_X", a)].query("model == @m")["s"]
        assert (g["r_paper"], g["r_data"]) == pytest.approx((PAPER_R[a], rx[a]), rel=1e-9), (m, a)
        assert (g["sgs_paper"], g["sgs_data"]) == pytest.approx((w["sgs"], data.mean()), abs=TOL), (m, a)
        assert g["p_data"] == pytest.approx(p_greater(data.to_numpy(), 0.05), rel=1e-9), (m, a)
    _floor_rows(files["significance_noise_floor_csv"], ref_q.noise_floor(store, ps))
    r, tok = ref_q.per_token(store)
    both = files["significance_per_token_csv"].set_index(["model", "axis"])
    assert len(both) == 2 * 2  # model-a and model-b have log-probs; model-c has no Δ-Prob
    for m, g in tok.groupby("model"):
        row, seq = both.loc[(m, "Δ-Prob / token")], both.loc[(m, "Δ-Prob (R = 250, sequence)")]
        assert row["sgs"] == pytest.approx(g["s"].mean(), abs=TOL) and row["n_prompts"] == len(g), m
        assert seq["sgs"] == pytest.approx(total.loc[(m, "prob"), "sgs"], abs=TOL), m
        assert row["lo"] <= row["sgs"] <= row["hi"] and seq["lo"] <= seq["sgs"] <= seq["hi"], m


def test_significance(site, store, ref):
    want = _chart("significance_heatmap") | {f"significance_{k}_csv" for k in (
        "table", "noise_floor", "pvalues", "counts", "threshold", "normalizers", "per_token")}
    check_significance(site("Significance", want), store, ref)


def check_sample_size(files: dict, ref: dict) -> None:
    ps = ref["ps"][ref["ps"]["model"] == "model-a"]  # the page's first model
    curve = files["sample_size_curve_dl_csv"]
    assert set(curve["model"]) == {"model-a"}
    plotted = _vega_rows(files["sample_size_curve_dl_html"], "sd_new", "n")
    for a, g in ps.groupby("axis"):
        x = g["s"].to_numpy()
        m = len(x)
        for n in sorted({4, 8, 16, 32, 64, 128, m}):
            row = curve[curve["axis"].isin([a, LABEL[a]]) & (curve["n"] == n)].iloc[0]
            within = np.std(x) / math.sqrt(n) * math.sqrt((m - n) / (m - 1)) if n <= m else float("nan")
            assert row["sd_within"] == pytest.approx(within, abs=1e-12, nan_ok=True), (a, n)
            assert row["sd_new"] == pytest.approx(np.std(x, ddof=1) / math.sqrt(n), abs=1e-12), (a, n)
            [drawn] = plotted.loc[plotted["axis"].isin([a, LABEL[a]]) & (plotted["n"] == n), "sd_new"]
            assert drawn == pytest.approx(row["sd_new"], abs=1e-12), (a, n)
    need = files["sample_size_needed_csv"].set_index(["model", "axis"])
    z = stats.norm.ppf(0.975)
    assert len(need) == len(ref["total"])
    for (m, a), g in ref["ps"].groupby(["model", "axis"]):
        sd = float(np.std(g["s"], ddof=1))
        row = need.loc[(m, LABEL[a])]
        assert row["sigma"] == pytest.approx(sd, rel=1e-9) and row["n_now"] == len(g), (m, a)
        n = max(2, math.ceil((z * sd / 0.02) ** 2))
        while stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n) > 0.02:
            n += 1
        assert row["n_needed"] == n, (m, a)
        assert row["halfwidth_now"] == pytest.approx(stats.t.ppf(0.975, len(g) - 1) * sd / math.sqrt(len(g)),
                                                     rel=1e-9), (m, a)


def test_sample_size(site, ref):
    check_sample_size(site("Sample size", _chart("sample_size_curve") | {"sample_size_needed_csv"}), ref)


def check_pairwise(files: dict, ref: dict) -> None:
    want = ref_q.wilcoxon_pairs(ref["ps"])
    tab = files["pairwise_table_csv"]
    got = tab.assign(axis=tab["axis"].map(UNLABEL)).set_index(["axis", "model_a", "model_b"])
    assert sorted(got.index) == sorted(want.index) and len(want) == 2 * 1 + 4 * 3  # Δ-Cos and Δ-Prob: model-a vs model-b only
    for k, w in want.iterrows():
        g = got.loc[k]
        assert [g[c] for c in ("n_prompts", "n_zero", "r_plus", "r_minus")] == [w[c] for c in (
            "n_prompts", "n_zero", "r_plus", "r_minus")], k
        assert [g[c] for c in ("sgs_a", "sgs_b", "diff")] == pytest.approx([w["sgs_a"], w["sgs_b"], w["diff"]], abs=TOL)
        assert g["p"] == pytest.approx(w["p_mean"], rel=1e-9) and g["p_adj"] == g["p"], k
        assert g["method"] == f"exact (all 2^{int(w['n_nonzero'])} sign flips)", k
        assert g["ci_low"] <= g["diff"] <= g["ci_high"], k
        if g["verdict"] != "none":  # a side is called only where p < 0.05, and it is the one with the lower SGS
            assert w["p_mean"] < 0.05 and g["better"] == (k[1] if w["diff"] < 0 else k[2]), k
        else:
            assert not isinstance(g["better"], str), k
    # the matrix of Δ-BLEU (the page's default axis): row − column, both orders
    bleu = want.xs("bleu", level="axis")
    cells = files["pairwise_matrix_dl_csv"].set_index(["row", "col"])
    assert len(cells) == 3 * 2
    drawn = {}  # (row, col) → (cell text, z, layer): three heatmap layers, one cell drawn in one of them
    for t in _plotly_figure(files["pairwise_matrix_dl_html"])[0]:
        z = _arr(t["z"]).astype(float).reshape(len(t["y"]), len(t["x"]))
        for i, y in enumerate(t["y"]):
            for j, x in enumerate(t["x"]):
                if t["text"][i][j]:
                    assert (y, x) not in drawn
                    drawn[(y, x)] = (t["text"][i][j], z[i, j], t["name"])
    assert len(drawn) == 3 * 2
    for (a, b), w in bleu.iterrows():
        for r, c, d in ((a, b, w["diff"]), (b, a, -w["diff"])):
            p = "p < 0.001" if w["p_mean"] < 0.001 else f"p = {w['p_mean']:.2g}"
            text = f"{d:+#.3g}".replace("-", "−") + mark(w["p_mean"]) + "\n" + p
            cell = cells.loc[(r, c)]
            assert cell["diff"] == pytest.approx(d, abs=TOL) and cell["p"] == pytest.approx(w["p_mean"], rel=1e-9), (r, c)
            assert cell["label"] == ("'" if text.startswith("+") else "") + text, (r, c)  # a leading + is quoted
            shown, z, layer = drawn[(r, c)]
            assert shown == text.replace("\n", "<br>"), (r, c)
            assert (z, layer == "not distinguishable") == ((0.0, True) if not cell["called"] else (pytest.approx(d), False))
            assert not cell["called"] or w["p_mean"] < 0.05, (r, c)
            assert shown.split("<br>")[0] in files["pairwise_matrix_dl_svg"], (r, c)  # the drawn cell text


def test_pairwise(site, ref):
    check_pairwise(site("Model vs model", _chart("pairwise_matrix") | {"pairwise_table_csv"}), ref)


def check_prompts(files: dict, store, ref: dict) -> None:
    pid = "nq_open:0"  # the page's first dataset and prompt
    raw = ref["raw"][ref["raw"]["prompt_id"] == pid]
    heat = files["prompts_heatmap_dl_csv"]
    spec = _vega_rows(files["prompts_heatmap_dl_html"], "delta_norm", "label", "axis_label")
    want = raw  # every variant of the prompt (rejected ones too) × axis, n/a cells included
    assert len(heat) == len(spec) == len(want) == len(MODELS) * 6 * 6
    got = heat.set_index(["model", "variant_id", "axis"])
    drawn = spec.set_index(["model", "label", "axis_label"])
    for r in want.itertuples(index=False):
        cell = got.loc[(r.model, r.variant_id, r.axis)]
        assert cell["label"] == ref_q.variant_label(r) and cell["axis_label"] == LABEL[r.axis]
        assert bool(cell["available"]) is bool(r.available), (r.variant_id, r.axis)
        assert cell["delta_norm"] == pytest.approx(r.delta_norm, abs=1e-12, nan_ok=True), (r.variant_id, r.axis)
        assert drawn.loc[(r.model, cell["label"], LABEL[r.axis]), "delta_norm"] == pytest.approx(
            r.delta_norm, abs=1e-12, nan_ok=True)
    var = ref_q.query(store, f"SELECT * FROM variants WHERE prompt_id = '{pid}' ORDER BY variant_id")
    table = files["prompts_variants_csv"].set_index("label")
    assert len(table) == len(var) == 6
    for r in var.itertuples(index=False):
        row = table.loc[ref_q.variant_label(r)]
        assert (row["text"], bool(row["kept"])) == (r.text, bool(r.kept))
        assert row["semantic_score"] == pytest.approx(r.semantic_score, abs=5e-4, nan_ok=True)
    rep = ref_q.replies(store).query("prompt_id == @pid").merge(var, on="variant_id")
    side = files["prompts_responses_csv"].set_index("variant")
    assert list(side.columns) == list(MODELS) and len(side) == 1 + len(var)
    for r in rep.itertuples(index=False):
        assert side.loc[ref_q.variant_label(r), r.model] == r.reply
        assert side.loc["base prompt", r.model] == r.base_reply
    for r in var[~var["kept"]].itertuples(index=False):  # never run: no reply, and the cell says so
        assert not set(side.loc[ref_q.variant_label(r)]) & set(rep["reply"]) and side.loc[ref_q.variant_label(r)].all()


def test_prompts(site, store, ref):
    check_prompts(site("Prompts", _chart("prompts_heatmap") | {"prompts_variants_csv", "prompts_responses_csv"}),
                  store, ref)


def check_worst(files: dict, store, ref: dict) -> None:
    want = ref_q.worst_prompts(ref["raw"], ref_q.replies(store), "bleu").head(25)  # Δ-BLEU, all models, 25 rows
    got = files["worst_table_csv"]
    assert list(got["rank"]) == list(range(1, 26)) and set(got["axis"]) == {"Δ-BLEU"}
    for g, w in zip(got.itertuples(index=False), want.itertuples(index=False)):
        assert (g.model, g.prompt_id, g.variant_id, g.label) == (w.model, w.prompt_id, w.variant_id, w.label)
        assert (g.score, g.s, g.delta_norm) == pytest.approx((w.s, w.s, w.delta_norm), abs=TOL), g.rank
        assert (g.n_variants, g.n_different) == (w.n_variants, w.n_different), g.rank
        assert g.prompt_text == f"Question {w.prompt_id.split(':')[1]} of {w.prompt_id.split(':')[0]}?"


def test_worst(site, store, ref):
    check_worst(site("Worst cases", {"worst_table_csv"}), store, ref)


def _means(df: pd.DataFrame, want: pd.DataFrame, by: list[str], cols: tuple[str, ...]) -> None:
    got = df.set_index(by)
    assert sorted(got.index) == sorted(want.index) and len(want) > 0
    for k, w in want.iterrows():
        assert [got.loc[k, c] for c in cols] == pytest.approx([w[c] for c in cols], rel=1e-9, abs=1e-12), k


def check_variants(files: dict, store, ref: dict) -> None:
    var = ref_q.query(store, "SELECT * FROM variants")
    hist, audit = ref_q.semantic(var, THRESHOLD)
    for df in (files["variants_semantic_hist_dl_csv"], _vega_rows(files["variants_semantic_hist_dl_html"], "bin_start")):
        assert {(r.family, r.kept, round(r.bin_start, 9)): int(r.count) for r in df.itertuples(index=False)} == hist
    assert files["variants_thresholds_csv"].set_index("model")["threshold"].to_dict() == dict.fromkeys(MODELS, THRESHOLD)
    got = files["variants_audit_table_csv"].set_index("family")
    assert sorted(got.index) == sorted(audit.index)
    for fam, w in audit.iterrows():
        assert [got.loc[fam, c] for c in w.index] == pytest.approx(list(w), nan_ok=True), fam
    rej = files["variants_rejected_table_csv"].set_index("prompt_id")
    gone = var[~var["kept"]]
    assert sorted(rej.index) == sorted(gone["prompt_id"]) and len(gone) == 5
    why = {r.variant_id: (r.skip_reason if isinstance(r.skip_reason, str) else
                          f"prompt-level rule: another {r.family} variant of this prompt failed" if r.passes_filter
                          else f"semantic score {r.semantic_score:.3f} ≤ filter threshold")
           for r in gone.itertuples(index=False)}
    assert sorted(rej["reason"]) == sorted(why.values())
    noop = files["variants_noop_table_csv"]
    assert noop[["family", "strength", "variants"]].values.tolist() == [["surface_noise", 4.0, 1]]
    assert noop["why"].tolist() == ["the variant's text equals the base prompt"]
    ok = ref_q.kept_rows(ref["raw"])
    bleu = ok[ok["axis"] == "bleu"]  # the page's default axis and first family
    cols = ("n", "mean_abs", "se_abs", "rms", "mean_signed")
    for key, by, facet, sub in (("dose_strength", ["model", "subtype", "strength"], "subtype",
                                 bleu[bleu["family"] == "social_register"]),
                                ("dose_position", ["model", "family", "position"], "family", bleu)):
        want = ref_q.mean_abs(sub, by)
        _means(files[f"variants_{key}_dl_csv"], want, by, cols)
        drawn = 0
        for name, fac, xs, ys in _traces(files[f"variants_{key}_dl_html"], facet):
            for x, y in zip(xs, ys):
                assert y == pytest.approx(want.loc[(name, fac, x), "mean_abs"], rel=1e-9), (key, name, fac, x)
                drawn += 1
        assert drawn == len(want), key
    tone = ref_q.tone(ok)
    tcols = ("n_negative", "mean_negative", "std_negative", "n_polite", "mean_polite", "std_polite", "diff", "t", "p")
    _means(files["variants_tone_dl_csv"], tone, ["model", "axis"], tcols)
    tab = files["variants_tone_table_csv"]
    _means(tab.assign(axis=tab["axis"].map(UNLABEL)), tone, ["model", "axis"], tcols)
    for name, fac, xs, ys in _traces(files["variants_tone_dl_html"], "axis"):
        for x, y in zip(xs, ys):
            assert y == pytest.approx(tone.loc[(x, UNLABEL[fac]), f"mean_{name}"], rel=1e-9), (x, fac, name)
    length = ref_q.length_factor(ok)
    _means(files["variants_length_dl_csv"], length, ["model", "axis", "target_ratio"],
           ("n_prompts", "mean_instability", "std_instability"))
    for name, fac, xs, ys in _traces(files["variants_length_dl_html"], "model"):
        for x, y in zip(xs, ys):
            assert y == pytest.approx(length.loc[(fac, UNLABEL[name], x), "std_instability"], rel=1e-9)


def test_variants(site, store, ref):
    want = {f"variants_{k}_csv" for k in ("thresholds", "audit_table", "rejected_table", "noop_table", "tone_table")}
    for k in ("semantic_hist", "dose_strength", "dose_position", "tone", "length"):
        want |= _chart(f"variants_{k}")
    check_variants(site("Variants", want), store, ref)


def check_method_choices(files: dict, store, ref: dict) -> None:
    from sklearn.metrics import cohen_kappa_score

    for i, ((options, axes), sc) in enumerate(zip(ref_q.CHOICES, ref_q.choice_scores(store, ref["ps"]))):
        pts = files[f"methods_chart_{i}_dl_csv"].set_index(["option", "model", "axis"])
        drawn = _vega_rows(files[f"methods_chart_{i}_dl_html"], "option", "model", "sgs")
        drawn = drawn.assign(axis=drawn["axis_label"].map(UNLABEL)).set_index(["option", "model", "axis"])
        wide = files[f"methods_sgs_{i}_csv"].set_index(["option", "model", "axis"])
        n = 0
        for (o, a), per_model in sc.items():
            for m, s in per_model.items():
                p = p_greater(s, 0.05)
                for got in (pts.loc[(o, m, a)], drawn.loc[(o, m, a)], wide.loc[(o, m, LABEL[a])]):
                    assert got["sgs"] == pytest.approx(s.mean(), abs=TOL) and got["n_prompts"] == len(s), (i, o, a, m)
                    assert got["p"] == pytest.approx(p, rel=1e-9) and (got["marker"] if isinstance(got["marker"], str) else "") == mark(p), (i, o, a, m)
                assert pts.loc[(o, m, a), "lo"] <= s.mean() <= pts.loc[(o, m, a), "hi"]
                n += 1
        assert len(pts) == len(drawn) == len(wide) == n > 0, i
        ranks = files[f"methods_ranks_{i}_csv"].set_index(["option", "axis"])
        assert len(ranks) == (len(options) - 1) * len(axes)
        for o in options[1:]:
            for a in axes:
                both = sorted(set(sc[(options[0], a)]) & set(sc[(o, a)]))
                row = ranks.loc[(o, LABEL[a])]
                assert row["n_models"] == len(both), (i, o, a)
                if len(both) < 3:
                    assert math.isnan(row["tau"]) and "at least 3" in row["reason"], (i, o, a)
                    continue
                x, y = ([sc[(opt, a)][m].mean() for m in both] for opt in (options[0], o))
                tau, p, flips = ref_q.kendall(x, y)
                assert (row["tau"], row["p"], row["n_discordant"]) == pytest.approx((tau, p, flips), abs=1e-12)
        scale = files[f"methods_scale_{i}_csv"].set_index(["option", "axis"])
        assert len(scale) == len(options) * len(axes)
        for o in options:
            for a in axes:
                pub = [v[AXES.index(a)] for v in ref_q.PAPER_FIG2A.values()]
                med = float(np.median([s.mean() for s in sc[(o, a)].values()]))
                row = scale.loc[(o, LABEL[a])]
                dist, side = ref_q.scale_distance(med, min(pub), max(pub))
                assert (row["median_sgs"], row["paper_lo"], row["paper_hi"], row["distance"]) == pytest.approx(
                    (med, min(pub), max(pub), dist), abs=1e-9) and row["direction"] == side, (i, o, a)
        claims = files[f"methods_claims_{i}_csv"]
        assert list(claims.columns) == ["claim", *options] and [c[:3] for c in claims["claim"]] == ["(a)", "(b)", "(c)"]
        assert claims[list(options)].map(lambda c: c.startswith(("holds — ", "fails — "))).all().all()
    assert files["methods_ranks_1_csv"]["tau"].iloc[0] < 1  # the rescaled Δ-BERT reorders the models
    v = ref_q.query(store, "SELECT r.model, m.verdict, m.heuristic_verdict FROM mirroring_verdicts m "
                           "JOIN runs r USING (run_id) WHERE m.verdict IS NOT NULL")
    judge = files["methods_judge_models_csv"].set_index("model")
    assert sorted(judge.index) == list(MODELS)
    for m, g in v.groupby("model"):
        j, h = g["verdict"].astype(int), g["heuristic_verdict"].astype(int)
        assert judge.loc[m, "n"] == len(g) and judge.loc[m, "agree"] == pytest.approx(float((j == h).mean()))
        assert judge.loc[m, "kappa"] == pytest.approx(cohen_kappa_score(j, h), abs=1e-12)
    dis = files["methods_disagreements_csv"]
    assert len(dis) == int((v["verdict"] != v["heuristic_verdict"]).sum()) > 0
    assert (dis["verdict"] != dis["heuristic_verdict"]).all()


def test_method_choices(site, store, ref):
    want = {"methods_judge_models_csv", "methods_disagreements_csv"}
    for i in range(len(ref_q.CHOICES)):
        want |= _chart(f"methods_chart_{i}") | {f"methods_{t}_{i}_csv" for t in ("sgs", "ranks", "claims", "scale")}
    check_method_choices(site("Method choices", want), store, ref)


def check_paper_reference(files: dict) -> None:
    for key in ("paper_fig2a_dl_csv", "paper_fig2a_table_csv"):
        fig = files[key].set_index("model")
        assert list(fig.index) == list(ref_q.PAPER_FIG2A)
        for m, vals in ref_q.PAPER_FIG2A.items():
            assert [fig.loc[m, LABEL[a]] for a in AXES] == pytest.approx(list(vals)), m
    [heat] = _plotly_figure(files["paper_fig2a_dl_html"])[0]
    assert [LABEL[a] for a in AXES] == list(heat["x"])
    for m, row in zip(heat["y"], _arr(heat["z"]).reshape(len(heat["y"]), 6)):
        assert list(row.astype(float)) == pytest.approx(list(ref_q.PAPER_FIG2A[m])), m
    t1 = files["paper_table1_csv"].set_index("model")
    assert (t1.loc["GPT-5.4", "Δ-BLEU"], t1.loc["GPT-5.4", "Δ-Cos"], t1.loc["Claude-Sonnet-4.6", "Δ-MR"]) == (
        "0.414±0.13†", "n/a", "0.061±0.11")
    thr = files["paper_threshold_csv"]
    assert thr[["axis", "ε=0.01", "ε=0.05", "ε=0.1"]].values.tolist() == [["Δ-MR", "9/9/9", "8/8/8", "8/8/8"]]


def test_paper_reference(site):
    check_paper_reference(site("Paper reference", _chart("paper_fig2a") | {"paper_fig2a_table_csv", "paper_table1_csv",
                                                                           "paper_threshold_csv"}))
