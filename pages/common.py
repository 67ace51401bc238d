"""Shared Streamlit helpers for every dashboard page: store path, cached queries, filters, charts, exports.

Pages render only: every number comes from ``sago_engine`` (store queries and report
functions). This module holds no SQL and no statistics — it caches, lays out and exports.
Text from datasets and models is always rendered as text (never as HTML).
"""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import streamlit as st

from sago_engine.filters import FILTER_FIELDS, Filters
from dashboard import frame, urlstate
from sago_engine.store_catalog import DEMO_STORE



def _store_errors() -> tuple[type[BaseException], ...]:
    from sago_engine.store import READ_ERRORS

    return READ_ERRORS


# ---------------------------------------------------------------- store and cached queries
def store_path() -> str:
    """The store the user picked in the sidebar (app.py), else ``$SAGO_STORE``, else the demo store.

    Share mode: only a store of the shared folder (``dashboard.access.confined_store``); a
    session value naming anything else is ignored.
    """
    chosen = frame.checked_store(st.session_state.get("store_path"))
    if chosen is not None:
        return chosen
    if frame.access().shared:  # nothing valid chosen: the first store of the shared folder
        opts = frame.store_options(frame.access())
        if not opts:
            st.error("No store (*.duckdb) in the shared folder.")
            st.stop()
        return frame.checked_store(opts[0])
    return os.environ.get("SAGO_STORE") or str(DEMO_STORE)


def _mtime(path: str) -> float:
    """File mtime (part of every cache key, so a rebuilt store is re-read). Raises OSError if missing."""
    p = Path(path)
    wal = Path(path + ".wal")
    m = p.stat().st_mtime
    return max(m, wal.stat().st_mtime) if wal.exists() else m


@st.cache_data(show_spinner=False, max_entries=256)
def _cached_query(path: str, mtime: float, name: str, fkey: tuple | None, kwargs: tuple) -> Any:
    """Open the store read-only, run one named ``Store`` query, close it. Depends only on its arguments."""
    from sago_engine.store import open_store

    del mtime  # cache key only
    with open_store(path, read_only=True) as store:
        fn = getattr(store, name)
        if fkey is not None:
            return fn(Filters(**dict(fkey)), **dict(kwargs))
        return fn(**dict(kwargs))


def query(name: str, filters: Filters | None = None, **kwargs: Any) -> Any:
    """Run ``Store.<name>(filters, **kwargs)`` on the current store, cached by path + mtime + filters + kwargs.

    On a missing, locked or foreign store the page shows "Cannot open the store: …" and stops.
    Pass ``filters=None`` for queries that take no ``Filters`` argument.
    """
    path = store_path()
    try:
        return _cached_query(path, _mtime(path), name, None if filters is None else filters.key(),
                             tuple(sorted(kwargs.items())))
    except _store_errors() as e:
        _store_error(path, e)


@st.cache_data(show_spinner=False, max_entries=256)
def _cached_report(path: str, mtime: float, fn: str, fkey: tuple, kwargs: tuple) -> Any:
    """``sago_engine.report.<fn>(prompt_scores(filters), **kwargs)``, cached like the queries."""
    from sago_engine import report

    scores = _cached_query(path, mtime, "prompt_scores", fkey, ())
    return getattr(report, fn)(scores, **dict(kwargs))


def scored(fn: str, filters: Filters, **kwargs: Any) -> Any:
    """Apply a ``sago_engine.report`` function to the filtered per-prompt scores, cached.

    E.g. ``scored("score_tables", f, eps=0.05)`` or ``scored("radar_data", f, dataset=None)``.
    Keyword values must be hashable.
    """
    path = store_path()
    try:
        return _cached_report(path, _mtime(path), fn, filters.key(), tuple(sorted(kwargs.items())))
    except _store_errors() as e:
        _store_error(path, e)


def scored_frame(fn: str, df: pd.DataFrame, **kwargs: Any) -> Any:
    """Apply a ``sago_engine.report`` function to a (small) frame a page already has, cached by its content."""
    return _report_on_frame(fn, df, tuple(sorted(kwargs.items())))


@st.cache_data(show_spinner=False, max_entries=128)
def _report_on_frame(fn: str, df: pd.DataFrame, kwargs: tuple) -> Any:
    from sago_engine import report

    return getattr(report, fn)(df, **dict(kwargs))


def model_colors() -> dict[str, str]:
    """One colour per model on every page: assigned over ALL models of the store (not the filtered ones)."""
    from sago_engine.palette import model_colors as _mc

    return _mc(query("filter_options")["models"])


def _store_error(path: str, e: BaseException) -> None:
    """Show why the store cannot be read (as text) and stop the page."""
    hint = (" It is being written by a run (DuckDB allows one writer or many readers): "
            "pick another store or reload when the run has finished.") if "lock" in str(e).lower() else ""
    st.error(f"Cannot open the store {Path(path).name}: {e}{hint}")
    st.stop()


