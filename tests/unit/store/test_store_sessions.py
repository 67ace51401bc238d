"""One process, many sessions: a Live save (writable) while another session's page reads the same
store (read-only) takes its turn instead of failing with DuckDB's "different configuration"
message (``sago_engine.store.sessions``)."""

from __future__ import annotations

import threading
import time

import pandas as pd
import pytest

from sago_engine.store import StoreError, open_store, sessions
from tests.support.factories import make_store


def _in_thread(fn):
    out: dict = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    return t, out


def test_a_write_while_another_session_reads_waits_for_its_turn(tmp_path):
    path = make_store(tmp_path / "s.duckdb")
    reader = open_store(path)  # a page's query, in progress

    def save():
        with open_store(path, read_only=False) as st:
            st.set_meta(saved="yes")
            return time.monotonic()

    t, out = _in_thread(save)
    time.sleep(0.5)
    assert t.is_alive()  # waiting, not failing
    closed_at = time.monotonic()
    reader.close()
    t.join(30)
    assert "error" not in out, out.get("error")
    assert out["value"] >= closed_at
    with open_store(path) as st:
        assert st.meta()["saved"] == "yes"


def test_a_read_while_another_session_writes_reads_after_the_write(tmp_path):
    path = make_store(tmp_path / "s.duckdb")
    writer = open_store(path, read_only=False)
    writer.insert_df("prompts", pd.DataFrame([{"prompt_id": "x:1", "dataset": "x", "source_id": "1", "text": "new"}]))
    t, out = _in_thread(lambda: open_store(path).prompts()["prompt_id"].tolist())
    time.sleep(0.5)
    assert t.is_alive()
    writer.close()
    t.join(30)
    assert "error" not in out, out.get("error")
    assert "x:1" in out["value"]


def test_readers_share_and_a_long_hold_ends_in_a_clear_error(tmp_path, monkeypatch):
    path = make_store(tmp_path / "s.duckdb")
    a, b = open_store(path), open_store(path)  # two sessions reading together: no wait
    monkeypatch.setattr(sessions, "WAIT_S", 0.3)
    t, out = _in_thread(lambda: open_store(path, read_only=False))
    t.join(30)
    assert isinstance(out.get("error"), StoreError)
    assert "read by another session" in str(out["error"]) and "try again" in str(out["error"])
    a.close()
    b.close()
    with open_store(path, read_only=False):
        pass


def test_writing_a_store_this_thread_reads_is_refused_at_once(tmp_path):
    path = make_store(tmp_path / "s.duckdb")
    with open_store(path):
        with pytest.raises(StoreError, match="open read-only in this thread"):
            open_store(path, read_only=False)
    with open_store(path, read_only=False):
        pass
