"""Merging never upgrades a run or counts a shard's usage twice; a stale write-ahead log beside a
store that is replaced (publish, merge) is moved aside, and open_store names the fix."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from precompute.__main__ import main as cli_main
from precompute.runner import publish
from sago_engine.store import StoreError, merge_stores, open_store
from tests.support.factories import make_store

ROOT = Path(__file__).resolve().parents[3]
FAILED = "failed: 30 of 32 replies are errors (first: HTTP 400)"
USAGE = {"requests": 32, "cache_hits": 0, "retries": 0, "errors": 30, "prompt_tokens": 320,
         "completion_tokens": 64, "invalid_logprobs": 2, "models": ["gpt-x-2026-01-01"]}


def _shard(path: Path, status: str, prompts: slice = slice(None), usage: dict | None = None,
           finished: str = "2026-11-30 10:00:00") -> Path:
    """A ``make_store`` store of model gpt-x (8 prompts) with that run status, units for
    ``prompts`` and ``usage`` in run_usage."""
    make_store(path, models=("gpt-x",), run_fields={"gpt-x": {"status": status}})
    with open_store(path, read_only=False) as st:
        pids = st.prompts()["prompt_id"].tolist()[prompts]
        st.insert_df("units", pd.DataFrame({"run_id": "run-gpt-x", "prompt_id": pids, "n_variants": 3,
                                            "finished_at": pd.Timestamp(finished)}))
        st.add_run_usage("run-gpt-x", usage or USAGE)
    return path


def _run(path: Path) -> tuple[str, dict]:
    with open_store(path) as st:
        status = st.runs().set_index("run_id").loc["run-gpt-x", "status"]
        u = st.run_usage().iloc[0]
    return status, {k: int(u[k]) for k in ("requests", "errors", "prompt_tokens", "invalid_logprobs")}


# ---------------------------------------------------------------------------- T8


def test_t8_a_failed_shard_stays_failed(tmp_path, caplog):
    """T8's input: one failed shard with units for all 8 prompts, 32 requests / 30 errors."""
    shard = _shard(tmp_path / "part1.duckdb", FAILED)
    merge_stores(tmp_path / "all.duckdb", [shard])
    status, usage = _run(tmp_path / "all.duckdb")
    assert status == FAILED  # main: "complete"
    assert usage == {"requests": 32, "errors": 30, "prompt_tokens": 320, "invalid_logprobs": 2}
    lines: list[str] = []
    merge_stores(tmp_path / "all.duckdb", [shard], overwrite=True, report=lines.append)
    assert lines == [f"run-gpt-x (gpt-x): {shard}: {FAILED} → {FAILED}"]
    # the command line prints the same line
    caplog.set_level(logging.INFO, logger="sago.merge")
    assert cli_main(["merge", "--out", str(tmp_path / "cli.duckdb"), str(shard)]) == 0
    assert f"run-gpt-x (gpt-x): {shard}: {FAILED} → {FAILED}" in caplog.messages
    assert _run(tmp_path / "cli.duckdb")[0] == FAILED


def test_t8_the_same_shard_twice_counts_once(tmp_path, caplog):
    shard = _shard(tmp_path / "part1.duckdb", "shard 1/1 complete")
    copy = tmp_path / "copy-of-part1.duckdb"
    shutil.copyfile(shard, copy)
    for i, inputs in enumerate(([shard, shard], [shard, copy], [copy, shard, copy])):
        caplog.clear()
        out = tmp_path / f"all{i}.duckdb"
        merge_stores(out, inputs)
        status, usage = _run(out)
        assert usage == {"requests": 32, "errors": 30, "prompt_tokens": 320, "invalid_logprobs": 2}, inputs
        assert status == "complete"
        assert sum("the same shard as" in x and "counted once" in x for x in caplog.messages) == len(inputs) - 1
    # another run of the same shard (other finish times) is other work: its usage adds up
    rerun = _shard(tmp_path / "rerun.duckdb", "shard 1/1 complete", finished="2026-12-01 09:00:00")
    merge_stores(tmp_path / "both.duckdb", [shard, rerun])
    assert _run(tmp_path / "both.duckdb")[1]["requests"] == 64