def open_frames(filters: Filters | None, *names: str) -> dict[str, Any]:
    """Several cached queries at once: ``{name: query(name, filters)}``.

    Queries that take no filter (``run_records``, ``filter_options``) are called without it.
    """
    unfiltered = {"run_records", "filter_options", "runs", "counts"}
    return {n: query(n, None if n in unfiltered else filters) for n in names}


def current_filters() -> Filters:
    """The Filters chosen in the sidebar (set by app.py through ``sidebar_filters``)."""
    f = st.session_state.get("sago_filters")
    return f if isinstance(f, Filters) else Filters()


def sidebar_filters(options: dict[str, list]) -> Filters:
    """Sidebar multiselects (keys ``filter_<field>``) for models, datasets, F, u, s, p → ``Filters``.

    An empty multiselect means "all" (``None``). Selections no longer offered by the current
    store are dropped. The result is also kept in ``st.session_state["sago_filters"]``.
    """
    chosen: dict[str, tuple | None] = {}
    box = st.sidebar.expander("Filters", expanded=not presentation_on())
    with box:
        st.caption("Empty = all. Every page honours these filters.")
        for name, label in FILTER_FIELDS:
            opts = list(options.get(name, []))
            key = f"filter_{name}"
            urlstate.restore(name, key, "floatlist" if name == "strengths" else "list", choices=opts)
            if key in st.session_state:  # keep only values this store offers
                st.session_state[key] = [v for v in st.session_state[key] if v in opts]
            fmt = (lambda v: f"{v:g}") if name == "strengths" else str
            sel = st.multiselect(label, opts, key=key, placeholder="all", format_func=fmt)
            chosen[name] = tuple(sel) if sel else None
    f = Filters(**chosen)
    st.session_state["sago_filters"] = f
    return f


# ---------------------------------------------------------------- presentation mode
_PRESENTATION_CSS = """
<style>
html, body, [data-testid="stAppViewContainer"] { font-size: 20px; }
[data-testid="stMarkdownContainer"] p, [data-testid="stCaptionContainer"] { font-size: 1.15rem; }
h1 { font-size: 2.6rem !important; } h2, h3 { font-size: 1.9rem !important; }
.block-container { max-width: 100% !important; padding-top: 2rem; }
[data-testid="stPlotlyChart"], [data-testid="stVegaLiteChart"] { min-height: 78vh; }
</style>
"""


def presentation_on() -> bool:
    """Whether presentation mode is on (the sidebar toggle ``app_presentation``)."""
    return bool(st.session_state.get("app_presentation", False))


def presentation_mode() -> bool:
    """Sidebar toggle for meetings: wide layout, large fonts, controls collapsed, one chart per screen.

    The injected CSS is a constant (it contains no data). Returns whether the mode is on.
    """
    urlstate.restore("present", "app_presentation", "bool")  # a meeting link: …/pareto?present=1
    on = st.sidebar.toggle("Presentation mode", key="app_presentation",
                           help="Large fonts, controls collapsed, one chart per screen.")
    if on:
        st.html(_PRESENTATION_CSS)
    return on


def chart_height(default: int = 480) -> int:
    """Chart height in pixels: taller in presentation mode (one chart per screen)."""
    return 760 if presentation_on() else default


# ---------------------------------------------------------------- exports
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


@st.cache_data(show_spinner=False, max_entries=64)
def _altair_static(spec_json: str, fmt: str) -> bytes:
    vlc = _vl_convert()
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


def altair_html(chart) -> bytes:
    """Standalone HTML of an Altair chart with the Vega JS inline (vl-convert), any row count."""
    import altair as alt

    vlc = _vl_convert()
    if vlc is not None:
        return vlc.vegalite_to_html(altair_spec(chart), bundle=True).encode("utf-8")
    with alt.data_transformers.enable("default", max_rows=None):
        return chart.to_html(inline=True).encode("utf-8")  # needs the vl-convert / altair_viewer bundle


def _slug(key: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in key)


def _download_row(key: str, items: list[tuple[str, Callable[[], bytes] | bytes, str, str]]) -> None:
    cols = st.columns(len(items) + 1)
    for col, (label, data, fname, mime) in zip(cols, items):
        with col:
            st.download_button(label, data=data, file_name=fname, mime=mime, key=f"{key}_dl_{label.lower()}",
                               on_click="ignore", icon=":material/download:")


def chart(fig, key: str, caption: str, data: pd.DataFrame | None = None) -> None:
    """Render a Plotly figure, a one-line plain-English caption, and PNG / SVG / HTML (/ CSV) downloads.

    PNG and SVG are generated only when clicked (deferred, cached by figure JSON); HTML has
    plotly.js inline. ``data`` (optional) adds a CSV of the plotted numbers.
    """
    st.plotly_chart(fig, key=key, width="stretch", config={"displaylogo": False})
    st.caption(caption)
    if presentation_on():
        return
    name = _slug(key)
    items = [("PNG", lambda: figure_png(fig), f"{name}.png", "image/png"),
             ("SVG", lambda: figure_svg(fig), f"{name}.svg", "image/svg+xml"),
             ("HTML", lambda: figure_html(fig), f"{name}.html", "text/html")]
    if data is not None:
        items.append(("CSV", data.to_csv(index=False).encode("utf-8"), f"{name}.csv", "text/csv"))
    _download_row(key, items)


