"""``python -m precompute calibrate-filter [--pairs FILE]``: the semantic filter's precision and recall
on labelled pairs, for the paper's mapped threshold and for the calibrated ones (BERTScore-F1, recall)."""

from __future__ import annotations

import argparse
import sys

from sago_engine.variants import filter_calibration as fc


def _row(name: str, r: fc.Rates) -> str:
    return (f"{name:<34} t = {r.threshold:.3f}  rejects {r.rejected_different}/{r.n_different} meaning changes "
            f"(recall {r.recall:.2f}) and {r.rejected_paraphrase}/{r.n_paraphrase} rephrasings "
            f"(precision {r.precision:.2f})")


def calibrate_main(argv: list[str]) -> int:
    """``calibrate-filter``: the semantic filter's precision and recall on labelled pairs; per score, the
    rates at the paper's threshold (F1, mapped) and at the calibrated one."""
    ap = argparse.ArgumentParser(prog="python -m precompute calibrate-filter",
                                 description="Precision and recall of the semantic filter on labelled paraphrase / "
                                             "different-meaning pairs, and the calibrated thresholds "
                                             "(docs/METHOD.md, \"Semantic filter\").")
    ap.add_argument("--pairs", default=str(fc.PAIRS_FILE), help="JSONL pairs: a, b, label (paraphrase | different)")
    args = ap.parse_args(argv)
    from sago_engine.variants.semantic_filter import FilterConfig, effective_threshold

    try:
        pairs = fc.load_pairs(args.pairs)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    labels = [p["label"] for p in pairs]
    f1, rec = fc.pair_scores(pairs, "f1"), fc.pair_scores(pairs, "recall")
    print(f"{len(pairs)} pairs ({labels.count('paraphrase')} paraphrases, {labels.count('different')} different)")
    print(_row("F1, paper's 0.85 mapped", fc.rates(f1, labels, effective_threshold(FilterConfig())["threshold"])))
    print(_row("F1, calibrated", fc.rates(f1, labels, fc.calibrate(f1, labels))))
    print(_row("F1, leave-one-out", fc.leave_one_out(f1, labels)))
    print(_row("recall, calibrated", fc.rates(rec, labels, fc.calibrate(rec, labels))))
    print(_row("recall, leave-one-out", fc.leave_one_out(rec, labels)))
    print(_row("recall, 0.85 (score=recall, raw)", fc.rates(rec, labels, 0.85)))
    return 0
