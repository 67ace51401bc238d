"""Dashboard query benchmark at paper scale: 11 models × 6 datasets × 200 prompts × 50 variants × 6 axes.

Builds a synthetic store with the project's own writer (``Store.insert_df``, which also keeps
the sufficient-statistics tables; numpy-generated deltas, the real (F, u, s, p) grid, one
API-like model without white-box axes), then times the store queries each dashboard page runs
(median of ``--repeat`` runs) and prints a table. ``--scale K`` multiplies the variants per
prompt by K — K × the paper's grid, K × 3.96 M deltas (beyond the grid's 110 cells a cell
repeats, as several seeds of one cell would). The store is published as the runner publishes (per-prompt
tables in prompt order). A cached store without the statistics tables or the prompt order (built by an
older sago) is migrated by one writable open. The LAST line is ``slowest_page_query_ms: N``
(the slowest page's total query time). Goal: ≤ 150 ms at scale 1, ≤ 300 ms at scale 10.

    .venv/bin/python benchmarks/dashboard_scale.py [--path /tmp/sago_scale.duckdb] [--rebuild] [--scale 10]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sago_engine.store import open_store  # noqa: E402
from sago_engine.types import AXES, DEFAULT_NORMALIZERS, WHITE_BOX_AXES  # noqa: E402
from sago_engine.variants import full_grid  # noqa: E402

DATASETS = ("truthfulqa", "nq_open", "alpaca", "simpleqa", "triviaqa", "hotpotqa")
WORDS = ("what", "is", "the", "capital", "of", "river", "who", "wrote", "novel", "year", "how", "many",
         "people", "live", "in", "city", "largest", "planet", "explain", "why", "sky", "blue")


def _tone(family: str, subtype: str, strength: float) -> str | None:
    if family != "social_register":
        return None
    if subtype == "politeness":
        return "negative" if strength < 0 else ("polite" if strength > 0 else "neutral")
    return {"negative_framing": "negative", "greeting": "polite", "gratitude": "polite"}.get(subtype, "neutral")


def build_store(path: str | Path, n_models: int = 11, datasets=DATASETS, n_prompts: int = 200, n_variants: int = 50,
                seed: int = 0, with_responses: bool = True, verbose: bool = True, keep_as_written: bool = False) -> Path:
    """Write a synthetic store of the given size with ``Store.insert_df`` (one transaction per model and
    dataset) into a working file, then publish it at ``path`` as the runner's final publish does
    (``Store.write_clustered_copy``: per-prompt tables in prompt order). ``keep_as_written`` keeps the
    working file, rows in the order they were written, at ``as_written_path(path)`` (the baseline)."""
    path = Path(path)
    work = path.with_name(f".{path.name}.building")
    for p in (path, work, work.with_name(work.name + ".wal")):
        p.unlink(missing_ok=True)
    rng = np.random.default_rng(seed)
    grid = full_grid()
    fam = np.array([g.family for g in grid])
    sub = np.array([g.subtype for g in grid])
    stren = np.array([g.strength for g in grid])
    pos = np.array([g.position for g in grid])
    metas = [json.dumps({k: v for k, v in {"tone": _tone(g.family, g.subtype, g.strength),
                                            "target_ratio": g.strength if g.subtype == "length" else None}.items()
                         if v is not None}) for g in grid]
    n_cells = len(grid)
    models = [f"model-{k:02d}" for k in range(n_models)]
    run_ids = [f"{k:016x}" for k in range(1, n_models + 1)]
    n_p = len(datasets) * n_prompts
    t0 = time.perf_counter()

    # prompts
    pids = np.array([f"{d}:{i}" for d in datasets for i in range(n_prompts)])
    pdata = np.repeat(np.array(datasets), n_prompts)
    lens = rng.integers(5, 30, n_p)
    ptext = [" ".join(rng.choice(WORDS, n)) + "?" for n in lens]
    prompts = pd.DataFrame({"prompt_id": pids, "dataset": pdata, "source_id": [p.split(":")[1] for p in pids],
                            "text": ptext})
    # variants: n_variants distinct cells per prompt
    cells = np.stack([rng.choice(n_cells, n_variants, replace=n_variants > n_cells)
                      for _ in range(n_p)])  # (n_p, n_variants)
    flat = cells.ravel()
    vp = np.repeat(np.arange(n_p), n_variants)
    vids = np.array([f"{i * 2654435761 % (1 << 64):016x}" for i in range(1, len(flat) + 1)])
    sem = np.clip(rng.normal(0.75, 0.12, len(flat)), 0.0, 1.0)
    sem[fam[flat] == "surface_noise"] = np.clip(sem[fam[flat] == "surface_noise"] + 0.15, 0, 1)
    passes = (sem > 0.5) | (fam[flat] == "surface_noise")
    variants = pd.DataFrame({
        "variant_id": vids, "prompt_id": pids[vp], "family": fam[flat], "subtype": sub[flat],
        "strength": stren[flat], "position": pos[flat], "text": [f"{ptext[p]} [{c}]" for p, c in zip(vp, flat)],
        "seed": np.arange(len(flat), dtype=np.int64), "generator": "synthetic",
        "meta": np.array(metas)[flat], "semantic_score": sem, "passes_filter": passes, "kept": passes,
    })
    # cell effect: bigger for stronger / negative variants
    cell_eff = 0.15 + 0.05 * np.abs(stren) / np.maximum(1, np.abs(stren).max()) + 0.1 * (fam == "structural")
    cell_eff = cell_eff + 0.08 * np.array([_tone(g.family, g.subtype, g.strength) == "negative" for g in grid])
    with open_store(work, read_only=False, create=True) as st:
        runs = pd.DataFrame([{"run_id": r, "model": m, "backend": "synthetic", "seed": seed, "status": "complete",
                              "normalizers": json.dumps(DEFAULT_NORMALIZERS), "fingerprint": f"synthetic|{m}",
                              "semantic_filter": json.dumps({"threshold": 0.5, "threshold_config": 0.85,
                                                             "scale": "synthetic"})}
                             for r, m in zip(run_ids, models)])
        with st.transaction():
            st.insert_df("runs", runs)
            st.insert_df("prompts", prompts)
            st.insert_df("variants", variants)
        n_v = len(flat)
        for k, (run, model) in enumerate(zip(run_ids, models)):
            api = k == n_models - 1  # the last model is API-like: no white-box axes
            scale = rng.uniform(0.6, 1.4, len(AXES))
            x = rng.normal(0.0, 1.0, (n_v, len(AXES))) * cell_eff[flat][:, None] * scale[None, :]
            for j, a in enumerate(AXES):
                if a in ("cos", "bleu", "bert"):
                    x[:, j] = -np.abs(x[:, j])
                if a == "mr":
                    x[:, j] = np.round(np.clip(x[:, j] * 2, -1, 1))
            dn = np.clip(x, -1, 1)
            avail1 = np.array([not (api and a in WHITE_BOX_AXES) for a in AXES])
            norm1 = np.array([DEFAULT_NORMALIZERS[a] for a in AXES])
            for ds in datasets:  # one transaction per (model, dataset): bounded memory at any scale
                rows = np.flatnonzero(pdata[vp] == ds)  # variant rows of this dataset
                m = len(rows)
                avail = np.tile(avail1, m)
                norm = np.tile(norm1, m)
                d = dn[rows].ravel()
                deltas = pd.DataFrame({"run_id": run, "dataset": ds, "prompt_id": np.repeat(pids[vp[rows]], len(AXES)),
                                       "variant_id": np.repeat(vids[rows], len(AXES)),
                                       "axis": np.tile(np.array(AXES), m),
                                       "delta": np.where(avail, d * norm, np.nan),
                                       "delta_norm": np.where(avail, d, np.nan), "available": avail,
                                       "reason": np.where(avail, None, "backend exposes no activations"),
                                       "detector": None})
                with st.transaction():
                    st.insert_df("deltas", deltas)
                    if with_responses:
                        pd_ids = pids[pdata == ds]
                        base = pd.DataFrame({"response_id": [f"{run}:{p}" for p in pd_ids], "run_id": run,
                                             "prompt_id": pd_ids, "variant_id": None,
                                             "response": [f"Answer of {model} to {ptext[i]}"
                                                          for i in np.flatnonzero(pdata == ds)], "n_tokens": 12})
                        var = pd.DataFrame({"response_id": [f"{run}:{v}" for v in vids[rows]], "run_id": run,
                                            "prompt_id": pids[vp[rows]], "variant_id": vids[rows],
                                            "response": [f"Answer of {model}, variant {c}" for c in flat[rows]],
                                            "n_tokens": 10})
                        st.insert_df("responses", pd.concat([base, var], ignore_index=True))
            if verbose:
                print(f"  wrote {model}: {n_v * len(AXES):,} deltas ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
        st.checkpoint()
        t1, c1 = time.perf_counter(), _cpu_s()
        st.write_clustered_copy(path)
        if verbose:
            print(f"  published in prompt order: {time.perf_counter() - t1:.1f} s wall, {_cpu_s() - c1:.1f} s cpu",
                  file=sys.stderr)
    if keep_as_written:
        os.replace(work, as_written_path(path))
    else:
        work.unlink()
    return path


def as_written_path(path: str | Path) -> Path:
    """Where ``build_store(keep_as_written=True)`` keeps the store with its rows in the order written."""
    path = Path(path)
    return path.with_name(path.name + ".as-written")


def _cpu_s() -> float:
    """CPU seconds of this process, all threads (DuckDB's workers included)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _median_ms(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median wall-clock and median CPU milliseconds of ``repeat`` calls of ``fn``."""
    wall, cpu = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), _cpu_s()
        fn()
        wall.append((time.perf_counter() - t) * 1000)
        cpu.append((_cpu_s() - c) * 1000)
    return statistics.median(wall), statistics.median(cpu)


