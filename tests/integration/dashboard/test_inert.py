"""Store strings stay inert: Markdown (T5), Plotly text, HTML exports, spreadsheet-safe CSV downloads (S10)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from dashboard import safe
from tests.support.factories import make_store
from tests.support.rendered import active_html
from tests.support.rendered import shown as _shown

ROOT = Path(__file__).resolve().parents[3]
#: Case T5's model name: an image that calls a pixel logger, and a fake download link.
EVIL = "![pixel](http://127.0.0.1:8765/leak.png) [Download the corrected store](http://127.0.0.1:8765/x)"


def _page(store, page: str | None = None, query: dict | None = None, monkeypatch=None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["app_store_custom"] = str(store)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    at.run()
    if page:
        at.switch_page(f"pages/{page}.py")
        at.run()
    assert not at.exception, at.exception
    return at


# ---------------------------------------------------------------- T5: Markdown
@pytest.fixture(scope="module")
def t5_store(tmp_path_factory):
    """Case T5's input: model-a and EVIL, EVIL without Δ-Cos and Δ-MR."""
    return make_store(tmp_path_factory.mktemp("t5") / "md.duckdb", models=("model-a", EVIL),
                      missing_axes={EVIL: ["cos", "mr"]})


def test_t5_rankings_caption_shows_the_model_name_as_text(t5_store):
    at = _page(t5_store, "rankings")
    [cap] = [c.value for c in at.caption if c.value.startswith("Not ranked on")]
    assert active_html(cap) == []
    assert _shown(cap).replace("\u2060", "") == f"Not ranked on Δ-Cos (axis unavailable, n/a): {EVIL}."


def test_t5_pareto_info_shows_the_model_name_as_text(t5_store):
    at = _page(t5_store, "pareto", query={"x": "cos"})
    [info] = [i.value for i in at.info if i.value.startswith("Not plotted")]
    assert active_html(info) == []
    assert _shown(info).replace("\u2060", "") == f"Not plotted (an axis is unavailable, n/a): {EVIL}."
    # the scatter's trace names are the model names as text: no Markdown, no Plotly link
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    names = [t.get("name", "") for t in fig["data"]]
    assert "model-a" in names and not any("<a" in n or "<img" in n for n in names)


@pytest.mark.parametrize("text", [
    EVIL, "<img src=x onerror=alert(1)>", "<script>alert(1)</script>", "[x](javascript:alert(1))",
    "# heading", "- item", "1. item", "> quote", "| a | b |\n|---|---|\n| 1 | 2 |", "**bold** _em_ ~~s~~",
    "$x^2$ and :red[colour] and :material/home:", "`code` ``` fence", "&lt;img src=x&gt; &amp;", "a\\*b\\",
    "http://127.0.0.1:8765/auto www.example.invalid HTTPS://x.y me@example.invalid", "{{7*7}}",
    "line one\nline two",
])
def test_md_shows_every_payload_literally(text):
    out = safe.md(text)
    assert active_html(out) == []
    assert _shown(out).replace("\u2060", "").split() == text.split()  # every character as typed (line breaks aside)


def test_md_replaces_control_and_bidi_characters():
    out = safe.md("evil\u202etxt.exe\u2066 \x07bell\x00")
    assert not re.search("[\u202a-\u202e\u2066-\u2069\x00-\x08]", out)
    assert out.count("\ufffd") == 4


def test_plotly_text_keeps_only_formatting_tags():
    s = safe.plotly_text('<a href="http://x">l</a><br><b>b</b> <img src=x> <span style="x">s</span> & <i>i</i>')
    assert "<a" not in s and "<img" not in s and "<span" not in s
    assert "<br>" in s and "<b>b</b>" in s and "<i>i</i>" in s and "&amp;" in s


