"""Worst cases tells a break from a repair, in a real browser (Debian chromium + Playwright) on a copy of the bundled
demo store (one variant reply replaced by a 400-character word), at 1280×720 and 1440×900, light and dark: the default
ranking leaves out prompts whose base reply is no answer (a variant that repairs "Ellelele…" is not a worst case),
"repairs" lists only those, the prompt column is on screen, the unbroken word stays inside the diff box (bounding
boxes), a blank reply is labelled."""

from __future__ import annotations

import io
import shutil
from urllib.parse import quote_plus

import pandas as pd
import pytest

from tests.support import browser
from tests.support.browser import browser_page, dashboard, require_chromium, screenshot_dir

pytestmark = pytest.mark.browser

SMOL, GEMMA = "smollm2-135m-instruct", "gemma-3-270m"
#: one word of 400 characters (no break opportunity inside; no stutter: its unit is 20 characters long)
LONG = "Supercalifragilistic" * 20


def _demo():
    from sago_engine.store.catalog import DEMO_STORE

    if not DEMO_STORE.exists():
        pytest.skip("no bundled demo store")
    return DEMO_STORE


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The demo store with smollm2's reply to one variant (of a prompt whose base reply is an answer) made ``LONG``."""
    from sago_engine.store import open_store

    path = tmp_path_factory.mktemp("worst_changes") / "demo.duckdb"
    shutil.copyfile(_demo(), path)
    with open_store(path, read_only=False) as st:
        st.con.execute("""UPDATE responses SET response = ? WHERE response_id = (
                              SELECT x.response_id FROM responses x JOIN runs r USING (run_id)
                              JOIN deltas d ON d.run_id = x.run_id AND d.variant_id = x.variant_id AND d.axis = 'bleu'
                              WHERE r.model = ? AND x.prompt_id = 'triviaqa:1290' AND d.available
                              ORDER BY x.variant_id LIMIT 1)""", [LONG, SMOL])
        assert st.con.execute("SELECT count(*) FROM responses WHERE response = ?", [LONG]).fetchone()[0] == 1
    return path


@pytest.fixture(scope="module")
def facts(store):
    """From the store and the degenerate-reply detector: smollm2's prompts whose base reply is no answer, the
    unfiltered top 25 (which holds some of them), and a gemma variant whose reply is empty (its text to search)."""
    from sago_engine.external import degenerate
    from sago_engine.store import open_store
    from sago_engine.views import worst

    with open_store(store) as st:
        texts = st.reply_texts(None)
        base = texts[texts["variant_id"].isna() & (texts["model"] == SMOL)]
        broken = {p for p, r, q in zip(base["prompt_id"], base["response"], base["prompt"])
                  if isinstance(r, str) and degenerate.reply_kind(r, q)}
        top = worst.worst_cases(st, None, axis="bleu", by="prompt", model=SMOL, limit=25)
        assert not texts[texts["response"].fillna("").str.contains(LONG, regex=False)].empty
        # a base prompt whose worst variant (by |Δ̃|) got a blank reply from gemma: searching its text lists it first
        blank = texts[(texts["model"] == GEMMA) & texts["variant_id"].notna()
                      & (texts["response"].fillna("x").str.strip() == "")]
        prompts = texts[texts["variant_id"].isna()].drop_duplicates("prompt_id").set_index("prompt_id")["prompt"]
        needle = None
        for pid in dict.fromkeys(blank["prompt_id"]):
            text = str(prompts.get(pid, ""))
            if not text.isprintable() or len(text) > 200:
                continue
            first = worst.worst_cases(st, None, axis="bleu", by="variant", model=GEMMA, search=text, limit=1)
            if len(first) and str(first["variant_reply"].iloc[0]).strip() == "":
                needle = text
                break
    assert needle, "no gemma prompt whose worst variant's reply is blank"
    assert broken & set(top["prompt_id"]), "the unfiltered ranking should hold a repaired prompt"
    return {"broken": broken, "empty_search": needle}


@pytest.fixture(scope="module")
def server(store):
    require_chromium()
    with dashboard(store, timeout=120) as url:
        yield url


def _open(page, url: str, path: str) -> None:
    page.goto(f"{url}{path}", wait_until="domcontentloaded")
    page.get_by_text("Worst cases: which prompts and variants move a model most?").first.wait_for(timeout=180_000)
    page.locator("[data-testid='stPageLink']").first.wait_for(timeout=180_000)
    browser.settle(page)
    assert page.locator("[data-testid='stException']").count() == 0


