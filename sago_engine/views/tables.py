"""Tables as a spreadsheet reads them: every number in its own column, for the pages' CSV downloads.

The pages show compact cells (``"0.854±0.088†"``, ``"0.854 [0.80, 0.90]†"``, ``"3/2/1"``); their
CSVs hold the numbers those cells are made of — SGS (the mean of s_X(i) over prompts), std, CI
low / high, p, adjusted p, marker — one row per model × axis (× dataset, × option), axes in the
paper's order. Pure functions over the frames ``sago_engine.views.report`` returns.
"""

from __future__ import annotations

import pandas as pd

from sago_engine.types import axis_label, axis_sort_key
from sago_engine.views import report

#: The numeric columns, in order, that a SGS table's CSV keeps when its frame has them.
SGS_COLUMNS = ("sgs", "std", "ci_low", "ci_high", "n_prompts", "t", "p", "p_adj", "correction", "marker", "eps",
               "status", "small_n")


def _ordered(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return df.assign(_o=df["axis"].map(axis_sort_key)).sort_values([*keys, "_o"]).drop(columns="_o")


def sgs_numbers(table: pd.DataFrame) -> pd.DataFrame:
    """A long SGS table (``report.score_tables`` / ``significance_table`` / ``sgs_ci_table`` /
    ``method_choices.option_sgs``) with numbers only.

    Returns option / model / dataset (those present), axis, axis_label, then the ``SGS_COLUMNS``
    present (``lo``/``hi`` renamed ``ci_low``/``ci_high``); formatted cells (``cell``,
    ``ci_cell``) are dropped. Sorted by option, model, dataset, then the paper's axis order.
    """
    keys = [c for c in ("option", "model", "dataset") if c in table.columns]
    t = table.rename(columns={"lo": "ci_low", "hi": "ci_high"})
    t = t.assign(axis_label=t["axis"].map(axis_label))
    cols = [*keys, "axis", "axis_label", *[c for c in SGS_COLUMNS if c in t.columns]]
    return _ordered(t[cols], keys).reset_index(drop=True)


def threshold_counts(scores: pd.DataFrame, epsilons=(0.01, 0.05, 0.10), alphas=report.ALPHAS,
                     correction: str = "none") -> pd.DataFrame:
    """``report.threshold_table``'s "n/n/n" cells as numbers: one row per axis × ε × α.

    Returns axis, axis_label, eps, alpha, n_rejected (models with p < α, adjusted p when
    ``correction`` is set; each ε's table is its own family), n_models.
    """
    rows = []
    for e in epsilons:
        sig = report.significance_table(scores, e, correction=correction)
        rc = report.rejection_counts(sig.assign(p=sig["p_adj"]), alphas)
        for al in alphas:
            for _, r in rc.iterrows():  # axes in the paper's order
                rows.append({"axis": r["axis"], "axis_label": r["axis_label"], "eps": float(e), "alpha": float(al),
                             "n_rejected": int(r[f"p<{al:g}"]), "n_models": int(r["n_models"])})
    out = pd.DataFrame(rows, columns=["axis", "axis_label", "eps", "alpha", "n_rejected", "n_models"])
    return out
