"""Command line of the precompute runner: ``python -m precompute --config precompute/configs/demo.toml``."""

from __future__ import annotations

import argparse
import json
import logging
import sys


def merge_main(argv: list[str]) -> int:
    """``python -m precompute merge --out OUT IN [IN ...]``: combine shard stores into one."""
    ap = argparse.ArgumentParser(
        prog="python -m precompute merge",
        description="Merge stores written with --shard K/N into one store identical to a single run. Each run "
                    "keeps the worst status of its shards (failed > incomplete > partial > complete), printed per "
                    "run; a shard given twice (or a copy of it) is counted once.",
    )
    ap.add_argument("--out", required=True, help="the merged store to create")
    ap.add_argument("inputs", nargs="+", help="shard stores to merge")
    ap.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    ap.add_argument("--relabel-repeated", action="store_true",
                    help="runs with different run ids that carry one label are labelled '<label> [<run id prefix>]' "
                         "in the merged store (without it such a merge is refused)")
    args = ap.parse_args(argv)
    from sago_engine.store import StoreError, merge_stores

    # one line per merged run (its inputs' statuses → the merged one) and per input counted once
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        counts = merge_stores(args.out, args.inputs, overwrite=args.force, relabel_repeated=args.relabel_repeated)
    except (FileExistsError, FileNotFoundError, StoreError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps({"out": args.out, **counts}))
    return 0


