"""Precompute beside a busy neighbour: the same runner workload quiet, then with CPU-bound processes beside it.

Usage: ``python benchmarks/precompute_loaded.py [--model KEY] [--neighbours 1] [--n-prompts 2]``

Workload: ``precompute_speed.py``'s (``--model``, default smollm2-135m-instruct; the first
``--n-prompts`` of truthfulqa, nq_open, alpaca and simpleqa_verified × the demo variant grid;
``precompute.runner.run`` into a fresh store each time, model load included, the weights cache
warmed first). The loaded run has ``--neighbours`` single-threaded busy loops beside it
(``neighbour.busy_neighbour``). Prints the load average before each run, the thread choice
(``runs.decoding.thread_choice``), whether the replies are identical, and as its last line
``quiet_s: Q loaded_s: L loaded_ratio: R`` (R = L / Q; with one neighbour on 2 cores the fair
share is 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from neighbour import busy_neighbour, load_line  # noqa: E402
from precompute_speed import DATASETS, MODEL, ROOT, sago_run  # noqa: E402  (imports sago_engine before torch)

from precompute.config import ModelConfig, load_config  # noqa: E402
from sago_engine.backends.hf_local import HFLocalBackend  # noqa: E402
from sago_engine.store import open_store  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=MODEL)
    ap.add_argument("--neighbours", type=int, default=1)
    ap.add_argument("--n-prompts", type=int, default=2, help="prompts per dataset (4 datasets)")
    ap.add_argument("--max-new", type=int, default=48)
    a = ap.parse_args()
    demo = load_config(ROOT / "precompute/configs/demo.toml")
    mcfg = next((m for m in demo.models if m.key == a.model), None)
    if mcfg is None:
        ap.error(f"--model {a.model!r}: not in precompute/configs/demo.toml")
    tmp = Path(tempfile.mkdtemp(prefix="sago-bench-loaded-"))

    def cfg(name: str):
        return dataclasses.replace(demo, store=str(tmp / f"{name}.duckdb"), datasets=DATASETS, n_prompts=a.n_prompts,
                                   max_new_tokens=a.max_new, models=(ModelConfig(key=a.model, dtype="float32",
                                                                                  device="cpu", batch_size=mcfg.batch_size),))

    HFLocalBackend(a.model, dtype="float32", device="cpu", batch_size=1).close()  # weights cache warm
    out = {}
    for name in ("quiet", "loaded"):
        print(f"{name}: load average {load_line()} (before)", flush=True)
        c = cfg(name)
        if name == "loaded":
            with busy_neighbour(a.neighbours):
                out[name] = sago_run(c)
        else:
            out[name] = sago_run(c)
        with open_store(c.store) as st:
            dec = st.runs()["decoding"].iloc[0]
        print(f"{name}: {out[name]['seconds']:.2f} s for {len(out[name]['responses'])} generations "
              f"(generate {out[name]['timing']['generate']:.2f} s); decoding.thread_choice: "
              f"{(dec if isinstance(dec, dict) else __import__('json').loads(dec)).get('thread_choice')}", flush=True)
    q, lo = out["quiet"], out["loaded"]
    same = sum(q["responses"].get(k) == v for k, v in lo["responses"].items())
    print(f"replies identical quiet vs loaded: {same}/{len(lo['responses'])}; load average after: {load_line()}")
    print(f"quiet_s: {q['seconds']:.2f} loaded_s: {lo['seconds']:.2f} loaded_ratio: {lo['seconds'] / q['seconds']:.2f}")
    return 0 if same == len(lo["responses"]) else 1


if __name__ == "__main__":
    from sago_engine.textsafe import guarded_terminal

    with guarded_terminal():  # replies, labels and messages reach the terminal inert
        sys.exit(main())