def page_queries(st, filters_cls) -> dict[str, dict[str, Callable[[], object]]]:
    """The store queries each page runs on first load (default filters: everything), by page.

    Every page also runs ``filter_options`` (app.py builds the sidebar from it). Queries that
    a page does not have yet (another helper's, still in progress) are skipped.
    """
    f = filters_cls()

    def q(name, *args, **kw):
        fn = getattr(st, name, None)
        return None if fn is None else (lambda: fn(*args, **kw))

    pid = st.prompt_list(f)["prompt_id"].iloc[0]
    pages = {
        "profiles": {"filter_options": q("filter_options"), "prompt_scores": q("prompt_scores", f),
                     "axis_availability": q("axis_availability", f)},
        "pareto / rankings / significance": {"filter_options": q("filter_options"),
                                             "prompt_scores": q("prompt_scores", f)},
        "prompts": {"filter_options": q("filter_options"), "prompt_list": q("prompt_list", f),
                    "prompt_detail": q("prompt_detail", f, prompt_id=pid)},
        "variants": {"filter_options": q("filter_options"),
                     "variant_audit": q("variant_audit", f, with_meta=False, with_ids=False),
                     "semantic_thresholds": q("semantic_thresholds"), "ablation_frame": q("ablation_frame", f)},
    }
    return {page: {k: v for k, v in qs.items() if v is not None} for page, qs in pages.items()}