def altair_chart(ch, key: str, caption: str, data: pd.DataFrame | None = None) -> None:
    """Render an Altair chart with a caption and downloads: PNG / SVG (vl-convert, offline) and HTML, + CSV.

    Without vl-convert-python only HTML and CSV are offered (and the note says so).
    """
    st.altair_chart(ch, key=key, width="stretch")
    st.caption(caption)
    if presentation_on():
        return
    name = _slug(key)
    items: list = []
    if _vl_convert() is not None:
        items += [("PNG", lambda: altair_png(ch), f"{name}.png", "image/png"),
                  ("SVG", lambda: altair_svg(ch), f"{name}.svg", "image/svg+xml"),
                  ("HTML", lambda: altair_html(ch), f"{name}.html", "text/html")]
    else:
        items.append(("HTML", lambda: altair_html(ch), f"{name}.html", "text/html"))
    if data is not None:
        items.append(("CSV", data.to_csv(index=False).encode("utf-8"), f"{name}.csv", "text/csv"))
    _download_row(key, items)
    if _vl_convert() is None:
        st.caption("PNG/SVG of this chart need vl-convert-python (not installed): HTML and CSV only.")


def table(df: pd.DataFrame, key: str, filename: str, **kwargs: Any) -> None:
    """Show a DataFrame (as text; no HTML) with a CSV download button below it.

    A column ``axis_label`` (the paper's Δ-… names) is shown as ``axis`` in place of the short code.
    """
    if "axis_label" in df.columns:
        df = df.drop(columns=[c for c in ("axis",) if c in df.columns]).rename(columns={"axis_label": "axis"})
    st.dataframe(df, key=key, hide_index=True, width="stretch", **kwargs)
    if not presentation_on():
        st.download_button("CSV", data=df.to_csv(index=False).encode("utf-8"), file_name=filename,
                           mime="text/csv", key=f"{key}_csv", on_click="ignore", icon=":material/download:")


@st.cache_data(show_spinner=False, max_entries=8)
def _delta_parquet(path: str, mtime: float, fkey: tuple) -> bytes:
    df = _cached_query(path, mtime, "delta_matrix", fkey, ())
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


@st.cache_data(show_spinner=False, max_entries=8)
def _delta_csv(path: str, mtime: float, fkey: tuple) -> bytes:
    return _cached_query(path, mtime, "delta_matrix", fkey, ()).to_csv(index=False).encode("utf-8")


def delta_matrix_downloads(filters: Filters, key: str = "app_delta") -> None:
    """CSV and Parquet of the per-prompt delta matrix (signed Δ and Δ̃ with F, u, s, p) of the current filter.

    Built only when clicked (deferred), cached by store path + mtime + filters.
    """
    path = store_path()
    try:
        mt = _mtime(path)
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


def provenance(key: str) -> None:
    """An expander with the run records (fingerprint, seed, R_X, encoder, versions) beside the numbers."""
    with st.expander("Provenance: runs behind these numbers"):
        runs = query("run_records")
        st.dataframe(runs, key=f"{key}_provenance", hide_index=True, width="stretch")


def empty_stop(df: pd.DataFrame, what: str = "scores") -> None:
    """Stop the page with a warning when the current store + filters give no rows."""
    if df is None or len(df) == 0:
        st.warning(f"No {what} for the current store and filters.")
        st.stop()


# ---------------------------------------------------------------- statistics controls
def correction_control(key: str) -> str:
    """Multiple-comparison control (none / Holm / BH), shared by every page through ``sago_correction``.

    Each page renders its own selectbox (key ``<page>_correction``); a change is copied to the
    page-independent ``st.session_state["sago_correction"]`` so markers on Profiles / Pareto follow
    the choice made on Significance. Returns "none" | "holm" | "bh".
    """
    from sago_engine.stats import CORRECTION_LABELS, CORRECTIONS

    wkey = f"{key}_correction"
    urlstate.restore("correction", wkey, "str", choices=CORRECTIONS,
                     default=st.session_state.get("sago_correction", "none"))

    def _sync() -> None:
        st.session_state["sago_correction"] = st.session_state[wkey]

    return st.selectbox("Multiple-comparison control", list(CORRECTIONS), key=wkey, on_change=_sync,
                        format_func=CORRECTION_LABELS.get,
                        help="Adjusts p over every test the table shows (models × axes [× datasets]). "
                             "Markers follow the adjusted p; raw p stays in the tables.")
