"""The dashboard in a real browser (Debian chromium + Playwright): radar and SGS tables render."""

from __future__ import annotations

import urllib.parse

import pytest

from tests.support.browser import (
    NAV_RECORDER,
    browser_page,
    dashboard,
    launcher,
    listen_addresses,
    require_chromium,
    screenshot_dir,
)
from tests.support.factories import make_store

pytestmark = pytest.mark.browser


# ---------------------------------------------------------------- every page, and the exports
#: The chart pages and the url paths app.py's st.navigation gives them (Profiles, the default page, is "/").
PAGES = ["pareto", "", "rankings", "significance", "sample_size", "pairwise", "prompts", "variants", "paper_reference"]
CHART = ("[data-testid='stPlotlyChart'] .main-svg, [data-testid='stVegaLiteChart'] svg, "
         "[data-testid='stVegaLiteChart'] canvas")


def _browser_store():
    """$SAGO_BROWSER_STORE, else the bundled demo store, which must open and be complete: a store the
    store layer refuses (or a half-written one) fails the test instead of being swapped for another."""
    import os

    from sago_engine.store import open_store
    from sago_engine.store.catalog import DEMO_STORE

    store = os.environ.get("SAGO_BROWSER_STORE") or DEMO_STORE
    with open_store(store) as st:
        runs = st.runs()
        assert len(runs) and (runs["status"] == "complete").all() and st.counts()["deltas"] > 0, store
    return store


@pytest.fixture(scope="module")
def demo_server():
    """One dashboard on the bundled demo store, shared by this module's demo-store tests (each test opens
    its own browser: Playwright's sync API allows one instance at a time)."""
    require_chromium()
    with dashboard(_browser_store()) as url:
        yield url


def test_every_page_renders_in_a_real_browser(demo_server):
    with browser_page(1400, 2400) as page:
        _every_page(demo_server, page)


def _every_page(url: str, page) -> None:
    shots = screenshot_dir()
    from sago_engine.store import open_store

    with open_store(_browser_store()) as st:
        models = sorted(st.runs()["model"].unique())
    offsite: list[str] = []  # no network at run time: every request stays on the dashboard's host

    def record(r):
        if (urllib.parse.urlparse(r.url).scheme in ("http", "https", "ws", "wss")
                and urllib.parse.urlparse(r.url).hostname not in ("127.0.0.1", "localhost")):
            offsite.append(r.url)

    page.on("request", record)
    try:
        for path in PAGES:  # the first visit goes straight to /pareto: app.py must still route it
            page.goto(f"{url}/{path}", wait_until="domcontentloaded")
            page.locator(CHART).first.wait_for(timeout=60_000)
            page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=60_000)
            page.wait_for_timeout(600)
            assert page.locator("[data-testid='stException']").count() == 0, f"exception on /{path}"
            assert page.get_by_text("Cannot open the store").count() == 0
            assert page.get_by_text("Page not found").count() == 0, f"/{path} is not a page"
            # the sidebar of app.py (store picker, presentation toggle) is there: st.navigation routed the page
            page.get_by_text("Presentation mode").first.wait_for(timeout=60_000)
            assert page.get_by_text("Presentation mode").count() == 1, f"/{path} was not routed through app.py"
            if path == "":  # Profiles: the radar has one trace per model, named in the legend, and the SGS tables
                page.get_by_text("Model profiles").first.wait_for(timeout=60_000)
                page.locator("[data-testid='stDataFrame']").nth(1).wait_for(timeout=60_000)  # total and per dataset
                legend = page.locator(".js-plotly-plot .legend").first.text_content()
                assert all(m in legend for m in models), (models, legend)
            page.screenshot(path=str(shots / f"page_{path or 'profiles'}.png"), full_page=True)
    finally:
        page.remove_listener("request", record)
    assert offsite == [], f"requests off the dashboard's host: {sorted(set(offsite))[:5]}"


