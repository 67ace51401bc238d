"""Significance on a sampled run in a real browser (Debian chromium + Playwright, 1280×800): the floor of the
sampled run beside the SGS, and the dice-vs-rephrasing view: one dot per prompt (counted from the raw rows with
plain SQL) and the diagonal."""

from __future__ import annotations

import duckdb
import pytest

from tests.support.browser import browser_page, dashboard, require_chromium, wait_ready

pytestmark = pytest.mark.browser


def _points(path) -> int:
    """(model, prompt) pairs of Δ-BLEU (the view's first axis) with base and variant samples, from the raw rows."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute("""
            SELECT count(*) FROM (SELECT run_id, prompt_id FROM sample_deltas WHERE axis = 'bleu' AND available
                                  GROUP BY ALL HAVING bool_or(variant_id IS NULL) AND bool_or(variant_id IS NOT NULL))
            """).fetchone()[0]
    finally:
        con.close()


def test_significance_shows_the_sampled_floor_and_the_dice_vs_rephrasing_view(tiny_sampled_store):
    require_chromium()
    with dashboard(tiny_sampled_store, timeout=120) as url, browser_page(1280, 800) as page:
        page.goto(f"{url}/significance", wait_until="domcontentloaded")
        page.get_by_text("Rephrasing or the dice? Sampled runs").first.wait_for(timeout=180_000)
        wait_ready(page)
        assert page.get_by_text("Against the noise floor").count() >= 1  # the sampled run's floor
        chart = page.locator("[data-testid='stPlotlyChart']").filter(has_text="rephrasing = dice").first
        chart.scroll_into_view_if_needed()
        chart.wait_for(timeout=60_000)
        assert chart.locator("path.point").count() == _points(tiny_sampled_store) == 4  # one dot per prompt
        assert chart.locator("g.trace.scatter path.js-line").count() >= 1  # the diagonal
        box = chart.bounding_box()
        assert box and box["width"] > 300 and box["x"] + box["width"] <= 1280
        assert page.get_by_text("pass^k: all k samples agree").count() == 1
