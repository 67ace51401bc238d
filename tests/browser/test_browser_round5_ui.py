"""A presenter's smaller trips, in chromium on one dashboard (demo store, the viewer's menu ⋮ shown): a cold start
says it is loading, /profiles opens Profiles, the theme survives a reload and a link, and Method choices' claims
and Profiles' reply-health tables fit the page at 1280×720 and 1440×900."""

from __future__ import annotations

import shutil
import time
from types import SimpleNamespace
from urllib.parse import parse_qs, urlparse

import pytest

from sago_engine.store.catalog import DEMO_STORE
from tests.support.browser import READY, browser_page, dashboard, require_chromium, wait_ready

pytestmark = pytest.mark.browser

#: The text of the page's main area (not the sidebar, not the hidden "Skip to main content" link).
MAIN_TEXT = "() => ((document.querySelector('[data-testid=stMain]') || {}).innerText || '').trim()"
#: Whether the app's background is dark (relative luminance of its colour below one half).
DARK = """() => { const c = getComputedStyle(document.querySelector('.stApp')).backgroundColor.match(/[\\d.]+/g)
  .map(Number); return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2] < 128; }"""
#: A table's box against the page: its right edge, the main column's content edge, the viewport's width, and
#: the elements inside it that scroll sideways (a grid whose columns are wider than the table is cut there).
FIT = """e => { const box = e.getBoundingClientRect(), main = document.querySelector('[data-testid=stMainBlockContainer]');
  const m = main.getBoundingClientRect(), pad = parseFloat(getComputedStyle(main).paddingRight);
  const wide = [...e.querySelectorAll('*')].filter(x => x.clientWidth > 0 && x.scrollWidth > x.clientWidth + 1)
    .map(x => `${x.tagName}.${x.className.split(' ')[0]} ${x.scrollWidth} > ${x.clientWidth}`);
  return {right: box.right, column: m.right - pad, viewport: innerWidth, wide}; }"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One dashboard for the file, and the timeline of its cold start: the first page after the server started,
    polled every 100 ms — when the main area first shows text and what it says, when the page's title comes,
    and the main area's text once the page is done."""
    require_chromium()
    store = tmp_path_factory.mktemp("round5") / DEMO_STORE.name
    shutil.copy(DEMO_STORE, store)
    with dashboard(store, timeout=120, toolbar="viewer") as url:
        with browser_page(1280, 720) as page:  # closed before the tests open theirs (one Playwright at a time)
            t0 = time.monotonic()
            page.goto(url + "/", wait_until="commit")
            first, first_text = None, ""
            while time.monotonic() - t0 < 240 and not page.locator("[data-testid='stMain'] h1").count():
                text = page.evaluate(MAIN_TEXT)
                if text and first is None:
                    first, first_text = time.monotonic() - t0, text
                page.wait_for_timeout(100)
            title = time.monotonic() - t0
            if first is None:  # the title was the first text
                first, first_text = title, page.evaluate(MAIN_TEXT)
            wait_ready(page)
            done = page.evaluate(MAIN_TEXT)
        yield SimpleNamespace(url=url, first=first, first_text=first_text, title=title, done=done)


def test_a_cold_start_says_it_is_loading(server):
    """The first page after a start shows "Starting the dashboard" before its title (the modules take seconds to
    import), and the note is gone once the page is drawn."""
    print(f"cold start: first text in the main area after {server.first:.1f} s, the page's title after "
          f"{server.title:.1f} s")
    assert "Starting the dashboard" in server.first_text, server.first_text[:200]
    assert server.done.startswith("Model profiles") and "Starting the dashboard" not in server.done


def test_profiles_answers_at_its_own_path(server):
    """/profiles opens Profiles with no "Page not found" box; the sidebar's Profiles link still goes to /."""
    with browser_page(1280, 720) as page:
        page.goto(server.url + "/profiles", wait_until="domcontentloaded")
        wait_ready(page)
        assert page.locator("[role='dialog']", has_text="Page not found").count() == 0
        assert page.locator("[data-testid='stMain'] h1").first.inner_text() == "Model profiles"
        assert urlparse(page.url).path == "/profiles"
        link = page.locator("[data-testid='stSidebar'] a", has_text="Profiles").first.get_attribute("href")
        assert urlparse(link).path in ("", "/"), link


