"""The store and the browser side of tests/browser/test_browser_downloads_pages.py: a small synthetic store that draws
every section with a download, one dashboard + one chromium page that clicks a page's download buttons, and
readers that parse each file by its format (CSV / Parquet / HTML / SVG / PNG)."""

from __future__ import annotations

import io
import json
import re
from contextlib import contextmanager

import numpy as np
import pandas as pd

from dashboard.frame import VIEWS
from sago_engine.store import open_store
from tests.browser.test_browser import _settled
from tests.browser.test_browser_downloads import _png_ok, _svg_text
from tests.integration.pages.test_pages_detail import _arr
from tests.integration.pages.test_pages_independent import AXES, PAPER_R
from tests.support.browser import browser_page, dashboard, download
from tests.support.factories import add_judge_verdicts, add_option_axes, make_store

MODELS = ("model-a", "model-b", "model-c")
DATASETS = ("truthfulqa", "nq_open")
BOM = b"\xef\xbb\xbf"


# ---------------------------------------------------------------- the store
def _variant_fields(d: str, i: int, j: int) -> dict:
    """Six variants per prompt: social register j = 0 negative / 3 polite tone, surface noise j = 1, 4 (not
    scored), structural/length j = 2 (ratio 0.5) and 5 (ratio 1.5). Prompt 0 of each dataset loses its
    structural family (j = 5 fails the filter, j = 2 goes with it); one no-op surface-noise variant."""
    out: dict = {"semantic_score": None if j % 3 == 1 else round(0.25 + 0.12 * ((3 * i + j) % 6), 3)}
    if j % 3 == 0:
        out.update(subtype="politeness", meta=json.dumps({"tone": "negative" if j == 0 else "polite"}))
    if j % 3 == 2:
        out.update(subtype="length", meta=json.dumps({"target_ratio": 0.5 if j == 2 else 1.5}))
    if i == 0 and j % 3 == 2:
        out.update(kept=False, passes_filter=j == 2, semantic_score=0.6 if j == 2 else 0.1)
    if d == "nq_open" and i == 1 and j == 4:
        out.update(kept=False, skip_reason="no-op: the variant's text equals the base prompt")
    return out


THRESHOLD = 0.219  # the semantic filter's threshold every run records (encoder scale)


def build_store(p):
    """3 models × 2 datasets × 6 prompts × 6 variants (model-c without Δ-Cos and Δ-Prob), Δ-Cos / Δ-BERT
    option axes (user_last and rescaled reorder the models), judge verdicts, a reply to every kept variant
    (surface noise j = 1 repeats the base reply), log-probs for model-a / model-b, two noise-floor repeats."""
    sem = json.dumps({"threshold": THRESHOLD, "threshold_config": 0.85, "scale": "mapped"})
    make_store(p, models=MODELS, datasets=DATASETS, n_prompts=6, n_variants=6, seed=5,
               missing_axes={"model-c": ["cos", "prob"]}, variant_fields=_variant_fields,
               run_fields={m: {"semantic_filter": sem} for m in MODELS})
    add_option_axes(p, factors={"cos@user_last": {"model-a": 3.0, "model-b": 1.0},
                                "bert@rescaled": {"model-a": 0.5, "model-b": 2.0, "model-c": 1.0}})
    add_judge_verdicts(p)
    rng = np.random.default_rng(23)
    with open_store(p, read_only=False) as st:
        var = st.variants()
        have = set(st.con.execute("SELECT variant_id FROM responses WHERE variant_id IS NOT NULL").df()["variant_id"])
        rows, floor = [], []
        for m in MODELS:
            for v in var[var["kept"] & ~var["variant_id"].isin(have)].itertuples(index=False):
                same = v.variant_id.endswith("/v1")
                rows.append({"response_id": f"run-{m}/{v.variant_id}", "run_id": f"run-{m}", "prompt_id": v.prompt_id,
                             "variant_id": v.variant_id,
                             "response": f"Base reply to {v.prompt_id}." if same else f"Another reply to {v.variant_id}."})
            if m != "model-c":
                for pid in sorted(var["prompt_id"].unique()):
                    for k in (1, 2):
                        for a in AXES:
                            x = float(np.clip(rng.normal(0, 0.06), -1, 1))
                            floor.append({"run_id": f"run-{m}", "dataset": pid.split(":")[0], "prompt_id": pid,
                                          "repeat": k, "axis": a, "delta": x * PAPER_R[a], "delta_norm": x,
                                          "available": True})
        st.insert_df("responses", pd.DataFrame(rows))
        st.insert_df("noise_floor", pd.DataFrame(floor))
        ids = st.con.execute("SELECT response_id FROM responses ORDER BY response_id").df()["response_id"]
        lp = pd.DataFrame({"response_id": ids, "n": rng.integers(3, 12, len(ids)), "lp": rng.uniform(-30, -2, len(ids))})
        st.con.register("_lp", lp)
        st.con.execute("UPDATE responses SET n_tokens = _lp.n, seq_logprob = _lp.lp FROM _lp "
                       "WHERE responses.response_id = _lp.response_id AND responses.run_id <> 'run-model-c'")
        st.con.unregister("_lp")
    return p


