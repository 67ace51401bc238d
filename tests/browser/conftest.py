"""The real-browser tests share one chromium per test module (each test still gets a fresh browser context)."""

from __future__ import annotations

import pytest

from tests.support.browser import shared_chromium


@pytest.fixture(scope="module", autouse=True)
def _one_chromium_per_module():
    with shared_chromium():
        yield
