"""Numbers published in SAGO (arXiv 2610.01428), as a labelled reference source — never local statistics.

Everything here is transcribed from the paper (its tables and figures, as published).
Each frame carries ``source = PAPER_SOURCE``. Pages may overlay these as separate, dashed,
labelled traces next to locally computed models; they are never merged into local tables,
tests or rankings.
"""

from __future__ import annotations

import pandas as pd

from sago_engine.types import AXES, axis_label

PAPER_SOURCE = "reported in arXiv 2610.01428"

#: The axes of Figure 2a's values, in the figure's order.
_FIG2A_AXES = ("cos", "bleu", "bert", "prob", "ent", "mr")
#: Figure 2a: total SGS over six datasets, eight open models (values in ``_FIG2A_AXES`` order).
_FIG2A = {
    "Llama-3.2-3B-Instruct": (0.12, 0.61, 0.09, 0.04, 0.01, 0.35),
    "Llama-3.1-8B-Instruct": (0.27, 0.63, 0.08, 0.04, 0.01, 0.57),
    "Gemma-2B-IT": (0.07, 0.64, 0.10, 0.06, 0.01, 0.32),
    "Gemma-7B-IT": (0.13, 0.62, 0.08, 0.07, 0.01, 0.55),
    "Gemma-4-E4B-IT": (0.10, 0.84, 0.18, 0.05, 0.01, 0.38),
    "Qwen2.5-1.5B-Instruct": (0.05, 0.73, 0.11, 0.03, 0.01, 0.34),
    "Qwen2.5-7B-Instruct": (0.28, 0.67, 0.09, 0.07, 0.01, 0.59),
    "Qwen3.5-9B": (0.06, 0.52, 0.08, 0.09, 0.01, 0.44),
}

#: Table 1: closed models, ε = 0.05, Total — (mean, std, marker); axes not listed are unavailable.
_TABLE1 = {
    "GPT-5.4": {"bleu": (0.414, 0.13, "†"), "bert": (0.056, 0.02, "†"), "mr": (0.020, 0.08, ""),
                "ent": (0.154, 0.10, "†")},
    "Gemini-2.5-Flash": {"bleu": (0.312, 0.28, "†"), "bert": (0.105, 0.02, "†"), "mr": (0.005, 0.03, "")},
    "Claude-Sonnet-4.6": {"bleu": (0.505, 0.13, "†"), "bert": (0.120, 0.09, "†"), "mr": (0.061, 0.11, "")},
}

#: Appendix B example: Δ-MR models rejecting H0 at p<0.05/0.01/0.001 for each ε.
_THRESHOLD_EXAMPLE = {"mr": {0.01: (9, 9, 9), 0.05: (8, 8, 8), 0.10: (8, 8, 8)}}

#: Muted palette for reported models (distinct from the local models' palette); dashed lines.
PAPER_PALETTE = ("#7F7F7F", "#8C564B", "#9467BD", "#17BECF", "#BCBD22", "#1F77B4", "#FF7F0E", "#2CA02C",
                 "#D62728", "#E377C2", "#AEC7E8")


def figure_2a() -> pd.DataFrame:
    """Figure 2a (long): model, axis, axis_label, sgs, std (NaN: not reported), marker, kind="open", source."""
    rows = [{"model": m, "axis": a, "axis_label": axis_label(a), "sgs": v, "std": float("nan"), "marker": "",
             "kind": "open", "table": "Figure 2a", "source": PAPER_SOURCE}
            for m, vals in _FIG2A.items() for a, v in zip(_FIG2A_AXES, vals, strict=True)]
    return pd.DataFrame(rows)


def table_1() -> pd.DataFrame:
    """Table 1 (long, closed models, ε = 0.05, Total): model, axis, axis_label, sgs, std, marker, kind, source.

    Axes the paper could not measure for an API model are absent (n/a, never 0).
    """
    rows = [{"model": m, "axis": a, "axis_label": axis_label(a), "sgs": v[0], "std": v[1], "marker": v[2],
             "kind": "closed", "table": "Table 1 (ε = 0.05)", "source": PAPER_SOURCE}
            for m, axes in _TABLE1.items() for a, v in axes.items()]
    return pd.DataFrame(rows)


def reported_totals() -> pd.DataFrame:
    """Figure 2a and Table 1 together (long), for overlays; every row labelled with ``source``."""
    return pd.concat([figure_2a(), table_1()], ignore_index=True)


def threshold_example() -> pd.DataFrame:
    """Appendix B example row(s): axis_label, "ε=0.01", "ε=0.05", "ε=0.1" as "n/n/n" (p<0.05/0.01/0.001), source."""
    rows = []
    for a, by_eps in _THRESHOLD_EXAMPLE.items():
        row = {"axis_label": axis_label(a)}
        for e, counts in by_eps.items():
            row[f"ε={e:g}"] = "/".join(map(str, counts))
        row["source"] = PAPER_SOURCE
        rows.append(row)
    return pd.DataFrame(rows)


def wide(df: pd.DataFrame) -> pd.DataFrame:
    """One row per reported model, one column per axis label; cells "mean±std marker" or "mean"; missing → "n/a"."""
    def cell(r):
        sd = "" if pd.isna(r["std"]) else f"±{r['std']:.2f}"
        return f"{r['sgs']:.3f}{sd}{r['marker']}" if sd else f"{r['sgs']:.2f}"

    d = df.assign(cell=df.apply(cell, axis=1))
    w = d.pivot_table(index="model", columns="axis", values="cell", aggfunc="first", sort=False)
    w = w.reindex(columns=list(AXES)).astype(object).fillna("n/a")
    w.columns = [axis_label(a) for a in w.columns]
    w = w.reindex([m for m in dict.fromkeys(df["model"])])
    out = w.reset_index()
    out["source"] = PAPER_SOURCE
    return out


def paper_colors() -> dict[str, str]:
    """Reported model → colour (stable; separate from local models' colours)."""
    models = list(_FIG2A) + list(_TABLE1)
    return {m: PAPER_PALETTE[i % len(PAPER_PALETTE)] for i, m in enumerate(models)}
