"""Every page in chromium on a store of one model and one dataset: no page fails, each draws something
or says why, Rankings / Profiles say what one model and one dataset leave them to show, Sample size's
exported chart has no two labels over each other and Worst cases shows the prompt's text."""

from __future__ import annotations

import pytest

from tests.support.browser import browser_page, dashboard, require_chromium, screenshot_dir
from tests.support.factories import make_store
from tests.support.svg_text import svg_overlaps

pytestmark = pytest.mark.browser

#: url paths of the pages (Profiles is "/"); Live is left out (it runs a model).
PATHS = ["", "pareto", "rankings", "significance", "sample_size", "pairwise", "prompts", "worst", "variants",
         "method_choices", "paper_reference"]
SHOWN = ("[data-testid='stPlotlyChart'] .main-svg, [data-testid='stVegaLiteChart'] svg, "
         "[data-testid='stVegaLiteChart'] canvas, [data-testid='stDataFrame'], [data-testid='stAlert']")


def test_every_page_on_one_model_and_one_dataset_in_chromium(tmp_path):
    require_chromium()
    store = make_store(tmp_path / "one.duckdb", models=("m-one",), datasets=("truthfulqa",), n_prompts=6,
                       n_variants=3, seed=2)
    shots = screenshot_dir()
    with dashboard(store) as url, browser_page(1400, 2000) as page:
        for path in PATHS:
            page.goto(f"{url}/{path}", wait_until="domcontentloaded")
            page.get_by_text("Presentation mode").first.wait_for(timeout=120_000)
            page.locator(SHOWN).first.wait_for(timeout=120_000)
            page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=120_000)
            page.wait_for_timeout(500)
            assert page.locator("[data-testid='stException']").count() == 0, f"exception on /{path}"
            if path == "rankings":
                assert page.get_by_text("there is nothing to rank", exact=False).count() == 1
            if path == "":
                assert page.get_by_text("SGS per dataset equals the total SGS above", exact=False).count() == 1
            if path == "sample_size":
                sample_size_labels_apart(page)
            page.screenshot(path=str(shots / f"shape_one_{path or 'profiles'}.png"), full_page=True)
        # this store keeps no reply texts, so no row is a break: every row, and the chosen one's prompt text
        page.goto(f"{url}/worst?change=all", wait_until="domcontentloaded")
        page.get_by_text("Base prompt", exact=True).first.wait_for(timeout=120_000)
        page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=120_000)
        page.locator("[data-testid='stCode']", has_text="of truthfulqa?").first.wait_for(timeout=60_000)


def sample_size_labels_apart(page) -> None:
    """Sample size's chart, fetched through its SVG download: no two drawn labels overlap (one drawable N
    once stacked every tick label of the N axis on one spot)."""
    closed = page.locator("[data-testid='stMain'] [data-testid='stExpander'] details:not([open]) > summary")
    while closed.count():
        closed.first.click()
    button = page.locator("[class*='st-key-'][class*='_dl_svg'] button").first
    button.wait_for(timeout=120_000)
    with page.expect_download(timeout=180_000) as dl:
        button.click(timeout=60_000)
    svg = open(dl.value.path(), encoding="utf-8").read()
    viewer = page.context.browser.new_page()
    try:
        assert not svg_overlaps(viewer, svg), svg_overlaps(viewer, svg)[:5]
    finally:
        viewer.close()