def test_method_choices_page_renders_on_the_demo_store(demo_server):
    """The Method choices page on the bundled demo store: charts of the choices it has, no exception, the
    sections it lacks (option axes, cap pair, judge verdicts) explained."""
    with browser_page(1400, 2400) as page:
        _method_choices(demo_server, page)


def _method_choices(url: str, page) -> None:
    page.goto(f"{url}/method_choices", wait_until="domcontentloaded")
    page.get_by_text("Method choices: how much do open choices move the results?").first.wait_for(timeout=90_000)
    page.locator(CHART).first.wait_for(timeout=90_000)
    page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=120_000)
    assert page.locator("[data-testid='stException']").count() == 0
    assert page.get_by_text("Cannot open the store").count() == 0
    # the judge section is the page's last: wait for it (the choices above it render first)
    page.get_by_text("No judge verdicts in this store").first.wait_for(timeout=180_000)
    assert page.locator("[data-testid='stException']").count() == 0
    assert page.get_by_text("R_X: the paper's normalizers vs data-driven").count() >= 1
    assert page.get_by_text("No judge verdicts in this store").count() == 1
    page.get_by_text("Presentation mode").first.wait_for(timeout=60_000)
    page.screenshot(path=str(screenshot_dir() / "page_method_choices.png"), full_page=True)


#: The export checks, run in a child process: kaleido's synchronous server (a thread with its own event
#: loop talking to chromium) can wait forever on a chromium that never answers under heavy load; a child
#: with a time limit turns that into one retry and then a failure, never a hung suite.
_EXPORT_CHECKS = """
import re
import altair as alt
import pandas as pd
import plotly.graph_objects as go
from dashboard import exports
fig = go.Figure(go.Scatter(x=[0, 0.2], y=[0, 0.3], name="model-a"))
png, svg, html = exports.figure_png(fig), exports.figure_svg(fig), exports.figure_html(fig).decode()
assert png[:8] == b"\\x89PNG\\r\\n\\x1a\\n"
assert svg.lstrip()[:5] in (b"<?xml", b"<svg ") and b"</svg>" in svg
no_src = re.compile(r"<script[^>]*\\bsrc\\s*=", re.I)  # every script inline: nothing fetched offline
assert "Plotly.newPlot" in html and not no_src.search(html)
assert len(html) > 1_000_000  # plotly.js inline
ch = alt.Chart(pd.DataFrame({"d": ["a", "b"], "rank": [1, 2]})).mark_line().encode(x="d:N", y="rank:Q")
apng, asvg, ahtml = exports.altair_png(ch), exports.altair_svg(ch), exports.altair_html(ch).decode()
assert apng[:8] == b"\\x89PNG\\r\\n\\x1a\\n" and b"<svg" in asvg
assert "vegaEmbed" in ahtml and not no_src.search(ahtml)
print("exports ok")
"""


def test_chart_exports_are_valid_files():
    import subprocess
    import sys
    from pathlib import Path

    require_chromium()
    root = Path(__file__).resolve().parents[2]
    for attempt in (1, 2):
        try:
            done = subprocess.run([sys.executable, "-c", _EXPORT_CHECKS], cwd=root, capture_output=True, text=True,
                                  timeout=240)
        except subprocess.TimeoutExpired:
            assert attempt == 1, "the chart exports hung twice (kaleido waiting on chromium)"
            continue
        assert done.returncode == 0 and "exports ok" in done.stdout, done.stderr[-3000:]
        return


# ---------------------------------------------------------------- first paint; local vs share mode
APP_READY = "[data-testid='stPageLink']"  # sago's own navigation (app.py ran)


def _links(page) -> list[str]:
    """Titles of sago's own navigation links (the material icon's ligature text dropped)."""
    return [t.strip().split("\n")[-1] for t in page.locator(APP_READY).all_inner_texts()]


