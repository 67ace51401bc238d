"""Charts and tables as the pages show them, with their downloads: PNG / SVG / HTML / CSV, the Δ matrix.

Every exported PNG / SVG / HTML of a chart carries a footer naming its source — the store's file
name, the sidebar filters and ε (``source_line``) — so a slide cites where its numbers come from.

Text from datasets and models is always rendered as text (never as HTML): Plotly figures go
through ``safe.inert_figure`` before they are drawn or exported, every CSV through
``safe.csv_bytes``, and the HTML of an Altair chart embeds its spec with ``<``, ``>`` and ``&``
escaped. PNG/SVG are built only when clicked (deferred, cached by the figure's JSON).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import charts, controls, data, safe
from sago_engine.filters import FILTER_FIELDS, Filters
from sago_engine.scoring.scores import MAIN_EPSILON

#: Longest footer (characters) of an exported chart; a longer filter list ends in "…".
FOOTER_MAX = 190


def _ensure_browser_path() -> None:
    """kaleido ≥ 1 drives a Chromium; point it at Debian's when it cannot find one itself."""
    if not os.environ.get("BROWSER_PATH"):
        for c in ("/usr/bin/chromium", "/usr/bin/chromium-browser"):
            if Path(c).exists():
                os.environ["BROWSER_PATH"] = c
                break


@st.cache_data(show_spinner=False, max_entries=64)
def _plotly_static(fig_json: str, fmt: str) -> bytes:
    """PNG or SVG bytes of a Plotly figure (kaleido), cached by the figure's JSON."""
    import plotly.io as pio

    _ensure_browser_path()
    fig = pio.from_json(fig_json)
    return fig.to_image(format=fmt, width=1200, height=700, scale=2 if fmt == "png" else 1)


def figure_png(fig) -> bytes:
    """PNG bytes of a Plotly figure (kaleido + chromium)."""
    return _plotly_static(fig.to_json(), "png")


def figure_svg(fig) -> bytes:
    """SVG bytes of a Plotly figure (kaleido + chromium)."""
    return _plotly_static(fig.to_json(), "svg")


def figure_html(fig) -> bytes:
    """Standalone HTML of a Plotly figure with plotly.js inline (never a CDN link: works offline)."""
    return fig.to_html(include_plotlyjs=True, full_html=True).encode("utf-8")


def _vl_convert():
    try:
        import vl_convert as vlc  # noqa: F401

        return vlc
    except ImportError:
        return None


#: The width (px) of a static export of a chart that fits its page's width: a file has no container.
STATIC_WIDTH = 800


#: Keys of a Vega-Lite view that holds other views (its width is set inside them, never on it).
_COMPOSITE = ("facet", "repeat", "concat", "hconcat", "vconcat")


def _sized(spec_json: str) -> str:
    """``spec_json`` for a file: a single (or layered) chart that fits its container on the page —
    ``autosize`` "fit" / "fit-x", or no width at all (Streamlit stretches it) — gets ``STATIC_WIDTH``
    and padding autosize: vl-convert has no container, a fitted chart above a footer has no valid PNG
    size, and a chart without a width falls back to Vega-Lite's 20 px per column, which prints the
    labels and cell texts of a heatmap over each other. Facets and concatenations keep their steps."""
    spec = json.loads(spec_json)
    auto = spec.get("autosize")
    kind = auto.get("type") if isinstance(auto, dict) else auto
    fit = isinstance(kind, str) and kind.startswith("fit")
    chart = spec["vconcat"][0] if spec.get("vconcat") else spec  # with a footer: the chart above it
    unsized = "width" not in chart and not any(k in chart for k in _COMPOSITE)
    if not (fit or unsized):
        return spec_json
    if fit:
        spec["autosize"] = {"type": "pad"}
    if not isinstance(chart.get("width"), (int, float)):
        chart["width"] = STATIC_WIDTH
    return json.dumps(spec)


@st.cache_data(show_spinner=False, max_entries=64)
def _altair_static(spec_json: str, fmt: str) -> bytes:
    vlc = _vl_convert()
    spec_json = _sized(spec_json)
    if fmt == "png":  # 2× pixels for ordinary charts; 1× for very large ones (the paper-scale heatmap: ~9 MB)
        return vlc.vegalite_to_png(spec_json, scale=2 if len(spec_json) < 2_000_000 else 1)
    return vlc.vegalite_to_svg(spec_json).encode("utf-8")


def altair_spec(chart) -> str:
    """The chart's Vega-Lite JSON with every row inlined (no 5,000-row cap).

    Altair's default data transformer refuses more than 5,000 rows (``MaxRowsError``); the
    Prompts heatmap has 11 models × 110 variants × 6 axes = 7,260 at the paper's scale. The
    cap is lifted only inside this call (a scoped ``data_transformers.enable``).
    """
    import altair as alt

    with alt.data_transformers.enable("default", max_rows=None):
        return chart.to_json()


