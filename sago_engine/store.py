"""The DuckDB store: schema, schema version, bulk writes and every query the pages use.

All SQL of sago lives in this module (ARCHITECTURE.md). Raw facts are kept (prompts, variants,
responses, signed deltas) so that scores can be recomputed without re-running models. Keys are
deterministic hashes, and writes use ``INSERT OR IGNORE``, so a re-run never duplicates a row.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import duckdb
import pandas as pd

SCHEMA_VERSION = 1
APP_ID = "sago-store"

_DDL = """
CREATE TABLE IF NOT EXISTS meta (
    key VARCHAR PRIMARY KEY,
    value VARCHAR
);
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY,
    model VARCHAR NOT NULL,
    backend VARCHAR NOT NULL,
    model_source VARCHAR,
    weights_sha256 VARCHAR,
    dtype VARCHAR,
    device VARCHAR,
    decoding JSON,
    seed BIGINT,
    normalizers JSON,
    semantic_filter JSON,
    encoder JSON,
    capabilities JSON,
    versions JSON,
    config JSON,
    fingerprint VARCHAR,
    started_at TIMESTAMP,
    finished_at TIMESTAMP,
    status VARCHAR
);
CREATE TABLE IF NOT EXISTS prompts (
    prompt_id VARCHAR PRIMARY KEY,
    dataset VARCHAR NOT NULL,
    source_id VARCHAR,
    text VARCHAR NOT NULL,
    reference JSON,
    category VARCHAR
);
CREATE TABLE IF NOT EXISTS variants (
    variant_id VARCHAR PRIMARY KEY,
    prompt_id VARCHAR NOT NULL,
    family VARCHAR NOT NULL,
    subtype VARCHAR NOT NULL,
    strength DOUBLE NOT NULL,
    position VARCHAR NOT NULL,
    text VARCHAR NOT NULL,
    seed BIGINT NOT NULL,
    generator VARCHAR,
    meta JSON,
    semantic_score DOUBLE,
    passes_filter BOOLEAN,
    kept BOOLEAN NOT NULL
);
CREATE TABLE IF NOT EXISTS responses (
    response_id VARCHAR PRIMARY KEY,
    run_id VARCHAR NOT NULL,
    prompt_id VARCHAR NOT NULL,
    variant_id VARCHAR,
    response VARCHAR NOT NULL,
    n_tokens INTEGER,
    seq_logprob DOUBLE,
    mean_entropy DOUBLE,
    cos_per_layer DOUBLE[],
    finish_reason VARCHAR,
    latency_s DOUBLE,
    error VARCHAR
);
CREATE TABLE IF NOT EXISTS deltas (
    run_id VARCHAR NOT NULL,
    dataset VARCHAR NOT NULL,
    prompt_id VARCHAR NOT NULL,
    variant_id VARCHAR NOT NULL,
    axis VARCHAR NOT NULL,
    delta DOUBLE,
    delta_norm DOUBLE,
    available BOOLEAN NOT NULL,
    reason VARCHAR,
    detector VARCHAR,
    PRIMARY KEY (run_id, variant_id, axis)
);
CREATE TABLE IF NOT EXISTS units (
    run_id VARCHAR NOT NULL,
    prompt_id VARCHAR NOT NULL,
    n_variants INTEGER,
    finished_at TIMESTAMP,
    PRIMARY KEY (run_id, prompt_id)
);
CREATE OR REPLACE VIEW prompt_scores AS
    SELECT d.run_id, r.model, d.dataset, d.prompt_id, d.axis,
           sqrt(avg(d.delta_norm * d.delta_norm)) AS s,
           count(*) AS n_variants
    FROM deltas d
    JOIN variants v USING (variant_id)
    JOIN runs r USING (run_id)
    WHERE d.available AND v.kept
    GROUP BY ALL;
CREATE OR REPLACE VIEW sgs_dataset AS
    SELECT run_id, model, dataset, axis, avg(s) AS sgs, stddev_samp(s) AS std, count(*) AS n_prompts
    FROM prompt_scores GROUP BY ALL;
