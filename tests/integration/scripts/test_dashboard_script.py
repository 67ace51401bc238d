"""``bash scripts/dashboard.sh STORE.duckdb``: a store named on the command line, as ``sago dashboard STORE``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "SAGO_SKIP_SETUP": "1"}
    return subprocess.run(["bash", str(ROOT / "scripts" / "dashboard.sh"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)


def test_a_store_that_does_not_exist_is_named_from_the_callers_folder(tmp_path):
    r = _run(["mine.duckdb"], tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip() == f"{tmp_path / 'mine.duckdb'}: no such store file"


def test_a_named_store_is_refused_in_share_mode(tmp_path):
    (tmp_path / "mine.duckdb").write_bytes(b"")
    r = _run(["mine.duckdb", "--share", str(tmp_path)], tmp_path)
    assert r.returncode == 2 and "with --share DIR, name a store of DIR with --store NAME" in r.stderr