def test_the_theme_picked_in_the_menu_survives_a_reload_and_a_link(server):
    """Dark picked in the menu on one page, then another page opened from the sidebar: a reload there opens dark,
    and its address (which says ``theme=dark``) opens dark in a fresh light browser context (no stored choice)."""
    with browser_page(1280, 720, "light") as page:
        page.goto(server.url + "/", wait_until="domcontentloaded")  # Profiles: its numbers are cached by now
        wait_ready(page)
        assert not page.evaluate(DARK)
        page.locator("[data-testid='stMainMenuButton']").click()
        page.locator("[data-testid='stMainMenuItem-theme-Dark']").click()
        assert _turns_dark(page, 10), "picking Dark in the menu left the page light"
        page.locator("[data-testid='stSidebar'] a", has_text="Paper reference").first.click()  # a page without a store
        page.locator("[data-testid='stMain'] h1", has_text="Paper").wait_for(timeout=120_000)
        page.wait_for_function("() => new URLSearchParams(location.search).get('theme') === 'dark'", timeout=10_000)
        page.reload(wait_until="domcontentloaded")
        assert _turns_dark(page), "the reload opened light"
        link = page.url
        assert parse_qs(urlparse(link).query).get("theme") == ["dark"], link
        fresh = page.context.browser.new_context(viewport={"width": 1280, "height": 720}, color_scheme="light")
        other = fresh.new_page()
        other.goto(link, wait_until="domcontentloaded")
        assert _turns_dark(other), f"{link} opened light in a fresh browser"
        fresh.close()


def _turns_dark(page, timeout_s: float = 45.0) -> bool:
    """Whether the page is dark within ``timeout_s``, across the one reload the theme script may make (the page's
    context is replaced then, so a check can fail mid-way; it is simply made again)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if page.evaluate(DARK):
                return True
        except Exception:  # noqa: BLE001 - playwright's Error while the page reloads, or no .stApp yet
            pass
        page.wait_for_timeout(300)
    return False


def _sticking_out(page, anchors: tuple[str, ...], n_min: int) -> list[str]:
    """What sticks out of each table shown just above an element whose class starts with one of ``anchors`` (its
    CSV button), at 1280×720 and at 1440×900; at least ``n_min`` such tables are expected."""
    sel = ", ".join(f"[data-testid='stElementContainer']:has(+ [class*='{a}'])" for a in anchors)
    tables = page.locator(sel)
    tables.first.wait_for(state="attached", timeout=120_000)
    page.wait_for_function(READY, timeout=120_000)
    assert tables.count() >= n_min, tables.count()
    bad = []
    for w, h in ((1280, 720), (1440, 900)):
        page.set_viewport_size({"width": w, "height": h})
        page.wait_for_timeout(800)
        for i, box in enumerate(tables.evaluate_all(f"els => els.map({FIT})")):
            if box["right"] > min(box["column"], box["viewport"]) + 1 or box["wide"]:
                bad.append(f"{anchors} #{i} at {w}×{h}: {box}")
    return bad


def test_the_claims_and_reply_health_tables_fit_the_page(server):
    """Every column of Method choices' claims tables and of Profiles' two reply-health tables is inside the page's
    main column, with nothing to scroll sideways, at 1280×720 and 1440×900."""
    with browser_page(1280, 720) as page:
        page.goto(server.url + "/method_choices", wait_until="domcontentloaded")
        bad = _sticking_out(page, ("st-key-methods_claims_",), 4)
        page.goto(server.url + "/", wait_until="domcontentloaded")
        bad += _sticking_out(page, ("st-key-profiles_reply_health_csv", "st-key-profiles_cut_replies_csv"), 2)
    assert not bad, bad
