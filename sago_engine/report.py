"""Tables and chart data for the dashboard, computed from a store (pages only render these)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sago_engine.scoring import MAIN_EPSILON, format_cell, prompt_scores, significance
from sago_engine.store import open_store
from sago_engine.types import AXES, AXIS_LABELS

DEMO_STORE = Path(__file__).resolve().parent.parent / "data" / "sago_demo.duckdb"


def find_stores(folder: str | Path) -> list[Path]:
    """DuckDB files in ``folder`` (sorted; the demo store first when present)."""
    folder = Path(folder)
    found = sorted(folder.glob("*.duckdb"))
    return sorted(found, key=lambda p: (p.name != DEMO_STORE.name, p.name))


def load_store_frames(path: str | Path) -> dict[str, pd.DataFrame]:
    """Read everything the summary pages need from a store, read-only, in one go.

    Returns ``{"runs", "deltas", "prompts"}`` DataFrames. Raises ``StoreError`` /
    ``FileNotFoundError`` from ``open_store``.
    """
    with open_store(path, read_only=True) as st:
        return {"runs": st.runs(), "deltas": st.deltas(kept_only=True), "prompts": st.prompts()}


def profile_tables(deltas: pd.DataFrame, eps: float = MAIN_EPSILON) -> dict[str, pd.DataFrame]:
    """Total and per-dataset SGS ± std with t-test markers, per model and axis.

    Returns ``{"total": long, "per_dataset": long}`` with columns model, [dataset,] axis, sgs,
    std, n_prompts, t, p, marker, eps, cell. An axis a model lacks is absent (shown as n/a).
    """
    ps = prompt_scores(deltas, group=("model", "dataset", "prompt_id", "axis"))
    total = significance(ps, eps, by=("model", "axis"))
    per = significance(ps, eps, by=("model", "dataset", "axis"))
    for df in (total, per):
        df["cell"] = [format_cell(m, s, k) for m, s, k in zip(df["sgs"], df["std"], df["marker"])]
    return {"total": total, "per_dataset": per}


def wide_cells(long: pd.DataFrame, index: list[str]) -> pd.DataFrame:
    """Pivot to one column per axis (paper's labels, paper's order), cells "mean±std marker"; missing → "n/a"."""
    w = long.pivot_table(index=index, columns="axis", values="cell", aggfunc="first")
    w = w.reindex(columns=list(AXES)).fillna("n/a")
    w.columns = [AXIS_LABELS[a] for a in w.columns]
    return w.reset_index()


#: Colour-blind-safe qualitative palette (Okabe–Ito); a model keeps its colour on every page.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442", "#000000")


def model_colors(models) -> dict[str, str]:
    """Stable model → colour map: sorted model names take the palette in order (cycling)."""
    return {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(sorted(set(models)))}


def radar_frame(total: pd.DataFrame) -> pd.DataFrame:
    """Radar data: model, axis label, SGS (NaN where the axis is unavailable), in the paper's axis order."""
    rows = []
    for model, grp in total.groupby("model", sort=True):
        vals = dict(zip(grp["axis"], grp["sgs"]))
        for a in AXES:
            rows.append({"model": model, "axis": AXIS_LABELS[a], "sgs": vals.get(a, float("nan"))})
    return pd.DataFrame(rows, columns=["model", "axis", "sgs"])