def _first_paint(page, url: str, shot) -> list[str]:
    """Open ``url`` in a fresh context, screenshot at first paint, wait for the frame; return Streamlit's own nav entries seen."""
    page.context.add_init_script(NAV_RECORDER)
    page.goto(url, wait_until="commit")
    page.locator("[data-testid='stApp'], [data-testid='stAppViewContainer']").first.wait_for(timeout=60_000)
    page.screenshot(path=str(shot))
    page.locator(APP_READY).first.wait_for(timeout=120_000)
    page.wait_for_timeout(500)
    return page.evaluate("window.__sagoNavSeen")


def test_first_paint_never_shows_the_folder_page_list_and_local_mode_is_loopback_only():
    """A cold local-mode server (scripts/dashboard.sh, the demo store): it listens on 127.0.0.1 only; /live
    first, then / and /?present=1 in new sessions — no legacy list (app, common, …), ever; the free path
    box and the Live page are offered."""
    require_chromium()
    shots = screenshot_dir()
    with launcher([]) as (url, port):
        assert listen_addresses(port) == {"127.0.0.1"}
        for path, name in (("/live", "live"), ("/", "root"), ("/?present=1", "present")):
            with browser_page() as page:
                seen = _first_paint(page, url + path, shots / f"first_paint_{name}.png")
                assert seen == [], f"{path}: Streamlit's folder list was shown: {seen}"
                links = _links(page)
                assert "Profiles" in links and "Live" in links and not any("common" in t for t in links)
                # app.py's sidebar (store picker, presentation toggle) arrives: st.navigation routed the page
                page.get_by_text("Presentation mode").first.wait_for(timeout=60_000)
                assert page.get_by_text("Presentation mode").count() == 1, f"{path} was not routed through app.py"
                if name == "live":
                    page.get_by_text("Live: probe one prompt").first.wait_for(timeout=60_000)
                if name == "root":
                    page.get_by_text("…or a path to another store").first.wait_for(timeout=60_000)
                    page.screenshot(path=str(shots / "mode_local.png"), full_page=True)


def _page_ready(page):
    page.locator(APP_READY).first.wait_for(timeout=120_000)
    page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=120_000)
    page.wait_for_timeout(500)


def _radar_legend(page) -> str:
    """Text of the Profiles radar's legend (one entry per model of the open store)."""
    page.locator(".js-plotly-plot .legend").first.wait_for(timeout=120_000)
    return page.locator(".js-plotly-plot .legend").first.text_content()


def test_share_mode_is_read_only_and_confined(tmp_path):
    """--share DIR: network address, stores of DIR only, no path box, no Live page; crafted store values refused."""
    require_chromium()
    share = tmp_path / "share"
    share.mkdir()
    make_store(share / "meeting.duckdb", models=("shared-a", "shared-b"))
    outside = make_store(tmp_path / "secret.duckdb", models=("secret-model",))
    (share / "escape.duckdb").symlink_to(outside)
    with launcher(["--share", str(share)]) as (url, port), browser_page(1400, 1600) as page:
        assert listen_addresses(port) == {"0.0.0.0"}
        page.goto(url, wait_until="domcontentloaded")
        _page_ready(page)
        links = _links(page)
        assert "Live" not in links and "Profiles" in links
        assert page.get_by_text("…or a path to another store").count() == 0
        legend = _radar_legend(page)
        assert "shared-a" in legend and "secret-model" not in legend
        page.screenshot(path=str(screenshot_dir() / "mode_share.png"), full_page=True)
        page.goto(url + "/live", wait_until="domcontentloaded")
        page.get_by_text("The Live page is not offered on this shared dashboard").first.wait_for(timeout=60_000)
        assert "Live" not in _links(page)
        for crafted in ("../secret.duckdb", str(outside), "escape.duckdb", str(share / "escape.duckdb")):
            page.goto(url + "/?store=" + urllib.parse.quote(crafted), wait_until="domcontentloaded")
            _page_ready(page)
            legend = _radar_legend(page)
            assert "shared-a" in legend and "secret-model" not in legend, crafted


