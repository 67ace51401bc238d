"""Presenting a study in a real browser (Debian chromium + Playwright), one server on a small synthetic store:
conclusions that name the method choice they depend on, presentation mode (sidebar collapsed, chart settings
out of the way, larger chart fonts), every heatmap row label drawn, exported charts that cite their source."""

from __future__ import annotations

import re

import pytest

from tests.support.browser import SCREENS, browser_page, dashboard, require_chromium, screenshot_dir, wait_still
from tests.support.browser import wait_ready as _ready
from tests.support.factories import add_option_axes, make_store

pytestmark = pytest.mark.browser

MODELS = ("m-a", "m-b", "m-c")
N_VARIANTS = 13


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("present")
    scale = {"m-a": 0.6, "m-b": 1.2, "m-c": 2.4}  # well-separated models: only the option reorders them
    flip = make_store(d / "flip.duckdb", models=MODELS, n_prompts=3, n_variants=N_VARIANTS, model_scale=scale)
    add_option_axes(flip, options={"cos": ("user_last",)},
                    factors={"cos@user_last": {"m-a": 4.0, "m-b": 1.5, "m-c": 0.3}})
    same = make_store(d / "same.duckdb", models=MODELS, n_prompts=3, n_variants=3, model_scale=scale)
    add_option_axes(same, options={"cos": ("user_last",)}, factors={"cos@user_last": 1.0})
    return flip, same


@pytest.fixture(scope="module")
def server(stores):
    require_chromium()
    with dashboard(stores[0], timeout=120) as url:
        yield url


def _open(page, url, title):
    page.goto(url, wait_until="domcontentloaded")
    page.get_by_text(title).first.wait_for(timeout=180_000)
    _ready(page)


def test_profiles_names_the_choice_that_reorders_and_links_to_method_choices(server, stores):
    with browser_page(1440, 900) as page:
        _open(page, f"{server}/", "Model profiles")
        note = page.locator(".st-key-profiles_assumptions")
        note.wait_for(timeout=60_000)
        text = " ".join(note.inner_text().split())
        assert "Depends on an open method choice" in text
        assert ("Δ-Cos ranking depends on Δ-Cos: token position and layers — under user_last (instead of default): "
                "m-c is the most stable instead of m-a; 3 pairs of models swap order.") in text, text
        note.scroll_into_view_if_needed()
        page.screenshot(path=str(screenshot_dir() / "assumptions_profiles.png"))
        note.get_by_text("Every option side by side: Method choices").click()
        page.wait_for_url("**/method_choices**", timeout=120_000)  # the note itself names the choice too
        page.get_by_text("Method choices: how much do open choices move the results?").first.wait_for(timeout=120_000)
        assert "/method_choices" in page.url

        # a store where no option changes a conclusion: no note
        _open(page, f"{server}/", "Model profiles")
        box = page.get_by_label("…or a path to another store")
        box.fill(str(stores[1]))
        box.press("Enter")
        _ready(page, rerun=True)
        page.get_by_text("SGS per axis — Total").first.wait_for(timeout=60_000)
        # the other store's page replaces the first one's (a slow machine may still show the old note)
        page.locator(".st-key-profiles_assumptions").wait_for(state="detached", timeout=120_000)
        assert page.locator(".st-key-profiles_assumptions").count() == 0
        assert page.get_by_text("Depends on an open method choice").count() == 0


def _tick_sizes(page) -> list[float]:
    """Font sizes (px) of the radar's angular tick labels (the axis names around the disc)."""
    page.locator(".js-plotly-plot .angularaxistick text").first.wait_for(timeout=60_000)
    return page.eval_on_selector_all(".js-plotly-plot .angularaxistick text",
                                     "els => els.map(e => parseFloat(getComputedStyle(e).fontSize))")


def test_presentation_mode_collapses_the_sidebar_and_enlarges_chart_fonts(server):
    with browser_page(1280, 720) as page:
        _open(page, f"{server}/", "Model profiles")
        assert page.locator("[data-testid='stSidebar']").get_attribute("data-collapsed") == "false"
        normal = _tick_sizes(page)
        _open(page, f"{server}/?present=1", "Model profiles")
        sidebar = page.locator("[data-testid='stSidebar']")
        assert sidebar.get_attribute("data-collapsed") == "true" and sidebar.bounding_box()["width"] == 0
        settings = page.locator("[data-testid='stExpander']").filter(has_text="Chart settings").first
        assert settings.locator("details").get_attribute("open") is None  # closed: the chart comes first
        assert page.get_by_text("Radial scale").first.is_visible() is False
        big = _tick_sizes(page)
        assert min(big) >= 1.4 * max(normal), (normal, big)
        chart = page.locator("[data-testid='stPlotlyChart']").first
        chart.scroll_into_view_if_needed()
        box = chart.bounding_box()
        assert box["height"] <= 720 - 60  # the whole chart on one 1280×720 screen (below the top bar)
        page.screenshot(path=str(screenshot_dir() / "presentation_profiles_1280.png"))


