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