def _baseline(path: Path, repeat: int, filters_cls) -> str:
    """The Prompts page's queries on the store as written and on the published (prompt-ordered) store,
    in this process, runs alternating between the two files (both see the same machine load)."""
    base = as_written_path(path)
    if not base.exists():
        return f"baseline: no {base} (build it with --rebuild --baseline)"
    with open_store(base) as b, open_store(path) as s:
        qa, qb = page_queries(b, filters_cls)["prompts"], page_queries(s, filters_cls)["prompts"]
        tot = {"as written": 0.0, "prompt order": 0.0}
        parts = []
        for name in qa:
            qa[name](), qb[name]()  # warm-up
            wa, wb = [], []
            for _ in range(repeat):
                wa.append(_median_ms(qa[name], 1)[0])
                wb.append(_median_ms(qb[name], 1)[0])
            ma, mb = statistics.median(wa), statistics.median(wb)
            tot["as written"] += ma
            tot["prompt order"] += mb
            parts.append(f"{name} {ma:.1f} → {mb:.1f}")
    return (f"baseline, same process (prompts page, median wall ms, as written → prompt order): {'; '.join(parts)}; "
            f"page {tot['as written']:.0f} → {tot['prompt order']:.0f} ms = {tot['as written'] / tot['prompt order']:.1f}× faster")