CREATE OR REPLACE VIEW sgs_total AS
    SELECT run_id, model, axis, avg(s) AS sgs, stddev_samp(s) AS std, count(*) AS n_prompts
    FROM prompt_scores GROUP BY ALL;
"""

TABLES = ("runs", "prompts", "variants", "responses", "deltas", "units")


class StoreError(RuntimeError):
    """A file that is not a sago store, or a store of an unsupported schema version."""


def _json(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str, ensure_ascii=False)


@dataclass
class Store:
    """An open sago store. Use ``open_store``; close with ``close()`` or as a context manager."""

    path: Path
    con: duckdb.DuckDBPyConnection
    read_only: bool

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.con.close()

    # ------------------------------------------------------------------ writes
    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All writes inside commit together or not at all (a killed run loses only the open unit)."""
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    def insert_df(self, table: str, df: pd.DataFrame) -> None:
        """Bulk ``INSERT OR IGNORE`` of a DataFrame whose columns are a subset of ``table``'s."""
        if table not in TABLES:
            raise ValueError(f"unknown table {table!r}")
        if df.empty:
            return
        cols = ", ".join(f'"{c}"' for c in df.columns)
        self.con.register("_sago_df", df)
        try:
            self.con.execute(f"INSERT OR IGNORE INTO {table} ({cols}) SELECT {cols} FROM _sago_df")
        finally:
            self.con.unregister("_sago_df")

    def upsert_run(self, run: dict[str, Any]) -> None:
        """Insert the run record, or update its mutable fields (status, times, hashes) if it exists."""
        row = {k: (_json(v) if isinstance(v, (dict, list, tuple)) else v) for k, v in run.items()}
        exists = self.con.execute("SELECT 1 FROM runs WHERE run_id = ?", [row["run_id"]]).fetchall()
        if exists:
            sets = ", ".join(f'"{k}" = ?' for k in row if k not in ("run_id", "started_at"))
            vals = [v for k, v in row.items() if k not in ("run_id", "started_at")]
            self.con.execute(f"UPDATE runs SET {sets} WHERE run_id = ?", [*vals, row["run_id"]])
        else:
            self.insert_df("runs", pd.DataFrame([row]))

    # ------------------------------------------------------------------ reads
    def done_units(self, run_id: str) -> set[str]:
        """Prompt ids whose unit (base + all variants) is finished for this run."""
        return {r[0] for r in self.con.execute("SELECT prompt_id FROM units WHERE run_id = ?", [run_id]).fetchall()}

    def existing_ids(self, table: str, column: str, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` already exist in ``table.column``."""
        if table not in TABLES:
            raise ValueError(f"unknown table {table!r}")
        if not ids:
            return set()
        df = pd.DataFrame({"id": list(ids)})
        self.con.register("_ids", df)
        try:
            rows = self.con.execute(f'SELECT DISTINCT t."{column}" FROM {table} t JOIN _ids ON t."{column}" = _ids.id').fetchall()
        finally:
            self.con.unregister("_ids")
        return {r[0] for r in rows}

    def counts(self) -> dict[str, int]:
        """Row count of every table."""
        return {t: int(self.con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0]) for t in TABLES}

    def runs(self) -> pd.DataFrame:
        """All runs, one row each, newest first."""
        return self.con.execute("SELECT * FROM runs ORDER BY model, started_at").df()

    def prompts(self, datasets: Iterable[str] | None = None) -> pd.DataFrame:
        """Prompts (optionally of some datasets)."""
        q = "SELECT * FROM prompts"
        params: list[Any] = []
        if datasets is not None:
            q += " WHERE list_contains(?, dataset)"
            params.append(list(datasets))
        return self.con.execute(q + " ORDER BY dataset, prompt_id", params).df()

    def variants(self, prompt_id: str | None = None) -> pd.DataFrame:
        """Variants (optionally of one prompt) with (F, u, s, p), text, seed, semantic score, kept."""
        q = "SELECT * FROM variants"
        params: list[Any] = []
        if prompt_id is not None:
            q += " WHERE prompt_id = ?"
            params.append(prompt_id)
        return self.con.execute(q + " ORDER BY family, subtype, strength, position", params).df()

    def deltas(self, *, kept_only: bool = True, run_ids: Iterable[str] | None = None) -> pd.DataFrame:
        """Every delta joined with its model, dataset and variant tuple (F, u, s, p).

        Columns: run_id, model, dataset, prompt_id, variant_id, family, subtype, strength,
        position, axis, delta, delta_norm (NULL where unavailable), available, reason, detector,
        kept, semantic_score.
        """
        q = """
            SELECT d.run_id, r.model, d.dataset, d.prompt_id, d.variant_id,
                   v.family, v.subtype, v.strength, v.position,
                   d.axis, d.delta, d.delta_norm, d.available, d.reason, d.detector,
                   v.kept, v.semantic_score
            FROM deltas d JOIN variants v USING (variant_id) JOIN runs r USING (run_id)
            WHERE TRUE
        """
        params: list[Any] = []
        if kept_only:
            q += " AND v.kept"
        if run_ids is not None:
            q += " AND list_contains(?, d.run_id)"
            params.append(list(run_ids))
        return self.con.execute(q + " ORDER BY d.run_id, d.prompt_id, d.variant_id, d.axis", params).df()

    def responses(self, prompt_id: str) -> pd.DataFrame:
        """All responses (base: variant_id NULL) for one prompt across runs, with the model name."""
        return self.con.execute(
            """SELECT r.model, x.* FROM responses x JOIN runs r USING (run_id)
               WHERE x.prompt_id = ? ORDER BY r.model, x.variant_id NULLS FIRST""",
            [prompt_id],
        ).df()

    def view(self, name: str) -> pd.DataFrame:
        """One of the SQL views: ``prompt_scores``, ``sgs_dataset``, ``sgs_total``."""
        if name not in ("prompt_scores", "sgs_dataset", "sgs_total"):
            raise ValueError(f"unknown view {name!r}")
        return self.con.execute(f"SELECT * FROM {name} ORDER BY ALL").df()

    def schema_version(self) -> int:
        rows = self.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall()
        return int(rows[0][0]) if rows else 0


def _check(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    try:
        _check_inner(con, path)
    except duckdb.Error as e:
        raise StoreError(f"{path} is not a sago store: {e}") from e


def _check_inner(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    if "meta" not in tables:
        raise StoreError(f"{path} is not a sago store (no meta table); tables found: {sorted(tables) or 'none'}")
    meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
    if meta.get("app") != APP_ID:
        raise StoreError(f"{path} is not a sago store (meta.app = {meta.get('app')!r})")
    try:
        v = int(meta.get("schema_version", 0))
    except (TypeError, ValueError):
        raise StoreError(f"{path}: unreadable schema_version {meta.get('schema_version')!r}") from None
    if v != SCHEMA_VERSION:
        raise StoreError(
            f"{path} has store schema version {v}; this sago reads version {SCHEMA_VERSION}. "
            "Rebuild it with `python -m precompute --config ...` into a new file."
        )


def open_store(path: str | Path, read_only: bool = True, create: bool = False) -> Store:
    """Open (or with ``create=True`` create) a sago store.

    Args:
        path: the DuckDB file.
        read_only: open without write access (the dashboard always does).
        create: create the schema when the file is new; an existing file must be a sago store.
    Raises:
        FileNotFoundError: the file does not exist and ``create`` is False.
        StoreError: the file is not a sago store or has another schema version.
    """
    path = Path(path)
    if not path.exists() and not create:
        raise FileNotFoundError(f"no store at {path}")
    if create and read_only:
        raise ValueError("create=True needs read_only=False")
    try:
        con = duckdb.connect(str(path), read_only=read_only)
    except duckdb.Error as e:
        raise StoreError(f"{path} cannot be opened as a DuckDB sago store: {e}") from e
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    if create and not tables:
        con.execute(_DDL)
        con.execute("INSERT INTO meta VALUES ('app', ?), ('schema_version', ?)", [APP_ID, str(SCHEMA_VERSION)])
    try:
        _check(con, path)
    except StoreError:
        con.close()
        raise
    return Store(path=path, con=con, read_only=read_only)
