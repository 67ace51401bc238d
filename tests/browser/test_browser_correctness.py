"""The Right-or-wrong page in a real browser (Debian chromium + Playwright) at 1280×720 and 1440×900, light and
dark, in presentation mode: its quadrant counts and accuracy equal numbers recomputed here from the store's raw
rows with plain SQL and pandas (never through sago_engine.correctness), and it fits the screen."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest

from sago_engine.correctness.rescore import rescore_correctness
from tests.support import correctness_store as cs
from tests.support.browser import browser_page, dashboard, require_chromium, screenshot_dir
from tests.support.browser import wait_ready as _ready

pytestmark = pytest.mark.browser

QUADRANTS = ("stable and right", "stable but wrong", "unstable but right", "unstable and wrong")
#: (width, height, colour scheme, presentation mode)
SCREENS = ((1280, 720, "light", True), (1280, 720, "dark", False), (1440, 900, "light", False),
           (1440, 900, "dark", True))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("corr_browser")
    cs.write_dataset_files(d / "data")
    path = cs.build(d / "corr.duckdb")
    rescore_correctness(path, data_dir=d / "data")
    return path


def expected(path, axis: str = "bleu") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Quadrant counts per model and base / variant accuracy, from the raw rows (SQL + pandas only)."""
    con = duckdb.connect(str(path), read_only=True)
    rows = con.execute("""
        SELECT r.model, c.run_id, c.prompt_id, c.variant_id, c.verdict, v.kept
        FROM correctness c JOIN runs r USING (run_id) LEFT JOIN variants v ON v.variant_id = c.variant_id
        WHERE c.repeat IS NULL AND c.verdict IN ('correct', 'wrong')""").df()
    s = con.execute("""
        SELECT d.run_id, d.prompt_id, sqrt(avg(d.delta_norm * d.delta_norm)) AS s
        FROM deltas d JOIN variants v USING (variant_id)
        WHERE d.axis = ? AND d.available AND v.kept GROUP BY ALL""", [axis]).df()
    con.close()
    base = rows[rows["variant_id"].isna()][["model", "run_id", "prompt_id", "verdict"]].rename(columns={"verdict": "b"})
    var = rows[rows["variant_id"].notna() & rows["kept"].eq(True)]
    pairs = var.merge(base, on=["model", "run_id", "prompt_id"])
    prompts = pairs.groupby(["model", "run_id", "prompt_id"], as_index=False).agg(b=("b", "first"))
    pts = prompts.merge(s, on=["run_id", "prompt_id"])
    thr = pts["s"].median()
    pts["q"] = [QUADRANTS[2 * int(x > thr) + int(b != "correct")] for x, b in zip(pts["s"], pts["b"])]
    counts = pts.groupby("model")["q"].value_counts().unstack(fill_value=0).reindex(columns=list(QUADRANTS),
                                                                                    fill_value=0)
    acc = pd.DataFrame({
        "base": prompts.groupby("model")["b"].apply(lambda x: (x == "correct").mean()),
        "base_pairs": pairs.groupby("model")["b"].apply(lambda x: (x == "correct").mean()),
        "variants": pairs.groupby("model")["verdict"].apply(lambda x: (x == "correct").mean())})
    return counts, acc


#: ``expected``'s accuracy columns in the order the accuracy table shows them.
_ACC = ("base", "base_pairs", "variants")


def _cells(page, header: str) -> list[str]:
    """The cell texts of the first table with a column ``header`` (``_grid_with_header``)."""
    return [c.strip() for c in _grid_with_header(page, header).locator("[role='gridcell']").all_inner_texts()]