# ---------------------------------------------------------------- exports at the paper's scale
def _paper_scale_heatmap():
    """The Prompts page's Δ̃ heatmap for 11 models × the full grid (110 variants) × 6 axes = 7,260 rows."""
    import numpy as np
    import pandas as pd

    from dashboard import charts
    from sago_engine.axis_spec import AXIS_SPECS
    from sago_engine.types import AXES, AXIS_LABELS
    from sago_engine.variants import full_grid

    grid = full_grid()
    rng = np.random.default_rng(0)
    rows = [{"model": f"model-{m:02d}", "label": f"{c.family} · {c.subtype} · {c.strength:g} · {c.position} #{i}",
             "order": i, "axis": a, "axis_label": AXIS_LABELS[a], "delta_norm": x, "delta": x, "unit": AXIS_SPECS[a].unit, "value": f"{x:+.2f}",
             "why": ""}
            for m in range(11) for i, c in enumerate(grid) for a in AXES for x in [float(rng.uniform(-1, 1))]]
    heat = pd.DataFrame(rows)
    return heat, charts.delta_heatmap(heat)


def test_paper_scale_heatmap_exports_html():
    import json

    from dashboard import exports

    heat, ch = _paper_scale_heatmap()
    assert len(heat) == 11 * 110 * 6 > 5000  # above Altair's MaxRowsError limit
    spec = json.loads(exports.altair_spec(ch))
    assert sum(len(v) for v in spec["datasets"].values()) == len(heat)  # every row inlined
    html = exports.altair_html(ch).decode()
    assert "vegaEmbed" in html and "model-10" in html


@pytest.mark.slow
def test_paper_scale_heatmap_exports_png_and_svg():
    """PNG and SVG of the 7,260-row heatmap (vl-convert; ~1 min each on a loaded 2-core machine)."""
    from dashboard import exports

    _, ch = _paper_scale_heatmap()
    png, svg = exports.altair_png(ch), exports.altair_svg(ch)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1_000_000
    assert b"<svg" in svg[:200] and b"model-10" in svg


# ---------------------------------------------------------------- the hostile-store corpus, every page, share mode
#: Every page share mode serves (no Live without --live); "" is Profiles, the default page.
SHARE_PAGES = ["", "pareto", "rankings", "significance", "sample_size", "pairwise", "prompts", "worst", "variants",
               "method_choices", "paper_reference"]
#: The pages that show a store's text (prompts, variants, replies, verdicts, reasons), not only its numbers.
TEXT_PAGES = ["", "prompts", "worst", "variants", "method_choices"]
#: Every URL the document holds in an attribute that makes the browser fetch, navigate or run it.
_URLS_JS = """() => {
  const out = [];
  for (const el of document.querySelectorAll('*')) {
    for (const a of ['src', 'href', 'xlink:href', 'data', 'action', 'formaction', 'poster', 'srcset', 'background']) {
      const v = el.getAttribute(a);
      if (v) out.push([el.tagName.toLowerCase(), a, v]);
    }
  }
  return out;
}"""


def _off_host(value: str, origin: str) -> bool:
    """Whether an attribute URL leaves the dashboard: another host or port, or a javascript:/vbscript: URL."""
    v = value.strip()
    if v.startswith(("#", "data:", "blob:", "about:")):
        return False
    u = urllib.parse.urlparse(urllib.parse.urljoin(origin + "/", v))
    if u.scheme in ("javascript", "vbscript"):
        return True
    return f"{u.scheme}://{u.netloc}" != origin


def _hover_charts(page) -> None:
    """Move the pointer over the middle of the first Plotly and Vega-Lite charts (their tooltips render store text)."""
    for sel in ("[data-testid='stPlotlyChart'] .nsewdrag", "[data-testid='stVegaLiteChart'] canvas, "
                "[data-testid='stVegaLiteChart'] svg"):
        loc = page.locator(sel).first
        if loc.count():
            box = loc.bounding_box()
            if box:
                page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
                page.wait_for_timeout(300)


