"""SIGKILL the runner at a seeded set of moments — mid-write and mid-publish — resume each time, and
compare with an uninterrupted run: nothing lost, nothing duplicated, every table identical.

The moments are events seen on the file system, not wall-clock delays (a loaded machine would
move a delay to another phase of the run): the working copy's write-ahead log present (a write
in flight) and the temporary snapshot beside the store present (a publish in flight), each at
its k-th occurrence in that process. ``benchmarks/kill_resume.py`` does 20 random-delay kills.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from precompute.runner import work_path
from sago_engine.store import open_store, table_fingerprints
from tests.support.factories import tiny_toml

ROOT = Path(__file__).resolve().parents[3]
SEED = 29
EVENTS = ("mid-write", "mid-publish")


def _kill_points(n: int, seed: int = SEED) -> list[tuple[str, int]]:
    """n (event, k) pairs: kill at the k-th time ``event`` is seen (k in 1..3), seeded."""
    rng = random.Random(seed)
    return [(rng.choice(EVENTS), rng.randint(1, 3)) for _ in range(n)]


def _seen(event: str, store: Path) -> bool:
    if event == "mid-publish":
        return any(p.name.startswith(f".{store.name}.publish-") for p in store.parent.iterdir())
    return work_path(store).with_name(work_path(store).name + ".wal").exists()


def _run_until(cmd, env, store: Path, event: str, k: int, timeout: float = 300.0) -> bool:
    """Start ``cmd``; SIGKILL it the k-th time ``event`` appears. True if killed, False if it finished first."""
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    count, was, deadline = 0, False, time.time() + timeout
    while p.poll() is None and time.time() < deadline:
        now = _seen(event, store)
        if now and not was:
            count += 1
            if count == k:
                p.send_signal(signal.SIGKILL)
                p.wait()
                return True
        was = now
        time.sleep(0.001)
    assert p.wait(timeout=max(1.0, deadline - time.time())) == 0, "the run failed instead of finishing"
    return False


def test_kill_points_are_seeded():
    assert _kill_points(4) == _kill_points(4) and len(set(_kill_points(8))) > 1
    assert {e for e, _ in _kill_points(3)} == set(EVENTS)  # this seed kills both mid-write and mid-publish


def test_sigkill_mid_write_and_mid_publish_then_resume_is_identical(tmp_path):
    conf = tmp_path / "c.toml"
    store = tmp_path / "s.duckdb"
    conf.write_text(tiny_toml(seed=7, chunk_prompts=1, n_prompts=2).format(store=store, data=ROOT / "data" / "datasets"))
    cmd = [sys.executable, "-m", "precompute", "--config", str(conf), "--no-progress", "--publish-every", "0"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    assert subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True).returncode == 0
    ref = table_fingerprints(store)
    with open_store(store) as st:
        ref_units = st.unit_keys()
    os.replace(store, tmp_path / "reference.duckdb")

    killed = []
    for event, k in _kill_points(3):
        if _run_until(cmd, env, store, event, k):
            killed.append((event, k))
            assert work_path(store).exists(), f"killed {event} #{k}: the working copy must remain"
            if store.exists():  # what a reader sees is a whole snapshot, never a half-written file
                with open_store(store) as st:
                    assert st.unit_keys() <= ref_units and sum(st.duplicate_keys().values()) == 0
        else:
            break  # the run finished before this kill point: nothing left to interrupt
    assert {e for e, _ in killed} == set(EVENTS), f"the seeded kills did not hit both moments: {killed}"
    if work_path(store).exists():
        assert subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True).returncode == 0
    assert not work_path(store).exists()
    with open_store(store) as st:
        assert st.unit_keys() == ref_units  # nothing lost
        assert sum(st.duplicate_keys().values()) == 0  # nothing twice
    assert table_fingerprints(store) == ref