# ---------------------------------------------------------------- the browser side
KEYS_JS = """() => Array.from(document.querySelectorAll('[data-testid="stDownloadButton"]')).map(el => {
  const c = el.closest('[class*="st-key-"]');
  return c ? Array.from(c.classList).find(x => x.startsWith('st-key-')).slice(7) : null; })"""
DELTA_KEYS = {"app_delta_csv", "app_delta_parquet"}
#: Charts whose PNG / SVG are fetched too (one per chart kind that tests/browser/test_browser_downloads.py lacks; no
#: Plotly PNG: each kaleido export starts a chromium, and the SVG is the one that holds the numbers).
IMAGES = {"png": {"significance_heatmap"}, "svg": {"pairwise_matrix", "significance_heatmap"}}


def _chart(key: str, csv: bool = True) -> set[str]:
    return {f"{key}_dl_{x}" for x in ("png", "svg", "html", *(("csv",) if csv else ()))}


@contextmanager
def download_site(store):
    """One dashboard on ``store`` and one chromium page; ``visit(title, want)`` opens a page (the first through
    its URL — Profiles, the default page, is "/" — the others through sago's own sidebar link: no reload) and clicks its buttons. ``want`` must be
    exactly the page's download keys (the sidebar's Δ matrix aside); ``extra`` are clicked too."""
    with dashboard(store) as url, browser_page(1280, 900) as page:
        def visit(title: str, want: set[str], extra: set[str] = frozenset(), query: str = "") -> dict:
            if page.url.startswith(url):
                page.locator("[data-testid='stSidebar'] [data-testid='stPageLink'] a", has_text=title).first.click()
            else:
                path = next(u for _f, t, _i, u in VIEWS if t == title)
                page.goto(f"{url}/{'' if path == VIEWS[0][3] else path}{query}", wait_until="domcontentloaded")
            try:  # until the new page's buttons are drawn (the assert below names any difference)
                page.wait_for_function(f"() => {{ const k = ({KEYS_JS})(); return {json.dumps(sorted(want))}"
                                       ".every(x => k.includes(x)); }", timeout=120_000)
            except Exception:  # noqa: BLE001 - playwright's TimeoutError
                pass
            _settled(page, 300)
            assert page.locator("[data-testid='stException']").count() == 0, title
            assert page.locator("[data-testid='stMain'] h1").first.inner_text()  # the page drew its title
            closed = page.locator("[data-testid='stMain'] [data-testid='stExpander'] details:not([open]) > summary")
            while closed.count():  # a button inside a closed expander is not clickable
                closed.first.click()
            if extra & DELTA_KEYS:
                page.locator("[data-testid='stSidebar'] summary", has_text="Export the Δ matrix").click()
            keys = [k for k in page.evaluate(KEYS_JS) if k not in DELTA_KEYS]
            assert None not in keys and len(keys) == len(set(keys)), keys
            assert set(keys) == want, (title, sorted(set(keys) - want), sorted(want - set(keys)))
            out = {}
            for k in sorted(want | extra):
                if k.endswith(("_png", "_svg")) and k.rsplit("_dl_", 1)[0] not in IMAGES.get(k.rsplit("_", 1)[1], ()):
                    continue
                name, data = download(page, k)
                out[k] = _check_format(k, name, data, store.name)
            return out

        yield visit


