"""SIGKILL a small precompute at random moments, resume it each time, compare with an uninterrupted run.

    python benchmarks/kill_resume.py --kills 20 [--seed 0] [--model tiny-random]

Last line: ``kills: K lost: L duplicated: D identical: true|false``.
lost = prompt units of the reference missing at the end; duplicated = rows sharing a key;
identical = every table equal to the uninterrupted run (wall-clock columns ignored).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sago_engine.store import open_store, table_fingerprints  # noqa: E402

CONFIG = """
[run]
store = "{store}"
seed = 11
max_new_tokens = 8
chunk_prompts = 1

[data]
dir = "{data}"
datasets = ["truthfulqa", "nq_open", "triviaqa"]
n_prompts = 6

[variants]
per_family = {{ social_register = 3, surface_noise = 3, structural = 2 }}

[[models]]
key = "{model}"
batch_size = 8
"""

def _cmd(conf: Path) -> list[str]:
    return [sys.executable, "-m", "precompute", "--config", str(conf), "--no-progress", "--publish-every", "0"]


def duplicated(path: Path) -> int:
    with open_store(path) as st:
        return sum(st.duplicate_keys().values())


def units(path: Path) -> set[tuple[str, str]]:
    with open_store(path) as st:
        return st.unit_keys()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="tiny-random")
    ap.add_argument("--max-delay", type=float, default=20.0, help="kill moments are uniform in [0.5, this] s")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    tmp = Path(tempfile.mkdtemp(prefix="sago-kill-"))
    conf = tmp / "run.toml"
    store = tmp / "store.duckdb"
    conf.write_text(CONFIG.format(store=store, data=ROOT / "data" / "datasets", model=args.model))

    t0 = time.perf_counter()
    subprocess.run(_cmd(conf), cwd=ROOT, env=env, check=True, capture_output=True)
    ref_s = time.perf_counter() - t0
    ref = table_fingerprints(store)
    ref_units = units(store)
    os.replace(store, tmp / "reference.duckdb")
    print(f"reference run: {ref_s:.1f} s, {len(ref_units)} units")

    kills = lost = dup = 0
    identical = True
    cycles = 0
    while kills < args.kills:
        cycles += 1
        while True:  # one store, killed again and again until a resume finishes it
            p = subprocess.Popen(_cmd(conf), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            delay = rng.uniform(0.5, args.max_delay)
            try:
                p.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                if kills < args.kills:
                    p.send_signal(signal.SIGKILL)
                    p.wait()
                    kills += 1
                    done = len(units(store)) if store.exists() else 0
                    print(f"kill {kills:2d} at {delay:5.1f} s: published units {done}/{len(ref_units)}")
                    continue
                p.wait()
            if p.returncode != 0:
                print(f"run exited with {p.returncode}", file=sys.stderr)
                return 1
            break
        fp = table_fingerprints(store)
        lost += len(ref_units - units(store))
        dup += duplicated(store)
        identical &= fp == ref
        if fp != ref:
            print("differs:", [k for k in ref if ref[k] != fp.get(k)])
        os.replace(store, tmp / f"cycle{cycles}.duckdb")
    print(f"cycles: {cycles}  store dir: {tmp}")
    print(f"kills: {kills} lost: {lost} duplicated: {dup} identical: {str(identical).lower()}")
    return 0 if (lost == 0 and dup == 0 and identical) else 1


if __name__ == "__main__":
    from sago_engine.textsafe import guarded_terminal

    with guarded_terminal():  # replies, labels and messages reach the terminal inert
        sys.exit(main())