#: Queries run only on a click (deferred downloads), timed for information, not part of any page load.
ON_CLICK = ("delta_matrix",)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", default="/tmp/sago_scale.duckdb", help="store file to build / reuse")
    ap.add_argument("--rebuild", action="store_true", help="rebuild even if the store exists")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per query (median)")
    ap.add_argument("--models", type=int, default=11)
    ap.add_argument("--prompts", type=int, default=200, help="prompts per dataset")
    ap.add_argument("--variants", type=int, default=50, help="variants per prompt")
    ap.add_argument("--on-click", action="store_true",
                    help="also time the on-click export (delta_matrix: every delta row into pandas; ~3 GB at scale 1)")
    ap.add_argument("--scale", type=int, default=1, help="K × the variants per prompt (K × 3.96 M deltas)")
    ap.add_argument("--baseline", action="store_true",
                    help="keep (when building) and time the store as written, before the prompt-order publish: "
                         "the Prompts page's queries on both files in the same process (doubles the disk used)")
    args = ap.parse_args(argv)

    from sago_engine.filters import Filters

    path = Path(args.path)
    if args.rebuild or not path.exists():
        t = time.perf_counter()
        print(f"building {path} …", file=sys.stderr)
        build_store(path, n_models=args.models, n_prompts=args.prompts, n_variants=args.variants * args.scale,
                    keep_as_written=args.baseline)
        print(f"built in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    with open_store(path, read_only=True) as st:
        migrate = not st.stats_materialised or "layout_version" not in st.meta()
    if migrate:  # a store cached by an older sago: one writable open adds the statistics tables / sorts it by prompt
        t, c = time.perf_counter(), _cpu_s()
        open_store(path, read_only=False).close()
        print(f"migrated (statistics tables, prompt order) in {time.perf_counter() - t:.1f} s wall, "
              f"{_cpu_s() - c:.1f} s cpu", file=sys.stderr)
    with open_store(path, read_only=True) as st:
        c = st.counts()
        print(f"store: {path} — {path.stat().st_size / 2**20:,.0f} MiB; " + ", ".join(f"{k} {v:,}" for k, v in c.items()))
        print("statistics tables (rows; vs deltas): " + ", ".join(
            f"{t} {n:,} ({n / max(c['deltas'], 1):.3f}×)" for t, n in st.stats_counts().items()))
        pages = page_queries(st, Filters)
        rows = []
        for page, qs in pages.items():
            for name, fn in qs.items():
                fn()  # warm-up (first touch of the file's blocks)
                rows.append((page, name, _median_ms(fn, args.repeat)))
        extra = []
        for name in ON_CLICK if args.on_click else ():
            if hasattr(st, name):
                fn = getattr(st, name)
                extra.append((name, _median_ms(lambda fn=fn: fn(Filters()), 1)))
    baseline = _baseline(path, args.repeat, Filters) if args.baseline else None
    w = max(len(r[0]) for r in rows)
    load = os.getloadavg()[0]
    print(f"machine: {os.cpu_count()} CPUs, load average {load:.1f} (wall times grow with the load; CPU time is "
          "the work itself, summed over DuckDB's threads)")
    print(f"{'page':<{w}}  {'query':<20} {'wall ms':>9} {'cpu ms':>9}")
    per_page: dict[str, float] = {}
    for page, name, (ms, cpu) in rows:
        print(f"{page:<{w}}  {name:<20} {ms:>9.1f} {cpu:>9.1f}")
        per_page[page] = per_page.get(page, 0.0) + ms
    print("per page (sum of its queries' median wall ms): " + "; ".join(f"{p}: {ms:.0f}" for p, ms in per_page.items()))
    if baseline:
        print(baseline)
    for name, (ms, cpu) in extra:
        print(f"(on click, not a page load) {name}: {ms:.0f} ms wall, {cpu:.0f} ms cpu")
    print(f"slowest_page_query_ms: {max(per_page.values()):.0f}")
    return 0


if __name__ == "__main__":
    from sago_engine.textsafe import guarded_terminal

    with guarded_terminal():  # replies, labels and messages reach the terminal inert
        raise SystemExit(main())
