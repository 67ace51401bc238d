"""Visitors see no tracebacks: an unexpected error inside a page, in a real browser (Debian chromium).

The server is started exactly as a user starts it, ``scripts/dashboard.sh --share DIR`` (and plain
``scripts/dashboard.sh`` for local mode); ``tests/page_error/sitecustomize.py`` makes the Profiles
page raise a ``ValueError`` whose message names a server path and a marker. Share mode must show
a generic error and nothing of the exception (no traceback, no message, no server path) — in the
page and in every frame the server sends; local mode shows the details to the person who runs it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.page_error.sitecustomize import MARKER, SERVER_PATH
from tests.support.browser import browser_page, launcher, require_chromium, screenshot_dir
from tests.support.factories import make_store

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]
EXCEPTION = "[data-testid='stException']"


def _error_env() -> dict:
    path = os.pathsep.join([str(ROOT / "tests" / "page_error"), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {"PYTHONPATH": path.rstrip(os.pathsep), "SAGO_TEST_PAGE_ERROR": "1"}


def _open_failing_page(url: str, page) -> tuple[str, str, list[bytes]]:
    """Open Profiles; return the exception box's text, the page's HTML and the frames the server sent."""
    received: list[bytes] = []

    def on_socket(ws):
        ws.on("framereceived", lambda f: received.append(f if isinstance(f, bytes) else f.encode("utf-8")))

    page.on("websocket", on_socket)
    page.goto(url, wait_until="domcontentloaded")
    page.locator(EXCEPTION).first.wait_for(timeout=120_000)
    page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=120_000)
    page.wait_for_timeout(800)
    assert page.locator(EXCEPTION).count() == 1
    # the page ran up to the failing table: the radar above it is drawn
    assert page.locator(".js-plotly-plot").count() >= 1
    return page.locator(EXCEPTION).first.inner_text(), page.content(), received


def _leaks(text: str) -> list[str]:
    found = [w for w in ("Traceback", MARKER, "cannot align", SERVER_PATH, str(ROOT), "/work/", "/root/", ".py\"",
                         ".py,", ".py'", "line 1", "File \"") if w in text]
    return found


def test_share_mode_shows_a_generic_error_and_local_mode_the_details(tmp_path):
    require_chromium()
    share = tmp_path / "share"
    share.mkdir()
    store = make_store(share / "meeting.duckdb")
    with launcher(["--share", str(share)], env=_error_env()) as (url, _port), browser_page(1400, 1800) as page:
        box, html, frames = _open_failing_page(url, page)
        page.screenshot(path=str(screenshot_dir() / "share_page_error.png"), full_page=True)
    assert "This app has encountered an error" in box, box
    assert "ValueError" in box  # the type only: what went wrong in kind, nothing of where or why
    assert _leaks(box) == [] and _leaks(html) == [], (box, _leaks(html))
    sent = b"\n".join(frames)
    assert frames and MARKER.encode() not in sent and SERVER_PATH.encode() not in sent, "the server sent the details"
    assert b"Traceback" not in sent and b"exports.py" not in sent and b"profiles.py" not in sent
    # Streamlit's session-start message names the main script (app.py) by its server path, in every
    # mode and with no option to turn it off; no other server path may reach the browser
    assert str(ROOT).encode() not in sent.replace(str(ROOT / "app.py").encode(), b"")

    # local mode (the host's own machine): the same error shows its message and its stack trace
    with launcher([], env={**_error_env(), "SAGO_STORE": str(store)}) as (url, _port), \
            browser_page(1400, 1800) as page:
        box, _html, _frames = _open_failing_page(url, page)
    assert MARKER in box and "ValueError" in box and "Traceback" in box and "pages/profiles.py" in box, box
