"""``python -m precompute check STORE --max-sgs bleu=0.4,… [--vs BASELINE] [--max-increase …]``: a release gate.

Exit status 0 when every check passes, 1 when one fails (each failing model, axis, value and
threshold printed), 2 when the command cannot run (no store, a bad threshold, no baseline run).
The checks are ``sago_engine.scoring.gate``'s; this module reads the stores and prints.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

from precompute.terminal import shown
from sago_engine.scoring import gate

#: Exit statuses of ``check``.
EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class CheckError(ValueError):
    """The gate cannot run: the message says why and what to give instead."""


def _labels(runs: pd.DataFrame) -> dict[str, str]:
    """run_id → the model's name, with the run id added when the model has several runs in the store."""
    n = runs["model"].value_counts()
    return {r.run_id: r.model if n[r.model] == 1 else f"{r.model} [{r.run_id}]" for r in runs.itertuples()}


def _pairs(runs: pd.DataFrame, base_runs: pd.DataFrame, same_store: bool, vs: str) -> dict[str, tuple[str, str]]:
    """new run_id → (label, baseline run_id): with ``vs`` a run id of the store, every other run against
    it; with ``vs`` a store, runs paired by model name (one run per model on each side)."""
    labels = _labels(runs)
    if same_store:
        return {rid: (lab, vs) for rid, lab in labels.items() if rid != vs}
    dup = sorted({m for df in (runs, base_runs) for m, k in df["model"].value_counts().items() if k > 1})
    if dup:
        raise CheckError("--vs STORE pairs runs by model name, and these models have several runs in one of the "
                         f"stores: {', '.join(shown(m) for m in dup)}; give --vs RUN_ID of one store instead")
    base = dict(zip(base_runs["model"], base_runs["run_id"]))
    out = {rid: (lab, base[m]) for rid, lab, m in zip(runs["run_id"], labels.values(), runs["model"]) if m in base}
    if not out:
        raise CheckError(f"no model of the store has a run in the baseline {vs}: models "
                         f"{', '.join(shown(m) for m in runs['model'])} vs {', '.join(shown(m) for m in base_runs['model'])}")
    return out


def _fmt(v: float, digits: int = 3) -> str:
    return "—" if not math.isfinite(v) else f"{v:.{digits}f}"


def format_checks(checks: pd.DataFrame) -> list[str]:
    """One aligned line per check: model, axis, check, value (with its CI and p for a change), threshold, result."""
    lines = []
    w_label = max((len(shown(x, 60)) for x in checks["label"]), default=0)
    w_axis = max((len(x) for x in checks["axis"]), default=0)
    for r in checks.itertuples():
        extra = ""
        if r.check == "change" and r.n_prompts:
            extra = f"  CI [{_fmt(r.ci_low)}, {_fmt(r.ci_high)}], p = {_fmt(r.p, 4)}, {r.n_prompts} prompts"
        if r.result == gate.NOT_MEASURED:
            cmp = ""
        elif r.value > r.threshold:  # a change above its threshold passes when the test does not find it
            cmp = f" > {r.threshold:g}" + ("" if r.result == gate.FAIL else " (not significant)")
        else:
            cmp = f" ≤ {r.threshold:g}"
        lines.append(f"{r.result:>12}  {shown(r.label, 60):<{w_label}}  {r.axis:<{w_axis}}  {r.check:<6} "
                     f"{_fmt(r.value)}{cmp}{extra}")
    return lines


