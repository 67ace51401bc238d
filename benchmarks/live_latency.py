"""Live-page latency: smollm2-135m-instruct warm, one prompt, 24 variants over the three families, 48 new tokens.

Usage: ``python benchmarks/live_latency.py [--model KEY] [--profile] [--neighbours 1] [--no-baseline]``. A
warm-up probe (another prompt) loads the model, the BERTScore encoder and the semantic filter's baseline
first, as a running server would have. The measured probe runs as the page runs it (the base prompt
and ``--first`` variants, then the rest in batches of ``--batch``) and, in the same process right
before it, as the baseline: the ramp the page ran before (1, 2, 4, 8, 8, 1 variants per generate call,
``--baseline-batch`` 8); both quiet, then both with ``--neighbours`` CPU-bound processes beside them
(``neighbour.busy_neighbour``: a Python busy loop each, as a precompute run beside the dashboard; 0
skips it). Every reply of the page's schedule is compared with the baseline's. Prints the load average
before each, per-stage seconds, optionally the top of a cProfile, and as its last line
``first_result_s: X full_profile_s: Y loaded_first_result_s: A loaded_full_profile_s: B loaded_ratio: R
cold_first_result_s: Z baseline_full_profile_s: P speedup: S loaded_speedup: T identical: I/N`` (first
scored batch; all variants scored, filtered, s_X computed; R = B / Y; cold = a fresh process as a
just-started dashboard: ``live.start_warmup`` begins loading the model and the encoder, and the cold
prompt's probe is issued at once — Z is the seconds from process start of the warm-up to its first
scored batch; P the baseline's full profile quiet, S = P / Y, T the same loaded; I of the N replies
equal the baseline's, quiet and loaded).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from neighbour import busy_neighbour, load_line  # noqa: E402

from sago_engine.live import probe as live  # noqa: E402
from sago_engine.types import DEFAULT_MAX_NEW_TOKENS  # noqa: E402

FAMILIES = ["social_register", "surface_noise", "structural"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default=live.DEFAULT_MODEL)
    ap.add_argument("--prompt", default="What is the capital of Australia?")
    ap.add_argument("--variants", type=int, default=24)
    ap.add_argument("--max-new", type=int, default=DEFAULT_MAX_NEW_TOKENS)
    ap.add_argument("--first", type=int, default=1, help="variants in the first batch (with the base prompt; later batches double up to --batch)")
    ap.add_argument("--batch", type=int, default=live.LIVE_BATCH, help="variants per later batch")
    ap.add_argument("--baseline-batch", type=int, default=8,
                    help="the baseline's largest batch (it ramps 1, 2, 4, … up to it)")
    ap.add_argument("--no-baseline", action="store_true", help="measure the page's schedule only")
    ap.add_argument("--cold-prompt", default="Which planet in our solar system has the most moons?")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold (fresh-process) measurement")
    ap.add_argument("--profile", action="store_true", help="print the top of a cProfile of the measured probe")
    ap.add_argument("--neighbours", type=int, default=1, help="busy processes beside the loaded run (0: quiet only)")
    a = ap.parse_args()

    cold_first = float("nan")
    if not a.no_cold:  # first, in this fresh process: the dashboard's start-up path
        t = time.perf_counter()
        live.start_warmup(a.model)
        cold_probe = live.plan_probe(a.cold_prompt, live.choose_specs(FAMILIES, max_variants=a.variants,
                                                                      prompt_id="cold"))
        cold_marks: list[float] = []
        live.run_probe(live.shared_backend(a.model), cold_probe, a.max_new, first_batch=a.first,
                       batch_size=a.batch, on_batch=lambda r: cold_marks.append(time.perf_counter() - t))
        cold_first = cold_marks[0] if cold_marks else float("nan")
        print(f"cold: warm-up {live.warmup_status()['ready_s']:.2f} s; first result {cold_first:.2f} s; "
              f"24/24 scored {cold_marks[-1] if cold_marks else float('nan'):.2f} s")
    t = time.perf_counter()
    backend = live.load_backend(a.model, batch_size=max(a.batch, a.baseline_batch, a.first + 1))
    load_s = time.perf_counter() - t
    warm = live.plan_probe("Name a mammal that can fly.", live.choose_specs(FAMILIES, max_variants=6))
    t = time.perf_counter()
    live.run_probe(backend, warm, a.max_new)
    print(f"model load {load_s:.2f} s; warm-up probe {time.perf_counter() - t:.2f} s")

    specs = live.choose_specs(FAMILIES, max_variants=a.variants, prompt_id="bench")

    def measure(label: str, prof: cProfile.Profile | None = None, baseline: bool = False):
        print(f"{label}: load average {load_line()} (before)")
        t0 = time.perf_counter()
        probe = live.plan_probe(a.prompt, specs)
        plan_s = time.perf_counter() - t0
        marks: list[tuple[int, float]] = []
        if prof:
            prof.enable()
        sched = (dict(first_batch=1, batch_size=a.baseline_batch, ramp=True) if baseline else
                 dict(first_batch=a.first, batch_size=a.batch))
        res = live.run_probe(backend, probe, a.max_new, **sched,
                             on_batch=lambda r: marks.append((r.done, round(time.perf_counter() - t0, 2))))
        live.prompt_profile(res)
        full = time.perf_counter() - t0
        if prof:
            prof.disable()
        tm = res.timings
        print(f"{label}: batches (variants done, s since start): {marks}")
        print(f"{label}: stages: variant generation {plan_s:.3f} s | generate {tm['generate']:.2f} s | score "
              f"(compute_rows: BLEU, BERTScore, MR, cos) {tm['score']:.2f} s | semantic filter {tm['filter']:.2f} s")
        return probe, res, (marks[0][1] if marks else float("nan")), full

    def replies(res) -> dict:
        return dict(zip(res.rows.responses["variant_id"].fillna("<base>"), res.rows.responses["response"]))

    def same(x, y) -> tuple[int, int]:
        rx, ry = replies(x), replies(y)
        return sum(rx.get(k) == ry.get(k) for k in rx), len(rx)

    nan = float("nan")
    bfull = blfull = nan
    eq = [0, 0]
    base_res = None
    if not a.no_baseline:
        _, base_res, _, bfull = measure(f"quiet baseline (ramp 1, 2, 4 … to {a.baseline_batch})", baseline=True)
    prof = cProfile.Profile() if a.profile else None
    probe, res, first, full = measure("quiet", prof)
    if base_res is not None:
        eq = [sum(t) for t in zip(eq, same(res, base_res))]
    fams = {f: sum(v.spec.family == f for v in probe.variants) for f in FAMILIES}
    print(f"variants: {len(probe.variants)} {fams}; threads: {backend.info().get('thread_choice')}")
    if prof:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(25)
        print(s.getvalue())
    lfirst = lfull = nan
    if a.neighbours > 0:
        with busy_neighbour(a.neighbours):
            lab = f"loaded ({a.neighbours} busy neighbour{'s' * (a.neighbours > 1)})"
            if not a.no_baseline:
                _, lbase, _, blfull = measure(f"{lab} baseline", baseline=True)
            _, lres, lfirst, lfull = measure(lab)
        if not a.no_baseline:
            eq = [sum(t) for t in zip(eq, same(lres, lbase))]
        n_same, n = same(lres, res)
        print(f"loaded replies identical to quiet: {n_same}/{n}")
    print(f"load average after: {load_line()}")
    print(f"first_result_s: {first:.2f} full_profile_s: {full:.2f} loaded_first_result_s: {lfirst:.2f} "
          f"loaded_full_profile_s: {lfull:.2f} loaded_ratio: {lfull / full:.2f} cold_first_result_s: {cold_first:.2f} "
          f"baseline_full_profile_s: {bfull:.2f} speedup: {bfull / full:.2f} loaded_speedup: {blfull / lfull:.2f} "
          f"identical: {eq[0]}/{eq[1]}")


if __name__ == "__main__":
    from sago_engine.textsafe import guarded_terminal

    with guarded_terminal():  # replies, labels and messages reach the terminal inert
        main()