def import_authors_main(argv: list[str]) -> int:
    """``python -m precompute import-authors DIR --store OUT``: the SAGO authors' released rows as labelled runs."""
    ap = argparse.ArgumentParser(
        prog="python -m precompute import-authors",
        description="Import the per-row results of the SAGO authors' repository (a clone of "
                    "Styled-Prompts-Shifted-Behavior-v2) as labelled external runs: their values as <axis>@authors, "
                    "leaked prompt tails cut from the replies, and sago's Δ-BLEU/Δ-BERT/Δ-MR recomputed on them.",
    )
    ap.add_argument("dir", help="the clone (or its results/ folder)")
    ap.add_argument("--store", required=True, help="the store to write (created if new)")
    ap.add_argument("--model", action="append", dest="models", help="an authors' model key (repeatable); default: all")
    ap.add_argument("--all-runs", action="store_true", help="import every run of a cell, not only the latest")
    ap.add_argument("--no-recompute", action="store_true", help="skip the run with sago's text axes")
    ap.add_argument("--report", action="store_true",
                    help="then print, per model and axis, the published SGS, the authors' rows aggregated their "
                         "way and the leak's effect (stderr)")
    args = ap.parse_args(argv)
    from sago_engine.external.authors_format import AuthorsFormatError
    from sago_engine.external.importer import import_authors
    from sago_engine.store import StoreError
    from sago_engine.textsafe import one_line

    try:
        summary = import_authors(args.dir, args.store, models=args.models, all_runs=args.all_runs,
                                 recompute=not args.no_recompute,
                                 log=lambda s: print(one_line(s), file=sys.stderr))
    except (FileNotFoundError, AuthorsFormatError, StoreError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.report:
        from sago_engine.external.audit import audit_table
        from sago_engine.store import open_store

        with open_store(args.store) as st:
            print(audit_table(st).to_string(index=False, float_format=lambda v: f"{v:.3f}"), file=sys.stderr)
    print(json.dumps(summary, default=str))
    return 0


def rescore_main(argv: list[str]) -> int:
    """``python -m precompute rescore STORE [--run RUN_ID] [--all] [--requests] [--correctness]``: a stored run's
    text axes under the current rules; with ``--requests``, the rendered requests of local replies that have
    none; with ``--correctness``, correctness verdicts of the stored replies instead (``correctness_main``)."""
    ap = argparse.ArgumentParser(
        prog="python -m precompute rescore",
        description="Recompute the text axes (Δ-BLEU, Δ-BERT, Δ-MR and their options, e.g. bert@rescaled) of stored "
                    "runs from their stored replies, nothing generated: rows whose availability differs under the "
                    "current rules are replaced (or, with --all, every text-axis row that differs), the statistics "
                    "tables refreshed and the rescore recorded in the store's meta (rescore:<run_id>). A sampled "
                    "run's sample_deltas (each sample against base sample 0) are recomputed alike from its stored "
                    "samples. White-box axes and judge verdicts stay as stored; a second rescore changes nothing.",
    )
    ap.add_argument("store", help="the store to rescore in place (copy it first to keep the original)")
    ap.add_argument("--run", dest="run_id", help="one run id (default: every run)")
    ap.add_argument("--all", dest="all_rows", action="store_true",
                    help="replace every text-axis row whose recomputed value (beyond float noise) or label differs, not only changed availability")
    ap.add_argument("--requests", action="store_true",
                    help="also render the request (the prompt as the model read it) of local replies that have none, "
                         "from the model's tokenizer and the chat template the run recorded")
    ap.add_argument("--correctness", action="store_true",
                    help="instead: a correctness verdict for every stored reply (base, variants, base repeats) "
                         "against its prompt's reference, with each dataset's scorer (docs/METHOD.md, "
                         "\"Correctness\"); no text axis is touched, nothing generated unless a dataset's scorer is judge")
    ap.add_argument("--scorer", action="append", default=[], metavar="DATASET=SCORER",
                    help="with --correctness: this dataset's scorer (exact, f1, contains, truthfulqa, none, judge); "
                         "repeatable; overrides the run's [data] correctness and the defaults")
    ap.add_argument("--all-scorers", action="store_true",
                    help="with --correctness: store contains, exact and f1 side by side for short-answer datasets "
                         "(Method choices compares them)")
    ap.add_argument("--data-dir", default="data/datasets",
                    help="with --correctness: dataset files to fill prompts.meta from (TruthfulQA's incorrect "
                         "answers), used only where the prompt's text matches (default data/datasets)")
    ap.add_argument("--judge-model", help="with --correctness and a judge scorer: the judge's model")
    ap.add_argument("--judge-backend", default="hf_local", help="the judge model's backend (default hf_local)")
    args = ap.parse_args(argv)
    if args.correctness:
        return correctness_main(args)
    from sago_engine.store import StoreError
    from sago_engine.verify.rescore import rescore_store

    try:
        results = rescore_store(args.store, run_id=args.run_id, all_rows=args.all_rows)
        if args.requests:
            from sago_engine.verify.rendered import fill_requests

            results += fill_requests(args.store, run_id=args.run_id)
    except (FileNotFoundError, StoreError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for r in results:
        print(json.dumps(r.as_dict()))
    return 0


def report_main(argv: list[str]) -> int:
    """``python -m precompute report STORE --html OUT.html --json OUT.json``: a result you can send, one
    self-contained HTML file (no network, no script) and the same numbers as JSON."""
    from precompute.report_file import main as report_file_main

    return report_file_main(argv)


def correctness_main(args) -> int:
    """``rescore STORE --correctness``: score the stored replies for correctness; one JSON line per run."""
    from sago_engine.correctness.rescore import rescore_correctness
    from sago_engine.correctness.scorers import no_scorer_fix, unscored_datasets
    from sago_engine.store import StoreError

    overrides = {}
    for item in args.scorer:
        dataset, sep, name = item.partition("=")
        if not sep or not dataset.strip() or not name.strip():
            print(f"error: --scorer takes DATASET=SCORER, e.g. nq_open=f1; got {item!r}", file=sys.stderr)
            return 2
        overrides[dataset.strip()] = name.strip()

    def judge_factory():
        if not args.judge_model:
            raise ValueError("the judge scorer needs a judge model: pass --judge-model (and --judge-backend)")
        from sago_engine.backends import get_backend

        return get_backend({"backend": args.judge_backend, "model": args.judge_model})

    try:
        results = rescore_correctness(args.store, run_id=args.run_id, overrides=overrides, all_short=args.all_scorers,
                                      data_dir=args.data_dir, judge_factory=judge_factory)
    except (FileNotFoundError, StoreError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for r in results:
        print(json.dumps(r.as_dict()))
    for dataset in unscored_datasets({d: s for r in results for d, s in r.scorers.items()}):
        print(f"hint: {no_scorer_fix(dataset)}", file=sys.stderr)  # guarded_terminal makes the name inert
    return 0


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return v


def _shard(text: str) -> tuple[int, int]:
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard takes K/N, e.g. 2/4; got {text!r}") from None
    if not (n >= 1 and 1 <= k <= n):
        raise argparse.ArgumentTypeError(f"--shard K/N needs 1 ≤ K ≤ N; got {text!r}")
    return k, n


def main(argv: list[str] | None = None) -> int:
    """The command line (subcommands ``merge``, ``import-authors``, ``rescore``; else a run). Everything
    it prints and logs goes through ``sago_engine.textsafe.guarded_terminal``: text from stores, CSVs,
    configs, replies and servers reaches the terminal with its control and bidi characters made inert."""
    from sago_engine.textsafe import guarded_terminal

    with guarded_terminal():
        return _main(sys.argv[1:] if argv is None else argv)


def _main(argv: list[str]) -> int:
    from sago_engine.envcheck import EnvError, check_environment

    try:  # every environment variable sago reads, before any work starts
        check_environment()
    except EnvError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if argv and argv[0] == "merge":
        return merge_main(argv[1:])
    if argv and argv[0] == "import-authors":
        return import_authors_main(argv[1:])
    if argv and argv[0] == "rescore":
        return rescore_main(argv[1:])
    if argv and argv[0] == "report":
        return report_main(argv[1:])
    if argv and argv[0] == "calibrate-filter":
        from precompute.filter_report import calibrate_main

        return calibrate_main(argv[1:])
    if argv and argv[0] == "check":
        from precompute.check import check_main

        return check_main(argv[1:])
    ap = argparse.ArgumentParser(
        prog="python -m precompute",
        description=(
            "Run models over dataset prompts and their variants (SAGO, arXiv 2610.01428) and write "
            "per-prompt, per-variant, per-axis deltas plus the raw responses into a DuckDB store. "
            "Re-running skips every prompt already finished for the same run (no new rows, no model calls). "
            "The runner writes a private working copy and publishes consistent snapshots to the store, so the "
            "dashboard can read it during a run; a killed run resumes with the same command. "
            "Subcommands: `python -m precompute merge --out OUT IN...` combines --shard outputs; "
            "`python -m precompute import-authors DIR --store OUT` imports the SAGO authors' released rows; "
            "`python -m precompute report STORE --html OUT.html` writes a report you can send."
            "`python -m precompute check STORE --max-sgs bleu=0.4` is a release gate (exit 1 when a threshold is passed)."
        ),
    )
    ap.add_argument("--config", required=True, help="TOML run config, e.g. precompute/configs/demo.toml")
    ap.add_argument("--store", help="override run.store (path of the DuckDB file to write)")
    ap.add_argument("--model", action="append",
                    help="run only this model key or label (repeatable); default: all in the config")
    ap.add_argument("--n-prompts", type=_positive, help="override data.n_prompts (prompts per dataset)")
    ap.add_argument("--shard", type=_shard, metavar="K/N",
                    help="run only part K of N (prompt chunks i with i mod N = K-1); default store "
                         "<store>.shard-K-of-N.duckdb; combine the parts with `merge`")
    ap.add_argument("--ray", metavar="ADDRESS",
                    help="run the study on a Ray cluster: auto (the cluster this machine is part of), HOST:PORT, "
                         "ray://HOST:10001, or local (a Ray instance on this machine only); each (model, shard) is a "
                         "Ray task, retried when its worker dies, and the shards are merged into the store "
                         "(docs/SCALING.md)")
    ap.add_argument("--shards", type=_positive, metavar="N",
                    help="with --ray: shards per model (default: the cluster's GPUs for a model on GPU, its CPUs / "
                         "--cpus-per-task otherwise, at most the number of prompt chunks)")
    ap.add_argument("--cpus-per-task", type=float, default=1.0, metavar="C",
                    help="with --ray: CPUs each task asks for, also its torch threads on CPU (default 1)")
    ap.add_argument("--ray-retries", type=int, default=3, metavar="R",
                    help="with --ray: times a task whose worker died is run again; it resumes its shard (default 3)")
    ap.add_argument("--ray-transfer", choices=("auto", "bytes"), default="auto",
                    help="with --ray: auto writes shard stores into <store>.ray/ where a worker sees it (shared "
                         "filesystem) and sends them as bytes otherwise; bytes always sends them")
    ap.add_argument("--ray-worker-dir", metavar="DIR",
                    help="with --ray: folder on each worker for shard stores sent as bytes (default <tmp>/sago-ray)")
    ap.add_argument("--publish-every", type=float, default=30.0, metavar="SECONDS",
                    help="publish a consistent snapshot of the store this often during a run (default 30)")
    ap.add_argument("--plan", action="store_true",
                    help="print the plan and exit: per model the replies to generate (new vs stored), judge calls, "
                         "estimated tokens, cost where prices are set, time (with --calibrate or --rate), memory "
                         "need vs available and inputs longer than its context (local models: tokenizer and config "
                         "only, no weights); the semantic filter is not run")
    ap.add_argument("--calibrate", action="store_true",
                    help="with --plan: measure each local model here (load it, answer and score one batch) for the "
                         "estimated time")
    ap.add_argument("--rate", type=float, metavar="REPLIES_PER_S",
                    help="with --plan: the stated rate (replies per second) the estimated time assumes")
    ap.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    ap.add_argument("--json", action="store_true",
                    help="end with one JSON line per model (the run's summary dict) instead of the readable summary")
    ap.add_argument("-v", "--verbose", action="store_true", help="log more")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    from dataclasses import replace

    from precompute import runner
    from precompute.config import ConfigError, check_run_keys, load_config

    if (args.calibrate or args.rate is not None) and not args.plan:
        print("error: --calibrate and --rate apply to --plan only", file=sys.stderr)
        return 2
    if args.rate is not None and not args.rate > 0:
        print(f"error: --rate must be > 0 replies/s, got {args.rate}", file=sys.stderr)
        return 2
    if args.ray and args.shard:
        print("error: --ray runs every shard itself; give --shards N, not --shard K/N", file=sys.stderr)
        return 2
    if not args.ray and (args.shards or args.ray_worker_dir):
        print("error: --shards and --ray-worker-dir apply to --ray only", file=sys.stderr)
        return 2
    try:  # with --ray the models run on the cluster's machines, which check their devices; --plan runs no
        # model (a float16 preset can be planned on a machine without a GPU; the run checks the device)
        cfg = load_config(args.config, check_keys=False, check_devices=not (args.ray or args.plan))
    except (ConfigError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.store:
        cfg = replace(cfg, store=args.store)
    elif args.shard:
        from pathlib import Path as _P

        st = _P(cfg.store)
        cfg = replace(cfg, store=str(st.with_name(f"{st.stem}.shard-{args.shard[0]}-of-{args.shard[1]}{st.suffix}")))
    if args.n_prompts is not None:
        cfg = replace(cfg, n_prompts=args.n_prompts)
    if args.model:
        valid = list(dict.fromkeys([n for m in cfg.models for n in (m.key, m.name)]))
        bad = [k for k in args.model if k not in valid]
        if bad:
            print(f"error: --model {bad} not in the config; valid: {valid}", file=sys.stderr)
            return 2
    if not args.plan:
        try:  # every missing key of the models to run, before any work
            check_run_keys(cfg, args.model)
        except ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    from sago_engine.backends.api.errors import ApiFatalError
    from sago_engine.datasets import DatasetError
    from sago_engine.models import ModelUnavailableError
    from sago_engine.store import StoreError
    from sago_engine.variants.rewriting.llm_rewriter import RewriterUnavailableError

    if args.plan:
        try:
            from precompute.plan_report import print_plan

            print_plan(cfg, runner, args.shard, args.model, rate=args.rate, calibrate=args.calibrate)
        except (DatasetError, StoreError, ModelUnavailableError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("\ninterrupted (Ctrl-C): nothing was written", file=sys.stderr)
            return EXIT_INTERRUPTED
        return 0
    if args.ray:
        return ray_main(cfg, args)
    try:
        summaries = runner.run(cfg, progress=not args.no_progress, only_models=args.model, shard=args.shard,
                               publish_every_s=args.publish_every)
    except (DatasetError, StoreError, ModelUnavailableError, ApiFatalError, ConfigError, RewriterUnavailableError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return interrupted()
    if args.json:
        for s in summaries:
            print(json.dumps(s))
    else:
        from precompute.closing import closing_lines

        caps = {s["run_id"]: cfg.max_new_tokens_for(m) for s in summaries for m in cfg.models if m.name == s["model"]}
        print("\n".join(closing_lines(cfg.store, summaries, caps)))
    return exit_status(summaries)


#: Exit status of a run or a plan stopped by Ctrl-C (SIGINT): 128 + 2, as a shell reports it.
EXIT_INTERRUPTED = 130


def interrupted() -> int:
    """Ctrl-C: one line instead of a traceback, and ``EXIT_INTERRUPTED``. Every prompt unit committed
    before the signal is kept (in the working copy), so the same command resumes."""
    print("\ninterrupted (Ctrl-C): the prompt units finished so far are kept; run the same command to resume",
          file=sys.stderr)
    return EXIT_INTERRUPTED


def ray_main(cfg, args) -> int:
    """``--ray``: launch the study on the cluster (``precompute.ray_launch.launch``), print one
    summary line per shard task and the merged store's counts; the exit status as a single run's."""
    from precompute.ray_launch import LaunchError, launch
    from sago_engine.store import StoreError

    try:
        res = launch(cfg, args.ray, shards=args.shards, cpus_per_task=args.cpus_per_task, max_retries=args.ray_retries,
                     only_models=args.model, progress=not args.no_progress, transfer=args.ray_transfer,
                     worker_dir=args.ray_worker_dir, publish_every_s=args.publish_every, verbose=args.verbose)
    except (LaunchError, StoreError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    summaries = []
    for t in res.tasks:
        for s in t["summaries"]:
            print(json.dumps({**s, "shard": t["shard"], "attempts": t["attempts"], "transfer": t["transfer"]}))
            summaries.append(s)
    print(json.dumps({"out": res.out, "shards": res.shards, "transfer": res.transfer, **res.counts}))
    return exit_status(summaries)


def exit_status(summaries: list[dict]) -> int:
    """0, or 3 when prompt units are left to retry, or 4 when a model's replies are mostly errors (said on stderr)."""
    retry = sum(s.get("retry_pending", 0) for s in summaries)
    if retry:  # exit status 3: the run is incomplete, the same command retries what failed
        print(f"incomplete: {retry} prompt units failed transiently; rerun the same command to retry them",
              file=sys.stderr)
        return 3
    failed = [s["model"] for s in summaries if str(s.get("status", "")).startswith("failed")]
    if failed:  # exit status 4: most replies of a model are errors — never reported as complete
        print(f"failed: most replies of {', '.join(failed)} are errors (see the run status)", file=sys.stderr)
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
