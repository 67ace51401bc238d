"""Prompts and Variants pages headless (AppTest): chart data equals sago_engine's numbers, filters apply, hostile text stays text."""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.io as pio
import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

from dashboard.safe import visible
from sago_engine.filters import Filters
from sago_engine.scoring.ablations import semantic_histogram, tone_asymmetry
from sago_engine.store import open_store
from sago_engine.types import AXES, DEFAULT_NORMALIZERS

ROOT = Path(__file__).resolve().parents[3]


def _page(store, page: str, **state) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.session_state["app_store_custom"] = str(store)
    for k, v in state.items():
        at.session_state[k] = v
    at.run()
    at.switch_page(f"pages/{page}.py")
    at.run()
    assert not at.exception, at.exception
    return at


def _plotly(at, key):
    [el] = [e for e in at.get("plotly_chart") if e.proto.id and key in e.proto.id]
    return pio.from_json(el.proto.spec)


def _arr(v) -> np.ndarray:
    """A trace array from a figure's JSON: plain list, or plotly's typed array {dtype, bdata[, shape]}."""
    if isinstance(v, dict) and "bdata" in v:
        a = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        return a.reshape([int(x) for x in str(v["shape"]).split(",")]) if "shape" in v else a
    return np.asarray(v)


def _vega_frames(at) -> list[pd.DataFrame]:
    out = []
    for el in at.get("vega_lite_chart"):
        for ds in el.proto.datasets:
            out.append(pa.ipc.open_stream(ds.data.data).read_pandas())
    return out


def _codes(at) -> list[str]:
    return [c.value for c in at.get("code")]


# ---------------------------------------------------------------- the real engine's tiny store
def test_prompts_page_heatmap_equals_store_deltas(tiny_store):
    at = _page(tiny_store, "prompts")
    pid = at.selectbox(key="prompts_prompt").value
    with open_store(tiny_store) as st:
        det = st.prompt_detail(Filters(), prompt_id=pid)
        base_text = st.prompts().set_index("prompt_id").loc[pid, "text"]
    assert base_text in _codes(at)
    [heat] = [df for df in _vega_frames(at) if "delta_norm" in df.columns]
    d = det["deltas"]
    assert len(heat) == len(d) == len(det["variants"]) * len(AXES)
    got = np.sort(heat["delta_norm"].to_numpy(dtype=float))
    ref = np.sort(d["delta_norm"].where(d["available"]).to_numpy(dtype=float))
    assert np.allclose(got, ref, equal_nan=True)
    # each model's base and variant responses are shown as text, side by side
    resp = det["responses"]
    base = resp[resp["variant_id"].isna()]["response"].iloc[0]
    assert base in _codes(at)
    assert len(at.get("html")) == 1  # the highlighted edit


def test_variants_page_charts_equal_engine(tiny_store):
    at = _page(tiny_store, "variants")
    axis = at.selectbox(key="variants_axis").value
    family = at.selectbox(key="variants_family").value
    with open_store(tiny_store) as st:
        raw = st.deltas(kept_only=True)
        audit = st.variant_audit(Filters())
    raw = raw[raw["available"]]
    # dose-response by strength: every plotted point is mean |Δ̃| of those raw deltas
    fig = _plotly(at, "variants_dose_strength")
    sel = raw[(raw.axis == axis) & (raw.family == family)]
    n_points = 0
    for tr in fig.data:
        xs, ys = _arr(tr.x).astype(float), _arr(tr.y).astype(float)
        sub = re.search(r"subtype=([^<]+)", tr.hovertemplate).group(1)
        for x, y in zip(xs, ys):
            vals = sel[(sel.model == tr.name) & (sel.subtype == sub) & (sel.strength == x)]["delta_norm"]
            assert y == pytest.approx(np.mean(np.abs(vals)), abs=1e-12)
            n_points += 1
    assert n_points == sel.groupby(["model", "subtype", "strength"]).ngroups > 0
    # semantic-score histogram: counts of the audit
    [hist] = [df for df in _vega_frames(at) if "bin_start" in df.columns]
    assert hist["count"].sum() == audit["semantic_score"].notna().sum()
    ref = semantic_histogram(audit)
    assert hist[["family", "kept", "count"]].reset_index(drop=True).equals(ref[["family", "kept", "count"]])
    # tone asymmetry bars = tone_asymmetry of the store's aggregates
    with open_store(tiny_store) as st:
        tone = tone_asymmetry(st.ablation_frame(Filters())["cells"])
    if not tone.empty:
        fig = _plotly(at, "variants_tone")
        got = sorted(float(y) for tr in fig.data for y in _arr(tr.y).astype(float) if np.isfinite(y))
        want = sorted(float(v) for v in pd.concat([tone["mean_negative"], tone["mean_polite"]]) if np.isfinite(v))
        assert np.allclose(got, want)