def altair_png(chart) -> bytes:
    """PNG bytes of an Altair chart (vl-convert, offline); any row count."""
    return _altair_static(altair_spec(chart), "png")


def altair_svg(chart) -> bytes:
    """SVG bytes of an Altair chart (vl-convert, offline); any row count."""
    return _altair_static(altair_spec(chart), "svg")


#: JSON text that is safe inside an HTML ``<script>``: no ``</script>``, comment or entity can
#: come from the data (the escapes decode to the same characters in JavaScript).
_SCRIPT_JSON = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def script_json(obj: Any) -> str:
    """``obj`` as JSON for an inline ``<script>``: ``<``, ``>``, ``&``, U+2028 and U+2029 escaped."""
    import json

    text = json.dumps(obj, ensure_ascii=False)  # NaN/Infinity: valid JavaScript literals
    return "".join(_SCRIPT_JSON.get(c, c) for c in text)


@functools.lru_cache(maxsize=1)
def _vega_bundle() -> str:
    """vl-convert's JavaScript bundle of Vega, Vega-Lite and Vega-Embed (no network)."""
    return _vl_convert().javascript_bundle()


def altair_html(chart) -> bytes:
    """Standalone HTML of an Altair chart with the Vega JS inline (vl-convert's bundle), any row count.

    The spec is embedded through ``script_json``: a data string such as
    ``</script><script>…`` stays a string in the page (vl-convert's own ``vegalite_to_html``
    writes the spec unescaped). Raises RuntimeError without vl-convert-python.
    """
    import json

    if _vl_convert() is None:
        raise RuntimeError("the HTML export of a chart needs vl-convert-python")
    spec = script_json(json.loads(altair_spec(chart)))
    return ('<!DOCTYPE html>\n<html>\n<head>\n<meta charset="UTF-8">\n<script type="text/javascript">'
            + _vega_bundle() + '</script>\n</head>\n<body>\n<div id="vega-chart"></div>\n'
            '<script type="text/javascript">\nvegaEmbed("#vega-chart", ' + spec
            + ', {"renderer": "svg", "actions": {"export": true, "source": false, "compiled": false, "editor": false}})'
            '.catch(console.error);\n</script>\n</body>\n</html>\n').encode("utf-8")


def source_line(store: str, filters: Filters, eps: float = MAIN_EPSILON) -> str:
    """The footer of an exported chart: "Source: sago · store <file name> · filters: … · ε = 0.05".

    Args:
        store: the store's path (only its file name is written: never a server folder).
        filters: the sidebar filters (None fields are "all"; a field with values lists them).
        eps: ε of the chart's tests (SGS units).
    Returns plain text (control and bidi characters replaced: ``safe.visible``), at most ``FOOTER_MAX``
    characters; escape it for the renderer that interprets markup (Plotly).
    """
    parts = []
    for name, label in FILTER_FIELDS:
        vals = getattr(filters, name)
        if vals is not None:
            parts.append(f"{label.split(' (')[0].lower()} = " + (", ".join(f"{v:g}" if isinstance(v, float) else str(v)
                                                                           for v in vals) or "none"))
    head = f"Source: sago · store {Path(str(store)).name} · ε = {eps:g} · filters: "
    text = safe.visible(head + ("; ".join(parts) if parts else "none (all models, datasets and variants)"))
    return text if len(text) <= FOOTER_MAX else text[:FOOTER_MAX - 1] + "…"


def _current_source(eps: float) -> str:
    return source_line(data.store_path(), controls.current_filters(), eps)


def plotly_with_footer(fig, text: str):
    """A copy of ``fig`` with ``text`` (plain text; HTML-escaped here) as a small grey line along its bottom
    edge, below the axes (the bottom margin grows by 36 px)."""
    import html

    import plotly.graph_objects as go

    out = go.Figure(fig)
    b = (out.layout.margin.b if out.layout.margin.b is not None else 80) + 36
    out.update_layout(margin={"b": b})
    out.add_annotation(text=html.escape(text), xref="paper", yref="paper", x=0, y=0, xanchor="left",
                       yanchor="bottom", yshift=-b + 6, showarrow=False, align="left",
                       font={"size": 11, "color": "#6b6b6b"}, name="sago_source")
    return out


#: Properties Vega-Lite allows only on the outermost chart: a footed chart carries them on the footer's vconcat.
_TOP_LEVEL = ("padding", "autosize", "background", "config", "usermeta")


#: Encoding channels that draw a legend.
_LEGENDS = ("color", "fill", "stroke", "shape", "size", "opacity", "strokeDash")


