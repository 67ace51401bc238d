"""Sampled runs on the tiny random model: byte-identical sampled replies for the same config and
seed — twice, at other batch sizes, and after a SIGKILL and resume. (Config checks, run ids and
sample seeds: tests/unit/core/test_sampling.py.)

The tiny random model (tests/conftest.py) carries the plumbing: its replies are noise, but they
are sampled noise drawn by the same code as a real model's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from precompute.config import load_config
from precompute.runner import run, work_path
from sago_engine.backends.hf_local import generation
from sago_engine.store import open_store, table_fingerprints
from tests.unit.core.test_sampling import SAMPLED, _config

ROOT = Path(__file__).resolve().parents[3]
#: Tables that hold replies and what is measured from them (``runs`` also records the batch size).
REPLY_TABLES = ("responses", "samples", "deltas", "units", "variants", "prompts")


def test_sampled_replies_are_the_same_in_any_batch(tiny_backend, monkeypatch):
    prompts = ["What is the capital of France?", "hello", "Tell me a joke about cats, please.", "x",
               "What is the capital of France?"]
    seeds = [11, 12, 13, 14, 15]
    monkeypatch.setattr(tiny_backend, "sampling", type(tiny_backend.sampling)(0.9, 0.95, 0))
    monkeypatch.setattr(tiny_backend, "batch_size", 5)
    shared = []
    once = generation.prefill_once
    monkeypatch.setattr(generation, "prefill_once", lambda be, seqs, *a, **k: shared.append(len(seqs)) or once(
        be, seqs, *a, **k))
    full = tiny_backend.generate(prompts, 8, seeds=seeds)
    assert shared == [5]  # the two asks of one prompt share a prefill (4 distinct rows prefilled, 5 decoded)
    monkeypatch.setattr(tiny_backend, "batch_size", 1)
    one = tiny_backend.generate(prompts, 8, seeds=seeds)
    assert shared == [5]  # batch 1: no row repeated, no shared prefill
    monkeypatch.setattr(tiny_backend, "batch_size", 2)
    mixed = tiny_backend.generate(prompts[::-1], 8, seeds=seeds[::-1])[::-1]  # other neighbours, other order
    assert [r.token_ids for r in full] == [r.token_ids for r in one] == [r.token_ids for r in mixed]
    assert [r.text for r in full] == [r.text for r in one]
    assert full[0].token_ids != full[4].token_ids  # same prompt, other seed: another draw
    monkeypatch.setattr(tiny_backend, "sampling", type(tiny_backend.sampling)())
    greedy = tiny_backend.generate(prompts, 8)
    assert greedy[0].token_ids == greedy[4].token_ids and greedy[0].token_ids != full[0].token_ids
    monkeypatch.setattr(tiny_backend, "sampling", type(tiny_backend.sampling)(0.9))
    with pytest.raises(ValueError, match="needs one seed per prompt"):
        tiny_backend.generate(prompts, 8)


def _tables(store: Path, tables=REPLY_TABLES) -> dict[str, str]:
    fp = table_fingerprints(store)
    return {k: v for k, v in fp.items() if k.split(".")[0] in tables}


def test_sampled_run_is_identical_twice_and_at_other_batch_sizes(tmp_path):
    a = load_config(_config(tmp_path, SAMPLED, name="a", n_prompts=2, batch_size=4))
    b = load_config(_config(tmp_path, SAMPLED, name="b", n_prompts=2, batch_size=4))
    c = load_config(_config(tmp_path, SAMPLED, name="c", n_prompts=2, batch_size=1, chunk_prompts=1))
    for cfg in (a, b, c):
        run(cfg, progress=False, publish_every_s=0)
    with open_store(a.store) as st:
        n_resp = st.con.execute("SELECT count(*) FROM responses").fetchone()[0]
        smp = st.con.execute("SELECT sample, count(*), count(DISTINCT response) FROM samples GROUP BY 1 ORDER BY 1"
                             ).fetchall()
        dec = st.con.execute("SELECT decoding FROM runs").fetchone()[0]
    assert [(s, n) for s, n, _ in smp] == [(1, n_resp), (2, n_resp)]  # k = 3: samples 1 and 2 of every reply
    sampling = json.loads(dec)["sampling"]
    assert json.loads(dec)["greedy"] is False and sampling["samples"] == 3 and sampling["temperature"] == 0.8
    assert "sampler" in sampling and "seed_rule" in sampling  # the backend's record and the config's
    ref = _tables(a.store)
    assert ref["samples.rows"] == str(2 * n_resp)
    assert _tables(b.store) == ref  # the same config and seed: the same bytes, every column
    # batch 1 and one prompt per chunk: the same replies byte for byte (log-probs and hidden states
    # differ by float noise between batch shapes, as for greedy runs: benchmarks/README.md)
    assert _replies(c.store) == _replies(a.store)


def _replies(store: Path) -> list[tuple]:
    """Every reply of the store: its key, sample, seed, text, token ids, length and finish, sorted."""
    with open_store(store) as st:
        return st.con.execute(
            "SELECT response_id, 0 AS sample, NULL AS seed, response, token_ids, n_tokens, finish_reason FROM responses "
            "UNION ALL SELECT response_id, sample, seed, response, token_ids, n_tokens, finish_reason FROM samples "
            "ORDER BY response_id").fetchall()


def _seen_write(store: Path) -> bool:
    return work_path(store).with_name(work_path(store).name + ".wal").exists()


def test_sampled_run_killed_and_resumed_is_identical(tmp_path):
    conf = _config(tmp_path, SAMPLED, n_prompts=2, chunk_prompts=1)
    store = tmp_path / "c.duckdb"
    cmd = [sys.executable, "-m", "precompute", "--config", str(conf), "--no-progress", "--publish-every", "0"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    assert subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True).returncode == 0
    ref = table_fingerprints(store)
    os.replace(store, tmp_path / "reference.duckdb")

    p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen, was, deadline = 0, False, time.time() + 300
    while p.poll() is None and time.time() < deadline:  # SIGKILL at the second write in flight
        now = _seen_write(store)
        if now and not was:
            seen += 1
            if seen == 2:
                p.send_signal(signal.SIGKILL)
                break
        was = now
        time.sleep(0.001)
    assert p.wait(timeout=300) == -signal.SIGKILL, "the run finished before it could be killed"
    assert work_path(store).exists()
    assert subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True).returncode == 0
    with open_store(store) as st:
        assert sum(st.duplicate_keys().values()) == 0
    assert table_fingerprints(store) == ref