def run_checks(store: str, max_sgs: dict[str, float], vs: str | None = None, max_increase: dict[str, float] | None = None,
               alpha: float = gate.ALPHA, models: list[str] | None = None) -> pd.DataFrame:
    """Every check of the gate on ``store`` (``gate.level_checks``, with ``vs`` ``gate.change_checks``).

    ``vs``: a baseline store file (runs paired by model name) or a run id of ``store`` (every other
    run against it). ``models``: only runs of these model names. Raises CheckError (no baseline run,
    an ambiguous pairing, an unknown model), FileNotFoundError, StoreError.
    """
    from sago_engine.store import open_store

    with open_store(store) as st:
        runs = st.runs()[["run_id", "model"]]
        axes = tuple(dict.fromkeys([*max_sgs, *(max_increase or {})]))
        scores = st.prompt_scores(axes=axes)
    if models:
        unknown = [m for m in models if m not in set(runs["model"])]
        if unknown:
            raise CheckError(f"--model {', '.join(shown(m) for m in unknown)} has no run in {store}; models: "
                             f"{', '.join(shown(m) for m in runs['model'].unique())}")
    checks = []
    base_rid = None
    if vs is not None:
        same_store = not Path(vs).exists()
        if same_store:
            if vs not in set(runs["run_id"]):
                raise CheckError(f"--vs {shown(vs)}: no such store file and no run of that id in {store}; run ids: "
                                 f"{', '.join(runs['run_id'])}")
            base_rid, base_runs, base_scores = vs, runs, scores
        else:
            with open_store(vs) as bs:
                base_runs = bs.runs()[["run_id", "model"]]
                base_scores = bs.prompt_scores(axes=axes)
        pairs = _pairs(runs, base_runs, same_store, vs)
        if models:
            pairs = {k: v for k, v in pairs.items() if runs.set_index("run_id").loc[k, "model"] in models}
        checks.append(gate.change_checks(scores, base_scores, pairs, max_increase or {}, alpha=alpha))
    labels = {k: v for k, v in _labels(runs).items() if k != base_rid
              and (not models or runs.set_index("run_id").loc[k, "model"] in models)}
    checks.insert(0, gate.level_checks(scores, labels, max_sgs))
    filled = [c for c in checks if not c.empty]
    return pd.concat(filled, ignore_index=True) if filled else checks[0]


def _thresholds(flag: str):
    def parse(text: str) -> dict[str, float]:
        try:
            return gate.parse_thresholds(text, flag)
        except gate.GateError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return parse


def check_main(argv: list[str]) -> int:
    """``check STORE --max-sgs …``: a release gate that fails when a model's SGS (or its change against a
    baseline) passes a threshold; returns its exit status (``EXIT_PASS`` / ``EXIT_FAIL`` / ``EXIT_USAGE``)."""
    ap = argparse.ArgumentParser(
        prog="python -m precompute check",
        description="A release gate for CI: exit 1 when a model's SGS on an axis is above its --max-sgs threshold, "
                    "or (with --vs) when its mean paired increase over the baseline run's per-prompt scores is above "
                    "--max-increase and the Wilcoxon signed-rank test finds the change (p < --alpha). Prints every "
                    "check; exit 0 when all pass, 2 when the gate cannot run. docs/STORES.md, \"A release gate in CI\".",
    )
    ap.add_argument("store", help="the store to check")
    ap.add_argument("--max-sgs", type=_thresholds("--max-sgs"), default={}, metavar="AXIS=V,…",
                    help="highest SGS that passes, per axis, e.g. bleu=0.4,mr=0.2 (values in [0, 1])")
    ap.add_argument("--vs", metavar="BASELINE",
                    help="a baseline store (runs paired by model name) or a run id of STORE (every other run against it)")
    ap.add_argument("--max-increase", type=_thresholds("--max-increase"), default={}, metavar="AXIS=V,…",
                    help="with --vs: largest mean paired increase of s_X(i) over the baseline that passes, per axis")
    ap.add_argument("--alpha", type=float, default=gate.ALPHA,
                    help=f"with --vs: level of the two-sided signed-rank test (default {gate.ALPHA}; 1 = fail on the "
                         "increase alone)")
    ap.add_argument("--model", action="append", dest="models", help="check only this model name (repeatable)")
    args = ap.parse_args(argv)
    if not args.max_sgs and not args.max_increase:
        ap.error("give --max-sgs and/or --vs BASELINE --max-increase")
    if bool(args.vs) != bool(args.max_increase):
        ap.error("--vs and --max-increase go together")
    if not 0.0 < args.alpha <= 1.0:
        ap.error(f"--alpha must be in (0, 1], got {args.alpha}")
    from sago_engine.store import StoreError

    try:
        checks = run_checks(args.store, args.max_sgs, args.vs, args.max_increase, args.alpha, args.models)
    except (CheckError, FileNotFoundError, StoreError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    for line in format_checks(checks):
        print(line)
    bad = gate.failures(checks)
    if len(bad):
        print(f"gate failed: {len(bad)} of {len(checks)} checks", file=sys.stderr)
        for r in bad.itertuples():
            what = "SGS" if r.check == "sgs" else "paired increase"
            print(f"  {shown(r.label, 60)}: {r.axis} {what} {r.value:.3f} > {r.threshold:g}", file=sys.stderr)
        return EXIT_FAIL
    n_na = int((checks["result"] == gate.NOT_MEASURED).sum())
    print(f"gate passed: {len(checks) - n_na} checks" + (f" ({n_na} not measured)" if n_na else ""))
    return EXIT_PASS
