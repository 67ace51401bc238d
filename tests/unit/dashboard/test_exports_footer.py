"""The footer every exported chart carries (dashboard.exports): its text, and that it joins every chart the
pages export — Plotly figures and Altair charts, a faceted heatmap with top-level padding included."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from dashboard import charts, exports
from sago_engine.filters import Filters


def test_source_line_names_store_file_filters_and_eps():
    assert exports.source_line("/srv/secret/folder/run.duckdb", Filters(), 0.05) == (
        "Source: sago · store run.duckdb · ε = 0.05 · filters: none (all models, datasets and variants)")
    line = exports.source_line("run.duckdb", Filters(models=("b", "a"), strengths=(2.0,)), 0.1)
    assert line == "Source: sago · store run.duckdb · ε = 0.1 · filters: models = a, b; strengths = 2"
    long = exports.source_line("run.duckdb", Filters(models=tuple(f"model-{i:03d}" for i in range(80))))
    assert len(long) == exports.FOOTER_MAX and long.endswith("…")
    assert "\u202e" not in exports.source_line("run.duckdb", Filters(models=("evil\u202ename",)))


def test_footer_joins_plotly_and_altair_charts():
    import vl_convert as vlc

    fig = exports.plotly_with_footer(go.Figure(go.Scatter(x=[0], y=[0])), "Source: sago · store <b>x</b>.duckdb")
    notes = [a for a in fig.layout.annotations if a.name == "sago_source"]
    assert len(notes) == 1 and notes[0].text == "Source: sago · store &lt;b&gt;x&lt;/b&gt;.duckdb"
    heat = pd.DataFrame([{"model": m, "label": f"v{i}", "order": i, "axis": "bleu", "axis_label": "Δ-BLEU",
                          "delta_norm": None if i == 0 else -0.5, "delta": None, "unit": "BLEU points",
                          "value": "n/a" if i == 0 else "-0.50", "why": ""} for m in ("a", "b") for i in range(3)])
    ch = charts.delta_heatmap(heat)
    assert ch.padding is not None  # a top-level property Vega-Lite refuses inside a concatenation
    svg = vlc.vegalite_to_svg(exports.altair_with_footer(ch, "Source: sago · store x.duckdb").to_json())
    assert "Source: sago · store x.duckdb" in svg and charts.NEUTRAL in svg  # footer and the grey n/a cell


def test_a_chart_that_fits_its_page_width_exports_a_png_under_its_footer():
    """A layered chart with ``autosize`` fit-x (as Sample size draws it) above the footer: vl-convert has no
    container to fit, so the file gets a fixed width instead of an invalid size."""
    import io

    import altair as alt
    import pandas as pd
    from PIL import Image

    df = pd.DataFrame({"n": [4, 8, 16] * 2, "s": [0.1, 0.05, 0.02, 0.2, 0.1, 0.04], "axis": ["a"] * 3 + ["b"] * 3})
    base = alt.Chart(df).encode(x="n:Q", color="axis:N")
    ch = (base.mark_line().encode(y="s:Q") + base.mark_point().encode(y="s:Q", size="s:Q")).properties(
        height=300, autosize=alt.AutoSizeParams(type="fit-x", contains="padding"))
    png = exports.altair_png(exports.altair_with_footer(ch, "Source: sago · store x"))
    img = Image.open(io.BytesIO(png))
    assert img.format == "PNG" and img.width >= 2 * exports.STATIC_WIDTH  # 2× pixels
    assert b"<svg" in exports.altair_svg(exports.altair_with_footer(ch, "Source: sago · store x"))
