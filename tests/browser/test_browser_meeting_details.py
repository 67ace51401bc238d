"""Details a presenter meets, in chromium on the demo store: the Variants page's labels and threshold line (light
and dark, 1280×720 and 1440×900), and a shared dashboard's provenance naming no folder of the host."""

from __future__ import annotations

import re
import shutil

import pytest

from dashboard.charts import NEUTRAL
from sago_engine.store.catalog import DEMO_STORE
from tests.support.browser import (
    SCREENS,
    browser_page,
    dashboard,
    download,
    launcher,
    require_chromium,
    screenshot_dir,
    settle,
    wait_still,
)
from tests.support.svg_text import shown_overlaps

pytestmark = pytest.mark.browser

LENGTH_CHART = ".st-key-variants_length"


def _settled(page) -> None:
    page.locator("[data-testid='stMain'] h1").first.wait_for(timeout=180_000)
    settle(page, timeout=300_000)
    assert page.locator("[data-testid='stException']").count() == 0


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    store = tmp_path_factory.mktemp("details") / DEMO_STORE.name
    shutil.copy(DEMO_STORE, store)
    return store


@pytest.fixture(scope="module")
def server(demo):
    require_chromium()
    with dashboard(demo, timeout=120) as url:
        yield url


@pytest.mark.parametrize("screen", SCREENS, ids=lambda s: f"{s[0]}x{s[1]}-{s[2]}")
def test_variants_length_factor_labels_do_not_overlap(server, screen):
    """The length-factor chart's four panels each name their x axis; no two of its labels meet."""
    w, h, scheme = screen
    with browser_page(w, h, scheme) as page:
        page.goto(f"{server}/variants", wait_until="domcontentloaded")
        _settled(page)
        chart = page.locator(LENGTH_CHART)
        chart.wait_for(state="attached", timeout=180_000)  # the page's last chart: late on a loaded machine
        chart.scroll_into_view_if_needed(timeout=60_000)
        page.locator(f"{LENGTH_CHART} .g-xtitle text").first.wait_for(timeout=60_000)
        wait_still(page, LENGTH_CHART)  # laid out: its boxes hold still
        titles = page.locator(f"{LENGTH_CHART} .g-xtitle text").all_text_contents()
        assert titles and all(t.startswith("target length ratio") for t in titles), titles
        overlaps = shown_overlaps(page, LENGTH_CHART)
        page.screenshot(path=str(screenshot_dir() / f"variants_length_{w}_{scheme}.png"))
        assert not overlaps, overlaps


def test_the_semantic_filter_threshold_is_labelled_and_grey(server):
    """The dashed threshold line is mid grey (seen on a light and a dark page) and names its value."""
    with browser_page(1440, 900) as page:
        page.goto(f"{server}/variants", wait_until="domcontentloaded")
        _settled(page)
        _name, svg = download(page, "variants_semantic_hist_dl_svg")
    text = svg.decode("utf-8")
    assert re.search(r">threshold t = 0\.\d{3}<", text), "the threshold line has no label"
    rules = re.findall(r'<line[^>]*stroke-dasharray="6,4"[^>]*>|<path[^>]*stroke-dasharray="6,4"[^>]*>', text)
    assert rules, "no dashed rule in the export"
    assert all(f'stroke="{NEUTRAL}"' in r for r in rules), rules[:2]
    assert "black" not in " ".join(rules) and 'stroke="#000"' not in " ".join(rules)


def test_share_mode_provenance_names_no_folder_of_the_host(tmp_path):
    """The demo store's run records name the model files where the store was built (absolute paths); a shared
    dashboard shows their file names only."""
    require_chromium()
    share = tmp_path / "share"
    share.mkdir()
    shutil.copy(DEMO_STORE, share / DEMO_STORE.name)
    with launcher(["--share", str(share)]) as (url, _port), browser_page(1280, 720, "dark") as page:
        page.goto(url + "/pareto", wait_until="domcontentloaded")
        _settled(page)
        page.get_by_text("Provenance: runs behind these numbers").click()
        runs = page.locator("[data-testid='stExpander']", has_text="Provenance: runs behind these numbers").first
        runs.locator("[data-testid^='glide-cell-3-']").first.wait_for(state="attached", timeout=60_000)
        cells = runs.evaluate("e => [...e.querySelectorAll(\"[data-testid^='glide-cell-']\")].map(c => c.textContent)")
    assert any(".gguf" in c for c in cells), cells[:20]  # the model file is still named
    leaks = [c for c in cells if re.search(r"(^|[\s\"'])/(work|home|root|tmp|usr|srv|opt)/", c)]
    assert not leaks, leaks[:3]


def test_the_store_picker_offers_the_saved_probes(tmp_path):
    """Local mode: the file the Live page's "Save to store" writes ($SAGO_USER_STORE) is in the store picker once
    it exists, and picking it opens it."""
    from tests.support.factories import make_store

    require_chromium()
    probes = tmp_path / "user" / "probes.duckdb"
    probes.parent.mkdir()
    make_store(probes, models=("probe-model",))
    with dashboard(None, env={"SAGO_USER_STORE": str(probes), "SAGO_LIVE_WARMUP": "0"}) as url, \
            browser_page(1280, 720) as page:
        page.goto(url + "/?store=probes.duckdb", wait_until="domcontentloaded")
        _settled(page)
        picker = page.locator("[data-testid='stSidebar'] [data-testid='stSelectbox']").first
        assert "Store file" in picker.inner_text() and "probes.duckdb" in picker.inner_html()
        page.locator(".js-plotly-plot .legend").first.wait_for(timeout=120_000)
        assert "probe-model" in page.locator(".js-plotly-plot .legend").first.text_content()
