"""Replies cut by the reply cap, per model × dataset: shares, the pairs both of whose replies were cut,
and the warning the run summary and the Profiles page show.

A reply that stopped at ``max_new_tokens`` (``reply_flags.HIT_CAP``) is cut text: Δ-BLEU and Δ-BERT
compare truncated replies, and Δ-MR's length rule sees two replies of equal length when both were
cut. These are marks read from the stored replies (``Store.cut_replies``, ``Store.cut_pairs``);
no stored value changes. docs/CONFIG.md, "Choosing the reply cap", says how to set the cap.
"""

from __future__ import annotations

import pandas as pd

#: Above this share of replies cut at the cap (per model × dataset) sago warns.
WARN_CUT_SHARE = 0.2

COLUMNS = ["model", "dataset", "replies", "cut", "cut_pct", "pairs", "both_cut", "both_cut_pct"]


def cut_table(cut: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """Per model × dataset: replies, cut (stopped at the cap), cut_pct, variant pairs, both_cut
    (both replies of the pair cut), both_cut_pct (percent, one decimal).

    Args:
        cut: ``Store.cut_replies`` rows (run_id, model, dataset, replies, cut).
        pairs: ``Store.cut_pairs`` rows (run_id, model, dataset, pairs, both_cut).
    Returns:
        ``COLUMNS``, one row per (model, dataset), sorted; runs of one model are summed.
    """
    if cut is None or cut.empty:
        return pd.DataFrame(columns=COLUMNS)
    a = cut.groupby(["model", "dataset"], sort=True)[["replies", "cut"]].sum()
    b = (pairs.groupby(["model", "dataset"], sort=True)[["pairs", "both_cut"]].sum() if pairs is not None
         and len(pairs) else pd.DataFrame(columns=["pairs", "both_cut"]))
    t = a.join(b, how="left").fillna(0).astype(int).reset_index()
    t["cut_pct"] = (100.0 * t["cut"] / t["replies"].clip(lower=1)).round(1)
    t["both_cut_pct"] = (100.0 * t["both_cut"] / t["pairs"].clip(lower=1)).round(1)
    return t[COLUMNS]


def over_threshold(table: pd.DataFrame, threshold: float = WARN_CUT_SHARE) -> pd.DataFrame:
    """The rows of ``cut_table`` whose share of cut replies exceeds ``threshold``."""
    if table.empty:
        return table
    return table[table["cut"] > threshold * table["replies"]].reset_index(drop=True)


def cut_warning(table: pd.DataFrame, threshold: float = WARN_CUT_SHARE) -> str | None:
    """One sentence naming every model × dataset above ``threshold`` (None when none is), e.g.
    ``"More than 20% of the replies stopped at the reply cap for smollm2 on alpaca (79%) …"``."""
    over = over_threshold(table, threshold)
    if over.empty:
        return None
    cells = ", ".join(f"{r.model} on {r.dataset} ({r.cut_pct:g}%)" for r in over.itertuples())
    return (f"More than {threshold:.0%} of the replies stopped at the reply cap for {cells}. Δ-BLEU, Δ-BERT "
            "and Δ-MR compare cut text there, and a pair whose two replies were both cut has equal lengths by "
            "construction (Δ-MR's length rule). Raise max_new_tokens (docs/CONFIG.md, \"Choosing the reply cap\").")