def test_filters_change_what_is_shown(tiny_store):
    at = _page(tiny_store, "prompts", filter_families=["surface_noise"], filter_datasets=["alpaca"])
    assert at.selectbox(key="prompts_dataset").options == ["alpaca"]
    table = at.dataframe[0].value
    assert set(table["family"]) == {"surface_noise"}
    at = _page(tiny_store, "variants", filter_families=["surface_noise"])
    assert at.selectbox(key="variants_family").options == ["surface_noise"]
    assert any("No social-register variants" in i.value for i in at.info)
    hist = [df for df in _vega_frames(at) if "bin_start" in df.columns]
    assert all(set(h["family"]) <= {"surface_noise"} for h in hist)
    full = _page(tiny_store, "variants")
    assert len(full.selectbox(key="variants_family").options) > 1


# ---------------------------------------------------------------- hostile text
#: Terminal controls (ESC, BEL) and bidi marks (RLO reverses what follows, RLM): shown as U+FFFD, never raw.
CONTROLS = " Hello \x1b[2J\x07 there \u202e evil \u200f"
RAW_CONTROLS = ("\x1b", "\x07", "\u202e", "\u200f")
HOSTILE_PROMPT = "<script>alert(1)</script> What is <b>2+2</b>?" + CONTROLS
HOSTILE_VARIANT = "<img src=x onerror=alert(1)> What is <b>2+2</b>? **bold** [link](javascript:alert(1))" + CONTROLS
HOSTILE_RESPONSE = "<script>document.title='pwned'</script>4" + CONTROLS
HOSTILE_MODEL = "m<img src=x onerror=\"document.title='pwned'\">"


def _hostile_store(path: Path) -> Path:
    with open_store(path, read_only=False, create=True) as st:
        st.insert_df("runs", pd.DataFrame([{"run_id": "r1", "model": HOSTILE_MODEL, "backend": "synthetic",
                                            "normalizers": json.dumps(DEFAULT_NORMALIZERS), "status": "complete"}]))
        st.insert_df("prompts", pd.DataFrame([{"prompt_id": "evil:1", "dataset": "evil", "text": HOSTILE_PROMPT}]))
        st.insert_df("variants", pd.DataFrame([
            {"variant_id": "v1", "prompt_id": "evil:1", "family": "social_register", "subtype": "politeness",
             "strength": -2.0, "position": "PREFIX", "text": HOSTILE_VARIANT, "seed": 1, "kept": True,
             "semantic_score": 0.9, "passes_filter": True, "meta": json.dumps({"tone": "negative"})}]))
        st.insert_df("responses", pd.DataFrame([
            {"response_id": "x0", "run_id": "r1", "prompt_id": "evil:1", "variant_id": None, "response": "4"},
            {"response_id": "x1", "run_id": "r1", "prompt_id": "evil:1", "variant_id": "v1",
             "response": HOSTILE_RESPONSE}]))
        st.insert_df("deltas", pd.DataFrame([("r1", "evil", "evil:1", "v1", a, -0.1, -0.05, True, None, None)
                                             for a in AXES],
                                            columns=["run_id", "dataset", "prompt_id", "variant_id", "axis", "delta",
                                                     "delta_norm", "available", "reason", "detector"]))
    return path