def _luminance(page, selector: str) -> float:
    rgb = page.eval_on_selector(selector, "e => getComputedStyle(e).backgroundColor")
    r, g, b = (int(x) for x in rgb[rgb.index("(") + 1:].split(")")[0].split(",")[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_quadrant_counts_and_accuracy_match_the_raw_rows_on_every_screen(store):
    require_chromium()
    counts, acc = expected(store)
    assert counts.to_numpy().sum() == 14  # 4 + 4 nq_open, 2 + 4 truthfulqa prompts with a base and a pair
    with dashboard(store, timeout=120) as url:
        for width, height, scheme, present in SCREENS:
            with browser_page(width, height, color_scheme=scheme) as page:
                page.goto(f"{url}/correctness?axis=bleu" + ("&present=1" if present else ""),
                          wait_until="domcontentloaded")
                page.get_by_text("Right or wrong: does instability hide wrong answers?").first.wait_for(
                    timeout=180_000)
                _ready(page)
                cells = _cells(page, "stable and right")
                ncol = 2 + len(QUADRANTS)  # model, four quadrants, n
                got = {cells[i]: [int(x) for x in cells[i + 1:i + ncol]] for i in range(0, len(cells), ncol)}
                assert got == {m: [*map(int, counts.loc[m]), int(counts.loc[m].sum())] for m in counts.index}, (
                    width, scheme, cells)
                cells = _cells(page, "base acc, per prompt")
                for m in acc.index:  # model, prompts, base per prompt, pairs, base over pairs, variants over pairs
                    i = cells.index(m)
                    assert [cells[i + 2], *cells[i + 4:i + 6]] == [f"{acc.loc[m, c]:.1%}" for c in _ACC]
                # the whole page fits the viewport's width; the chart reads (its dots drawn, inside the screen)
                assert page.evaluate("document.documentElement.scrollWidth") <= width
                chart = page.locator("[data-testid='stPlotlyChart']").first
                chart.scroll_into_view_if_needed()
                box = chart.bounding_box()
                assert box["x"] >= 0 and box["x"] + box["width"] <= width
                assert box["height"] <= height - 60
                assert page.locator("[data-testid='stPlotlyChart'] .scatterlayer .point").count() == 14
                app = "[data-testid='stApp']"
                assert (_luminance(page, app) < 60) if scheme == "dark" else (_luminance(page, app) > 200)
                sidebar = page.locator("[data-testid='stSidebar']")
                assert (sidebar.get_attribute("data-collapsed") == "true") == present
                page.screenshot(path=str(screenshot_dir() / f"correctness_{width}_{scheme}{'_present' if present else ''}.png"),
                                full_page=False)
                # a row links to the Prompts drill-down, which shows the reference
                if not present and width == 1440:
                    cells = _cells(page, "quadrant")
                    href = next(c for c in cells if "prompt=" in c)
                    assert "prompt=" in href
                    page.goto(f"{url}/{href.lstrip('./')}", wait_until="domcontentloaded")
                    page.get_by_text("Prompts: one prompt under its variants").first.wait_for(timeout=180_000)
                    _ready(page)
                    page.get_by_text("Reference (the dataset's accepted answers").first.wait_for(timeout=60_000)


def _grid_with_header(page, header: str, timeout_s: float = 120.0):
    """The main area's data grid whose column headers include ``header`` (polled: grids draw one by one)."""
    import time

    grids = page.locator("[data-testid='stMain'] [data-testid='stDataFrame']")
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        for i in range(grids.count()):
            g = grids.nth(i)
            g.scroll_into_view_if_needed()
            if header in [h.strip() for h in g.locator("[role='columnheader']").all_inner_texts()]:
                g.locator("[role='gridcell']").first.wait_for(state="attached", timeout=60_000)
                return g
        page.wait_for_timeout(1000)
    raise AssertionError(f"no table with a column {header!r}")


def right_to_wrong(path) -> list[tuple[str, str]]:
    """(model, prompt_id) of each kept variant whose base reply is correct and its own wrong (raw rows, SQL)."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute("""
            SELECT r.model, x.prompt_id FROM correctness x JOIN correctness b
                 ON b.run_id = x.run_id AND b.prompt_id = x.prompt_id AND b.variant_id IS NULL AND b.repeat IS NULL
                 AND b.scorer = x.scorer
            JOIN runs r ON r.run_id = x.run_id JOIN variants v ON v.variant_id = x.variant_id
            WHERE v.kept AND b.verdict = 'correct' AND x.verdict = 'wrong' ORDER BY ALL""").fetchall()
    finally:
        con.close()


def test_accuracy_on_profiles_and_the_flip_ranking_on_worst_cases(store):
    require_chromium()
    from urllib.parse import quote_plus

    _, acc = expected(store)
    flips = right_to_wrong(store)
    assert len(flips) == 3
    with dashboard(store, timeout=120) as url:
        for width, height, scheme, present in ((1280, 720, "light", True), (1440, 900, "dark", False)):
            with browser_page(width, height, color_scheme=scheme) as page:
                page.goto(f"{url}/profiles" + ("?present=1" if present else ""), wait_until="domcontentloaded")
                page.get_by_text("Model profiles").first.wait_for(timeout=180_000)
                _ready(page)
                page.get_by_text("Accuracy under rephrasing (share of replies right — not an SGS)").first.wait_for(
                    timeout=60_000)
                cells = _cells(page, "base acc, per prompt")
                for m in acc.index:
                    i = cells.index(m)
                    assert [cells[i + 2], *cells[i + 4:i + 6]] == [f"{acc.loc[m, c]:.1%}" for c in _ACC]
                assert page.evaluate("document.documentElement.scrollWidth") <= width

                page.goto(f"{url}/worst?rank=variant&replies=right_to_wrong&axis=bleu&rows=100"
                          + ("&present=1" if present else ""), wait_until="domcontentloaded")
                page.get_by_text("Worst cases: which prompts and variants move a model most?").first.wait_for(
                    timeout=180_000)
                _ready(page)
                if not present:  # every chip of the Replies control shows (none scrolled out of its column)
                    group = page.locator("[data-testid='stButtonGroup']").filter(has_text="right → wrong").first
                    gb = group.bounding_box()
                    for chip in group.locator("button").all():
                        b = chip.bounding_box()
                        assert gb["x"] - 1 <= b["x"] and b["x"] + b["width"] <= gb["x"] + gb["width"] + 1, chip.inner_text()
                grid = page.locator("[data-testid='stMain'] [data-testid='stDataFrame']").first
                grid.locator("[role='gridcell']").first.wait_for(state="attached", timeout=120_000)
                cells = [c.strip() for c in grid.locator("[role='gridcell']").all_inner_texts()]
                links = [c for c in cells if c.startswith("./prompts?")]
                assert len(links) == len(flips), cells
                for model, pid in flips:
                    assert any(f"prompt={quote_plus(pid)}" in c and cells[cells.index(c) + 1] == model for c in links)
                assert page.evaluate("document.documentElement.scrollWidth") <= width
                page.screenshot(path=str(screenshot_dir() / f"worst_right_to_wrong_{width}_{scheme}.png"))