def altair_with_footer(chart, text: str):
    """``chart`` above a one-line text chart holding ``text`` (Vega draws it as text, never markup); the
    chart's top-level-only properties (``_TOP_LEVEL``: padding, config, …) move to the outer chart."""
    import altair as alt

    top = {a: getattr(chart, a) for a in _TOP_LEVEL if getattr(chart, a, alt.Undefined) is not alt.Undefined}
    if top:
        chart = chart.copy()
        for a in top:
            setattr(chart, a, alt.Undefined)

    foot = alt.Chart(pd.DataFrame({"source": [text]})).mark_text(
        align="left", baseline="top", fontSize=11, color="#6b6b6b", limit=1400).encode(
        text="source:N", x=alt.value(0), y=alt.value(0)).properties(
        height=14, width=10, view=alt.ViewBackground(stroke=None))  # no frame: a stray square beside the text
    # legends stay with the chart (a bottom legend of a shared one would sit below the footer)
    return alt.vconcat(chart, foot, spacing=10, **top).resolve_legend(**{c: "independent" for c in _LEGENDS})


def _slug(key: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in key)


def _file_name(name: str) -> str:
    """A download's file name made from page values (a prompt id comes from the store): letters, digits,
    ``-`` and ``_`` only, at most 100 characters before the extension."""
    stem, dot, ext = name.rpartition(".")
    return _slug(stem)[:100] + "." + _slug(ext) if dot else _slug(name)[:100]


def _download_row(key: str, items: list[tuple[str, Callable[[], bytes] | bytes, str, str]]) -> None:
    cols = st.columns(len(items) + 1)
    for col, (label, payload, fname, mime) in zip(cols, items):
        with col:
            st.download_button(label, data=payload, file_name=fname, mime=mime, key=f"{key}_dl_{label.lower()}",
                               on_click="ignore", icon=":material/download:")


def chart(fig, key: str, caption: str, data: pd.DataFrame | None = None, on_select: str | None = None,
          eps: float = MAIN_EPSILON) -> Any:
    """Render a Plotly figure, a one-line plain-English caption, and PNG / SVG / HTML (/ CSV) downloads.

    PNG and SVG are generated only when clicked (deferred, cached by figure JSON); HTML has
    plotly.js inline; all three carry the ``source_line`` footer (store, filters, ``eps``).
    ``data`` (optional) adds a CSV of the plotted numbers. Every string of the
    figure goes through ``safe.inert_figure`` first (on the page and in every export).
    In presentation mode: larger fonts (``charts.present_plotly``), no downloads. The modebar has no
    camera (its PNG would lack the footer).
    ``on_select="rerun"`` makes clicked points a selection (``selection_mode="points"``); returns
    the chart's event (``st.plotly_chart``'s return value).
    """
    fig = safe.inert_figure(fig)
    if controls.presentation_on():
        fig = charts.present_plotly(fig)
    sel = {} if on_select is None else {"on_select": on_select, "selection_mode": "points"}
    # no modebar camera: every image export goes through the buttons below, which add the footer
    config = {"displaylogo": False, "modeBarButtonsToRemove": ["toImage"]}
    event = st.plotly_chart(fig, key=key, width="stretch", config=config, **sel)
    st.caption(caption)
    if controls.presentation_on():
        return event
    name = _slug(key)
    out = plotly_with_footer(fig, _current_source(eps))
    items = [("PNG", lambda: figure_png(out), f"{name}.png", "image/png"),
             ("SVG", lambda: figure_svg(out), f"{name}.svg", "image/svg+xml"),
             ("HTML", lambda: figure_html(out), f"{name}.html", "text/html")]
    if data is not None:
        items.append(("CSV", safe.csv_bytes(data), f"{name}.csv", "text/csv"))
    _download_row(key, items)
    return event


def altair_chart(ch, key: str, caption: str, data: pd.DataFrame | None = None, on_select: Any = None,
                 eps: float = MAIN_EPSILON) -> Any:
    """Render an Altair chart with a caption and downloads: PNG / SVG (vl-convert, offline) and HTML, + CSV.

    PNG / SVG / HTML carry the ``source_line`` footer (store, filters, ``eps``). In presentation mode:
    larger fonts (``charts.present_altair``), no downloads.

    Without vl-convert-python only CSV is offered (and the note says so).
    ``on_select`` ("rerun" or a callback) reports the chart's selection parameters; returns the
    chart's event (``st.altair_chart``'s return value).
    """
    ch = safe.inert_altair(ch)
    shown = charts.present_altair(ch) if controls.presentation_on() else ch
    event = st.altair_chart(shown, key=key, width="stretch", **({} if on_select is None else {"on_select": on_select}))
    st.caption(caption)
    if controls.presentation_on():
        return event
    name = _slug(key)
    items: list = []
    if _vl_convert() is not None:
        out = altair_with_footer(ch, _current_source(eps))
        items += [("PNG", lambda: altair_png(out), f"{name}.png", "image/png"),
                  ("SVG", lambda: altair_svg(out), f"{name}.svg", "image/svg+xml"),
                  ("HTML", lambda: altair_html(out), f"{name}.html", "text/html")]
    if data is not None:
        items.append(("CSV", safe.csv_bytes(data), f"{name}.csv", "text/csv"))
    _download_row(key, items)
    if _vl_convert() is None:
        st.caption("PNG/SVG/HTML of this chart need vl-convert-python (not installed): CSV only.")
    return event


