"""Every page in chromium on a store of one model and one dataset: no page fails, each draws something
or says why, and Rankings / Profiles say what one model and one dataset leave them to show."""

from __future__ import annotations

import pytest

from tests.support.browser import browser_page, dashboard, require_chromium, screenshot_dir
from tests.support.factories import make_store

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
            page.screenshot(path=str(shots / f"shape_one_{path or 'profiles'}.png"), full_page=True)
