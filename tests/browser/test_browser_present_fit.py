"""Presentation mode's first screen, measured in chromium on the demo store: every page shows one whole chart
(its box and everything it draws inside the window, below the top bar, without scrolling) or says why it has
none (``controls.no_chart_note``), at 1280×720 and 1440×900, light and dark."""

from __future__ import annotations

import shutil

import pytest

from sago_engine.store.catalog import DEMO_STORE
from tests.support.browser import (
    ALL_SCREENS,
    browser_page,
    dashboard,
    require_chromium,
    screenshot_dir,
    settle,
    wait_still,
)

pytestmark = pytest.mark.browser

SCREENS = ALL_SCREENS
#: Pages whose first screen holds no chart by design; each says why.
NO_CHART = {"prompts", "worst", "live"}
FIRST_CHART = ("[data-testid='stMain'] [data-testid='stPlotlyChart'], "
               "[data-testid='stMain'] [data-testid='stVegaLiteChart']")
#: The first chart on the page, its drawn parts (Plotly's SVG layers, Vega's canvas / SVG), the top bar.
FIRST_SCREEN_JS = """() => {
  window.scrollTo(0, 0);
  const main = document.querySelector('[data-testid="stMain"]');
  const chart = main.querySelector('[data-testid="stPlotlyChart"], [data-testid="stVegaLiteChart"]');
  const header = document.querySelector('[data-testid="stHeader"]');
  const note = main.querySelector('.st-key-presentation_no_chart');
  const box = e => { const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
  return {chart: chart && box(chart), parts: chart ? [...chart.querySelectorAll('svg.main-svg, canvas, svg')].map(box) : [],
          header: header ? header.getBoundingClientRect().bottom : 0, note: note && box(note),
          noteText: note ? note.innerText : '', scrollY: window.scrollY};
}"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    require_chromium()
    store = tmp_path_factory.mktemp("fit") / DEMO_STORE.name
    shutil.copy(DEMO_STORE, store)
    with dashboard(store, timeout=120) as url:
        yield url


@pytest.mark.parametrize("screen", SCREENS, ids=lambda s: f"{s[0]}x{s[1]}-{s[2]}")
def test_every_page_opens_on_one_whole_chart_in_presentation_mode(server, screen):
    from dashboard.frame import VIEWS

    w, h, scheme = screen
    problems = []
    with browser_page(w, h, scheme) as page:
        for _script, _title, _icon, path in VIEWS:
            page.goto(f"{server}/{'' if path == VIEWS[0][3] else path}?present=1", wait_until="domcontentloaded")
            page.locator("[data-testid='stMain'] h1").first.wait_for(timeout=180_000)
            settle(page, timeout=300_000)
            want = (".st-key-presentation_no_chart" if path in NO_CHART
                    else "[data-testid='stPlotlyChart'], [data-testid='stVegaLiteChart']")
            try:  # a chart mounts after its run, then lays out: wait until its boxes hold still
                page.locator(f"[data-testid='stMain'] :is({want})").first.wait_for(state="attached", timeout=60_000)
                if path not in NO_CHART:
                    wait_still(page, FIRST_CHART)
            except Exception:  # noqa: BLE001 - playwright's TimeoutError: measured (and reported) below
                pass
            assert page.locator("[data-testid='stException']").count() == 0, path
            m = page.evaluate(FIRST_SCREEN_JS)
            page.screenshot(path=str(screenshot_dir() / f"present_first_screen_{path}_{w}_{scheme}.png"))
            if path in NO_CHART:
                note = m["note"]
                if not (note and note["bottom"] <= h and m["noteText"].startswith("No chart on this screen:")):
                    problems.append((path, "no chart and no note on the first screen", m))
                continue
            c = m["chart"]
            if c is None:
                problems.append((path, "no chart", m))
                continue
            boxes = [c, *(p for p in m["parts"] if p["bottom"] > p["top"])]
            top = min(b["top"] for b in boxes)
            bottom = max(b["bottom"] for b in boxes)
            if top < m["header"] - 1 or bottom > h + 1 or c["left"] < 0 or c["right"] > w + 1:
                problems.append((path, f"chart spans {top:.0f}–{bottom:.0f} px of a {h} px window (top bar "
                                       f"{m['header']:.0f} px)", c))
    assert not problems, problems
