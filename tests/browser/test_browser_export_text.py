"""Every chart's SVG export on every page of the demo store, fetched in chromium through its download button:
no two labels of a file overlap (bounding boxes of the drawn text, ``tests.support.svg_text``).

One dashboard on a copy of the bundled demo store (real model names, the lengths a meeting shows), one
browser page walking the twelve views through their URLs; closed expanders are opened so every chart with
a download is reached. The Live page draws its chart only after a probe has run (no download here).
"""

from __future__ import annotations

import shutil

import pytest

from sago_engine.store.catalog import DEMO_STORE
from tests.support.browser import browser_page, dashboard, require_chromium, settle
from tests.support.svg_text import svg_overlaps

pytestmark = pytest.mark.browser

SVG_KEYS_JS = """() => Array.from(document.querySelectorAll('[data-testid="stDownloadButton"]')).map(el => {
  const c = el.closest('[class*="st-key-"]');
  return c ? Array.from(c.classList).find(x => x.startsWith('st-key-')).slice(7) : null; })
  .filter(k => k && k.endsWith('_dl_svg'))"""
#: Pages with at least this many chart exports on the demo store (a page that loses its charts fails).
AT_LEAST = {"profiles": 1, "pareto": 1, "rankings": 2, "significance": 1, "sample_size": 1, "pairwise": 1,
            "prompts": 1, "variants": 5, "method_choices": 1, "paper_reference": 1}


def test_no_label_of_any_exported_chart_overlaps_another(tmp_path):
    require_chromium()
    from dashboard.frame import VIEWS

    store = tmp_path / DEMO_STORE.name
    shutil.copy(DEMO_STORE, store)
    found, bad = {}, {}
    with dashboard(store, timeout=120) as url, browser_page(1440, 900) as page:
        viewer = page.context.browser.new_page()
        for _script, _title, _icon, path in VIEWS:
            page.goto(f"{url}/{'' if path == VIEWS[0][3] else path}", wait_until="domcontentloaded")
            page.locator("[data-testid='stMain'] h1").first.wait_for(timeout=180_000)
            settle(page, timeout=300_000)
            assert page.locator("[data-testid='stException']").count() == 0, path
            if path in AT_LEAST:  # a loaded machine draws the buttons after the run's charts: wait for them
                try:
                    page.wait_for_function(f"() => ({SVG_KEYS_JS})().length >= {AT_LEAST[path]}", timeout=120_000)
                except Exception:  # noqa: BLE001 - playwright's TimeoutError: the count is asserted below
                    pass
            closed = page.locator("[data-testid='stMain'] [data-testid='stExpander'] details:not([open]) > summary")
            while closed.count():
                closed.first.click()
            keys = page.evaluate(SVG_KEYS_JS)
            found[path] = keys
            for key in keys:
                with page.expect_download(timeout=180_000) as dl:
                    page.locator(f".st-key-{key} button").first.click(timeout=60_000)
                svg = open(dl.value.path(), encoding="utf-8").read()
                assert "Source: sago · store sago_demo.duckdb" in svg, key
                overlaps = svg_overlaps(viewer, svg)
                if overlaps:
                    bad[key] = overlaps[:5]
    for path, n in AT_LEAST.items():
        assert len(found.get(path, [])) >= n, (path, found.get(path))
    assert not bad, bad
