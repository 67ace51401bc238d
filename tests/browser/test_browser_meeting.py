"""The meeting's questions in a real browser (Debian chromium + Playwright) on the bundled demo store: the Worst
cases view (ranked rows, search, click-through to the Prompts page), Model vs model (the matrix with p-values),
Profiles (the sentence, numeric CSV, a table cell opening Worst cases), the Prompts heatmap's clickable cells."""

from __future__ import annotations

import io
import re
from urllib.parse import quote_plus

import pandas as pd
import pytest

from tests.support.browser import browser_page, dashboard, require_chromium, screenshot_dir, settle

pytestmark = pytest.mark.browser



def _demo():
    from sago_engine.store.catalog import DEMO_STORE

    if not DEMO_STORE.exists():
        pytest.skip("no bundled demo store")
    return DEMO_STORE


def _ready(page, timeout=180_000, rerun=False):
    """sago's navigation is drawn and the script run (after an input: ``rerun``) is over; no exception shown."""
    page.locator("[data-testid='stPageLink']").first.wait_for(timeout=timeout)
    settle(page, timeout=timeout, rerun=rerun)
    assert page.locator("[data-testid='stException']").count() == 0


def _input_value(page, label: str) -> str:
    return page.locator("[data-testid='stSelectbox']").filter(has_text=label).first.locator("input").input_value()


def _cells(page) -> list[str]:
    """Texts of the first table's visible cells (the data grid's accessible table)."""
    grid = page.locator("[data-testid='stDataFrame']").first
    grid.locator("[role='gridcell']").first.wait_for(state="attached", timeout=120_000)
    return grid.locator("[role='gridcell']").all_inner_texts()


def test_worst_cases_rank_search_and_open_on_the_prompts_page():
    require_chromium()
    from sago_engine.store import open_store
    from sago_engine.views import worst

    store = _demo()
    with open_store(store) as st:
        # the page's default: breaks only (a variant that repairs a broken base reply is no worst case)
        ranked = worst.worst_cases(st, None, axis="bleu", by="prompt", limit=25, change="breaks")
        by_var = worst.worst_cases(st, None, axis="bleu", by="variant", limit=100, change="breaks")
        # a known reply: a variant's reply from the middle of the ranking, searched by a phrase of it
        row = next(r for _, r in by_var.iloc[20:].iterrows() if isinstance(r["variant_reply"], str)
                   and len(r["variant_reply"].split()) > 8)
        needle = " ".join(row["variant_reply"].split()[2:7])
        hits = worst.worst_cases(st, None, axis="bleu", by="variant", search=needle, limit=10, change="breaks")
    assert len(hits) >= 1
    shots = screenshot_dir()
    with dashboard(store, timeout=120) as url, browser_page(1440, 900) as page:
        page.goto(f"{url}/worst?axis=bleu", wait_until="domcontentloaded")
        page.get_by_text("Worst cases: which prompts and variants move a model most?").first.wait_for(timeout=180_000)
        _ready(page)
        joined = "|" + "|".join(_cells(page)) + "|"
        # rows ranked as the engine ranks them (rank, change, prompt, the row's link to the Prompts page, model,
        # dataset, s_X(i))
        pos = []
        for r in ranked.head(5).itertuples():
            m = re.search(rf"\|{r.rank}\|break\|[^|]*\|\./prompts\?[^|]*prompt={re.escape(quote_plus(r.prompt_id))}&"
                          rf"[^|]*\|{re.escape(r.model)}\|{re.escape(r.dataset)}\|([0-9.e-]+)\|", joined)
            assert m and float(m.group(1)) == pytest.approx(r.score, abs=1e-12), (r, joined[:800])
            pos.append(m.start())
        assert pos == sorted(pos)
        top = ranked.iloc[0]
        page.get_by_text(f"#1: {top['model']} on {top['prompt_id']}").first.wait_for(timeout=60_000)
        page.screenshot(path=str(shots / "worst_ranked.png"))

        # a search that finds a known reply
        box = page.get_by_label("Search prompts, variants and replies")
        box.fill(needle)
        box.press("Enter")
        _ready(page, rerun=True)
        page.locator("button").filter(has_text="variants by").first.click()
        _ready(page, rerun=True)
        first = hits.iloc[0]
        page.get_by_text(f"#1: {first['model']} on {first['prompt_id']}").first.wait_for(timeout=60_000)
        codes = page.locator("[data-testid='stCode']").all_inner_texts()
        assert any(needle in " ".join(c.split()) for c in codes), (needle, [c[:80] for c in codes])
        page.screenshot(path=str(shots / "worst_search.png"))

        # one click to the Prompts page on that prompt and variant
        page.get_by_text("Open this prompt and variant on the Prompts page").first.click()
        page.get_by_text("Prompts: one prompt under its variants").first.wait_for(timeout=120_000)
        _ready(page)
        assert "/prompts" in page.url
        assert _input_value(page, "Prompt").startswith(str(first["prompt_id"]))
        assert _input_value(page, "Variant") == first["label"]
        page.screenshot(path=str(shots / "worst_to_prompts.png"))


