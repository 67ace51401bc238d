"""The dashboard in a real browser (Debian chromium + Playwright): radar and SGS tables render."""

from __future__ import annotations

import pytest

from tests.browser import browser_page, dashboard, require_chromium, screenshot_dir
from tests.factories import make_store

pytestmark = pytest.mark.browser


def test_profiles_page_renders_radar_and_tables(tmp_path):
    require_chromium()
    store = make_store(tmp_path / "browser.duckdb")
    with dashboard(store) as url, browser_page() as page:
        page.goto(url, wait_until="domcontentloaded")
        page.get_by_text("Model profiles").first.wait_for(timeout=60_000)
        page.locator(".js-plotly-plot .scatterlayer, .js-plotly-plot .polarlayer").first.wait_for(timeout=60_000)
        page.locator("[data-testid='stDataFrame']").first.wait_for(timeout=30_000)
        assert page.locator("[data-testid='stDataFrame']").count() >= 2
        assert page.get_by_text("Cannot open the store").count() == 0
        # the radar has one trace per model, named in the legend
        legend = page.locator(".js-plotly-plot .legend").first.text_content()
        assert "model-a" in legend and "model-b" in legend
        page.wait_for_timeout(500)
        page.screenshot(path=str(screenshot_dir() / "profiles.png"), full_page=True)


# ---------------------------------------------------------------- every page, and the exports
#: The chart pages and the url paths app.py's st.navigation gives them (Profiles, the default page, is "/").
PAGES = ["pareto", "", "rankings", "significance", "sample_size", "prompts", "variants", "paper_reference"]
CHART = ("[data-testid='stPlotlyChart'] .main-svg, [data-testid='stVegaLiteChart'] svg, "
         "[data-testid='stVegaLiteChart'] canvas")


def _browser_store(tmp_path):
    """The demo store when it is complete and readable, else $SAGO_BROWSER_STORE, else a synthetic 3-model store."""
    import os

    from sago_engine.report import DEMO_STORE
    from sago_engine.store import open_store

    if os.environ.get("SAGO_BROWSER_STORE"):
        return os.environ["SAGO_BROWSER_STORE"]
    try:
        with open_store(DEMO_STORE) as st:
            runs = st.runs()
            if len(runs) and (runs["status"] == "complete").all() and st.counts()["deltas"] > 0:
                return DEMO_STORE
    except Exception:  # missing, locked by the runner, or half-written: fall back
        pass
    return make_store(tmp_path / "pages.duckdb", models=("model-a", "model-b", "model-c"),
                      datasets=("truthfulqa", "nq_open", "alpaca"), n_prompts=6, n_variants=6,
                      missing_axes={"model-c": ["cos", "prob"]})


def test_every_page_renders_in_a_real_browser(tmp_path):
    require_chromium()
    store = _browser_store(tmp_path)
    shots = screenshot_dir()
    with dashboard(store) as url, browser_page(1400, 2400) as page:
        for path in PAGES:  # the first visit goes straight to /pareto: app.py must still route it
            page.goto(f"{url}/{path}", wait_until="domcontentloaded")
            page.locator(CHART).first.wait_for(timeout=60_000)
            page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=60_000)
            page.wait_for_timeout(600)
            assert page.locator("[data-testid='stException']").count() == 0, f"exception on /{path}"
            assert page.get_by_text("Cannot open the store").count() == 0
            assert page.get_by_text("Page not found").count() == 0, f"/{path} is not a page"
            # the sidebar of app.py (store picker, presentation toggle) is there: st.navigation routed the page
            assert page.get_by_text("Presentation mode").count() == 1, f"/{path} was not routed through app.py"
            page.screenshot(path=str(shots / f"page_{path or 'profiles'}.png"), full_page=True)


def test_chart_exports_are_valid_files():
    require_chromium()
    import altair as alt
    import pandas as pd
    import plotly.graph_objects as go

    from pages import common

    fig = go.Figure(go.Scatter(x=[0, 0.2], y=[0, 0.3], name="model-a"))
    png, svg, html = common.figure_png(fig), common.figure_svg(fig), common.figure_html(fig).decode()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert svg.lstrip()[:5] in (b"<?xml", b"<svg ") and b"</svg>" in svg
    import re

    no_src = re.compile(r"<script[^>]*\bsrc\s*=", re.I)  # every script inline: nothing fetched offline
    assert "Plotly.newPlot" in html and not no_src.search(html)
    assert len(html) > 1_000_000  # plotly.js inline
    ch = alt.Chart(pd.DataFrame({"d": ["a", "b"], "rank": [1, 2]})).mark_line().encode(x="d:N", y="rank:Q")
    apng, asvg, ahtml = common.altair_png(ch), common.altair_svg(ch), common.altair_html(ch).decode()
    assert apng[:8] == b"\x89PNG\r\n\x1a\n" and b"<svg" in asvg
    assert "vegaEmbed" in ahtml and not no_src.search(ahtml)
