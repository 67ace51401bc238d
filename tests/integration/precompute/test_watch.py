"""A run you can watch and stop: replies reported as they finish, the bar, the closing summary, Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from precompute.closing import closing_lines, cut_lines, dashboard_command
from precompute.watch import ReplyBar
from sago_engine.runtime import progress
from sago_engine.store import open_store
from tests.support.factories import tiny_toml

ROOT = Path(__file__).resolve().parents[3]


def test_local_backend_reports_replies_before_the_call_returns(tiny_backend):
    seen: list[int] = []
    prompts = [f"Question number {i}: what is {i} plus {i}?" + " more" * (i % 5) for i in range(12)]
    with progress.reporting(seen.append):
        out = tiny_backend.generate(prompts, 6)
    assert len(out) == 12
    assert sum(seen) == 12  # every reply once
    assert len(seen) >= 2  # batch size 8: at least two reports, not one at the end


def test_local_backend_reports_decoding_steps_between_replies_and_replies_stay_the_same(tiny_backend):
    """A batch of long replies decodes for minutes before its first reply ends: each step is reported
    (tokens so far, cap), and reporting them changes no reply."""
    prompts = [f"Tell me about the number {i}." for i in range(3)]
    plain = tiny_backend.generate(prompts, 6)
    steps: list[tuple[int, int]] = []
    with progress.stepping(lambda k, cap: steps.append((k, cap))):
        watched = tiny_backend.generate(prompts, 6)
    assert [r.text for r in watched] == [r.text for r in plain]
    assert [r.token_ids for r in watched] == [r.token_ids for r in plain]
    assert steps and all(cap == 6 and 1 <= k <= 6 for k, cap in steps)
    assert progress.step_sink() is None  # the block ended
    with ReplyBar(3, "m", enabled=False) as bar:
        bar.step(4, 6)
        assert bar.step_note == "decoding: token 4/6"


def test_advance_without_reporting_does_nothing_and_reporting_nests():
    progress.advance(3)  # no sink: no error
    outer, inner = [], []
    with progress.reporting(outer.append):
        with progress.reporting(inner.append):
            progress.advance(2)
        progress.advance(1)
        progress.advance(0)
    assert (outer, inner) == ([1], [2])
    assert progress.current() is None


def test_reply_bar_ticks_never_run_past_the_chunk():
    with ReplyBar(10, "m", enabled=False) as bar:
        tick = bar.within(4)
        tick(3)
        tick(3)  # a retried batch reports again: clamped to the chunk's 4
        assert bar.n == 4
        bar.set_done(4)
        bar.within(6)(6)
        assert bar.n == 10


def test_closing_summary_names_sgs_health_and_the_dashboard(tiny_store):
    with open_store(tiny_store) as st:
        rid = st.runs()["run_id"].iloc[0]
    s = {"run_id": rid, "model": "tiny-random", "pending": 6, "generated": 36, "seconds": 12.0, "status": "complete"}
    text = "\n".join(closing_lines(tiny_store, [s], {rid: 6}))
    assert "tiny-random: complete — 36 replies generated in 12 s, 3.0 replies/s" in text
    assert re.search(r"SGS  Δ-Cos \d\.\d{3}  Δ-BLEU \d\.\d{3}  Δ-BERT .* Δ-MR \d\.\d{3}  \(6 prompts\)", text)
    assert re.search(r"reply health: 36 replies, 0 errors \(0%\), \d+ cut at the 6-token cap \(\d+%\), \d+ empty", text)
    assert f"open the dashboard: {dashboard_command(tiny_store)}" in text
    assert "{" not in text  # no raw JSON line
    slow = {**s, "generated": 16, "seconds": 781.0}  # 1.5 B parameters on a busy CPU
    assert "16 replies generated in 781 s, 48.8 s per reply" in closing_lines(tiny_store, [slow], {rid: 6})[0]
    done = {**s, "pending": 0, "generated": 0}
    assert "every prompt already done — nothing generated" in closing_lines(tiny_store, [done])[0]


def test_cut_lines_warn_above_the_threshold_only():
    import pandas as pd

    from sago_engine.scoring.cap_health import cut_table

    cut = pd.DataFrame({"run_id": "r", "model": "m", "dataset": ["a", "b\x1b[31m"], "replies": [100, 100],
                        "cut": [20, 89]})
    pairs = pd.DataFrame({"run_id": "r", "model": "m", "dataset": ["a", "b\x1b[31m"], "pairs": [90, 90],
                          "both_cut": [0, 70]})
    lines = cut_lines(cut_table(cut, pairs), 48)
    assert lines[0] == ("  pairs whose two replies both hit the cap: 70 of 180 (39%) — Δ-BLEU and Δ-MR's length rule "
                        "compare cut text there")
    assert "more than 20% of the replies stopped at the 48-token reply cap on b\\x1b[31m 89/100 (89%);" in lines[1]
    assert "a 20/100" not in lines[1]  # 20% is not above 20%
    assert cut_lines(cut_table(cut[:1], pairs[:1]), 48) == []


def test_dashboard_command_quotes_the_path_from_a_clone_and_names_sago_where_installed(tmp_path):
    assert dashboard_command("/tmp/my store.duckdb") == "SAGO_STORE='/tmp/my store.duckdb' bash scripts/dashboard.sh"
    # installed with pip: site-packages holds no scripts/ folder
    assert dashboard_command("/tmp/my store.duckdb", clone_root=tmp_path) == "sago dashboard '/tmp/my store.duckdb'"


def _read_into(stream, buf: list[str]) -> None:
    for chunk in iter(lambda: stream.read(64), ""):
        buf.append(chunk)


def test_ctrl_c_ends_cleanly_with_130_and_the_same_command_resumes(tmp_path):
    conf, store = tmp_path / "c.toml", tmp_path / "s.duckdb"
    # 12 prompts (144 replies, several seconds): the interrupt lands while replies are still being generated
    # even when this process reads the bar late on a busy machine
    conf.write_text(tiny_toml(seed=5, chunk_prompts=1, n_prompts=12).format(store=store, data=ROOT / "data" / "datasets"))
    cmd = [sys.executable, "-m", "precompute", "--config", str(conf), "--publish-every", "0"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "COLUMNS": "100"}
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err: list[str] = []
    reader = threading.Thread(target=_read_into, args=(p.stderr, err), daemon=True)
    reader.start()
    deadline = time.time() + 300
    while p.poll() is None and time.time() < deadline and not re.search(r"tiny-random: .*\| [1-9]\d*/\d+ \[", "".join(err)):
        time.sleep(0.05)
    assert p.poll() is None, "the run ended before its bar moved:\n" + "".join(err)
    p.send_signal(signal.SIGINT)
    rc = p.wait(timeout=120)
    reader.join(timeout=10)
    text = "".join(err)
    assert rc == 130, text
    assert "interrupted (Ctrl-C)" in text and "run the same command to resume" in text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text
    assert re.search(r"reply/s\]", text)  # the bar showed a rate
    r = subprocess.run(cmd + ["--no-progress"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "open the dashboard: SAGO_STORE=" in r.stdout
    with open_store(store) as st:
        assert len(st.unit_keys()) == 24 and sum(st.duplicate_keys().values()) == 0