def test_inert_figure_escapes_every_store_string():
    import plotly.express as px

    df = pd.DataFrame({"model": [f'<a href="http://127.0.0.1:8765/a">{EVIL}</a>', "m2"], "x": [1.0, 2.0],
                       "subtype": ["<img src=http://127.0.0.1:8765/i>", "s"]})
    fig = px.bar(df, x="model", y="x", color="model", facet_col="subtype", hover_data=["subtype"],
                 title="<a href='http://127.0.0.1:8765/t'>t</a>")
    d = json.loads(safe.inert_figure(fig).to_json())
    d["layout"].pop("template", None)
    text = json.dumps(d, ensure_ascii=False)
    assert "<a " not in text and "<img" not in text and "&lt;a href" in text
    assert "<br>" in json.dumps(d["data"][0]["hovertemplate"])  # px's own formatting is kept


def test_altair_html_export_keeps_a_script_payload_inside_the_spec():
    pytest.importorskip("vl_convert")
    import altair as alt

    from dashboard import exports

    bad = "</script><script>window.__sago_pwned=1</script><!--"
    ch = alt.Chart(pd.DataFrame({"m": [bad, "b"], "v": [1, 2]})).mark_bar().encode(x="m:N", y="v:Q")
    out = exports.altair_html(ch).decode()
    assert out.count("<script") == 2 and out.count("</script>") == 2  # the bundle's and the embed's only
    assert bad not in out and "<!--" not in out
    m = re.search(r'vegaEmbed\("#vega-chart", (.*), \{"renderer"', out, re.S)
    spec = json.loads(m.group(1))
    assert bad in json.dumps(spec["datasets"], ensure_ascii=False)  # the string itself is intact


# ---------------------------------------------------------------- S10: CSV downloads
def _case_frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Case S10's input: a responses-side-by-side frame and a wide SGS table."""
    side = pd.DataFrame({"variant": ["base prompt", "v1"],
                         "model-a": ["- Lima is the capital.", '=HYPERLINK("http://example.invalid","Lima")']})
    wide = pd.DataFrame({"model": ["m"], "Δ-Cos": ["0.123±0.045†"], "Δ-BLEU": ["0.2"], "Δ-MR": ["0.3"]})
    return side, wide


def test_s10_csv_cells_are_spreadsheet_safe_and_utf8_with_bom():
    side, wide = _case_frames()
    b = safe.csv_bytes(side)
    assert b[:3] == b"\xef\xbb\xbf"
    back = pd.read_csv(io.BytesIO(b), encoding="utf-8-sig")
    assert list(back["model-a"]) == ["'- Lima is the capital.", "'=HYPERLINK(\"http://example.invalid\",\"Lima\")"]
    w = safe.csv_bytes(wide)
    assert w[:3] == b"\xef\xbb\xbf"
    text = w[3:].decode("utf-8")
    assert text == "model,Δ-Cos,Δ-BLEU,Δ-MR\r\nm,0.123±0.045†,0.2,0.3\r\n"


def test_csv_numbers_stay_numbers_and_formula_starts_of_every_kind_are_quoted():
    df = pd.DataFrame({"delta": [-0.5, 0.25, float("nan")], "n": [-3, 4, 5], "ok": [True, False, True],
                       "text": ["+1+2", "@SUM(A1)", "\tx"], "num_text": ["-0.5", "+3", "1e-3"],
                       "cat": pd.Categorical(["=1", "a", "-b"]), "=head": ["\rcr", None, "fine"]})
    raw = safe.csv_bytes(df)
    back = pd.read_csv(io.BytesIO(raw), encoding="utf-8-sig", keep_default_na=False, dtype=str)
    assert list(back.columns) == ["delta", "n", "ok", "text", "num_text", "cat", "'=head"]
    assert back["delta"].tolist() == ["-0.5", "0.25", ""] and back["n"].tolist() == ["-3", "4", "5"]
    assert back["text"].tolist() == ["'+1+2", "'@SUM(A1)", "'\tx"]
    assert back["num_text"].tolist() == ["-0.5", "+3", "1e-3"]  # plain numbers written as text: not formulas
    assert back["cat"].tolist() == ["'=1", "a", "'-b"]
    assert back["'=head"].tolist() == ["'\rcr", "", "fine"]
    assert df["text"].iloc[0] == "+1+2" and df.columns[-1] == "=head"  # the frame itself is not modified