def _table_csv(page) -> pd.DataFrame:
    with page.expect_download(timeout=60_000) as dl:
        page.locator(".st-key-worst_table_csv button").first.click()  # the table's CSV (the sidebar has others)
    return pd.read_csv(io.BytesIO(open(dl.value.path(), "rb").read()))


SCREENS = [pytest.param(w, h, c, id=f"{w}x{h}-{c}") for w, h, c in browser.SCREENS]


@pytest.mark.parametrize("width,height,scheme", SCREENS)
def test_default_ranks_breaks_not_repairs(server, facts, width, height, scheme):
    with browser_page(width, height, color_scheme=scheme) as page:
        # the default: no prompt whose base reply is no answer (a variant can only repair it)
        _open(page, server, f"/worst?axis=bleu&model={SMOL}&rows=25")
        shown = _table_csv(page)
        assert not shown.empty
        assert not (set(shown["prompt_id"]) & facts["broken"]), sorted(set(shown["prompt_id"]) & facts["broken"])
        page.screenshot(path=str(screenshot_dir() / f"worst_breaks_{width}_{scheme}.png"))
        # "repairs": only those prompts
        _open(page, server, f"/worst?axis=bleu&model={SMOL}&rows=25&change=repairs")
        repairs = _table_csv(page)
        assert not repairs.empty and set(repairs["prompt_id"]) <= facts["broken"], sorted(repairs["prompt_id"])


@pytest.mark.parametrize("width,height,scheme", SCREENS)
def test_prompt_column_is_on_screen(server, width, height, scheme):
    with browser_page(width, height, color_scheme=scheme) as page:
        for rank in ("prompt", "variant"):
            _open(page, server, f"/worst?axis=bleu&model={SMOL}&rank={rank}")
            # the grid's accessible table holds only the columns drawn in view
            grid = page.locator("[data-testid='stDataFrame']").first
            grid.locator("[role='columnheader']").first.wait_for(state="attached", timeout=60_000)
            headers = [h.strip() for h in grid.locator("[role='columnheader']").all_inner_texts()]
            assert "prompt" in headers, (rank, headers)
            box = grid.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1, box
            page.screenshot(path=str(screenshot_dir() / f"worst_columns_{rank}_{width}_{scheme}.png"))


@pytest.mark.parametrize("width,height,scheme", SCREENS)
def test_long_unbroken_reply_stays_in_the_diff_box(server, width, height, scheme):
    with browser_page(width, height, color_scheme=scheme) as page:
        _open(page, server, f"/worst?axis=bleu&model={SMOL}&rank=variant&change=all&q={quote_plus(LONG)}")
        diff = page.locator("[data-testid='stHtml'] div[style*='border']").filter(has_text=LONG).first
        diff.wait_for(timeout=60_000)
        diff.scroll_into_view_if_needed()
        geo = diff.evaluate("""d => {
            const b = d.getBoundingClientRect();
            const rs = [...d.querySelectorAll('*')].flatMap(e => [...e.getClientRects()]);
            return {left: b.left, right: b.right, inner: Math.max(...rs.map(r => r.right)), n: rs.length,
                    scroll: d.scrollWidth, client: d.clientWidth};
        }""")
        assert geo["n"] > 0 and geo["inner"] <= geo["right"] + 1 and geo["scroll"] <= geo["client"] + 1, geo
        assert geo["right"] <= width + 1, geo
        page.screenshot(path=str(screenshot_dir() / f"worst_long_word_{width}_{scheme}.png"))


@pytest.mark.parametrize("width,height,scheme", SCREENS)
def test_empty_reply_is_labelled(server, facts, width, height, scheme):
    with browser_page(width, height, color_scheme=scheme) as page:
        _open(page, server, f"/worst?axis=bleu&model={GEMMA}&rank=variant&change=all&rows=10"
                            f"&q={quote_plus(facts['empty_search'])}")
        page.screenshot(path=str(screenshot_dir() / f"worst_empty_{width}_{scheme}.png"), full_page=True)
        page.locator("[data-testid='stCode']").first.wait_for(timeout=60_000)
        codes = [c.strip() for c in page.locator("[data-testid='stCode']").all_inner_texts()]
        assert "(empty reply)" in codes, [c[:60] for c in codes]
        assert "" not in codes, [c[:60] for c in codes]
        page.screenshot(path=str(screenshot_dir() / f"worst_empty_{width}_{scheme}.png"))
