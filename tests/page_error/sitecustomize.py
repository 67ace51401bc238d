"""Makes one page raise an unexpected error inside the real dashboard (tests/browser/test_browser_errors.py).

Python imports ``sitecustomize`` at start-up from ``PYTHONPATH``; the test starts
``scripts/dashboard.sh`` with this folder (and the project) there. The Profiles page's total-SGS
table then raises a ``ValueError`` whose message names a server path and a marker, as an engine
bug deep in a page would, so the test can look for both in what a visitor's browser receives.
"""

from __future__ import annotations

import os
from pathlib import Path

MARKER = "sago-leak-marker-7f3a"
#: A server path the message names (the project's engine folder).
SERVER_PATH = str(Path(__file__).resolve().parents[2] / "sago_engine" / "views" / "report.py")
TABLE_KEY = "profiles_total_table"


def _install() -> None:
    from dashboard import exports

    table = exports.table

    def failing_table(df, key, *args, **kwargs):
        if key == TABLE_KEY:
            raise ValueError(f"{MARKER}: cannot align the SGS cells ({SERVER_PATH}, line 1)")
        return table(df, key, *args, **kwargs)

    exports.table = failing_table


if os.environ.get("SAGO_TEST_PAGE_ERROR") == "1":
    _install()
