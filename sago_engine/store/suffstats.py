"""Sufficient statistics of Δ̃ per group: the only thing the summary pages read.

SQL here only filters and aggregates (n, ΣΔ̃, ΣΔ̃², Σ|Δ̃| per group); ``sago_engine.scoring.scores`` alone
turns them into s_X(i), SGS and tests (like sacrebleu, whose BLEU formula is one function fed by
sufficient statistics). Four tables, written with the deltas (``refresh``) and rebuilt from the
deltas by the schema-3 migration (``MATERIALISE_SQL``):

* ``delta_stats`` — per (run, dataset, prompt, axis, family, subtype, strength, position, tone,
  target_ratio, kept, available, reason): the finest grain; answers every dashboard filter
  (models, datasets, F, u, s, p, kept variants, availability) exactly.
* ``prompt_stats`` — ``delta_stats`` summed over the variant fields: one row per (run, prompt,
  axis, kept, available, reason); the per-prompt scores when no variant field is filtered.
* ``cell_stats`` — ``delta_stats`` summed over prompts: one row per (run, dataset, axis, cell,
  kept, available, reason); the ablations.
* ``length_stats`` — per (run, dataset, axis, target_ratio): n_prompts, Σ_i s_i, Σ_i s_i² of the
  per-prompt scores s_i (``scoring.rms`` over prompt i's kept, available structural/length
  variants of that ratio), for the length ablation without a variant filter (with one, the
  per-prompt sums come from ``delta_stats``). Computed in Python (the score formula is not SQL).

Grain columns: ``kept`` is the variant's; ``available`` is ``deltas.available``; ``reason`` is the
unavailability reason (NULL on available rows, so an available group is one row). Value
columns: ``n_rows`` (delta rows), ``n`` (rows with a Δ̃), ``sum_norm`` (ΣΔ̃), ``sum_sq`` (ΣΔ̃²),
``sum_abs`` (Σ|Δ̃|). A read-only store written before these tables existed is answered from the
same SQL computed on the fly from ``deltas`` (``source``): the same numbers, only slower.
"""

from __future__ import annotations

import duckdb
import pandas as pd

from sago_engine.scoring.scores import rms

STATS_TABLES = ("delta_stats", "prompt_stats", "cell_stats", "length_stats")

_VALUES_DDL = "n_rows BIGINT NOT NULL, n BIGINT NOT NULL, sum_norm DOUBLE, sum_sq DOUBLE, sum_abs DOUBLE"
STATS_DDL = f"""
CREATE TABLE IF NOT EXISTS delta_stats (
    run_id VARCHAR NOT NULL, dataset VARCHAR NOT NULL, prompt_id VARCHAR NOT NULL, axis VARCHAR NOT NULL,
    family VARCHAR, subtype VARCHAR, strength DOUBLE, position VARCHAR, tone VARCHAR, target_ratio DOUBLE,
    kept BOOLEAN, available BOOLEAN NOT NULL, reason VARCHAR, {_VALUES_DDL}
);
CREATE TABLE IF NOT EXISTS prompt_stats (
    run_id VARCHAR NOT NULL, dataset VARCHAR NOT NULL, prompt_id VARCHAR NOT NULL, axis VARCHAR NOT NULL,
    kept BOOLEAN, available BOOLEAN NOT NULL, reason VARCHAR, {_VALUES_DDL}
);
CREATE TABLE IF NOT EXISTS cell_stats (
    run_id VARCHAR NOT NULL, dataset VARCHAR NOT NULL, axis VARCHAR NOT NULL,
    family VARCHAR, subtype VARCHAR, strength DOUBLE, position VARCHAR, tone VARCHAR, target_ratio DOUBLE,
    kept BOOLEAN, available BOOLEAN NOT NULL, reason VARCHAR, {_VALUES_DDL}
);
CREATE TABLE IF NOT EXISTS length_stats (
    run_id VARCHAR NOT NULL, dataset VARCHAR NOT NULL, axis VARCHAR NOT NULL, target_ratio DOUBLE NOT NULL,
    n_prompts BIGINT NOT NULL, sum_s DOUBLE NOT NULL, sum_s2 DOUBLE NOT NULL
);
"""

#: Variants with their tone and target length ratio (from ``meta``, else derived). tone
#: (social_register only): ``meta.tone``; else, for politeness, the sign of the strength
#: (negative < 0, neutral 0, polite > 0). target_ratio: ``meta.target_ratio``, else the strength,
#: for structural/length only (NULL otherwise).
VARIANT_SQL = """
    SELECT variant_id, prompt_id, family, subtype, strength, position, kept,
           CASE WHEN family = 'social_register' THEN coalesce(meta->>'tone', CASE WHEN subtype = 'politeness'
               THEN CASE WHEN strength < 0 THEN 'negative' WHEN strength > 0 THEN 'polite' ELSE 'neutral' END
           END) END AS tone,
           CASE WHEN family = 'structural' AND subtype = 'length'
                THEN coalesce(TRY_CAST(meta->>'target_ratio' AS DOUBLE), strength) END AS target_ratio
    FROM variants
"""

