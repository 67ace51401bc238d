"""Every page in share mode on the hostile-store corpus (tests/support/hostile_stores.py), headless (AppTest).

What a page hands the browser stays inert: no Markdown string renders an image, link or HTML;
Plotly text keeps only formatting tags; every CSV download is spreadsheet-safe; no exception;
a refused store (a VIEW over a server file, a user macro) is named in a clear message and the
secret file's text never appears. The real-browser counterpart is in tests/browser/test_browser.py.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from dashboard.frame import VIEWS
from tests.support.hostile_stores import MARKER, SECRET, build_corpus, text_columns
from tests.support.rendered import offending, shown, walk

ROOT = Path(__file__).resolve().parents[3]
#: Every page share mode offers (no Live without --live).
PAGES = [path for path, _t, _i, url in VIEWS if url != "live"]
#: A tag Plotly would render from text: anything but the formatting tags ``safe.plotly_text`` keeps.
_PLOTLY_ACTIVE = re.compile(r"<(?!/?(?:br|b|i|em|sub|sup|extra)\s*/?>)[a-zA-Z/!]")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return build_corpus(tmp_path_factory.mktemp("hostile"), port=9)  # port 9 (discard): nothing fetches here


@pytest.fixture
def share(corpus, monkeypatch):
    monkeypatch.setenv("SAGO_SHARE_DIR", str(corpus.share))
    monkeypatch.delenv("SAGO_STORE", raising=False)
    return corpus


@pytest.fixture
def downloads(monkeypatch):
    """Every CSV a page offers (file name → bytes), recorded at ``st.download_button``."""
    import streamlit as st

    got: dict[str, bytes] = {}
    real = st.download_button

    def record(label, data=None, file_name=None, **kw):
        if file_name and file_name.endswith(".csv"):
            got[file_name] = data() if callable(data) else data
        return real(label, data=data, file_name=file_name, **kw)

    monkeypatch.setattr(st, "download_button", record)
    return got


def _open(store: str, page: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.query_params["store"] = store
    at.switch_page(page)  # a link to the page: the first one this session runs
    at.run()
    return at


def _strings(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if k != "template":
                yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


#: Characters of the payload that act on a page when shown raw: ESC, BEL, RLO (reverses what follows), PDF.
_RAW = ("\x1b", "\x07", "\u202e", "\u202c")


def _shown_text(at) -> str:
    """The text of every code, text, HTML, Markdown and caption element and every table cell of a page."""
    out = [str(e.value) for kind in ("code", "text", "markdown", "caption") for e in at.get(kind)]
    out += [e.proto.body for e in at.get("html")]
    out += [e.value.to_csv() for e in at.get("arrow_data_frame")]
    return "".join(out)


def _proto_bytes(at) -> bytes:
    return b"".join(n.proto.SerializeToString() for n in walk(at._tree) if getattr(n, "proto", None) is not None)


def _spreadsheet_safe(name: str, data: bytes) -> list[str]:
    """Problems of one CSV download: no BOM, or a cell a spreadsheet would run as a formula."""
    bad = [] if data[:3] == b"\xef\xbb\xbf" else [f"{name}: no UTF-8 byte-order mark"]
    for row in csv.reader(io.StringIO(data[3:].decode("utf-8"), newline="")):
        for cell in row:
            if cell[:1] in ("=", "+", "-", "@", "\t", "\r") and not re.fullmatch(
                    r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|-?inf", cell):
                bad.append(f"{name}: {cell[:60]!r}")
    return bad


# ---------------------------------------------------------------- the corpus itself
def test_the_payload_reaches_every_text_column_of_every_table(corpus):
    """Coverage of the corpus: a table or text column added to the schema must get the payload too."""
    path = corpus.stores["payload"]
    cols = text_columns(path)
    con = duckdb.connect(str(path), read_only=True)
    try:
        missing = [(t, c) for t, c, _ in cols if not con.execute(
            f"SELECT count(*) FROM {t} WHERE CAST({c} AS VARCHAR) LIKE ?", [f"%{MARKER}%"]).fetchone()[0]]
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        nonfinite = con.execute("SELECT count(*) FROM deltas WHERE isinf(delta) OR isnan(delta_norm)").fetchone()[0]
    finally:
        con.close()
    assert missing == []
    assert {t for t, _, _ in cols} == tables  # every table has a text column with the payload
    assert nonfinite > 0


# ---------------------------------------------------------------- every page on the payload store
@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("store", ["payload", "controls"])
def test_every_page_keeps_the_payload_store_inert(share, downloads, page, store):
    """The payload store, and the same with every control, bidi and zero-width character and a
    reply's replaced surrogate (``controls``)."""
    at = _open(f"{store}.duckdb", page)
    assert not at.exception, at.exception[0].message
    assert [e.value for e in at.error] == []
    assert offending(at) == []  # no Markdown string renders an image, a link or HTML
    for el in at.get("plotly_chart"):
        fig = json.loads(el.proto.spec)
        active = [s[:80] for s in _strings(fig) if _PLOTLY_ACTIVE.search(s)]
        assert active == [], active
    problems = [p for name, data in downloads.items() for p in _spreadsheet_safe(name, data)]
    assert problems == []
    if page != "pages/paper_reference.py":  # the paper's page shows published numbers, not the store's
        assert MARKER.encode() in _proto_bytes(at)  # the store's strings did reach the page, as text
    raw = [c for c in _RAW if c in _shown_text(at)]  # shown as U+FFFD, never raw
    assert raw == [], raw


@pytest.mark.parametrize("page", PAGES)
def test_huge_finite_numbers_and_a_repeated_label_render_without_error(share, page):
    """±1e308 and 5e-324 in every measurement column, and both runs labelled alike: every page
    renders (no traceback, no error box)."""
    at = _open("numbers.duckdb", page)
    assert not at.exception, at.exception[0].message
    assert [e.value for e in at.error] == []


@pytest.mark.parametrize("page", ["pages/prompts.py", "pages/profiles.py"])
def test_huge_strings_render_without_error(share, page):
    at = _open("huge.duckdb", page)
    assert not at.exception, at.exception[0].message
    assert [e.value for e in at.error] == []
    if page.endswith("prompts.py"):  # the 1 MB prompt: its one-word edit highlighted, or the texts side by side
        assert at.get("html") or any(c.value.startswith("Too long to highlight") for c in at.caption)


# ---------------------------------------------------------------- stores the store layer refuses
@pytest.mark.parametrize("page", ["pages/profiles.py", "pages/prompts.py"])
@pytest.mark.parametrize("store", ["view", "macro"])
def test_a_refused_store_gets_a_clear_message_and_shows_no_secret(share, store, page):
    """A VIEW over a server file, or user macros: a clear "not a sago store" message, no traceback,
    and the secret file's text nowhere in what the page sends."""
    at = _open(f"{store}.duckdb", page)
    assert not at.exception, at.exception[0].message
    assert SECRET.encode() not in _proto_bytes(at)
    errors = [shown(e.value) for e in at.error]
    assert any(f"{store}.duckdb" in e and "not a sago store" in e for e in errors), errors
    assert not any(str(share.share) in e for e in errors)  # the server's folder is not named
