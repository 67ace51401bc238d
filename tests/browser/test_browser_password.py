"""Share mode's meeting password fails closed, in a real browser (Debian chromium + Playwright)."""

from __future__ import annotations

import pytest

from tests.integration.dashboard.test_share_password import BROKEN, VALID
from tests.support.browser import browser_page, dashboard, launcher, require_chromium, screenshot_dir
from tests.support.factories import make_store

pytestmark = pytest.mark.browser

PASSWORD_INPUT = "input[type='password']"
REFUSAL = "cannot read the meeting password from"


def _settled(page) -> None:
    page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=120_000)
    page.wait_for_timeout(1000)


def _shared(tmp_path, secrets_text: str):
    """A share folder holding one small store (md.duckdb) and a secrets file with ``secrets_text``."""
    share = tmp_path / "share"
    share.mkdir()
    make_store(share / "md.duckdb")
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(secrets_text)
    return share, secrets


def _no_profiles(page) -> None:
    assert page.get_by_text("Model profiles").count() == 0
    assert page.locator(".js-plotly-plot").count() == 0
    assert page.locator("[data-testid='stDataFrame']").count() == 0
    assert page.locator("[data-testid='stPageLink']").count() == 0


def test_a_secrets_file_that_does_not_parse_refuses_to_share(tmp_path):
    """T18: ``sago_password = "meeting-2026`` (no closing quote) never opens the meeting to everyone."""
    require_chromium()
    share, secrets = _shared(tmp_path, BROKEN)
    # scripts/dashboard.sh --share refuses before the server starts
    with pytest.raises(RuntimeError, match=REFUSAL):
        with launcher(["--share", str(share), "--secrets.files", str(secrets)]):
            pass
    # a share-mode server started another way: the page itself refuses before drawing anything
    env = {"SAGO_SHARE_DIR": str(share), "STREAMLIT_SECRETS_FILES": str(secrets), "SAGO_LIVE_WARMUP": "0"}
    with dashboard(None, env=env) as url, browser_page() as page:
        page.goto(url + "/?store=md.duckdb", wait_until="domcontentloaded")
        page.get_by_text(REFUSAL).first.wait_for(timeout=120_000)
        _settled(page)
        assert page.locator(PASSWORD_INPUT).count() == 0
        _no_profiles(page)
        page.screenshot(path=str(screenshot_dir() / "share_password_broken.png"), full_page=True)
        secrets.write_text(VALID)  # the host fixes the file: the next visitor is asked for the password
        page.goto(url + "/?store=md.duckdb", wait_until="domcontentloaded")
        page.locator(PASSWORD_INPUT).first.wait_for(timeout=120_000)
        _settled(page)
        assert page.locator(PASSWORD_INPUT).count() == 1
        assert page.get_by_text(REFUSAL).count() == 0
        _no_profiles(page)


PASSWORD = "meeting-2026"  # the password of VALID
WRONG = "guess-1234"


def _gate_shows_nothing(page) -> None:
    """The gate is all there is: no page content, no sago navigation, no store name, no model."""
    _no_profiles(page)
    html = page.content()
    assert "md.duckdb" not in html and "model-a" not in html and "model-b" not in html
    assert page.get_by_text("Presentation mode").count() == 0  # app.py's sidebar was never drawn


def _type_password(page, text: str) -> None:
    box = page.locator(PASSWORD_INPUT).first
    box.fill(text)
    box.press("Enter")