def test_every_csv_download_goes_through_one_helper():
    """No page or dashboard module writes CSV itself: ``safe.csv_bytes`` is the only ``to_csv``."""
    hits = []
    for p in [ROOT / "app.py", *(ROOT / "pages").glob("*.py"), *(ROOT / "dashboard").glob("*.py")]:
        for i, line in enumerate(p.read_text().splitlines(), 1):
            if "to_csv(" in line and p.name != "safe.py":
                hits.append(f"{p.name}:{i}")
    assert hits == []


@pytest.fixture(scope="module")
def s10_store(tmp_path_factory):
    """A store whose replies begin with a Markdown bullet and a spreadsheet formula (case S10)."""
    p = make_store(tmp_path_factory.mktemp("s10") / "s10.duckdb", models=("model-a",), datasets=("truthfulqa",),
                   n_prompts=1, n_variants=3)
    replies = iter(["- Lima is the capital.", '=HYPERLINK("http://example.invalid","Lima")'] * 10)
    return _with_replies(p, replies)


def _with_replies(path, replies):
    from sago_engine.store import open_store

    with open_store(path, read_only=False) as st:
        var = st.variants()
        rows = [{"response_id": "r/base", "run_id": "run-model-a", "prompt_id": "truthfulqa:0", "variant_id": None,
                 "response": next(replies)}]
        rows += [{"response_id": f"r/{v}", "run_id": "run-model-a", "prompt_id": "truthfulqa:0", "variant_id": v,
                  "response": next(replies)} for v in var["variant_id"]]
        st.insert_df("responses", pd.DataFrame(rows))
    return path


def test_s10_prompts_page_responses_csv_is_spreadsheet_safe(s10_store, monkeypatch):
    import streamlit as st

    got: dict[str, bytes] = {}
    real = st.download_button

    def record(label, data=None, file_name=None, **kw):
        if file_name and file_name.endswith(".csv") and isinstance(data, bytes):
            got[file_name] = data
        return real(label, data=data, file_name=file_name, **kw)

    monkeypatch.setattr(st, "download_button", record)
    _page(s10_store, "prompts")
    [name] = [n for n in got if n.startswith("responses_")]
    b = got[name]
    assert b[:3] == b"\xef\xbb\xbf"
    back = pd.read_csv(io.BytesIO(b), encoding="utf-8-sig")
    cells = back["model-a"].tolist()
    assert "'- Lima is the capital." in cells and "'=HYPERLINK(\"http://example.invalid\",\"Lima\")" in cells
    assert not any(c.startswith(("-", "=")) for c in cells)
    assert all(v[:3] == b"\xef\xbb\xbf" for v in got.values())  # every CSV of the page


def test_altair_chart_data_shows_control_and_bidi_characters_as_replacements():
    """Vega-Lite draws a label's characters raw (an RLO reverses it): every chart ``exports.altair_chart``
    shows goes through ``safe.inert_altair``, whose data frames hold ``visible`` text, layers and facets too."""
    import altair as alt

    df = pd.DataFrame({"model": ["m \u202eevil\u200f \x1b[31m"], "x": [1.0]})
    ch = alt.layer(alt.Chart(df).mark_point().encode(x="x:Q", y="model:N"),
                   alt.Chart(df).mark_rule().encode(x="x:Q")).facet(column="model:N")
    spec = json.dumps(safe.inert_altair(ch).to_dict(), ensure_ascii=False)
    assert "m \ufffdevil\ufffd \ufffd[31m" in spec
    assert not [c for c in ("\u202e", "\u200f", "\x1b") if c in spec]
    assert df["model"][0].startswith("m \u202e")  # the caller's frame is not modified
    src = (ROOT / "dashboard" / "exports.py").read_text(encoding="utf-8")
    assert "safe.inert_altair(ch)" in src
