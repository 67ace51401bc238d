"""Reads of sampled runs: each sample's Δ against base sample 0, the floor they give, the sampled replies."""

from __future__ import annotations

from dataclasses import replace

import duckdb
import pandas as pd

from sago_engine.filters import Filters
from sago_engine.store.reads.where import filter_where
from sago_engine.store.schema import has_table

#: Columns of ``SampleQueries.sample_deltas``.
SAMPLE_DELTA_READ_COLUMNS = ["run_id", "model", "dataset", "prompt_id", "variant_id", "sample", "axis", "delta",
                             "delta_norm", "available", "reason"]
#: Columns of ``SampleQueries.sample_floor`` (those of ``Browse.noise_floor``).
FLOOR_READ_COLUMNS = ["run_id", "model", "dataset", "prompt_id", "repeat", "axis", "delta", "delta_norm", "available",
                      "reason"]
#: Columns of ``SampleQueries.sample_replies``.
SAMPLE_REPLY_COLUMNS = ["run_id", "model", "dataset", "prompt_id", "variant_id", "sample", "response", "error"]


def _where(f: Filters | None) -> tuple[str, list]:
    """Base rows (``variant_id`` NULL) pass the model and dataset filters; a variant's rows also
    need a kept variant inside the variant filters (as every score does)."""
    own, p_own = filter_where(replace(f, families=None, subtypes=None, strengths=None, positions=None)
                              if f is not None else None, d="x", v="v", r="r")
    full, p_full = filter_where(f, d="x", v="v", r="r")
    return f"((x.variant_id IS NULL AND {own}) OR (x.variant_id IS NOT NULL AND v.kept AND {full}))", p_own + p_full


class SampleQueries:
    """Sampled-run methods of ``Store`` (``self.con``: a DuckDB connection)."""

    con: duckdb.DuckDBPyConnection

    def sample_deltas(self, f: Filters | None = None) -> pd.DataFrame:
        """``sample_deltas`` rows of the selection with the run's model (empty, same columns, for a
        store without sampled runs). Columns ``SAMPLE_DELTA_READ_COLUMNS``, sorted."""
        if not has_table(self.con, "sample_deltas"):
            return pd.DataFrame(columns=SAMPLE_DELTA_READ_COLUMNS)
        where, params = _where(f)
        return self.con.execute(f"""
            SELECT x.run_id, r.model, x.dataset, x.prompt_id, x.variant_id, x.sample, x.axis, x.delta,
                   x.delta_norm, x.available, x.reason
            FROM sample_deltas x LEFT JOIN runs r ON r.run_id = x.run_id
                 LEFT JOIN variants v ON v.variant_id = x.variant_id
            WHERE {where} ORDER BY x.run_id, x.prompt_id, x.variant_id NULLS FIRST, x.sample, x.axis""",
                                params).df()[SAMPLE_DELTA_READ_COLUMNS]

    def sample_floor(self) -> pd.DataFrame:
        """The floor of every sampled run as ``Browse.noise_floor`` rows: base samples 1..k−1 against
        base sample 0 (``repeat`` = the sample). Empty (same columns) without sampled runs."""
        if not has_table(self.con, "sample_deltas"):
            return pd.DataFrame(columns=FLOOR_READ_COLUMNS)
        return self.con.execute("""
            SELECT x.run_id, r.model, x.dataset, x.prompt_id, x.sample AS repeat, x.axis, x.delta, x.delta_norm,
                   x.available, x.reason
            FROM sample_deltas x LEFT JOIN runs r ON r.run_id = x.run_id
            WHERE x.variant_id IS NULL ORDER BY ALL""").df()[FLOOR_READ_COLUMNS]

    def sample_replies(self, f: Filters | None = None) -> pd.DataFrame:
        """Every reply of the sampled runs in the selection: sample 0 (``responses``) and samples ≥ 1
        (``samples``) of the base (``variant_id`` NULL) and of kept variants. Columns
        ``SAMPLE_REPLY_COLUMNS``, sorted; empty without sampled runs."""
        if not has_table(self.con, "samples"):
            return pd.DataFrame(columns=SAMPLE_REPLY_COLUMNS)
        where, params = _where(f)
        return self.con.execute(f"""
            WITH sampled AS (SELECT DISTINCT run_id FROM samples),
            u AS (SELECT run_id, prompt_id, variant_id, 0 AS sample, response, error
                  FROM responses WHERE run_id IN (SELECT run_id FROM sampled)
                  UNION ALL SELECT run_id, prompt_id, variant_id, sample, response, error FROM samples),
            x AS (SELECT u.*, p.dataset FROM u JOIN prompts p ON p.prompt_id = u.prompt_id)
            SELECT x.run_id, r.model, x.dataset, x.prompt_id, x.variant_id, x.sample, x.response, x.error
            FROM x LEFT JOIN runs r ON r.run_id = x.run_id LEFT JOIN variants v ON v.variant_id = x.variant_id
            WHERE {where} ORDER BY x.run_id, x.prompt_id, x.variant_id NULLS FIRST, x.sample""",
                                params).df()[SAMPLE_REPLY_COLUMNS]
