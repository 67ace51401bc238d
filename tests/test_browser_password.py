"""Share mode's meeting password fails closed, in a real browser (Debian chromium + Playwright)."""

from __future__ import annotations

import pytest

from tests.browser import browser_page, dashboard, launcher, require_chromium, screenshot_dir
from tests.factories import make_store
from tests.test_share_password import BROKEN, VALID

pytestmark = pytest.mark.browser

PASSWORD_INPUT = "input[type='password']"
REFUSAL = "cannot read the meeting password from"


def _settled(page) -> None:
    page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=120_000)
    page.wait_for_timeout(1000)


def _no_profiles(page) -> None:
    assert page.get_by_text("Model profiles").count() == 0
    assert page.locator(".js-plotly-plot").count() == 0
    assert page.locator("[data-testid='stDataFrame']").count() == 0
    assert page.locator("[data-testid='stPageLink']").count() == 0


def test_a_secrets_file_that_does_not_parse_refuses_to_share(tmp_path):
    """T18: ``sago_password = "meeting-2026`` (no closing quote) never opens the meeting to everyone."""
    require_chromium()
    share = tmp_path / "share"
    share.mkdir()
    make_store(share / "md.duckdb")
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(BROKEN)
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
