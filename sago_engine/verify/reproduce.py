"""Whether a store's rows about some prompts are the rows a re-run of the same settings writes.

A re-run of a cut of a config (fewer prompts, one model; the same seed, variant grid, semantic filter
and R_X) measures each of its prompts as the full run did, but under another run id: the run id
hashes the plan's signature, every prompt of the plan (``precompute.records.run_id_for``), and the
response ids hash the run id. Rows are therefore matched by what they are about — prompt, variant,
axis, sample, repeat (``ROW_KEYS``) — never by run or response id.

What is compared, per table of ``ROW_KEYS`` (``Store.rows_of_prompts``): every column except those of
``IGNORED`` (the run and response ids, latency, timestamps). Text, token ids, integers, booleans,
labels and JSON exactly; floats within the project's float-noise tolerance of the axis they belong to
(``axes.noise.NOISE_TOL``, and ``axes.noise.replay_tol`` for token log-prob statistics; ``float_tolerance``): a model's floats depend on the rows it computes beside
them (a prompt's hidden states in a batch of 28 rows differ from those in a batch of 112 in the last
float32 bits), so a slice re-run cannot be bit-identical to the full run, only equal up to that noise.
``runs`` (run-level provenance: config, host, versions, timings) and the tables that sum over all the
prompts of a run (``cell_stats``, ``length_stats``) are not compared.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from sago_engine.axes.noise import NOISE_TOL, REPLAYED_AXES, replay_tol
from sago_engine.types import base_axis

#: Per compared table, the columns that identify a row within one run (what it is about).
ROW_KEYS: dict[str, tuple[str, ...]] = {
    "prompts": ("prompt_id",),
    "variants": ("variant_id",),
    "responses": ("prompt_id", "variant_id"),
    "deltas": ("prompt_id", "variant_id", "axis"),
    "units": ("prompt_id",),
    "mirroring_verdicts": ("prompt_id", "variant_id", "response_of"),
    "base_repeats": ("prompt_id", "repeat"),
    "noise_floor": ("prompt_id", "repeat", "axis"),
    "correctness": ("prompt_id", "variant_id", "repeat", "scorer"),
    "samples": ("prompt_id", "variant_id", "sample"),
    "sample_deltas": ("prompt_id", "variant_id", "sample", "axis"),
    "delta_stats": ("prompt_id", "axis", "family", "subtype", "strength", "position", "tone", "target_ratio",
                    "kept", "available", "reason"),
    "prompt_stats": ("prompt_id", "axis", "kept", "available", "reason"),
}
#: Columns never compared: ids that hash the run id, wall-clock time and timestamps.
IGNORED: frozenset[str] = frozenset({"run_id", "response_id", "latency_s", "finished_at"})
#: Float columns of reply statistics → the axis whose tolerance applies (``AxisSpec.response_stat``).
STAT_AXIS: dict[str, str] = {"seq_logprob": "prob", "mean_entropy": "ent", "cos_per_layer": "cos",
                             "semantic_score": "bert"}


def float_tolerance(table: str, column: str, row: Mapping[str, Any], normalizers: Mapping[str, float],
                    cap: int | None = None) -> float:
    """The largest |a − b| of a float cell that counts as float noise between two computations.

    Reply statistics (``STAT_AXIS``): their axis's tolerance; ``seq_logprob`` / ``mean_entropy``
    at least the cross-computation tolerance over the row's ``n_tokens`` (``axes.noise.replay_tol``:
    another batch shape sums the same float32 products in another order). ``delta`` of a Δ row:
    ``NOISE_TOL`` of its axis (an option axis: its base axis); for Δ-Prob / Δ-Ent, a difference of
    two such statistics, at least twice their tolerance at the reply cap ``cap`` (tokens; the run's
    ``max_new_tokens``) when given. ``delta_norm``: that over R_X (``normalizers``, the run's
    ``[normalizers]``); ``sum_norm`` / ``sum_abs`` of a statistics row: ``n_rows`` times the
    ``delta_norm`` tolerance; ``sum_sq``: that times ``2 · sum_abs + n_rows · tol``
    (|a² − b²| ≤ |a − b| · (2|a| + |a − b|) summed). Any other float (a correctness score): 0 (exact).
    """
    if "axis" in row and column in ("delta", "delta_norm", "sum_norm", "sum_abs", "sum_sq"):
        axis = base_axis(str(row["axis"]))
        tol = NOISE_TOL.get(axis, 0.0)
        if cap is not None and axis in REPLAYED_AXES:
            tol = max(tol, 2.0 * replay_tol(axis, cap))
        if column == "delta":
            return tol
        tol /= float(normalizers.get(axis, 1.0))
        if column == "delta_norm":
            return tol
        n = float(row.get("n_rows") or 0)
        if column == "sum_sq":
            return tol * (2.0 * abs(float(row.get("sum_abs") or 0.0)) + n * tol)
        return n * tol
    axis = STAT_AXIS.get(column)
    if axis is None:
        return 0.0
    tol = NOISE_TOL.get(axis, 0.0)
    if axis in REPLAYED_AXES and row.get("n_tokens") is not None and not pd.isna(row.get("n_tokens")):
        tol = max(tol, replay_tol(axis, int(row["n_tokens"])))
    return tol


def _floats(v) -> np.ndarray | None:
    """``v`` as a float64 array when it is a float or a list of floats, else None."""
    if isinstance(v, float | np.floating):
        return np.array([float(v)])
    if isinstance(v, list | tuple | np.ndarray) and len(v) and all(isinstance(x, float | np.floating) for x in v):
        return np.asarray(v, dtype=np.float64)
    return None


def _plain(v):
    """A cell as a comparable Python value: arrays → lists, missing → None."""
    if isinstance(v, np.ndarray):
        return [_plain(x) for x in v.tolist()]
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NaT:
        return None
    if isinstance(v, np.generic):
        return v.item()
    return v


def cell_difference(want, got, tol: float) -> str | None:
    """Why two cells differ, or None when they are equal (floats: |a − b| ≤ ``tol``, NaN = NaN = None)."""
    a, b = _plain(want), _plain(got)
    fa, fb = _floats(a), _floats(b)
    if fa is not None and fb is not None:
        if fa.shape != fb.shape:
            return f"{len(fa)} values vs {len(fb)}"
        gap = np.abs(fa - fb)
        gap = np.where(np.isnan(fa) & np.isnan(fb), 0.0, gap)
        worst = float(np.max(gap)) if gap.size else 0.0
        return None if worst <= tol else f"differs by {worst:.3g} (> tolerance {tol:g})"
    return None if a == b else f"{shorten(a)!r} vs {shorten(b)!r}"


def shorten(v, n: int = 60):
    """``v`` for a message: text longer than ``n`` characters cut with an ellipsis."""
    s = v if isinstance(v, str) else repr(v)
    return s if len(s) <= n else s[:n] + "…"


def _keyed(df: pd.DataFrame, keys: Sequence[str]) -> dict[tuple, dict]:
    out: dict[tuple, dict] = {}
    for rec in df.to_dict("records"):
        out[tuple(_plain(rec.get(k)) for k in keys)] = rec
    return out


def table_differences(table: str, want: pd.DataFrame, got: pd.DataFrame, normalizers: Mapping[str, float],
                      limit: int = 20, cap: int | None = None) -> list[str]:
    """What differs between two stores' rows of ``table`` (one run each, the same prompts).

    Rows are matched by ``ROW_KEYS[table]``; a row only one side has, a key held twice, or a cell
    that differs (``cell_difference`` under ``float_tolerance``) is one line. Columns of
    ``IGNORED`` and columns only one side has are not compared. At most ``limit`` lines.
    """
    keys = ROW_KEYS[table]
    if want.empty and got.empty:
        return []
    out: list[str] = []
    for name, df in (("expected", want), ("re-run", got)):
        if not df.empty and len(df) != len(df.drop_duplicates(subset=list(keys))):
            out.append(f"{table}: the {name} rows repeat a key {keys}")
    a, b = _keyed(want, keys), _keyed(got, keys)
    for k in sorted(set(a) - set(b), key=repr):
        out.append(f"{table} {k}: only in the expected store")
    for k in sorted(set(b) - set(a), key=repr):
        out.append(f"{table} {k}: only in the re-run")
    cols = [c for c in want.columns if c in got.columns and c not in IGNORED and c not in keys]
    for k in sorted(set(a) & set(b), key=repr):
        for c in cols:
            why = cell_difference(a[k][c], b[k][c], float_tolerance(table, c, a[k], normalizers, cap))
            if why is not None:
                out.append(f"{table} {k} {c}: {why}")
    return out[:limit]


def store_differences(want: Mapping[str, pd.DataFrame], got: Mapping[str, pd.DataFrame],
                      normalizers: Mapping[str, float], limit: int = 20, cap: int | None = None) -> list[str]:
    """``table_differences`` over every table of ``ROW_KEYS`` (a table one side lacks reads as empty).

    Args:
        want / got: table → the rows of one run about the compared prompts (``Store.rows_of_prompts``).
        normalizers: the runs' R_X per axis (``runs.normalizers``), for the ``delta_norm`` tolerance.
        cap: the runs' reply cap (tokens), for the Δ-Prob / Δ-Ent tolerance (``float_tolerance``).
    Returns:
        One line per difference (at most ``limit`` per table); ``[]`` when every row matches.
    """
    out: list[str] = []
    for t in ROW_KEYS:
        out += table_differences(t, want.get(t, pd.DataFrame()), got.get(t, pd.DataFrame()), normalizers, limit, cap)
    return out
