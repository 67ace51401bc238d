"""Share mode's landing in a real browser (Debian chromium + Playwright), started as a host starts it
(``scripts/dashboard.sh --share DIR``): visitors land on the demo store, not on the first file by name, and a
broken file in the folder is listed by name (no server path) instead of breaking the store picker."""

from __future__ import annotations

import pytest

from tests.support.browser import browser_page, launcher, require_chromium, screenshot_dir
from tests.support.factories import make_store

pytestmark = pytest.mark.browser

READY = "!document.querySelector('[data-testid=\"stStatusWidget\"]')"


def test_share_mode_lands_on_the_demo_and_lists_a_broken_file(tmp_path):
    require_chromium()
    share = tmp_path / "share"
    share.mkdir()
    make_store(share / "aaa-first-by-name.duckdb", models=("first-a", "first-b"))
    make_store(share / "sago_demo.duckdb", models=("demo-a", "demo-b"))
    (share / "0-broken.duckdb").write_bytes(b"not a database, truncated in transit")
    with launcher(["--share", str(share)]) as (url, _port), browser_page(1440, 900) as page:
        page.goto(url, wait_until="domcontentloaded")
        page.get_by_text("Model profiles").first.wait_for(timeout=180_000)
        page.wait_for_function(READY, timeout=180_000)
        page.wait_for_timeout(1500)
        assert page.locator("[data-testid='stException']").count() == 0
        picker = page.locator("[data-testid='stSelectbox']").filter(has_text="Store file").first
        assert picker.locator("input").input_value() == "sago_demo.duckdb"
        page.locator(".js-plotly-plot .legendtext").first.wait_for(timeout=60_000)
        legend = page.eval_on_selector_all(".js-plotly-plot .legendtext", "els => els.map(e => e.textContent)")
        assert "demo-a" in legend and "first-a" not in legend, legend
        sidebar = page.locator("[data-testid='stSidebar']").inner_text()
        assert "Not offered: 0-broken.duckdb (not a DuckDB database file)." in " ".join(sidebar.split())
        assert str(tmp_path) not in page.content()
        page.screenshot(path=str(screenshot_dir() / "share_landing.png"))
        # the picker still offers the readable stores, the broken one not
        picker.click()
        options = page.locator("[role='option']").all_inner_texts()
        assert options == ["sago_demo.duckdb", "aaa-first-by-name.duckdb"], options