def _settled(page, quiet_ms: int = 500) -> None:
    """Wait until the page's script has finished and stayed finished for ``quiet_ms`` (the frame may rerun
    a page once; a short run never shows the status widget, so that widget is no signal)."""
    page.locator(APP_READY).first.wait_for(timeout=120_000)
    state = "document.querySelector('[data-testid=\"stApp\"]').dataset.testScriptState"
    for _ in range(5):
        page.wait_for_function(f"{state} === 'notRunning'", timeout=120_000)
        page.wait_for_timeout(quiet_ms)
        if page.evaluate(state) == "notRunning":
            return


def test_hostile_stores_on_every_page_in_share_mode(tmp_path):
    """The corpus of tests/support/hostile_stores.py in share mode, one server for its folder, every page, chromium:
    no request leaves the dashboard (recorded at the browser; a pixel logger on another loopback port
    must receive nothing), no <img>/<a>/… points off the host, nothing runs (no dialog, no payload
    global, no injected script), no traceback, the secret file outside the folder never shown, and a
    store the store layer refuses gets a clear message (the refusal itself: the trust-store branch)."""
    require_chromium()
    from tests.support.hostile_stores import PWNED, SECRET, PixelLogger, build_corpus

    with PixelLogger() as pixel:
        corpus = build_corpus(tmp_path, pixel.port)
        with launcher(["--share", str(corpus.share)]) as (url, _port), browser_page(1400, 2200) as page:
            origin = url.rstrip("/")
            left: list[str] = []  # requests to anything but the dashboard

            def route(r):
                u = urllib.parse.urlparse(r.request.url)
                if u.scheme in ("data", "blob") or f"{u.scheme}://{u.netloc}" == origin:
                    return r.continue_()
                left.append(r.request.url)
                # loopback (the pixel logger) goes through, so the logger sees it too; nothing else leaves
                return r.continue_() if u.hostname == "127.0.0.1" else r.abort()

            page.route("**/*", route)
            sockets: list[str] = []
            page.on("websocket", lambda ws: sockets.append(ws.url))
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            problems: list[str] = []
            for name in corpus.stores:
                # a refused store is refused by the frame every page shares: each is opened on one page (a
                # different one each); the huge store's long strings reach the pages that show stored text
                # (the others show numbers)
                refused_on = dict(zip(corpus.refused, TEXT_PAGES))
                pages = ([refused_on[name]] if name in refused_on else TEXT_PAGES if name == "huge" else SHARE_PAGES)
                for path in pages:
                    where = f"/{path}?store={name}.duckdb"
                    page.goto(f"{origin}/{path}?store={name}.duckdb", wait_until="domcontentloaded")
                    _settled(page)
                    if name == "payload":  # tooltips show store strings (the other stores: sizes, refusals)
                        _hover_charts(page)
                    html = page.content()
                    text = page.inner_text("body")
                    if page.locator("[data-testid='stException']").count():
                        problems.append(f"{where}: traceback")
                    if SECRET in html:
                        problems.append(f"{where}: the secret file is shown")
                    if page.evaluate(f"window.{PWNED}") is not None:
                        problems.append(f"{where}: a payload script ran")
                    if page.evaluate(f"Array.from(document.scripts).some(s => s.text.includes('{PWNED}'))"):
                        problems.append(f"{where}: a payload script was injected")
                    for tag, attr, value in page.evaluate(_URLS_JS):
                        if _off_host(value, origin):
                            problems.append(f"{where}: <{tag} {attr}={value[:80]!r}>")
                    if name in corpus.refused and "is not a sago store" not in text:
                        problems.append(f"{where}: no clear message that the store is refused")
            page.screenshot(path=str(screenshot_dir() / "hostile_last.png"), full_page=True)
    assert problems == [], "\n".join(problems[:40])
    assert left == [], sorted(set(left))[:10]
    assert pixel.hits == [], pixel.hits[:10]
    assert dialogs == [], dialogs[:5]
    assert all(urllib.parse.urlparse(s).netloc == urllib.parse.urlparse(origin).netloc for s in sockets), sockets
