"""Reads of every stored row about some prompts, table by table (``sago_engine.verify.reproduce`` compares
two stores' rows this way)."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pandas as pd

from sago_engine.store.schema import has_table

#: The tables whose every row belongs to one prompt (a ``prompt_id`` column): what one prompt's
#: measurement wrote (``PromptRowQueries.rows_of_prompts``). ``cell_stats`` and ``length_stats`` sum over the
#: prompts of a run and are not among them.
PROMPT_TABLES = ("prompts", "variants", "responses", "deltas", "units", "mirroring_verdicts", "base_repeats",
                 "noise_floor", "correctness", "samples", "sample_deltas", "delta_stats", "prompt_stats")


class PromptRowQueries:
    """Per-prompt row reads of ``Store`` (``self.con``: a DuckDB connection)."""

    con: duckdb.DuckDBPyConnection
    columns: dict[str, tuple[str, ...]]

    def rows_of_prompts(self, table: str, prompt_ids: Sequence[str], run_id: str | None = None) -> pd.DataFrame:
        """Every stored row of ``table`` (its known columns, JSON as text) about the prompts ``prompt_ids``,
        of run ``run_id`` where the table has runs (all runs when None), in no particular order.

        ``table``: one of ``PROMPT_TABLES`` (the tables whose rows each belong to one prompt).
        Raises ValueError for another table. A table the store lacks reads as an empty frame.
        """
        if table not in PROMPT_TABLES:
            raise ValueError(f"not a per-prompt table: {table!r}")
        if not has_table(self.con, table):
            return pd.DataFrame()
        where = 't.run_id = ? AND ' if run_id is not None and "run_id" in self.columns[table] else ""
        cols = ", ".join(f't."{c}"' for c in self.columns[table])
        self.con.register("_pids", pd.DataFrame({"id": list(prompt_ids)}, dtype=object))
        try:
            return self.con.execute(f"""SELECT {cols} FROM {table} t
                                        WHERE {where} t.prompt_id IN (SELECT id FROM _pids)""",
                                    [run_id] if where else []).df()
        finally:
            self.con.unregister("_pids")