def test_prompts_heatmap_draws_every_row_label_in_presentation_mode(server):
    with browser_page(1280, 720) as page:
        _open(page, f"{server}/prompts?present=1&dataset=truthfulqa&prompt=truthfulqa%3A0", "Prompts: one prompt")
        chart = page.locator("[data-testid='stVegaLiteChart']").first
        chart.scroll_into_view_if_needed()
        wait_still(page, "[data-testid='stVegaLiteChart']")  # laid out: its boxes hold still
        axes = page.evaluate("""() => [...document.querySelectorAll("[data-testid='stVegaLiteChart'] g.role-axis")]
          .filter(a => (a.getAttribute('aria-label') || '').startsWith('Y-axis'))
          .map(a => [...a.querySelectorAll('.role-axis-label text')].map(t => ({
              text: t.textContent, shown: (t.getAttribute('opacity') ?? '1') !== '0',
              top: t.getBoundingClientRect().top, bottom: t.getBoundingClientRect().bottom})))""")
        assert axes, "no y axis in the heatmap"
        for labels in axes:  # one y axis per row of panels
            assert len(labels) == N_VARIANTS and all(t["shown"] for t in labels), labels
            assert len({t["text"] for t in labels}) == N_VARIANTS
            tops = sorted(labels, key=lambda t: t["top"])
            assert all(a["bottom"] <= b["top"] + 0.5 for a, b in zip(tops, tops[1:])), "labels overlap"
        page.screenshot(path=str(screenshot_dir() / "presentation_prompts_heatmap_1280.png"))


def test_exported_svgs_carry_store_filters_and_eps(server):
    with browser_page(1440, 900) as page:
        _open(page, f"{server}/significance?eps=0.08&models=m-a&models=m-b", "Significance: is the instability")
        with page.expect_download() as dl:
            page.locator(".st-key-significance_heatmap_dl_svg button").click()
        svg = open(dl.value.path(), encoding="utf-8").read()
        text = " ".join(re.sub(r"<[^>]+>", " ", svg).split())
        assert "Source: sago · store flip.duckdb · ε = 0.08 · filters: models = m-a, m-b" in text, text[-400:]
        _open(page, f"{server}/pareto", "Pareto: stability on two axes")
        with page.expect_download(timeout=120_000) as dl:
            page.locator(".st-key-pareto_scatter_dl_svg button").click()
        svg = open(dl.value.path(), encoding="utf-8").read()
        assert "Source: sago · store flip.duckdb · ε = 0.05 · filters: none (all models, datasets and variants)" in svg




@pytest.mark.parametrize("screen", SCREENS, ids=lambda s: f"{s[0]}x{s[1]}-{s[2]}")
def test_model_vs_model_and_worst_cases_name_the_choice_that_reorders(server, screen):
    """Model vs model's verdicts and Worst cases' axis rest on Δ-Cos's stored default: both say that under
    user_last m-c is the most stable (as Profiles does); on Δ-BLEU (no open choice) neither has the box."""
    w, h, scheme = screen
    want = "Δ-Cos ranking depends on Δ-Cos: token position and layers — under user_last (instead of default)"
    with browser_page(w, h, scheme) as page:
        for path, title, key in (("/pairwise?axis=cos&present=1", "Model against model: is", "pairwise_assumptions"),
                                 ("/worst?axis=cos&change=all&present=1", "Worst cases: which", "worst_assumptions")):
            _open(page, server + path, title)
            note = page.locator(f".st-key-{key}")
            note.wait_for(timeout=60_000)
            text = " ".join(note.inner_text().split())
            assert "Depends on an open method choice" in text and want in text, text
            note.scroll_into_view_if_needed()
            page.screenshot(path=str(screenshot_dir() / f"assumptions_{key}_{w}_{scheme}.png"))
            _open(page, server + path.replace("axis=cos", "axis=bleu"), title)
            page.get_by_text("Depends on an open method choice").first.wait_for(state="detached", timeout=60_000)
            assert page.locator(f".st-key-{key}").count() == 0