def test_hostile_text_renders_as_literal_text(tmp_path):
    at = _page(_hostile_store(tmp_path / "evil.duckdb"), "prompts")
    [h] = at.get("html")
    body = h.proto.body
    assert "<script" not in body and "<img" not in body and "<b>" not in body
    assert not h.proto.unsafe_allow_javascript
    # the text a browser displays: without the insertions it is the base prompt, without the deletions the variant
    def shown(drop: str) -> str:
        return html.unescape(re.sub(r"<[^>]+>", "", re.sub(rf"<{drop}\b[^>]*>.*?</{drop}>", "", body, flags=re.S)))
    assert shown("ins") == visible(HOSTILE_PROMPT) and shown("del") == visible(HOSTILE_VARIANT)
    codes = _codes(at)  # st.code renders text, never HTML or markdown
    assert visible(HOSTILE_PROMPT) in codes and visible(HOSTILE_RESPONSE) in codes
    assert not [c for c in RAW_CONTROLS if c in body + "".join(codes) + _page_text(at)]
    md = " ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.caption)
    assert "alert(1)" not in md and "pwned" not in md
    # the variants page renders too, with the hostile model name only inside chart data / tables
    at = _page(tmp_path / "evil.duckdb", "variants")
    assert "alert(1)" not in " ".join(m.value for m in at.markdown)
    at = _page(tmp_path / "evil.duckdb", "worst")  # the base prompt, variant and reply boxes
    shown_text = "".join(_codes(at)) + "".join(h.proto.body for h in at.get("html")) + _page_text(at)
    assert visible(HOSTILE_PROMPT) in _codes(at) and not [c for c in RAW_CONTROLS if c in shown_text]


def _page_text(at) -> str:
    """Every text element's value and every table cell of an AppTest page."""
    out = [str(getattr(e, "value", "")) for kind in ("text", "markdown", "caption") for e in at.get(kind)]
    out += [e.value.to_csv() for e in at.get("arrow_data_frame")]
    return "".join(out)


@pytest.mark.browser
def test_hostile_text_is_inert_in_a_real_browser(tmp_path):
    """In chromium: the hostile prompt, variant and response show as text and none of their scripts runs."""
    from tests.support.browser import browser_page, dashboard, require_chromium, screenshot_dir

    require_chromium()
    store = _hostile_store(tmp_path / "evil.duckdb")
    with dashboard(store) as url, browser_page(1400, 2400) as page:
        page.goto(f"{url}/prompts", wait_until="domcontentloaded")
        page.locator("[data-testid='stVegaLiteChart'] svg, [data-testid='stVegaLiteChart'] canvas").first.wait_for(
            timeout=60_000)
        page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=60_000)
        page.wait_for_timeout(800)
        assert page.locator("[data-testid='stException']").count() == 0
        assert page.evaluate("document.title") != "pwned"
        body = page.locator("[data-testid='stMain']").inner_text()
        assert visible(HOSTILE_PROMPT) in body and visible(HOSTILE_RESPONSE) in body
        # the highlighted edit: without its deletions it reads as the variant, without its insertions as the base
        shown = """(drop) => { const el = document.querySelector('[data-testid="stMain"] [data-testid="stHtml"]').cloneNode(true);
                               el.querySelectorAll(drop).forEach(e => e.remove()); return el.textContent; }"""
        assert page.evaluate(shown, "del") == visible(HOSTILE_VARIANT) and page.evaluate(shown, "ins") == visible(HOSTILE_PROMPT)
        assert page.locator("[data-testid='stMain'] img[src='x'], [data-testid='stMain'] script, "
                            "[data-testid='stMain'] b").count() == 0
        page.screenshot(path=str(screenshot_dir() / "prompts_hostile.png"), full_page=True)
        # the variants page puts the hostile model name into Plotly legends and Vega-Lite charts
        page.goto(f"{url}/variants", wait_until="domcontentloaded")
        page.locator("[data-testid='stPlotlyChart'] .main-svg").first.wait_for(timeout=60_000)
        page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=60_000)
        page.wait_for_timeout(800)
        assert page.locator("[data-testid='stException']").count() == 0
        assert page.evaluate("document.title") != "pwned"
        assert page.locator("[data-testid='stMain'] img[src='x']").count() == 0