# ---------------------------------------------------------------- reading the files
def _check_format(key: str, name: str, data: bytes, store_name: str):
    """Parse one downloaded file by its extension (which must match its button) and return what it holds:
    CSV / Parquet → DataFrame, HTML → str, SVG → its text, PNG → None."""
    ext = name.rsplit(".", 1)[-1]
    assert ext == (key.rsplit("_", 1)[-1] if "_dl_" in key or key in DELTA_KEYS else "csv"), (key, name)
    if ext == "csv":
        df = pd.read_csv(io.BytesIO(data), encoding="utf-8-sig", keep_default_na=False, na_values=[""])
        assert data.startswith(BOM) and data.endswith(b"\r\n") and data.count(b"\r\n") >= len(df) + 1, key
        return df
    if ext == "parquet":
        return pd.read_parquet(io.BytesIO(data))
    footer = f"Source: sago · store {store_name}"
    if ext == "html":
        html = data.decode("utf-8")
        assert "Plotly.newPlot(" in html or 'vegaEmbed("#vega-chart", ' in html, key
        assert not re.search(r"<script[^>]*\bsrc\s*=", html, re.I), key  # every script inline: works offline
        if "Plotly.newPlot(" in html:
            layout = _plotly_figure(html)[1]
            assert any(a.get("name") == "sago_source" and a["text"].startswith(footer)
                       for a in layout.get("annotations", [])), key
        else:
            assert _vega_rows(html, "source")["source"].str.startswith(footer).all(), key
        return html
    if ext == "svg":
        text = _svg_text(data)
        assert footer in text, key
        return text
    _png_ok(data)
    return None


def _plotly_figure(html: str) -> tuple[list[dict], dict]:
    """The traces and layout of the figure a Plotly HTML export draws (``Plotly.newPlot(div, data, layout, …)``)."""
    rest = html[html.index("Plotly.newPlot(") + len("Plotly.newPlot("):].lstrip()
    dec = json.JSONDecoder()
    out = []
    for _ in range(3):
        obj, end = dec.raw_decode(rest)
        out.append(obj)
        rest = rest[end:].lstrip()[1:].lstrip()  # past the comma
    return out[1], out[2]


def _vega_rows(html: str, *columns: str) -> pd.DataFrame:
    """The rows of the one inline dataset of a Vega-Lite HTML export that has all of ``columns``."""
    rest = html[html.index('vegaEmbed("#vega-chart", ') + len('vegaEmbed("#vega-chart", '):]
    spec, _ = json.JSONDecoder().raw_decode(rest)
    found = [pd.DataFrame(rows) for rows in spec.get("datasets", {}).values() if rows and set(columns) <= set(rows[0])]
    assert len(found) == 1, [list(r[0]) for r in spec.get("datasets", {}).values() if r]
    return found[0]


def _traces(html: str, facet: str) -> list[tuple[str, str, np.ndarray, np.ndarray]]:
    """(trace name, the facet value named in its hover template, x, y) of a plotly-express HTML export."""
    return [(t["name"], re.search(rf"{facet}=([^<]+)", t["hovertemplate"]).group(1), _arr(t["x"]),
             _arr(t["y"]).astype(float)) for t in _plotly_figure(html)[0]]
