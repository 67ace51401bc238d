"""The DuckDB store: schema, schema version, bulk writes and every query the pages use.

All SQL of sago lives in this module (ARCHITECTURE.md). Raw facts are kept (prompts, variants,
responses, signed deltas) so that scores can be recomputed without re-running models. Keys are
deterministic hashes, and writes use ``INSERT OR IGNORE``, so a re-run never duplicates a row.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

import duckdb
import pandas as pd

if TYPE_CHECKING:  # only for annotations; filters.py has no store dependency
    from sago_engine.filters import Filters

SCHEMA_VERSION = 3
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
    token_ids INTEGER[],
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
CREATE TABLE IF NOT EXISTS mirroring_verdicts (
    run_id VARCHAR NOT NULL,
    variant_id VARCHAR NOT NULL,
    prompt_id VARCHAR NOT NULL,
    response_of VARCHAR NOT NULL,
    judge_model VARCHAR NOT NULL,
    template_id VARCHAR NOT NULL,
    verdict INTEGER,
    raw VARCHAR,
    error VARCHAR,
    heuristic_verdict INTEGER NOT NULL,
    detector VARCHAR NOT NULL,
    PRIMARY KEY (run_id, variant_id, response_of)
);
CREATE TABLE IF NOT EXISTS templates (
    template_id VARCHAR PRIMARY KEY,
    kind VARCHAR NOT NULL,
    text VARCHAR NOT NULL
);
CREATE TABLE IF NOT EXISTS run_usage (
    run_id VARCHAR PRIMARY KEY,
    requests BIGINT NOT NULL,
    cache_hits BIGINT NOT NULL,
    retries BIGINT NOT NULL,
    errors BIGINT NOT NULL,
    prompt_tokens BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    price_in_per_mtok DOUBLE,
    price_out_per_mtok DOUBLE,
    cost_usd DOUBLE,
    models_returned JSON,
    updated_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS api_responses (
    response_id VARCHAR PRIMARY KEY,
    run_id VARCHAR NOT NULL,
    model_returned VARCHAR,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    cached BOOLEAN,
    attempts INTEGER,
    finish_raw VARCHAR
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
#: Tables added in schema version 2 (LLM judge and rewriter: ``mirroring_verdicts``,
#: ``templates``; API backends: ``run_usage`` — one row per API run, cumulative over resumes:
#: requests incl. retries, cache hits, retries, prompts that ended in an error, tokens of fresh
#: requests, prices and cost in USD (NULL when prices are not configured), the distinct model
#: strings the API returned; ``api_responses`` — per response: the model string the API returned,
#: token counts, cache hit, attempts, raw stop reason). A version-1 store lacks them: read-only
#: reads return empty frames, and a writable open migrates it to version 2 (creates them).
EXTRA_TABLES = ("mirroring_verdicts", "templates", "run_usage", "api_responses")
_EXTRA_DDL = _DDL[_DDL.index("CREATE TABLE IF NOT EXISTS mirroring_verdicts"):_DDL.index("CREATE OR REPLACE VIEW prompt_scores")]
#: Schema version 3 (measurement fidelity): ``responses.token_ids`` — the generated token ids
#: exactly as the model emitted them (special tokens included), so a teacher-forced pass can
#: re-derive ``seq_logprob``/``mean_entropy``; ``responses.response`` is the reply exactly as
#: decoded (no stripping). Older stores read NULL there.
#: Additive, idempotent steps that bring a version-1 or -2 store to this version (run in one
#: transaction on a writable open). Each later addition of this version appends here.
_MIGRATIONS: tuple[str, ...] = (
    _EXTRA_DDL,
    "ALTER TABLE responses ADD COLUMN IF NOT EXISTS token_ids INTEGER[]",
)
#: Schema versions this sago opens (older ones are migrated on a writable open).
READABLE_VERSIONS = (1, 2, SCHEMA_VERSION)


class StoreError(RuntimeError):
    """A file that is not a sago store, or a store of an unsupported schema version."""


#: What reading a store can raise for a missing, locked, foreign or damaged file (pages catch these).
READ_ERRORS: tuple[type[BaseException], ...] = (StoreError, FileNotFoundError, OSError, duckdb.Error)


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
        """Bulk ``INSERT OR IGNORE`` of a DataFrame whose columns are a subset of ``table``'s
        (one of ``TABLES`` or ``EXTRA_TABLES``)."""
        if table not in TABLES + EXTRA_TABLES:
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
        """Insert the run record; if it exists (a resumed run) update only ``status``/``finished_at``.

        The first record of a run (settings, versions, hashes) is what produced its first rows,
        so a resume never rewrites it.
        """
        row = {k: (_json(v) if isinstance(v, (dict, list, tuple)) else v) for k, v in run.items()}
        exists = self.con.execute("SELECT 1 FROM runs WHERE run_id = ?", [row["run_id"]]).fetchall()
        if exists:
            upd = {k: v for k, v in row.items() if k in ("status", "finished_at")}
            if upd:
                sets = ", ".join(f'"{k}" = ?' for k in upd)
                self.con.execute(f"UPDATE runs SET {sets} WHERE run_id = ?", [*upd.values(), row["run_id"]])
        else:
            self.insert_df("runs", pd.DataFrame([row]))

    def add_run_usage(self, run_id: str, usage: dict[str, Any], price_in_per_mtok: float | None = None,
                      price_out_per_mtok: float | None = None, price_cached_in_per_mtok: float | None = None) -> None:
        """Add one chunk's API usage to the run's ``run_usage`` row (created on first use).

        Args:
            usage: counters as ``ApiBackend.take_usage()`` returns them (requests, cache_hits,
                retries, errors, prompt_tokens, completion_tokens, models).
            price_in_per_mtok / price_out_per_mtok: USD per million tokens; the cost is
                recomputed from the cumulative tokens (``api_common.cost_usd``: reasoning tokens
                are output, cached input at ``price_cached_in_per_mtok`` or else the input
                price), NULL when either price is None.
        """
        cols = ("requests", "cache_hits", "retries", "errors", "prompt_tokens", "completion_tokens",
                *USAGE_EXTRA_COUNTERS)  # api-fidelity: reasoning / cached / cache-write tokens
        old = self.con.execute(f"SELECT {', '.join(cols)}, models_returned FROM run_usage WHERE run_id = ?",
                               [run_id]).fetchall()
        tot = {c: int(usage.get(c) or 0) for c in cols}
        models = set(usage.get("models") or ())
        if old:
            for c, v in zip(cols, old[0][: len(cols)]):
                tot[c] += int(v or 0)
            models |= set(json.loads(old[0][-1] or "[]"))
        from sago_engine.backends.api_common import cost_usd

        price_cached = price_cached_in_per_mtok
        cost = cost_usd(tot["prompt_tokens"], tot["completion_tokens"], price_in_per_mtok, price_out_per_mtok,
                        tot["cached_tokens"], price_cached)
        import datetime as _dt

        now = _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None)
        names = ("run_id", *cols, "price_in_per_mtok", "price_out_per_mtok", "price_cached_in_per_mtok", "cost_usd",
                 "models_returned", "updated_at")
        self.con.execute(
            f"INSERT OR REPLACE INTO run_usage ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
            [run_id, *[tot[c] for c in cols], price_in_per_mtok, price_out_per_mtok, price_cached, cost,
             _json(sorted(models)), now])

    def set_meta(self, **values: Any) -> None:
        """Upsert ``meta`` key/value pairs (values stored as text)."""
        for k, v in values.items():
            self.con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [k, None if v is None else str(v)])

    def checkpoint(self) -> None:
        """Merge the write-ahead log into the database file (the file alone is then complete)."""
        self.con.execute("CHECKPOINT")

    # ------------------------------------------------------------------ reads
    def meta(self) -> dict[str, str]:
        """All ``meta`` key/value pairs (app, schema_version, published_at, progress…)."""
        return dict(self.con.execute("SELECT key, value FROM meta").fetchall())

    def run_usage(self) -> pd.DataFrame:
        """API usage per run (``run_usage``, see ``EXTRA_TABLES``) joined with the model name; empty for a store
        written before the table existed."""
        cols = ["run_id", "model", "backend", "requests", "cache_hits", "retries", "errors", "prompt_tokens",
                "completion_tokens", "price_in_per_mtok", "price_out_per_mtok", "cost_usd", "models_returned",
                "updated_at", *USAGE_EXTRA_COUNTERS, "price_cached_in_per_mtok"]
        if not self._has_table("run_usage"):
            return pd.DataFrame(columns=cols)
        return self.con.execute(
            "SELECT u.run_id, r.model, r.backend, u.* EXCLUDE (run_id) FROM run_usage u "
            "LEFT JOIN runs r USING (run_id) ORDER BY r.model").df().reindex(columns=cols)

    def api_responses(self, run_id: str | None = None) -> pd.DataFrame:
        """Per-response API facts (model string returned, tokens, cache hit, attempts, raw stop
        reason), optionally of one run; empty for a store without the table."""
        if not self._has_table("api_responses"):
            return pd.DataFrame(columns=["response_id", "run_id", "model_returned", "prompt_tokens",
                                         "completion_tokens", "cached", "attempts", "finish_raw"])
        if run_id is None:
            return self.con.execute("SELECT * FROM api_responses ORDER BY response_id").df()
        return self.con.execute("SELECT * FROM api_responses WHERE run_id = ? ORDER BY response_id", [run_id]).df()

    def _has_table(self, name: str) -> bool:
        return bool(self.con.execute("SELECT 1 FROM information_schema.tables WHERE table_name = ?", [name]).fetchall())

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

    # --- dashboard queries (summary) ---
    def _filter_where(self, f: "Filters | None", d: str = "d", v: str = "v", r: str = "r") -> tuple[str, list[Any]]:
        """Turn ``Filters`` into a parameterised SQL condition over deltas ``d``, variants ``v``, runs ``r``.

        Returns ``(sql, params)``; ``sql`` is ``"TRUE"`` when nothing is restricted. Values are
        always bound parameters (never formatted into the SQL text).
        """
        if f is None:
            return "TRUE", []
        cols = {"models": f"{r}.model", "datasets": f"{d}.dataset", "families": f"{v}.family",
                "subtypes": f"{v}.subtype", "strengths": f"{v}.strength", "positions": f"{v}.position"}
        parts, params = [], []
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

    def filter_options(self) -> dict[str, list]:
        """Distinct values for the sidebar filters: models, datasets, families, subtypes, strengths, positions.

        Models come from runs that have deltas; datasets from deltas; the variant fields from
        kept variants. Each list is sorted.
        """
        q = self.con.execute
        return {
            "models": [x[0] for x in q("SELECT DISTINCT model FROM runs WHERE run_id IN (SELECT DISTINCT run_id FROM deltas) ORDER BY 1").fetchall()],
            "datasets": [x[0] for x in q("SELECT DISTINCT dataset FROM deltas ORDER BY 1").fetchall()],
            "families": [x[0] for x in q("SELECT DISTINCT family FROM variants WHERE kept ORDER BY 1").fetchall()],
            "subtypes": [x[0] for x in q("SELECT DISTINCT subtype FROM variants WHERE kept ORDER BY 1").fetchall()],
            "strengths": [float(x[0]) for x in q("SELECT DISTINCT strength FROM variants WHERE kept ORDER BY 1").fetchall()],
            "positions": [x[0] for x in q("SELECT DISTINCT position FROM variants WHERE kept ORDER BY 1").fetchall()],
        }

    def prompt_scores(self, f: "Filters | None" = None) -> pd.DataFrame:
        """Per-prompt RMS s_X(i) = sqrt(mean_v Δ̃²) over kept, available variants matching ``f``, in SQL.

        SAGO (arXiv 2610.01428) §Notation. Aggregated inside DuckDB (never pulls raw deltas), so
        it stays fast on millions of delta rows. Columns: run_id, model, dataset, prompt_id, axis,
        s, n_variants. An axis a model cannot measure has no rows (shown as n/a, never 0).
        """
        where, params = self._filter_where(f)
        sql = f"""
            SELECT d.run_id, r.model, d.dataset, d.prompt_id, d.axis,
                   sqrt(avg(d.delta_norm * d.delta_norm)) AS s,
                   count(*)::INTEGER AS n_variants
            FROM deltas d JOIN variants v USING (variant_id) JOIN runs r USING (run_id)
            WHERE d.available AND d.delta_norm IS NOT NULL AND v.kept AND {where}
            GROUP BY d.run_id, r.model, d.dataset, d.prompt_id, d.axis
            ORDER BY r.model, d.dataset, d.prompt_id, d.axis
        """
        return self.con.execute(sql, params).df()

    def delta_matrix(self, f: "Filters | None" = None) -> pd.DataFrame:
        """The per-prompt delta matrix of the current filter (for CSV / Parquet export).

        One row per (run, prompt, variant, axis) of kept variants: model, dataset, prompt_id,
        variant_id, family, subtype, strength, position, axis, delta (signed, raw units),
        delta_norm (Δ̃), available, reason. Unavailable axes keep NULL deltas with their reason.
        """
        where, params = self._filter_where(f)
        sql = f"""
            SELECT r.model, d.run_id, d.dataset, d.prompt_id, d.variant_id,
                   v.family, v.subtype, v.strength, v.position,
                   d.axis, d.delta, d.delta_norm, d.available, d.reason
            FROM deltas d JOIN variants v USING (variant_id) JOIN runs r USING (run_id)
            WHERE v.kept AND {where}
            ORDER BY r.model, d.dataset, d.prompt_id, d.variant_id, d.axis
        """
        return self.con.execute(sql, params).df()

    def run_records(self) -> pd.DataFrame:
        """Provenance of every run: model, backend, fingerprint, seed, R_X, encoder, filter, versions, status.

        JSON columns are returned as JSON text (shown verbatim in the provenance expander).
        """
        return self.con.execute(
            """SELECT run_id, model, backend, model_source, weights_sha256, dtype, device, fingerprint, seed,
                      CAST(decoding AS VARCHAR) AS decoding, CAST(normalizers AS VARCHAR) AS normalizers,
                      CAST(encoder AS VARCHAR) AS encoder, CAST(semantic_filter AS VARCHAR) AS semantic_filter,
                      CAST(versions AS VARCHAR) AS versions, started_at, finished_at, status
               FROM runs ORDER BY model, started_at"""
        ).df()

    def axis_availability(self, f: "Filters | None" = None) -> pd.DataFrame:
        """Per model and axis: how many delta rows are available / unavailable, and why.

        Columns: model, axis, n_available, n_unavailable, available (True iff any row is
        available), reasons (distinct reasons of unavailable rows, "; "-joined, or NULL).
        """
        where, params = self._filter_where(f)
        sql = f"""
            SELECT r.model, d.axis,
                   count(*) FILTER (WHERE d.available AND d.delta_norm IS NOT NULL)::INTEGER AS n_available,
                   count(*) FILTER (WHERE NOT d.available OR d.delta_norm IS NULL)::INTEGER AS n_unavailable,
                   bool_or(d.available AND d.delta_norm IS NOT NULL) AS available,
                   string_agg(DISTINCT d.reason, '; ') FILTER (WHERE NOT d.available) AS reasons
            FROM deltas d JOIN variants v USING (variant_id) JOIN runs r USING (run_id)
            WHERE v.kept AND {where}
            GROUP BY r.model, d.axis ORDER BY r.model, d.axis
        """
        return self.con.execute(sql, params).df()

    # --- dashboard queries (detail) ---
    def _variant_cte(self) -> str:
        """SQL for the variants with their tone and target length ratio (from ``meta``, else derived).

        tone (social_register only): ``meta.tone``; else, for politeness, the sign of the
        strength (negative < 0, neutral 0, polite > 0). target_ratio: ``meta.target_ratio``, else the
        strength, for structural/length only (NULL otherwise).
        """
        return """
            SELECT variant_id, prompt_id, family, subtype, strength, position, kept,
                   CASE WHEN family = 'social_register' THEN coalesce(meta->>'tone', CASE WHEN subtype = 'politeness'
                       THEN CASE WHEN strength < 0 THEN 'negative' WHEN strength > 0 THEN 'polite' ELSE 'neutral' END
                   END) END AS tone,
                   CASE WHEN family = 'structural' AND subtype = 'length'
                        THEN coalesce(TRY_CAST(meta->>'target_ratio' AS DOUBLE), strength) END AS target_ratio
            FROM variants
        """

    def prompt_list(self, f: "Filters | None" = None) -> pd.DataFrame:
        """Prompts that have kept variants matching ``f``: dataset, prompt_id, text, n_variants.

        The dataset and (F, u, s, p) filters apply; with a model filter only prompts that one of
        those models answered (a base response exists) are listed. Sorted by dataset, prompt_id.
        """
        from dataclasses import replace

        models = None if f is None else f.models
        where, params = self._filter_where(None if f is None else replace(f, models=None), d="p")
        sql = f"""
            SELECT p.dataset, p.prompt_id, p.text, count(*)::INTEGER AS n_variants
            FROM prompts p JOIN variants v USING (prompt_id)
            WHERE v.kept AND {where}
        """
        if models is not None:
            sql += """ AND p.prompt_id IN (SELECT x.prompt_id FROM responses x JOIN runs r USING (run_id)
                                           WHERE x.variant_id IS NULL AND list_contains(?::VARCHAR[], r.model))"""
            params.append([str(m) for m in models])
        sql += " GROUP BY p.dataset, p.prompt_id, p.text ORDER BY p.dataset, p.prompt_id"
        return self.con.execute(sql, params).df()

    def prompt_detail(self, f: "Filters | None" = None, *, prompt_id: str) -> dict[str, pd.DataFrame]:
        """Everything the Prompts page shows for one prompt, restricted by ``f``.

        Returns a dict of DataFrames:
            ``prompt``: 0 or 1 row (prompt_id, dataset, source_id, text, reference as JSON text, category);
            ``variants``: its variants matching the (F, u, s, p) filters, kept or not — variant_id,
            family, subtype, strength, position, text, seed, generator, meta (JSON text),
            semantic_score, passes_filter, kept;
            ``responses``: model, run_id, variant_id (NULL = the base prompt), response, n_tokens,
            finish_reason, error — the base response and the responses to the listed variants,
            for the filtered models;
            ``deltas``: model, run_id, variant_id, axis, delta (signed Δ), delta_norm (Δ̃),
            available, reason, detector — per listed variant × axis (unavailable axes keep NULLs).
        Empty frames when the prompt is unknown or its dataset is filtered out.
        """
        from dataclasses import replace

        from sago_engine.filters import Filters

        q = self.con.execute
        fv = None if f is None else replace(f, models=None)
        vwhere, vparams = self._filter_where(fv, d="p")
        dwhere, dparams = self._filter_where(None if f is None else Filters(datasets=f.datasets), d="p")
        prompt = q(f"""SELECT prompt_id, dataset, source_id, text, CAST(reference AS VARCHAR) AS reference, category
                       FROM prompts p WHERE prompt_id = ? AND {dwhere}""", [prompt_id, *dparams]).df()
        variants = q(f"""
            SELECT v.variant_id, v.family, v.subtype, v.strength, v.position, v.text, v.seed, v.generator,
                   CAST(v.meta AS VARCHAR) AS meta, v.semantic_score, v.passes_filter, v.kept
            FROM variants v JOIN prompts p USING (prompt_id)
            WHERE v.prompt_id = ? AND {vwhere}
            ORDER BY v.family, v.subtype, v.strength, v.position, v.variant_id""", [prompt_id, *vparams]).df()
        if prompt.empty:
            variants = variants.iloc[0:0]
        vids = [str(x) for x in variants["variant_id"]]
        mwhere, mparams = ("TRUE", []) if f is None or f.models is None else \
            ("list_contains(?::VARCHAR[], r.model)", [[str(m) for m in f.models]])
        if prompt.empty:
            mwhere, mparams = "FALSE", []
        # the dataset condition is implied by the prompt; it lets DuckDB skip other datasets' row groups
        dataset = None if prompt.empty else str(prompt["dataset"].iloc[0])
        responses = q(f"""
            SELECT r.model, x.run_id, x.variant_id, x.response, x.n_tokens, x.finish_reason, x.error
            FROM responses x JOIN runs r USING (run_id)
            WHERE x.prompt_id = ? AND {mwhere} AND (x.variant_id IS NULL OR list_contains(?::VARCHAR[], x.variant_id))
            ORDER BY r.model, x.run_id, x.variant_id NULLS FIRST""", [prompt_id, *mparams, vids]).df()
        deltas = q(f"""
            SELECT r.model, d.run_id, d.variant_id, d.axis, d.delta, d.delta_norm, d.available, d.reason, d.detector
            FROM deltas d JOIN runs r USING (run_id)
            WHERE d.prompt_id = ? AND d.dataset = ? AND {mwhere} AND list_contains(?::VARCHAR[], d.variant_id)
            ORDER BY r.model, d.run_id, d.variant_id, d.axis""", [prompt_id, dataset, *mparams, vids]).df()
        return {"prompt": prompt.reset_index(drop=True), "variants": variants, "responses": responses,
                "deltas": deltas}

    def variant_audit(self, f: "Filters | None" = None, with_meta: bool = True, with_ids: bool = True) -> pd.DataFrame:
        """Every variant (kept or not) matching the dataset and (F, u, s, p) filters, for the audit.

        Columns: variant_id, dataset, prompt_id, family, subtype, strength, position,
        semantic_score (BERTScore-F1 vs the base prompt; NULL where not scored), passes_filter,
        kept, meta (JSON text). ``with_meta=False`` drops meta and ``with_ids=False`` drops
        variant_id, dataset and prompt_id: the audit charts need neither, and large stores
        load several times faster without them. Variants do not depend on the model, so the
        model filter does not apply. Rows come in store order.
        """
        from dataclasses import replace

        where, params = self._filter_where(None if f is None else replace(f, models=None), d="p")
        return self.con.execute(f"""
            SELECT {"v.variant_id, p.dataset, v.prompt_id, " if with_ids else ""}
                   v.family, v.subtype, v.strength, v.position,
                   v.semantic_score, v.passes_filter, v.kept{", CAST(v.meta AS VARCHAR) AS meta" if with_meta else ""}
            FROM variants v JOIN prompts p USING (prompt_id)
            WHERE {where}""", params).df()

    def rejected_variants(self, f: "Filters | None" = None, limit: int = 1000) -> pd.DataFrame:
        """Variants the semantic filter (or the rewrite checks) rejected, with the reason, for the audit.

        SAGO (arXiv 2610.01428) §Variants. The dataset and (F, u, s, p) filters apply (not the
        model filter: variants do not depend on the model). Columns: dataset, prompt_id,
        family, subtype, strength, position, generator, text, semantic_score, reason — reason is
        ``"degenerate rewrite: <why>"`` (an LLM rewrite that was empty, unchanged, repetitive,
        an error or moved the length the wrong way; ``meta.rewrite_issue``), ``"semantic score
        <s> ≤ filter threshold"`` (failed on its own), or ``"prompt-level rule: another <family>
        variant of this prompt failed"`` (passed, but SAGO keeps a prompt's family only if all
        its variants pass). At most ``limit`` rows, ordered by dataset, prompt, (F, u, s, p).
        """
        from dataclasses import replace

        where, params = self._filter_where(None if f is None else replace(f, models=None), d="p")
        return self.con.execute(f"""
            SELECT p.dataset, v.prompt_id, v.family, v.subtype, v.strength, v.position, v.generator, v.text,
                   v.semantic_score,
                   CASE WHEN v.meta->>'rewrite_issue' IS NOT NULL THEN 'degenerate rewrite: ' || (v.meta->>'rewrite_issue')
                        WHEN v.passes_filter IS NOT DISTINCT FROM FALSE AND v.semantic_score IS NOT NULL
                            THEN 'semantic score ' || printf('%.3f', v.semantic_score) || ' ≤ filter threshold'
                        WHEN v.passes_filter THEN 'prompt-level rule: another ' || v.family || ' variant of this prompt failed'
                        ELSE 'not kept' END AS reason
            FROM variants v JOIN prompts p USING (prompt_id)
            WHERE NOT v.kept AND {where}
            ORDER BY p.dataset, v.prompt_id, v.family, v.subtype, v.strength, v.position, v.variant_id
            LIMIT ?""", [*params, int(limit)]).df()

    def variant_records(self, ids: Sequence[str]) -> pd.DataFrame:
        """The stored rows of the variants ``ids`` (all ``variants`` columns; meta as JSON text).

        Lets a resumed run reuse LLM rewrites instead of regenerating them. Unknown ids are absent.
        """
        if not ids:
            return self.con.execute("SELECT * EXCLUDE (meta), CAST(meta AS VARCHAR) AS meta_json FROM variants LIMIT 0").df()
        self.con.register("_ids", pd.DataFrame({"id": list(ids)}))
        try:
            return self.con.execute("""SELECT v.* EXCLUDE (meta), CAST(v.meta AS VARCHAR) AS meta_json
                                       FROM variants v JOIN _ids ON v.variant_id = _ids.id
                                       ORDER BY v.variant_id""").df()
        finally:
            self.con.unregister("_ids")

    def _has_table(self, name: str) -> bool:
        return bool(self.con.execute(
            "SELECT 1 FROM information_schema.tables WHERE table_name = ?", [name]).fetchall())

    def templates(self, kind: str | None = None) -> pd.DataFrame:
        """Stored prompt templates (LLM judge / rewriter): template_id, kind, text.

        Empty (same columns) on stores written before the table existed.
        """
        if not self._has_table("templates"):
            return pd.DataFrame(columns=["template_id", "kind", "text"])
        q, params = "SELECT template_id, kind, text FROM templates", []
        if kind is not None:
            q += " WHERE kind = ?"
            params.append(kind)
        return self.con.execute(q + " ORDER BY kind, template_id", params).df()

    def mirroring_verdicts(self, run_ids: Iterable[str] | None = None) -> pd.DataFrame:
        """Judge and heuristic verdicts per (run, social-register variant, judged reply).

        Columns: model, run_id, prompt_id, variant_id, response_of ("variant" = the variant's
        reply, "base" = the base reply judged against the variant's register), judge_model,
        template_id, verdict (1/0/NULL = no usable answer), raw (the judge's text), error,
        heuristic_verdict (1/0), detector (the label Δ-MR of that variant used). Empty on stores
        without the table.
        """
        cols = ["model", "run_id", "prompt_id", "variant_id", "response_of", "judge_model", "template_id",
                "verdict", "raw", "error", "heuristic_verdict", "detector"]
        if not self._has_table("mirroring_verdicts"):
            return pd.DataFrame(columns=cols)
        q, params = f"""SELECT r.model, m.* EXCLUDE (run_id), m.run_id FROM mirroring_verdicts m
                        JOIN runs r USING (run_id) WHERE TRUE""", []
        if run_ids is not None:
            q += " AND list_contains(?::VARCHAR[], m.run_id)"
            params.append([str(x) for x in run_ids])
        df = self.con.execute(q + " ORDER BY r.model, m.run_id, m.prompt_id, m.variant_id, m.response_of", params).df()
        return df[cols]

    def semantic_thresholds(self) -> pd.DataFrame:
        """The semantic filter each run applied: model, run_id, threshold (encoder scale),
        threshold_config (the paper-scale value, 0.85), scale ("mapped" | "raw" | …), encoder (JSON text)."""
        return self.con.execute("""
            SELECT model, run_id,
                   TRY_CAST(semantic_filter->>'threshold' AS DOUBLE) AS threshold,
                   TRY_CAST(semantic_filter->>'threshold_config' AS DOUBLE) AS threshold_config,
                   semantic_filter->>'scale' AS scale,
                   CAST(semantic_filter->'encoder' AS VARCHAR) AS encoder
            FROM runs ORDER BY model, run_id""").df()

    def ablation_frame(self, f: "Filters | None" = None) -> dict[str, pd.DataFrame]:
        """Sufficient statistics of Δ̃ for the ablations, aggregated inside DuckDB in one pass over deltas.

        SAGO (arXiv 2610.01428) §Ablations. Kept variants and available axes only; ``f`` applies.
        Grouping runs on a small integer cell code (a dense rank of the cell's fields, not the
        strings; a dense code groups much faster than a hash), which keeps one pass over millions
        of delta rows cheap; only the small aggregates come back to pandas.

        Returns:
            ``cells``: one row per (model, axis, family, subtype, strength, position, tone,
            target_ratio) with ``n`` (number of Δ̃ values), ``sum_abs`` (Σ|Δ̃|), ``sum_sq``
            (Σ Δ̃²), ``sum`` (Σ Δ̃). Additive, so ``sago_engine.ablations`` pools any coarser
            grouping exactly. tone: ``meta.tone`` (else the sign of a politeness strength);
            target_ratio: ``meta.target_ratio`` (else the strength) for structural/length only.
            ``length``: one row per (model, axis, target_ratio) with ``n_prompts``, ``sum_s``
            (Σ_i s_i) and ``sum_s2`` (Σ_i s_i²), where s_i = sqrt(mean Δ̃²) over prompt i's
            length variants of that ratio — the per-prompt instability of the length factor
            (the same per-prompt RMS as the ``prompt_scores`` view).
        """
        where, params = self._filter_where(f)
        # runs are joined only when the model filter needs them; the model is attached after aggregation
        join_runs = "JOIN runs r USING (run_id)" if f is not None and f.models is not None else ""
        sql = f"""
            WITH vt AS ({self._variant_cte()}),
            cells AS (
                SELECT variant_id, family, subtype, strength, position, tone, target_ratio,
                       CASE WHEN target_ratio IS NOT NULL THEN prompt_id END AS pkey,
                       dense_rank() OVER (ORDER BY family, subtype, strength, position,
                                          tone NULLS FIRST, target_ratio NULLS FIRST)::INTEGER AS cell
                FROM vt WHERE kept
            ),
            keys AS (SELECT DISTINCT cell, family, subtype, strength, position, tone, target_ratio FROM cells),
            agg0 AS (
                SELECT d.run_id, d.axis, v.cell, v.pkey AS prompt_id,
                       count(*) AS n, sum(abs(d.delta_norm)) AS sum_abs,
                       sum(d.delta_norm * d.delta_norm) AS sum_sq, sum(d.delta_norm) AS sum
                FROM deltas d JOIN cells v USING (variant_id) {join_runs}
                WHERE d.available AND d.delta_norm IS NOT NULL AND {where}
                GROUP BY ALL
            ),
            agg AS (SELECT r.model, a.* EXCLUDE (run_id) FROM agg0 a JOIN runs r USING (run_id)),
            pooled AS (
                SELECT model, axis, cell, sum(n) AS n, sum(sum_abs) AS sum_abs, sum(sum_sq) AS sum_sq, sum(sum) AS sum
                FROM agg GROUP BY ALL
            ),
            per_prompt AS (
                SELECT a.model, a.axis, k.target_ratio, a.prompt_id, sqrt(sum(a.sum_sq) / sum(a.n)) AS s
                FROM agg a JOIN keys k USING (cell) WHERE a.prompt_id IS NOT NULL GROUP BY ALL
            )
            SELECT 'cell' AS kind, p.model, p.axis, k.family, k.subtype, k.strength, k.position, k.tone,
                   k.target_ratio, p.n::BIGINT AS n, p.sum_abs, p.sum_sq, p.sum,
                   NULL::BIGINT AS n_prompts, NULL::DOUBLE AS sum_s, NULL::DOUBLE AS sum_s2
            FROM pooled p JOIN keys k USING (cell)
            UNION ALL
            SELECT 'length', model, axis, NULL, NULL, NULL, NULL, NULL, target_ratio, NULL, NULL, NULL, NULL,
                   count(*)::BIGINT, sum(s), sum(s * s)
            FROM per_prompt GROUP BY model, axis, target_ratio
        """
        df = self.con.execute(sql, params).df()
        keys = ["model", "axis", "family", "subtype", "strength", "position", "tone", "target_ratio"]
        cells = df[df["kind"] == "cell"][keys + ["n", "sum_abs", "sum_sq", "sum"]]
        length = df[df["kind"] == "length"][["model", "axis", "target_ratio", "n_prompts", "sum_s", "sum_s2"]]
        return {"cells": cells.sort_values(keys, na_position="first").reset_index(drop=True),
                "length": length.sort_values(["model", "axis", "target_ratio"]).reset_index(drop=True)}

    # --- live probes ---
    def write_probe(self, run: dict[str, Any], frames: dict[str, pd.DataFrame]) -> None:
        """Record one live probe (the Live page's "save to store") as a run, in one transaction.

        Args:
            run: the run record (``runs`` columns; JSON fields as Python objects).
            frames: ``prompts``, ``variants``, ``responses``, ``deltas``, ``units`` frames with the
                columns of those tables (``variants.meta`` as a JSON string). Rows are keyed, so
                saving the same probe twice adds nothing.
        Raises:
            StoreError: the store is read-only.
        """
        if self.read_only:
            raise StoreError(f"{self.path} is open read-only; live probes go to a writable user store")
        with self.transaction():
            self.upsert_run(run)
            for table in ("prompts", "variants", "responses", "deltas", "units"):
                if table in frames and not frames[table].empty:
                    self.insert_df(table, frames[table])

    # --- statistics ---
    def cell_prompt_scores(self, f: "Filters | None" = None) -> pd.DataFrame:
        """Per-prompt RMS of Δ̃ within each variant cell (F, u, s, p), for the sample-size view.

        SAGO (arXiv 2610.01428) appendix D. Kept variants, available axes, ``f`` applies.
        Columns: model, axis, dataset, prompt_id, family, subtype, strength, position,
        s (sqrt(mean Δ̃²) over the prompt's variants in that cell), n_variants.
        """
        where, params = self._filter_where(f)
        sql = f"""
            SELECT r.model, d.axis, d.dataset, d.prompt_id, v.family, v.subtype, v.strength, v.position,
                   sqrt(avg(d.delta_norm * d.delta_norm)) AS s, count(*)::INTEGER AS n_variants
            FROM deltas d JOIN variants v USING (variant_id) JOIN runs r USING (run_id)
            WHERE d.available AND d.delta_norm IS NOT NULL AND v.kept AND {where}
            GROUP BY ALL ORDER BY ALL
        """
        return self.con.execute(sql, params).df()

    def delta_abs_quantiles(self, f: "Filters | None" = None, *, q: float = 0.95) -> pd.DataFrame:
        """Per axis over the store (kept, available, ``f``): n, q, q_abs = quantile_cont(|Δ|, q), max_abs."""
        where, params = self._filter_where(f)
        sql = f"""
            SELECT d.axis, count(*)::BIGINT AS n, ?::DOUBLE AS q,
                   quantile_cont(abs(d.delta), ?::DOUBLE) AS q_abs, max(abs(d.delta)) AS max_abs
            FROM deltas d JOIN variants v USING (variant_id) JOIN runs r USING (run_id)
            WHERE d.available AND d.delta IS NOT NULL AND v.kept AND {where}
            GROUP BY d.axis ORDER BY d.axis
        """
        return self.con.execute(sql, [float(q), float(q), *params]).df()

    def prompt_scores_rescaled(self, f: "Filters | None" = None, *, normalizers: tuple = ()) -> pd.DataFrame:
        """``prompt_scores`` recomputed from raw Δ under other R_X: s = sqrt(mean clip(Δ/R, −1, 1)²).

        ``normalizers``: ((axis, R), …) pairs (a tuple, so it can key a cache); axes not listed
        are left out. Same columns as ``prompt_scores``.
        """
        pairs = [(str(a), float(r)) for a, r in normalizers if float(r) > 0]
        if not pairs:
            return self.prompt_scores(f).iloc[0:0]
        where, params = self._filter_where(f)
        sql = f"""
            WITH rx AS (SELECT unnest(?::VARCHAR[]) AS axis, unnest(?::DOUBLE[]) AS rr)
            SELECT d.run_id, r.model, d.dataset, d.prompt_id, d.axis,
                   sqrt(avg(pow(least(greatest(d.delta / rx.rr, -1.0), 1.0), 2))) AS s,
                   count(*)::INTEGER AS n_variants
            FROM deltas d JOIN rx USING (axis) JOIN variants v USING (variant_id) JOIN runs r USING (run_id)
            WHERE d.available AND d.delta IS NOT NULL AND v.kept AND {where}
            GROUP BY d.run_id, r.model, d.dataset, d.prompt_id, d.axis
            ORDER BY r.model, d.dataset, d.prompt_id, d.axis
        """
        return self.con.execute(sql, [[a for a, _ in pairs], [r for _, r in pairs], *params]).df()

    def per_token_logprob_deltas(self, f: "Filters | None" = None) -> pd.DataFrame:
        """Δ of the length-normalized log-prob per kept variant: seq_logprob/n_tokens (variant − base).

        Columns: model, dataset, prompt_id, variant_id, delta_per_token (nats per token),
        delta_seq (the paper's Δ-Prob, not normalized). Responses without a log-prob or with 0
        tokens are left out (closed models: no rows, i.e. unavailable, never 0).
        """
        where, params = self._filter_where(f, d="p")
        sql = f"""
            SELECT r.model, p.dataset, x.prompt_id, x.variant_id,
                   x.seq_logprob / x.n_tokens - b.seq_logprob / b.n_tokens AS delta_per_token,
                   x.seq_logprob - b.seq_logprob AS delta_seq
            FROM responses x
            JOIN responses b ON b.run_id = x.run_id AND b.prompt_id = x.prompt_id AND b.variant_id IS NULL
            JOIN variants v ON v.variant_id = x.variant_id
            JOIN prompts p ON p.prompt_id = x.prompt_id
            JOIN runs r ON r.run_id = x.run_id
            WHERE v.kept AND x.seq_logprob IS NOT NULL AND b.seq_logprob IS NOT NULL
                  AND x.n_tokens > 0 AND b.n_tokens > 0 AND x.error IS NULL AND b.error IS NULL AND {where}
            ORDER BY r.model, p.dataset, x.prompt_id, x.variant_id
        """
        return self.con.execute(sql, params).df()

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
    if v not in READABLE_VERSIONS:
        raise StoreError(
            f"{path} has store schema version {v}; this sago reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))}. "
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
    if not read_only:
        # v1/v2 → v3 migration: purely additive (new tables and columns), in one transaction; the
        # steps are idempotent, so they also run on a v3 store that predates a later v3 addition
        con.execute("BEGIN TRANSACTION")
        for step in _MIGRATIONS:
            con.execute(step)
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])
        con.execute("COMMIT")
    return Store(path=path, con=con, read_only=read_only)


#: Columns ignored when comparing two stores for identity (wall-clock facts, not results).
VOLATILE_COLUMNS = {"runs": ("started_at", "finished_at", "status"), "units": ("finished_at",),
                    "responses": ("latency_s",)}


def merge_stores(out: str | Path, inputs: Sequence[str | Path], overwrite: bool = False) -> dict[str, int]:
    """Merge shard stores into one (``python -m precompute merge``).

    Rows are keyed deterministically, so ``INSERT OR IGNORE`` of every table of every input
    gives the same rows as one unsharded run. Run records keep the earliest start, the latest
    finish, and status ``complete`` when the merged units cover every prompt (else ``partial``).

    Args:
        out: the merged store to create.
        inputs: shard stores (each must be a sago store of this schema version).
        overwrite: replace ``out`` if it exists (otherwise refuse: nothing is overwritten unasked).
    Returns:
        Row counts per table of the merged store.
    Raises:
        FileExistsError: ``out`` exists and ``overwrite`` is False.
        StoreError / FileNotFoundError: an input is not a readable sago store.
    """
    out = Path(out)
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} exists; pass --force to overwrite it")
    for p in inputs:  # validate every input before writing anything
        open_store(p, read_only=True).close()
    tmp = out.with_name(f".{out.name}.merging")
    tmp.unlink(missing_ok=True)
    with open_store(tmp, read_only=False, create=True) as st:
        for i, p in enumerate(inputs):
            st.con.execute(f"ATTACH '{str(Path(p)).replace(chr(39), chr(39) * 2)}' AS src{i} (READ_ONLY)")
            with st.transaction():
                src_tables = {r[0] for r in st.con.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_catalog = ?", [f"src{i}"]).fetchall()}
                for t in TABLES + tuple(t for t in EXTRA_TABLES if t in src_tables):
                    if t in ("runs", "run_usage"):
                        continue
                    st.con.execute(f"INSERT OR IGNORE INTO {t} BY NAME SELECT * FROM src{i}.{t}")
                if "run_usage" in src_tables:  # shards of one API run: usage adds up
                    st.con.execute(f"""
                        INSERT INTO run_usage BY NAME SELECT * FROM src{i}.run_usage s
                        ON CONFLICT (run_id) DO UPDATE SET
                            requests = run_usage.requests + excluded.requests,
                            cache_hits = run_usage.cache_hits + excluded.cache_hits,
                            retries = run_usage.retries + excluded.retries,
                            errors = run_usage.errors + excluded.errors,
                            prompt_tokens = run_usage.prompt_tokens + excluded.prompt_tokens,
                            completion_tokens = run_usage.completion_tokens + excluded.completion_tokens,
                            reasoning_tokens = run_usage.reasoning_tokens + excluded.reasoning_tokens,
                            cached_tokens = run_usage.cached_tokens + excluded.cached_tokens,
                            cache_write_tokens = run_usage.cache_write_tokens + excluded.cache_write_tokens,
                            cost_usd = run_usage.cost_usd + excluded.cost_usd,
                            models_returned = CAST(list_sort(list_distinct(list_concat(
                                CAST(run_usage.models_returned AS VARCHAR[]),
                                CAST(excluded.models_returned AS VARCHAR[])))) AS JSON),
                            updated_at = greatest(run_usage.updated_at, excluded.updated_at)""")
                st.con.execute(f"""
                    INSERT INTO runs BY NAME SELECT * FROM src{i}.runs s
                    ON CONFLICT (run_id) DO UPDATE SET
                        started_at = least(runs.started_at, excluded.started_at),
                        finished_at = greatest(runs.finished_at, excluded.finished_at)""")
            st.con.execute(f"DETACH src{i}")
        st.con.execute("""UPDATE runs SET status = CASE
            WHEN (SELECT count(*) FROM units u WHERE u.run_id = runs.run_id) = (SELECT count(*) FROM prompts)
            THEN 'complete' ELSE 'partial' END""")
        counts = st.counts()
        st.checkpoint()
    os.replace(tmp, out)
    return counts


def table_fingerprints(path: str | Path) -> dict[str, str]:
    """sha256 per table over all rows (sorted, volatile columns dropped): equal ⇔ identical results."""
    import hashlib

    out = {}
    with open_store(path, read_only=True) as st:
        for t in TABLES + tuple(t for t in EXTRA_TABLES if st._has_table(t)):
            cols = [r[0] for r in st.con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
                [t]).fetchall() if r[0] not in VOLATILE_COLUMNS.get(t, ())]
            sel = ", ".join(f'"{c}"' for c in cols)
            df = st.con.execute(f"SELECT {sel} FROM {t} ORDER BY ALL").df()
            out[t] = hashlib.sha256(pd.util.hash_pandas_object(df.astype(str), index=False).values.tobytes()).hexdigest()
            out[t + ".rows"] = str(len(df))
    return out


# =============================================================================================
# BEGIN api-fidelity block (issue #13): billed token classes, base-prompt repeats, noise floor,
# reply health. Every store addition of that issue is here, so the store package split can move
# it as one piece: DDL appended to ``_DDL`` (fresh stores) and one idempotent ``_MIGRATIONS``
# step (older stores, run on every writable open), new tables appended to ``EXTRA_TABLES``,
# and the read/write methods bound onto ``Store`` at the end.
#
# ``run_usage`` / ``api_responses`` gain the billed token classes the providers report apart:
# reasoning (thinking) tokens — inside completion_tokens —, cached input tokens and cache
# writes — inside prompt_tokens —, and the cached-input price. ``base_repeats``: the k ≥ 1
# repeats of each base prompt (the first asking stays the base row of ``responses``, so its
# response_id never changes); ``noise_floor``: each axis's Δ between the base reply and repeat
# k, the provider's own noise (rows as ``deltas``, keyed by repeat instead of variant).
_FIDELITY_DDL = """
ALTER TABLE run_usage ADD COLUMN IF NOT EXISTS reasoning_tokens BIGINT DEFAULT 0;
ALTER TABLE run_usage ADD COLUMN IF NOT EXISTS cached_tokens BIGINT DEFAULT 0;
ALTER TABLE run_usage ADD COLUMN IF NOT EXISTS cache_write_tokens BIGINT DEFAULT 0;
ALTER TABLE run_usage ADD COLUMN IF NOT EXISTS price_cached_in_per_mtok DOUBLE;
ALTER TABLE api_responses ADD COLUMN IF NOT EXISTS reasoning_tokens INTEGER;
ALTER TABLE api_responses ADD COLUMN IF NOT EXISTS cached_tokens INTEGER;
CREATE TABLE IF NOT EXISTS base_repeats (
    response_id VARCHAR PRIMARY KEY,
    run_id VARCHAR NOT NULL,
    prompt_id VARCHAR NOT NULL,
    repeat INTEGER NOT NULL,
    response VARCHAR NOT NULL,
    n_tokens INTEGER,
    seq_logprob DOUBLE,
    mean_entropy DOUBLE,
    finish_reason VARCHAR,
    latency_s DOUBLE,
    error VARCHAR
);
CREATE TABLE IF NOT EXISTS noise_floor (
    run_id VARCHAR NOT NULL,
    dataset VARCHAR NOT NULL,
    prompt_id VARCHAR NOT NULL,
    repeat INTEGER NOT NULL,
    axis VARCHAR NOT NULL,
    delta DOUBLE,
    delta_norm DOUBLE,
    available BOOLEAN NOT NULL,
    reason VARCHAR,
    PRIMARY KEY (run_id, prompt_id, repeat, axis)
);
"""
_DDL += _FIDELITY_DDL
_MIGRATIONS += (_FIDELITY_DDL,)
EXTRA_TABLES += ("base_repeats", "noise_floor")
#: Extra ``run_usage`` counters (summed over chunks and shards like the others).
USAGE_EXTRA_COUNTERS = ("reasoning_tokens", "cached_tokens", "cache_write_tokens")


def _has_column(st: Store, table: str, column: str) -> bool:
    return bool(st.con.execute("SELECT 1 FROM information_schema.columns WHERE table_name = ? AND column_name = ?",
                               [table, column]).fetchall())


def _reply_health(self: Store) -> pd.DataFrame:
    """Per run: how many stored replies are not answers.

    Returns:
        DataFrame, one row per run: run_id, model, backend, replies (base + variant rows of
        ``responses``, plus base repeats), errors (``error`` set), empty (no error, blank
        text, not a refusal), budget_spent (empty with finish "length": the token budget went to hidden
        reasoning), refused (no error but finish "error": content filter / safety / refusal),
        judge_verdicts and judge_unparsed (mirroring-judge answers with no unambiguous YES/NO,
        backend errors excluded; 0 without a judge).
    """
    rep = ("UNION ALL SELECT run_id, response, finish_reason, error FROM base_repeats"
           if self._has_table("base_repeats") else "")
    df = self.con.execute(f"""
        WITH r AS (SELECT run_id, response, finish_reason, error FROM responses {rep})
        SELECT r.run_id, any_value(ru.model) AS model, any_value(ru.backend) AS backend, count(*) AS replies,
               count(*) FILTER (WHERE r.error IS NOT NULL) AS errors,
               count(*) FILTER (WHERE r.error IS NULL AND trim(r.response) = ''
                                       AND coalesce(r.finish_reason, '') <> 'error') AS empty,
               count(*) FILTER (WHERE r.error IS NULL AND trim(r.response) = '' AND r.finish_reason = 'length')
                   AS budget_spent,
               count(*) FILTER (WHERE r.error IS NULL AND r.finish_reason = 'error') AS refused
        FROM r LEFT JOIN runs ru USING (run_id) GROUP BY r.run_id ORDER BY model""").df()
    if self._has_table("mirroring_verdicts"):
        j = self.con.execute("""SELECT run_id, count(*) AS judge_verdicts,
                   count(*) FILTER (WHERE verdict IS NULL AND error IS NULL) AS judge_unparsed
                FROM mirroring_verdicts GROUP BY run_id""").df()
        df = df.merge(j, on="run_id", how="left")
    for c in ("judge_verdicts", "judge_unparsed"):
        df[c] = df[c].fillna(0).astype(int) if c in df else 0
    return df


def _noise_floor(self: Store, run_ids: Iterable[str] | None = None) -> pd.DataFrame:
    """``noise_floor`` rows joined with the run's model (empty, same columns, without the table).

    Columns: run_id, model, dataset, prompt_id, repeat, axis, delta, delta_norm, available, reason.
    """
    cols = ["run_id", "model", "dataset", "prompt_id", "repeat", "axis", "delta", "delta_norm", "available", "reason"]
    if not self._has_table("noise_floor"):
        return pd.DataFrame(columns=cols)
    where, params = "", []
    if run_ids is not None:
        ids = list(run_ids)
        where, params = f"WHERE n.run_id IN ({', '.join('?' * len(ids)) or 'NULL'})", ids
    return self.con.execute(f"SELECT n.run_id, r.model, n.dataset, n.prompt_id, n.repeat, n.axis, n.delta, "
                            f"n.delta_norm, n.available, n.reason FROM noise_floor n LEFT JOIN runs r USING (run_id) "
                            f"{where} ORDER BY ALL", params).df()[cols]


def _base_repeats(self: Store, run_id: str | None = None) -> pd.DataFrame:
    """Stored base-prompt repeats (k ≥ 1), optionally of one run; empty without the table."""
    if not self._has_table("base_repeats"):
        return pd.DataFrame(columns=["response_id", "run_id", "prompt_id", "repeat", "response", "n_tokens",
                                     "seq_logprob", "mean_entropy", "finish_reason", "latency_s", "error"])
    if run_id is None:
        return self.con.execute("SELECT * FROM base_repeats ORDER BY run_id, prompt_id, repeat").df()
    return self.con.execute("SELECT * FROM base_repeats WHERE run_id = ? ORDER BY prompt_id, repeat", [run_id]).df()


Store.reply_health = _reply_health
Store.noise_floor = _noise_floor
Store.base_repeats = _base_repeats
# END api-fidelity block
# =============================================================================================
