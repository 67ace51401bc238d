"""Command line of the precompute runner: ``python -m precompute --config precompute/configs/demo.toml``."""

from __future__ import annotations

import argparse
import json
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m precompute",
        description=(
            "Run models over dataset prompts and their variants (SAGO, arXiv 2610.01428) and write "
            "per-prompt, per-variant, per-axis deltas plus the raw responses into a DuckDB store. "
            "Re-running skips every prompt already finished for the same run (no new rows, no model calls)."
        ),
    )
    ap.add_argument("--config", required=True, help="TOML run config, e.g. precompute/configs/demo.toml")
    ap.add_argument("--store", help="override run.store (path of the DuckDB file to write)")
    ap.add_argument("--model", action="append", help="run only this model key (repeatable); default: all in the config")
    ap.add_argument("--n-prompts", type=int, help="override data.n_prompts (prompts per dataset)")
    ap.add_argument("--plan", action="store_true", help="print the plan (prompts, variants, pending work) and exit")
    ap.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    ap.add_argument("-v", "--verbose", action="store_true", help="log more")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    from dataclasses import replace

    from precompute.config import ConfigError, load_config
    from precompute import runner

    try:
        cfg = load_config(args.config)
    except (ConfigError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.store:
        cfg = replace(cfg, store=args.store)
    if args.n_prompts:
        cfg = replace(cfg, n_prompts=args.n_prompts)
    if args.model:
        bad = [k for k in args.model if k not in [m.key for m in cfg.models]]
        if bad:
            print(f"error: --model {bad} not in the config; valid: {[m.key for m in cfg.models]}", file=sys.stderr)
            return 2
    if args.plan:
        from sago_engine.store import open_store
        from pathlib import Path

        store = open_store(cfg.store, read_only=True) if Path(cfg.store).exists() else None
        plan = runner.make_plan(cfg, None)
        n_var = sum(len(v) for v in plan.variants.values())
        print(f"prompts: {len(plan.prompts)}  variants: {n_var}  kept: {int(plan.variant_rows['kept'].sum())}")
        for m in cfg.models:
            rid = runner.run_id_for(cfg, m, plan)
            done = store.done_units(rid) if store else set()
            print(f"  {m.key}: run {rid}, {len(plan.prompts) - len(done & {p.prompt_id for p in plan.prompts})} prompts pending")
        return 0
    from sago_engine.datasets import DatasetError
    from sago_engine.models import ModelUnavailableError
    from sago_engine.store import StoreError

    try:
        summaries = runner.run(cfg, progress=not args.no_progress, only_models=args.model)
    except (DatasetError, StoreError, ModelUnavailableError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for s in summaries:
        print(json.dumps(s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
