"""One headless page run (Streamlit AppTest) of the dashboard on a store, for the page tests."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]


def open_page(store, page: str | None = None, timeout: int = 120) -> AppTest:
    """The app on ``store`` (the sidebar's typed path), then ``pages/<page>.py`` when given (default: Profiles)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
    at.session_state["app_store_custom"] = str(store)
    at.run()
    if page and page != "profiles":
        at.switch_page(f"pages/{page}.py")
        at.run()
    return at
