"""SQL helpers of the store package: ``Filters`` → a parameterised condition (values always bound, never
formatted into SQL), and a fast query → DataFrame fetch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import duckdb
import pandas as pd

from sago_engine.types import AXES, base_axis

if TYPE_CHECKING:
    from sago_engine.filters import Filters


def axis_names(axes: Sequence[str] | None) -> list[str]:
    """The axis names a score query reads: ``None`` = the six plain axes (``types.AXES``, what every
    plain page shows), else exactly ``axes`` (plain and/or option axes ``<base>@<option>``).

    Raises:
        ValueError: a name whose base is not one of the six (``types.base_axis``).
    """
    if axes is None:
        return list(AXES)
    names = [str(a) for a in axes]
    for a in names:
        base_axis(a)
    return names


def filter_where(f: Filters | None, d: str = "d", v: str = "v", r: str = "r", *, a: str | None = None,
                 axes: Sequence[str] | None = None) -> tuple[str, list[Any]]:
    """Turn ``Filters`` into a SQL condition over the aliases of deltas/statistics ``d`` (dataset),
    variants ``v`` (family, subtype, strength, position) and runs ``r`` (model).

    With ``a`` (the alias of a table with an ``axis`` column) the rows are also restricted to
    ``axis_names(axes)``: the six plain axes unless ``axes`` names others (option axes).

    Returns ``(sql, params)``; ``sql`` is ``"TRUE"`` when nothing is restricted; an empty
    selection gives ``FALSE``.
    """
    parts: list[str] = []
    params: list[Any] = []
    if a is not None:
        parts.append(f"list_contains(?::VARCHAR[], {a}.axis)")
        params.append(axis_names(axes))
    if f is None:
        return (" AND ".join(parts) or "TRUE"), params
    cols = {"models": f"{r}.model", "datasets": f"{d}.dataset", "families": f"{v}.family",
            "subtypes": f"{v}.subtype", "strengths": f"{v}.strength", "positions": f"{v}.position"}
    for name, col in cols.items():
        vals = getattr(f, name)
        if vals is None:
            continue
        if not vals:
            parts.append("FALSE")
            continue
        cast = "::DOUBLE[]" if name == "strengths" else "::VARCHAR[]"
        parts.append(f"list_contains(?{cast}, {col})")
        params.append([float(x) for x in vals] if name == "strengths" else [str(x) for x in vals])
    return (" AND ".join(parts) or "TRUE"), params



def fetch_df(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
    """Run one SELECT and return a DataFrame through Arrow: the same columns and dtypes as
    ``con.execute(sql, params).df()`` (pandas' ``str`` dtype for text), about 4× faster for many
    text rows (measured: 72 k rows × 4 text columns, 98 → 26 ms CPU)."""
    return con.sql(sql, params=list(params) if params else None).to_arrow_table().to_pandas()