def _axis_named(df: pd.DataFrame) -> pd.DataFrame:
    if "axis_label" in df.columns:
        return df.drop(columns=[c for c in ("axis",) if c in df.columns]).rename(columns={"axis_label": "axis"})
    return df


def table(df: pd.DataFrame, key: str, filename: str, missing: dict[str, str] | None = None,
          show: pd.DataFrame | None = None, wrap: bool = False, **kwargs: Any) -> Any:
    """Show a DataFrame (as text; no HTML) with a CSV download button below it (``safe.csv_bytes``).

    A column ``axis_label`` (the paper's Δ-… names) is shown as ``axis`` in place of the short code.
    ``missing`` = {column: why}: an empty cell of that column shows why it is empty (numbers
    beside it to 4 significant digits) instead of "None"; the CSV keeps the empty cell.
    ``show``: a different frame for the screen (e.g. compact "0.854±0.088†" cells) while the CSV
    holds ``df`` (numbers in their own columns). Returns ``st.dataframe``'s value (the selection
    event when ``on_select`` is passed in ``kwargs``).
    ``wrap``: a static table (``st.table``) whose cells and headers wrap to the page's width — for a few
    rows of long text or many columns, which an interactive grid cuts at the right; its text goes through
    ``safe.md_frame`` (``st.table`` reads cells as Markdown); no selection (returns None).
    """
    df = _axis_named(df)
    shown = df if show is None else _axis_named(show)
    if missing:
        shown = shown.copy()
        for col, why in missing.items():
            if col in shown.columns and shown[col].isna().any():
                shown[col] = [why if pd.isna(v) else (f"{v:.4g}" if isinstance(v, float) else v) for v in shown[col]]
    if wrap:
        cells = safe.md_frame(shown)
        floats = [c for c in cells.columns if pd.api.types.is_float_dtype(cells[c])]
        event = st.table(cells.style.format("{:.4g}", subset=floats, na_rep=""), hide_index=True)
    else:
        event = st.dataframe(safe.visible_frame(shown), key=key, hide_index=True, width="stretch", **kwargs)
    if not controls.presentation_on():
        st.download_button("CSV", data=safe.csv_bytes(df), file_name=_file_name(filename),
                           mime="text/csv", key=f"{key}_csv", on_click="ignore", icon=":material/download:")
    return event


def _delta_rows(path: str, mtime: float, fkey: tuple) -> pd.DataFrame:
    """The Δ matrix with the correctness verdicts of both replies when the store holds any (each dataset's
    scorer as the Right-or-wrong page reads it)."""
    from sago_engine.correctness.compare import chosen_scorers

    stored = data._cached_query(path, mtime, "correctness_scorers", None, ())
    kw = (("scorers", tuple(sorted(chosen_scorers(stored).items()))),) if len(stored) else ()
    return data._cached_query(path, mtime, "delta_matrix", fkey, kw)


@st.cache_data(show_spinner=False, max_entries=8)
def _delta_parquet(path: str, mtime: float, fkey: tuple) -> bytes:
    df = _delta_rows(path, mtime, fkey)
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


@st.cache_data(show_spinner=False, max_entries=8)
def _delta_csv(path: str, mtime: float, fkey: tuple) -> bytes:
    return safe.csv_bytes(_delta_rows(path, mtime, fkey))


def delta_matrix_downloads(filters: Filters, key: str = "app_delta") -> None:
    """CSV and Parquet of the per-prompt delta matrix (signed Δ and Δ̃ with F, u, s, p) of the current filter.

    Built only when clicked (deferred), cached by store path + mtime + filters.
    """
    path = data.store_path()
    try:
        mt = data._mtime(path)
    except OSError:
        return
    fk = filters.key()
    tag = hashlib.sha1(repr(fk).encode()).hexdigest()[:8]
    c1, c2 = st.columns(2)
    with c1:
        st.download_button("Δ matrix CSV", data=lambda: _delta_csv(path, mt, fk), file_name=f"sago_deltas_{tag}.csv",
                           mime="text/csv", key=f"{key}_csv", on_click="ignore", icon=":material/download:")
    with c2:
        st.download_button("Δ matrix Parquet", data=lambda: _delta_parquet(path, mt, fk),
                           file_name=f"sago_deltas_{tag}.parquet", mime="application/octet-stream",
                           key=f"{key}_parquet", on_click="ignore", icon=":material/download:")