def test_t8_statuses_combine_worst_first_and_merges_of_merges_count_once(tmp_path):
    """Own inputs: a complete half and an incomplete half; a half alone; a merge fed back with a shard."""
    half = {**USAGE, "requests": 10, "errors": 0, "invalid_logprobs": 0}
    s1 = _shard(tmp_path / "s1.duckdb", "shard 1/2 complete", slice(0, 4), half)
    s2_inc = _shard(tmp_path / "s2i.duckdb", "incomplete: 2 prompt units failed transiently (rerun to retry)",
                    slice(4, 6), half)
    s2 = _shard(tmp_path / "s2.duckdb", "shard 2/2 complete", slice(4, 8), half, finished="2026-11-30 11:00:00")
    s_run = _shard(tmp_path / "sr.duckdb", "running", slice(4, 8), half, finished="2026-11-30 12:00:00")
    cases = {
        "inc": ([s1, s2_inc], "incomplete: 2 prompt units failed transiently (rerun to retry)"),
        "half": ([s1], "partial: merged units cover 4 of 8 prompts"),
        "all": ([s1, s2], "complete"),
        "running": ([s1, s_run], "incomplete: a merged input's run record says 'running' (it did not finish)"),
        "fail": ([s1, s2, _shard(tmp_path / "f.duckdb", FAILED, slice(0, 0), half)], FAILED),
    }
    for name, (inputs, want) in cases.items():
        merge_stores(tmp_path / f"{name}.out.duckdb", inputs)
        assert _run(tmp_path / f"{name}.out.duckdb")[0] == want, name
    # a coverage "partial" of a merge is lifted by the missing shard; usage still counted once each
    merge_stores(tmp_path / "again.duckdb", [tmp_path / "half.out.duckdb", s2])
    assert _run(tmp_path / "again.duckdb") == ("complete", {"requests": 20, "errors": 0, "prompt_tokens": 640,
                                                            "invalid_logprobs": 0})
    merge_stores(tmp_path / "again2.duckdb", [tmp_path / "all.out.duckdb", s1])  # s1 is already inside
    assert _run(tmp_path / "again2.duckdb")[1]["requests"] == 20
    # an input that holds a shard already merged plus another one cannot be counted once: refused
    merge_stores(tmp_path / "s2s.duckdb", [s2, _shard(tmp_path / "s3.duckdb", "shard 1/2 complete", slice(0, 4),
                                                      half, finished="2026-12-02 08:00:00")])
    with pytest.raises(StoreError, match="cannot be counted once"):
        merge_stores(tmp_path / "bad.duckdb", [tmp_path / "all.out.duckdb", tmp_path / "s2s.duckdb"])
    assert not (tmp_path / "bad.duckdb").exists()


# ---------------------------------------------------------------------------- T10


_KILLED_WRITER = """
import os, signal, sys
from sago_engine.store import open_store
st = open_store(sys.argv[1], read_only=False)
st.con.execute("SET checkpoint_threshold = '1GB'")  # checkpointing deferred: the change stays in the WAL
st.set_meta(note="edited by hand")
os.kill(os.getpid(), signal.SIGKILL)
"""


def _kill_a_writer(path: Path) -> None:
    """A writable open of ``path`` that changes it and is SIGKILLed: ``<path>.wal`` is left."""
    subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(path)], cwd=ROOT, check=False)
    assert (path.parent / (path.name + ".wal")).exists()