#: The statistics rows a score reads (alias ``s``): kept variants, available Δ̃, at least one, and
#: finite sums. sago never writes a non-finite Δ̃ as available; a store that holds one (a broken or
#: hostile file) has that row read as unavailable, never as NaN or ±inf in an SGS.
USABLE = ("s.kept AND s.available AND s.n > 0 AND isfinite(s.sum_norm) AND isfinite(s.sum_sq) "
          "AND isfinite(s.sum_abs)")
#: The raw ``deltas`` rows (alias ``d``) a quantile or a rescaling reads: available, a finite Δ.
USABLE_DELTA = "d.available AND isfinite(d.delta)"

#: The temporary objects ``refresh`` and ``_write_length`` create on the caller's connection (frames
#: registered as views, one temp table), each removed before the function returns: the (run, prompt)
#: keys and the (run, dataset) pairs of the written deltas, their ``delta_stats`` rows, the length sums.
_KEYS, _PAIRS, _FINE, _LENGTH = "_sago_keys", "_sago_rd", "_sago_fine", "_sago_len"

_SUMS = ("sum(n_rows)::BIGINT AS n_rows, sum(n)::BIGINT AS n, sum(sum_norm) AS sum_norm, "
         "sum(sum_sq) AS sum_sq, sum(sum_abs) AS sum_abs")


def fine_select(join: str = "", variants_where: str = "TRUE") -> str:
    """SELECT of ``delta_stats`` rows from ``deltas d`` ⋈ variants (``join`` restricts ``d``,
    ``variants_where`` the variants read)."""
    return f"""
        SELECT d.run_id, d.dataset, d.prompt_id, d.axis, v.family, v.subtype, v.strength, v.position, v.tone,
               v.target_ratio, v.kept, d.available, CASE WHEN d.available THEN NULL ELSE d.reason END AS reason,
               count(*)::BIGINT AS n_rows, count(d.delta_norm)::BIGINT AS n, sum(d.delta_norm) AS sum_norm,
               sum(d.delta_norm * d.delta_norm) AS sum_sq, sum(abs(d.delta_norm)) AS sum_abs
        FROM deltas d {join} JOIN ({VARIANT_SQL} WHERE {variants_where}) v USING (variant_id)
        GROUP BY ALL"""


def prompt_select(src: str, join: str = "") -> str:
    """SELECT of ``prompt_stats`` rows summed from ``delta_stats``-shaped ``src`` (alias s)."""
    return f"""
        SELECT s.run_id, s.dataset, s.prompt_id, s.axis, s.kept, s.available, s.reason, {_SUMS}
        FROM {src} s {join} GROUP BY ALL"""


def cell_select(src: str, join: str = "") -> str:
    """SELECT of ``cell_stats`` rows summed from ``delta_stats``-shaped ``src`` (alias s)."""
    return f"""
        SELECT s.run_id, s.dataset, s.axis, s.family, s.subtype, s.strength, s.position, s.tone, s.target_ratio,
               s.kept, s.available, s.reason, {_SUMS}
        FROM {src} s {join} GROUP BY ALL"""


def length_prompt_select(join: str) -> str:
    """SELECT of per-prompt sums (run_id, dataset, prompt_id, axis, target_ratio, n, sum_sq) of kept,
    available structural/length variants from ``delta_stats`` (alias s; ``join`` restricts it)."""
    return f"""
        SELECT s.run_id, s.dataset, s.prompt_id, s.axis, s.target_ratio, sum(s.n)::BIGINT AS n, sum(s.sum_sq) AS sum_sq
        FROM delta_stats s {join}
        WHERE {USABLE} AND s.target_ratio IS NOT NULL
        GROUP BY ALL"""


def length_rows(per_prompt: pd.DataFrame, by: tuple[str, ...] = ("run_id", "dataset", "axis", "target_ratio")) -> pd.DataFrame:
    """``by`` + n_prompts, sum_s, sum_s2 from per-prompt length sums (``length_prompt_select``);
    s_i = ``scoring.rms``."""
    s = rms(per_prompt["n"].to_numpy(), per_prompt["sum_sq"].to_numpy())
    out = (per_prompt[list(by)].assign(_s=s, _s2=s * s).groupby(list(by), sort=True, dropna=False)
           .agg(n_prompts=("_s", "size"), sum_s=("_s", "sum"), sum_s2=("_s2", "sum")).reset_index())
    out["n_prompts"] = out["n_prompts"].astype("int64")
    return out


def _write_length(con: duckdb.DuckDBPyConnection, join: str = "") -> None:
    rows = con.sql(length_prompt_select(join)).to_arrow_table().to_pandas()
    if rows.empty:
        return
    con.register(_LENGTH, length_rows(rows))
    try:
        con.execute(f"INSERT INTO length_stats SELECT run_id, dataset, axis, target_ratio, n_prompts, sum_s, sum_s2 "
                    f"FROM {_LENGTH}")
    finally:
        con.unregister(_LENGTH)