# ---------------------------------------------------------------- a missing value says why
def test_missing_values_say_why_not_nan():
    from sago_engine.views.detail import NO_REPLY, SURFACE_EXEMPT, heatmap_frame, responses_side_by_side, variant_rows

    variants = pd.DataFrame({"variant_id": ["p/v0", "p/v1"], "prompt_id": ["p", "p"],
                             "family": ["social_register", "surface_noise"], "subtype": ["politeness", "typo"],
                             "strength": [1.0, 0.1], "position": ["PREFIX", "GLOBAL"],
                             "semantic_score": [0.9312, None], "kept": [True, True], "text": ["Please, Q?", "Qq?"]})
    responses = pd.DataFrame({"model": ["m1", "m1", "m1", "m2", "m2"],
                              "variant_id": [None, "p/v0", "p/v1", None, "p/v0"],  # m2 has no reply to v1
                              "response": ["b1", "r10", "r11", "b2", "r20"]})
    deltas = pd.DataFrame({"model": ["m1", "m1"], "variant_id": ["p/v0", "p/v0"], "axis": ["cos", "prob"],
                           "delta": [-0.01, None], "delta_norm": [-0.5, None], "available": [True, False],
                           "reason": [None, "API exposes no sequence log-prob"]})
    detail = {"variants": variants, "responses": responses, "deltas": deltas}
    rows = variant_rows(variants)
    assert list(rows["semantic_score"]) == ["0.931", SURFACE_EXEMPT]
    side = responses_side_by_side(detail)
    assert side.set_index("variant").loc["surface_noise · typo · 0.1 · GLOBAL", "m2"] == NO_REPLY
    assert side.set_index("variant").loc["base prompt", "m2"] == "b2"
    heat = heatmap_frame(detail).set_index("axis")
    assert heat.loc["cos", "value"] == "-0.50" and heat.loc["cos", "why"] == ""
    assert heat.loc["prob", "value"] == "n/a"
    assert heat.loc["cos", "unit"] == "cosine" and heat.loc["prob", "unit"] == "nats"  # AxisSpec.unit of the raw Δ
    from sago_engine.views.detail import _cell_text

    assert [_cell_text(x) for x in (0.0002, -0.003, 0.004, -0.5, 0.123)] == ["0", "-0.003", "+0.004", "-0.50", "+0.12"]
    assert heat.loc["prob", "why"] == "axis unavailable: API exposes no sequence log-prob"
    for frame in (rows, side, heat.reset_index()):
        text = frame.astype(str).to_numpy().ravel()
        assert not {"nan", "None", "NaN", "<NA>"} & set(text), frame


def test_prompts_page_shows_no_code_words(tiny_store):
    at = _page(tiny_store, "prompts")
    from sago_engine.views.detail import SURFACE_EXEMPT

    [var_table] = [d.value for d in at.dataframe if "semantic_score" in d.value.columns]
    sem = var_table.set_index("family")["semantic_score"]
    assert set(sem.loc[["surface_noise"]]) == {SURFACE_EXEMPT}
    assert all(re.fullmatch(r"[01]\.\d{3}", x) for x in sem.drop("surface_noise"))
    for d in at.dataframe:
        assert not {"nan", "None", "<NA>"} & set(d.value.astype(str).to_numpy().ravel())
    assert not {"nan", "None"} & set(_codes(at))