def test_t10_publish_moves_a_stale_wal_aside(tmp_path, caplog):
    """T10's sequence: a published run.duckdb, a SIGKILLed writable session, then a publish."""
    target = tmp_path / "run.duckdb"
    work = make_store(tmp_path / ".run.duckdb.work", models=("m",))
    with open_store(work, read_only=False) as st:
        publish(st, target, clustered=True)
    _kill_a_writer(target)
    with open_store(work, read_only=False) as st:
        publish(st, target, clustered=True)
    with open_store(target) as st:  # main: StoreError "WAL does not match database file"
        assert st.meta()["published_at"] and "note" not in st.meta()
    names = sorted(p.name for p in tmp_path.iterdir())
    stale = [n for n in names if n.startswith("run.duckdb.wal.stale-")]
    assert "run.duckdb.wal" not in names and len(stale) == 1 and stale[0].endswith("Z")
    assert any("run.duckdb.wal.stale-" in m for m in caplog.messages)


def test_t10_merge_moves_a_stale_wal_aside(tmp_path):
    shard = _shard(tmp_path / "part1.duckdb", "shard 1/1 complete")
    out = tmp_path / "all.duckdb"
    merge_stores(out, [shard])
    _kill_a_writer(out)
    (tmp_path / ".all.duckdb.merging.wal").write_bytes(b"left by a killed merge")
    merge_stores(out, [shard], overwrite=True)
    with open_store(out) as st:
        assert st.counts()["units"] == 8
    names = {p.name for p in tmp_path.iterdir()}
    assert "all.duckdb.wal" not in names and any(n.startswith("all.duckdb.wal.stale-") for n in names)
    assert not any(n.startswith(".all.duckdb.merging") for n in names)


def test_t10_open_store_names_the_fix_for_a_foreign_wal(tmp_path):
    target = make_store(tmp_path / "run.duckdb", models=("m",))
    _kill_a_writer(target)
    other = make_store(tmp_path / "other.duckdb", models=("n",))
    other.replace(target)  # a new file renamed over the store without moving its WAL
    for ro in (True, False):
        with pytest.raises(StoreError) as e:
            open_store(target, read_only=ro)
        msg = str(e.value)
        assert "WAL does not match database file" in msg
        assert "a write-ahead log from an older file lies beside the store; move `run.duckdb.wal` away" in msg
    (tmp_path / "run.duckdb.wal").rename(tmp_path / "run.duckdb.wal.stale")
    with open_store(target) as st:
        assert json.loads(st.runs()[["model"]].to_json(orient="values")) == [["n"]]


# ---------------------------------------------------------------------------- inputs as untrusted files
def test_rows_that_differ_under_the_same_key_are_counted_and_shown(tmp_path, caplog):
    """Two inputs holding different values for the same keyed rows: the first input's are kept and
    the others are counted per table and named, never dropped without a word."""
    a = make_store(tmp_path / "a.duckdb", models=("gpt-x",), seed=0)
    b = make_store(tmp_path / "b.duckdb", models=("gpt-x",), seed=1)  # same keys, other deltas
    lines: list[str] = []
    counts = merge_stores(tmp_path / "m.duckdb", [a, b], report=lines.append)
    assert counts["conflicting_rows"] == {"deltas": 144}
    assert f"{b}: 144 row(s) of deltas differ from rows of an earlier input under the same key; the earlier " \
           "input's are kept" in lines
    # the same shard twice differs in nothing
    assert merge_stores(tmp_path / "m2.duckdb", [a, a])["conflicting_rows"] == {}


def test_an_input_replaced_while_merging_is_refused(tmp_path, monkeypatch):
    """A shard store replaced between its inspection and its copy (a run publishing a new snapshot)."""
    from sago_engine.store import merge as merge_mod

    a = _shard(tmp_path / "a.duckdb", "complete")
    newer = _shard(tmp_path / "newer.duckdb", FAILED)
    inspect = merge_mod._inspect

    def inspect_then_publish(path):
        got = inspect(path)
        shutil.copy(newer, tmp_path / "a.tmp")
        os.replace(tmp_path / "a.tmp", a)
        return got

    monkeypatch.setattr(merge_mod, "_inspect", inspect_then_publish)
    with pytest.raises(StoreError, match=r"a\.duckdb changed while it was merged"):
        merge_stores(tmp_path / "m.duckdb", [a])
    assert not (tmp_path / "m.duckdb").exists()
