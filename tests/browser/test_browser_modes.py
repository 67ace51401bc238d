"""The dashboard's modes in a real browser (Debian chromium + Playwright): a cold local-mode server's first paint
and loopback-only address, share mode's read-only, confined store picker; the Prompts heatmap's exports at the
paper's scale (11 models × the full grid × 6 axes)."""

from __future__ import annotations

import urllib.parse

import pytest

from tests.support.browser import (
    NAV_RECORDER,
    browser_page,
    launcher,
    listen_addresses,
    require_chromium,
    screenshot_dir,
)
from tests.support.factories import make_store

pytestmark = pytest.mark.browser


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