#: Rebuild the SQL-only statistics tables from ``deltas`` (idempotent).
MATERIALISE_SQL = (
    "DELETE FROM delta_stats; DELETE FROM prompt_stats; DELETE FROM cell_stats; DELETE FROM length_stats; "
    f"INSERT INTO delta_stats {fine_select()}; "
    f"INSERT INTO prompt_stats {prompt_select('delta_stats')}; "
    f"INSERT INTO cell_stats {cell_select('delta_stats')};"
)


def materialise(con: duckdb.DuckDBPyConnection) -> None:
    """Rebuild every statistics table from ``deltas`` (idempotent; the schema-3 migration and a merge run it)."""
    con.execute(MATERIALISE_SQL)
    _write_length(con)


def has_stats(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether all three statistics tables exist (a store of this version opened writable always has them)."""
    got = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables WHERE list_contains(?, table_name)",
                                     [list(STATS_TABLES)]).fetchall()}
    return got == set(STATS_TABLES)


def source(level: str, materialised: bool) -> str:
    """The FROM item (a table name or a subquery) of one grain: ``"fine"``, ``"prompt"`` or ``"cell"``
    (``length_stats`` has no SQL twin: without it, the length ablation uses the per-prompt path).

    ``materialised=False`` (an old read-only store) computes the same rows from ``deltas``.
    """
    name = {"fine": "delta_stats", "prompt": "prompt_stats", "cell": "cell_stats"}[level]
    if materialised:
        return name
    fine = f"({fine_select()})"
    return {"fine": fine, "prompt": f"({prompt_select(fine)})", "cell": f"({cell_select(fine)})"}[level]


def refresh(con: duckdb.DuckDBPyConnection, deltas: pd.DataFrame) -> None:
    """Recompute the statistics of every (run, prompt) and (run, dataset) in ``deltas`` from the table.

    Called after ``deltas`` rows were inserted (inside the caller's transaction). Recomputing from
    the table, not adding the frame, keeps it exact when ``INSERT OR IGNORE`` skipped rows. The
    variants of the deltas must be stored first (their fields and ``kept`` are read here). The
    scans are restricted to the frame's runs and datasets by constant lists, so DuckDB skips the
    row groups of other runs (a run's rows are appended together).
    """
    keys = deltas[["run_id", "prompt_id"]].drop_duplicates()
    rd = deltas[["run_id", "dataset"]].drop_duplicates()
    runs = sorted(rd["run_id"].unique().tolist())
    datasets = sorted(rd["dataset"].unique().tolist())

    def prune(a: str) -> str:  # constant IN lists: pushed into the scan, row groups skipped by min/max
        rr = ", ".join("'" + str(x).replace("'", "''") + "'" for x in runs)
        dd = ", ".join("'" + str(x).replace("'", "''") + "'" for x in datasets)
        return f"{a}.run_id IN ({rr}) AND {a}.dataset IN ({dd})"

    con.register(_KEYS, keys)
    con.register(_PAIRS, rd)
    try:
        # rows of these keys exist only when a write repeats (a fresh run appends): skip the deletes then
        if con.execute(f"SELECT 1 FROM prompt_stats s WHERE {prune('s')} LIMIT 1").fetchall():
            for t in ("delta_stats", "prompt_stats"):
                con.execute(f"DELETE FROM {t} USING {_KEYS} k WHERE {t}.run_id = k.run_id "
                            f"AND {t}.prompt_id = k.prompt_id AND {prune(t)}")
        on_keys = f"JOIN {_KEYS} k ON d.run_id = k.run_id AND d.prompt_id = k.prompt_id AND {prune('d')}"
        fine = fine_select(on_keys, f"prompt_id IN (SELECT prompt_id FROM {_KEYS})")
        con.execute(f"CREATE OR REPLACE TEMP TABLE {_FINE} AS {fine}")
        con.execute(f"INSERT INTO delta_stats SELECT * FROM {_FINE}")
        con.execute(f"INSERT INTO prompt_stats {prompt_select(_FINE)}")
        con.execute(f"DROP TABLE {_FINE}")
        on_rd = f"JOIN {_PAIRS} k ON s.run_id = k.run_id AND s.dataset = k.dataset AND {prune('s')}"
        for t in ("cell_stats", "length_stats"):
            con.execute(f"DELETE FROM {t} USING {_PAIRS} k WHERE {t}.run_id = k.run_id AND {t}.dataset = k.dataset "
                        f"AND {prune(t)}")
        con.execute(f"INSERT INTO cell_stats {cell_select('delta_stats', on_rd)}")
        _write_length(con, on_rd)
    finally:
        con.unregister(_KEYS)
        con.unregister(_PAIRS)
