"""Every download button of a Plotly page (Pareto) and an Altair page (Rankings), clicked in chromium:
the PNG, SVG, HTML and CSV files parse and hold the numbers the page shows (recomputed here from
the raw deltas, as in tests/integration/pages/test_pages_independent.py)."""

from __future__ import annotations

import io
import re

import pandas as pd
import pytest

from tests.integration.pages.test_pages_independent import LABEL, per_prompt, raw_rows, sgs_table
from tests.support.browser import browser_page, dashboard, download, require_chromium
from tests.support.factories import make_store

pytestmark = pytest.mark.browser
MODELS = ("model-a", "model-b", "model-c")


def _ready(page) -> None:
    page.locator("[data-testid='stPlotlyChart'] .main-svg, [data-testid='stVegaLiteChart'] svg, "
                 "[data-testid='stVegaLiteChart'] canvas").first.wait_for(timeout=120_000)
    page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=120_000)
    page.wait_for_timeout(800)


def _download(page, key: str) -> bytes:
    """The bytes of the file the download button with widget key ``key`` gives (``tests.support.browser.download``)."""
    return download(page, key, timeout_ms=240_000)[1]


def _csv(data: bytes) -> pd.DataFrame:
    return pd.read_csv(io.BytesIO(data), encoding="utf-8-sig")


def _png_ok(data: bytes) -> None:
    from PIL import Image

    img = Image.open(io.BytesIO(data))
    img.load()
    assert img.format == "PNG" and img.width >= 300 and img.height >= 300
    lo, hi = img.convert("L").getextrema()
    assert hi - lo > 100  # something is drawn, not a blank canvas


def _svg_text(data: bytes) -> str:
    from lxml import etree

    root = etree.fromstring(data)
    assert root.tag.endswith("svg")
    return " ".join(t for t in root.itertext())


def test_every_download_of_pareto_and_rankings_holds_the_page_numbers(tmp_path):
    require_chromium()
    store = make_store(tmp_path / "dl.duckdb", models=MODELS, datasets=("truthfulqa", "nq_open", "alpaca"),
                       n_prompts=6, n_variants=6, seed=5, missing_axes={"model-c": ["cos", "prob"]})
    ps = per_prompt(raw_rows(store))
    total, per = sgs_table(ps, ["model", "axis"]), sgs_table(ps, ["model", "dataset", "axis"]).reset_index()
    with dashboard(store) as url, browser_page(1400, 2400) as page:
        page.goto(f"{url}/pareto", wait_until="domcontentloaded")
        _ready(page)
        # --- the Plotly scatter: PNG, SVG, HTML, CSV of the plotted points
        _png_ok(_download(page, "pareto_scatter_dl_png"))
        svg = _svg_text(_download(page, "pareto_scatter_dl_svg"))
        assert all(m in svg for m in MODELS) and "SGS Δ-BLEU" in svg and "SGS Δ-MR" in svg
        html = _download(page, "pareto_scatter_dl_html").decode("utf-8")
        assert "Plotly.newPlot" in html
        for m in MODELS:
            x, y = re.search(rf'"name":"{m}","x":\[([-0-9.e]+)\],"y":\[([-0-9.e]+)\]', html).groups()
            assert (float(x), float(y)) == pytest.approx((total.loc[(m, "bleu"), "sgs"], total.loc[(m, "mr"), "sgs"]),
                                                         abs=1e-9), m
        pts = _csv(_download(page, "pareto_scatter_dl_csv")).set_index("model")
        assert sorted(pts.index) == list(MODELS)
        for m in MODELS:
            assert pts.loc[m, "x"] == pytest.approx(total.loc[(m, "bleu"), "sgs"], abs=1e-9)
            assert pts.loc[m, "y"] == pytest.approx(total.loc[(m, "mr"), "sgs"], abs=1e-9)
        # --- the table under it: its CSV holds the numbers behind the cells the page shows
        tab = _csv(_download(page, "pareto_table_csv")).set_index("model")
        assert set(tab["x_axis"]) == {"bleu"} and set(tab["y_axis"]) == {"mr"}
        for m in MODELS:
            for col, axis in (("x", "bleu"), ("y", "mr")):
                assert tab.loc[m, col] == pytest.approx(total.loc[(m, axis), "sgs"], abs=1e-9), (m, col)
                assert tab.loc[m, f"{col}_std"] == pytest.approx(total.loc[(m, axis), "std"], abs=1e-9), (m, col)
                assert tab.loc[m, f"{col}_lo"] <= tab.loc[m, col] <= tab.loc[m, f"{col}_hi"], (m, col)

        page.goto(f"{url}/rankings", wait_until="domcontentloaded")
        _ready(page)
        # --- the Altair bump chart (Δ-Cos by default): PNG, SVG, HTML, CSV of the ranks
        _png_ok(_download(page, "rankings_bump_dl_png"))
        svg = _svg_text(_download(page, "rankings_bump_dl_svg"))
        assert "model-a" in svg and "model-b" in svg and "Δ-Cos" in svg
        html = _download(page, "rankings_bump_dl_html").decode("utf-8")
        assert "vegaEmbed" in html and "model-a" in html and "nq_open" in html
        ranks = _csv(_download(page, "rankings_bump_dl_csv")).set_index(["model", "dataset"])
        cos = per[per["axis"] == "cos"].copy()
        cos["rank"] = cos.groupby("dataset")["sgs"].rank(method="min").astype(int)
        assert len(ranks) == len(cos) == 6  # model-c has no Δ-Cos: not ranked
        for r in cos.itertuples(index=False):
            assert int(ranks.loc[(r.model, r.dataset), "rank"]) == r.rank
            assert ranks.loc[(r.model, r.dataset), "sgs"] == pytest.approx(r.sgs, abs=1e-9)
        ratio = _csv(_download(page, "rankings_ratio_csv")).set_index(["model", "axis"])
        for (m, a), g in per.groupby(["model", "axis"]):
            assert ratio.loc[(m, LABEL[a]), "ratio"] == pytest.approx(g["sgs"].max() / g["sgs"].min(), rel=1e-9)
