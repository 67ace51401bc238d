"""The Live page's first screen while a probe runs (Debian chromium, smollm2-135m-instruct, 4 variants, 16 new
tokens): Run and Cancel, the status line, the base reply and the Δ table sit above the form, inside the window
without scrolling; the background warm-up note moves on instead of freezing beside "Done"."""

from __future__ import annotations

import shutil

import pytest

from sago_engine.live import probe as live
from sago_engine.store.catalog import DEMO_STORE
from tests.support.browser import browser_page, dashboard, fill_live_form, require_chromium, screenshot_dir

pytestmark = pytest.mark.browser

PROMPT = "What is the capital of Australia?"
SCREENS = [(1280, 900, "light"), (1440, 900, "dark")]
BOX_JS = """sel => { const e = document.querySelector(sel); if (!e) return null;
  const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, scrollY: window.scrollY}; }"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from sago_engine.models import ModelUnavailableError, resolve_model

    require_chromium()
    try:
        resolve_model(live.DEFAULT_MODEL)
    except ModelUnavailableError as e:
        pytest.skip(str(e))
    store = tmp_path_factory.mktemp("live") / DEMO_STORE.name
    shutil.copy(DEMO_STORE, store)
    with dashboard(store, timeout=120, env={"SAGO_LIVE_WARMUP": "1"}) as url:
        yield url


def _on_screen(page, selector: str, h: int) -> dict:
    box = page.evaluate(BOX_JS, selector)
    assert box is not None, selector
    assert box["scrollY"] == 0 and 0 <= box["top"] and box["bottom"] <= h, (selector, box)
    return box


@pytest.mark.parametrize("screen", SCREENS, ids=lambda s: f"{s[0]}x{s[1]}-{s[2]}")
def test_progress_is_on_the_first_screen_and_the_warm_up_note_moves_on(server, screen):
    w, h, scheme = screen
    with browser_page(w, h, scheme) as page:
        page.goto(f"{server}/live", wait_until="domcontentloaded")
        fill_live_form(page, PROMPT, 4, 16)  # a real model, a short probe
        page.evaluate("() => window.scrollTo(0, 0)")
        run = page.get_by_role("button", name="Run probe")
        b = run.bounding_box()
        assert b and b["y"] + b["height"] <= h, "Run probe is below the first screen"
        run.click()
        page.locator("[data-testid='stMarkdown']", has_text="Running").first.wait_for(timeout=30_000)
        page.evaluate("() => window.scrollTo(0, 0)")
        page.evaluate("() => { const e = [...document.querySelectorAll('[data-testid=\"stMarkdown\"]')]"
                      ".find(e => e.textContent.includes('Running')); e.id = 'sago-status'; }")
        _on_screen(page, "#sago-status", h)
        page.get_by_text("Base response (").wait_for(timeout=600_000)
        page.get_by_text("4/4 variants scored in").wait_for(timeout=600_000)
        page.wait_for_timeout(1500)
        page.evaluate("() => window.scrollTo(0, 0)")
        page.evaluate("() => { const e = [...document.querySelectorAll('[data-testid=\"stMarkdown\"]')]"
                      ".find(e => e.textContent.includes('variants scored in')); e.id = 'sago-status'; }")
        _on_screen(page, "#sago-status", h)
        table = page.evaluate(BOX_JS, "[data-testid='stMain'] [data-testid='stDataFrame']")
        assert table is not None and table["top"] < h, ("the Δ table starts below the first screen", table)
        assert page.get_by_text("Preparing").count() == 0, "the warm-up note still says Preparing beside Done"
        assert page.locator("[data-testid='stException']").count() == 0
        page.screenshot(path=str(screenshot_dir() / f"live_first_screen_{w}_{scheme}.png"))