def test_model_vs_model_matrix_profiles_sentence_csv_and_clicks():
    require_chromium()
    from sago_engine.scoring import pairwise
    from sago_engine.store import open_store

    store = _demo()
    with open_store(store) as st:
        scores = st.prompt_scores()
    table = pairwise.paired_table(scores)
    cells = pairwise.matrix_cells(table, "bleu")
    lead = pairwise.leader_sentences(scores, n_resamples=1000)  # Profiles' default B (its URL key B)
    bleu_sentence = lead.loc[lead["axis"] == "bleu", "sentence"].iloc[0]
    shots = screenshot_dir()
    with dashboard(store, timeout=120) as url, browser_page(1440, 900) as page:
        page.goto(f"{url}/pairwise?axis=bleu", wait_until="domcontentloaded")
        page.get_by_text("Model against model: is the difference real?").first.wait_for(timeout=180_000)
        _ready(page)
        page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
        texts = [t.strip() for t in page.eval_on_selector_all(".js-plotly-plot text", "els => els.map(e => e.textContent)")]
        c = cells.iloc[0]
        first_line, p_line = c["label"].split("\n")  # a cell's two lines: the difference, the adjusted p
        assert first_line + p_line in texts and re.match(r"p [<=] ", p_line), (c["label"], texts[:40])
        page.screenshot(path=str(shots / "pairwise_matrix.png"))

        # Profiles says whether the most stable model is ahead of the runner-up
        page.goto(f"{url}/", wait_until="domcontentloaded")
        page.get_by_text("Model profiles").first.wait_for(timeout=180_000)
        _ready(page)
        page.get_by_text(bleu_sentence).first.wait_for(timeout=60_000)
        page.screenshot(path=str(shots / "profiles_sentence.png"))

        # a cell of the total SGS table (model × axis) opens that model's worst prompts on that axis
        grid = page.locator(".st-key-profiles_total_table [data-testid='stDataFrame'], "
                            "[data-testid='stDataFrame']").first
        grid.scroll_into_view_if_needed()
        page.wait_for_timeout(1000)
        bb = grid.bounding_box()
        page.mouse.click(bb["x"] + 60, bb["y"] + 35 + 35 + 17)  # the second model's name cell
        page.wait_for_timeout(600)
        # two keys at once: each selection reruns the page, and the Δ-Cos cell between must not win the race
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowRight")  # its Δ-BLEU cell
        page.get_by_text("Worst cases: which prompts and variants move a model most?").first.wait_for(timeout=120_000)
        _ready(page)
        second = sorted(scores["model"].unique())[1]
        assert "axis=bleu" in page.url and _input_value(page, "Model") == second

        # that table's CSV holds numbers in their own columns
        page.goto(f"{url}/", wait_until="domcontentloaded")
        page.get_by_text("Model profiles").first.wait_for(timeout=180_000)
        _ready(page)
        with page.expect_download() as dl:
            page.locator(".st-key-profiles_total_table_csv button").click()
        csv = pd.read_csv(io.BytesIO(open(dl.value.path(), "rb").read()))
        assert {"model", "axis", "sgs", "std", "p", "p_adj", "marker"} <= set(csv.columns)
        for col in ("sgs", "std", "p", "p_adj"):
            assert pd.api.types.is_float_dtype(csv[col]), col
        assert not csv.astype(str).apply(lambda s: s.str.contains("±")).any().any()

        # a heatmap cell on the Prompts page shows that variant's edit and responses
        page.goto(f"{url}/prompts", wait_until="domcontentloaded")
        page.get_by_text("Prompts: one prompt under its variants").first.wait_for(timeout=180_000)
        _ready(page)
        before = _input_value(page, "Variant")
        marks = page.locator("[data-testid='stVegaLiteChart'] .mark-rect path")
        mark = marks.nth(20)
        mark.scroll_into_view_if_needed()
        label = re.search(r"variant: ([^;]+);", mark.get_attribute("aria-label")).group(1).strip()
        assert label != before
        mb = mark.bounding_box()
        page.mouse.click(mb["x"] + mb["width"] / 2, mb["y"] + mb["height"] / 2)
        _ready(page, rerun=True)
        assert _input_value(page, "Variant") == label