def test_the_meeting_password_gates_every_visitor(tmp_path):
    """scripts/dashboard.sh --share with sago_password: a wrong password shows only "Wrong password.",
    the right one opens the page, another visitor (a second browser context) is asked again, and the
    password reaches neither the page's HTML, a URL, a frame the server sends, nor the server's log."""
    require_chromium()
    share, secrets = _shared(tmp_path, VALID)
    log = tmp_path / "server.log"
    with launcher(["--share", str(share), "--secrets.files", str(secrets)], log=log) as (url, _port), \
            browser_page(1400, 1600) as page:
        urls: list[str] = []
        received: list[bytes] = []  # everything the server sends over the app's websocket

        def on_socket(ws):
            ws.on("framereceived", lambda f: received.append(f if isinstance(f, bytes) else f.encode("utf-8")))

        page.on("request", lambda r: urls.append(r.url))
        page.on("websocket", on_socket)
        page.goto(url, wait_until="domcontentloaded")
        page.locator(PASSWORD_INPUT).first.wait_for(timeout=120_000)
        _settled(page)
        _gate_shows_nothing(page)
        # a wrong password: a message, still nothing of the page
        _type_password(page, WRONG)
        page.get_by_text("Wrong password.").first.wait_for(timeout=60_000)
        _settled(page)
        assert page.locator(PASSWORD_INPUT).count() == 1
        _gate_shows_nothing(page)
        page.screenshot(path=str(screenshot_dir() / "share_password_wrong.png"), full_page=True)
        # the right password: the Profiles page, its store in the sidebar, no password box left
        _type_password(page, PASSWORD)
        page.get_by_text("Model profiles").first.wait_for(timeout=120_000)
        page.locator(".js-plotly-plot .legend").first.wait_for(timeout=120_000)
        _settled(page)
        legend = page.locator(".js-plotly-plot .legend").first.text_content()
        assert "model-a" in legend and "model-b" in legend
        assert page.locator("[data-testid='stDataFrame']").count() >= 2
        assert "md.duckdb" in page.locator("[data-testid='stSidebar']").inner_html()  # the store picker
        assert page.locator(PASSWORD_INPUT).count() == 0 and page.get_by_text("Wrong password.").count() == 0
        # the session stays open: another page through sago's own navigation is not gated again
        page.locator("[data-testid='stPageLink'] a", has_text="Pareto").first.click()
        page.locator(".js-plotly-plot").first.wait_for(timeout=120_000)
        _settled(page)
        assert page.locator(PASSWORD_INPUT).count() == 0 and "/pareto" in page.url
        html, final_url = page.content(), page.url

        # another visitor: a fresh browser context (no cookies, no session) is asked again
        other = page.context.browser.new_context(viewport={"width": 1400, "height": 1600})
        try:
            visitor = other.new_page()
            visitor.on("request", lambda r: urls.append(r.url))
            visitor.goto(url + "/?store=md.duckdb", wait_until="domcontentloaded")
            visitor.locator(PASSWORD_INPUT).first.wait_for(timeout=120_000)
            _settled(visitor)
            _gate_shows_nothing(visitor)
            visitor.goto(url + "/pareto", wait_until="domcontentloaded")
            visitor.locator(PASSWORD_INPUT).first.wait_for(timeout=120_000)
            _settled(visitor)
            assert visitor.locator(".js-plotly-plot").count() == 0
            visitor_html = visitor.content()
        finally:
            other.close()
    server_log = log.read_text(errors="replace")
    assert "You can now view" in server_log  # the log is the server's own output
    for where, text in (("the page", html), ("the other visitor's page", visitor_html), ("the page URL", final_url),
                        ("a request URL", "\n".join(urls)), ("the server log", server_log)):
        assert PASSWORD not in text, f"the password appears in {where}"
    assert WRONG not in server_log
    assert received and not any(PASSWORD.encode("utf-8") in f for f in received), "the server sent the password"


#: Links a presenter hands out before a meeting: (path and query, the page's title, a parameter the view keeps).
LINKS = (("/pairwise?store=md.duckdb&axis=bert", "Model against model", "axis=bert"),
         ("/significance?eps=0.08", "Significance: is the instability", "eps=0.08"),
         ("/worst?store=md.duckdb&axis=cos", "Worst cases", "axis=cos"))


@pytest.fixture(scope="module")
def gated(tmp_path_factory):
    """One shared dashboard behind the meeting password for the linked-view tests (each visitor is a new
    browser context: a session of its own that meets the gate)."""
    require_chromium()
    share, secrets = _shared(tmp_path_factory.mktemp("gated"), VALID)
    with launcher(["--share", str(share), "--secrets.files", str(secrets)]) as (url, _port):
        yield url


@pytest.mark.parametrize("size", [(1280, 720), (1440, 900)])
def test_a_linked_view_survives_the_password_typed_at_once(gated, size):
    """The password typed as soon as the gate appears (while the gate's first run may still be under way)
    opens the linked page with its parameters, never Profiles."""
    url = gated
    with browser_page(*size) as page:
        for link, title, kept in LINKS:
            visitor = page.context.browser.new_context(viewport={"width": size[0], "height": size[1]})
            try:
                v = visitor.new_page()
                v.goto(url + link, wait_until="domcontentloaded")
                v.locator(PASSWORD_INPUT).first.wait_for(timeout=120_000)
                _type_password(v, PASSWORD)  # at once: no wait for the gate's run to finish
                v.locator("h1").first.wait_for(timeout=120_000)
                _settled(v)
                heading = v.locator("h1").first.inner_text()
                assert heading.startswith(title), (link, heading, v.url)
                assert link.split("?")[0] in v.url and kept in v.url, (link, v.url)
                assert v.get_by_text("Model profiles").count() == 0
            finally:
                visitor.close()
