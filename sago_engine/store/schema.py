"""Schema of a sago store: tables, schema version, additive migrations, validity checks.

Raw facts are kept (prompts, variants, responses, signed deltas) so that scores can be
recomputed without re-running models. Keys are deterministic hashes, and writes use
``INSERT OR IGNORE``, so a re-run never duplicates a row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb

from sago_engine.store import layout, suffstats, trust
from sago_engine.store.errors import StoreError

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
"""

TABLES = ("runs", "prompts", "variants", "responses", "deltas", "units")
#: The key columns of each table of ``TABLES`` (its primary key).
KEYS = {"runs": ("run_id",), "prompts": ("prompt_id",), "variants": ("variant_id",), "responses": ("response_id",),
        "deltas": ("run_id", "variant_id", "axis"), "units": ("run_id", "prompt_id")}
#: Tables added in schema version 2 (LLM judge and rewriter: ``mirroring_verdicts``,
#: ``templates``; API backends: ``run_usage`` — one row per API run, cumulative over resumes:
#: requests incl. retries, cache hits, retries, prompts that ended in an error, tokens of fresh
#: requests, prices and cost in USD (NULL when prices are not configured), the distinct model
#: strings the API returned; ``api_responses`` — per response: the model string the API returned,
#: token counts, cache hit, attempts, raw stop reason). A version-1 store lacks them: read-only
#: reads return empty frames, and a writable open migrates it to version 2 (creates them).
_EXTRA_DDL = _DDL[_DDL.index("CREATE TABLE IF NOT EXISTS mirroring_verdicts"):]

# ====================================================================== schema v3 additions
#: Schema version 3 (measurement fidelity): ``responses.token_ids`` — the generated token ids
#: exactly as the model emitted them (special tokens included), so a teacher-forced pass can
#: re-derive ``seq_logprob``/``mean_entropy``; ``responses.response`` is the reply exactly as
#: decoded (no stripping). Older stores read NULL there.
#: Schema version 3 (dashboard speed): the sufficient-statistics tables ``delta_stats``,
#: ``prompt_stats``, ``cell_stats`` and ``length_stats`` (``suffstats.STATS_DDL``: n, ΣΔ̃, ΣΔ̃², Σ|Δ̃| per group),
#: written with the deltas and rebuilt here from existing deltas; the SQL views of schema 1/2
#: (``prompt_scores``, ``sgs_dataset``, ``sgs_total``) are dropped: the score formula lives in
#: ``sago_engine.scoring.scores`` only (``Store.view`` computes them from the statistics).
_TOKEN_IDS_DDL = "ALTER TABLE responses ADD COLUMN IF NOT EXISTS token_ids INTEGER[]"
_DROP_VIEWS = "DROP VIEW IF EXISTS sgs_total; DROP VIEW IF EXISTS sgs_dataset; DROP VIEW IF EXISTS prompt_scores"

# Schema version 3 (API fidelity): ``run_usage`` / ``api_responses`` gain the billed
# token classes the providers report apart — reasoning (thinking) tokens, inside completion_tokens;
# cached input tokens and cache writes, inside prompt_tokens — and the cached-input price.
# ``base_repeats``: the k ≥ 1 repeats of each base prompt (the first asking stays the base row of
# ``responses``, so its response_id never changes); ``noise_floor``: each axis's Δ between the
# base reply and repeat k, the provider's own noise (rows as ``deltas``, keyed by repeat).
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
# ================================================================== end schema v3 additions

# ====================================================================== schema v4
#: Schema version 4 (one change for the whole round; every addition is additive and idempotent):
#:
#: - ``runs.origin`` (JSON): where a run's rows come from when sago did not measure them itself —
#:   NULL for sago's own runs; for an external (imported) run ``{"kind": "imported", "source": ...,
#:   "sha256": ..., "definitions": {...}}`` (the file, its digest and the axis definitions its values
#:   follow).
#: - ``variants.skip_reason``: why a variant is not run (``kept`` false): the semantic filter, or a
#:   no-op (the variant text equals its base prompt); NULL for a kept variant.
#: - ``responses.request``: the model input exactly as sent (the chat template rendered, or the API
#:   messages as JSON); NULL where not recorded.
#: - ``responses.raw_response``: the reply as received when sago stores a cleaned ``response``
#:   (e.g. an imported reply with a leaked prompt tail); NULL when ``response`` is the raw reply.
#: - ``run_usage.invalid_logprobs``: replies whose server log-probs were unusable (sentinels,
#:   positive or non-finite values), summed like the other counters.
#: - ``imported_rows``: every row of an imported external results file exactly as read (each
#:   column as text, JSON object ``columns``), keyed by (run, source file, data row index), with the
#:   prompt and variant it was stored as — so no column of the source is lost
#:   (``sago_engine.external.importer``).
_IMPORTED_ROWS_DDL = """
CREATE TABLE IF NOT EXISTS imported_rows (
    run_id VARCHAR NOT NULL,
    source VARCHAR NOT NULL,
    row_index INTEGER NOT NULL,
    prompt_id VARCHAR,
    variant_id VARCHAR,
    columns JSON NOT NULL,
    PRIMARY KEY (run_id, source, row_index)
);
"""
_V4_DDL = """
ALTER TABLE runs ADD COLUMN IF NOT EXISTS origin JSON;
ALTER TABLE variants ADD COLUMN IF NOT EXISTS skip_reason VARCHAR;
ALTER TABLE responses ADD COLUMN IF NOT EXISTS request VARCHAR;
ALTER TABLE responses ADD COLUMN IF NOT EXISTS raw_response VARCHAR;
ALTER TABLE run_usage ADD COLUMN IF NOT EXISTS invalid_logprobs BIGINT DEFAULT 0;
""" + _IMPORTED_ROWS_DDL
# ================================================================== end schema v4

# ====================================================================== schema v5
#: Schema version 5 (one change for the whole round; every addition is additive and idempotent):
#:
#: - ``responses.flags`` / ``base_repeats.flags`` (VARCHAR[]): what sago noticed about a reply's
#:   text at the boundary or afterwards — e.g. ``surrogates_replaced``, ``nul_removed``,
#:   ``invalid_utf8``, ``cut_huge`` (text normalised on arrival), ``hit_cap`` (the reply stopped at
#:   the token cap), ``degenerate:loop`` / ``degenerate:echo`` / ``degenerate:salad``; NULL when
#:   nothing was noticed or the store predates it. ``mirroring_verdicts.flags``: the same boundary
#:   flags of the judge's reply (``replytext``).
#: - ``correctness``: the verdict of a named, versioned correctness scorer on one stored reply
#:   (base, variant or base repeat) against its prompt's reference: ``correct``, ``wrong``,
#:   ``undecided`` or ``unavailable`` (with ``reason``), a score in [0, 1] where the scorer has one,
#:   and a judge's raw answer where the scorer is an LLM judge (``sago_engine.correctness``).
#: - ``prompts.meta`` (JSON): the dataset row's ``meta`` object as read (e.g. TruthfulQA's
#:   ``incorrect_answers``, which its correctness scorer contrasts with the reference); NULL when
#:   the row has none or the store predates it (``rescore --correctness`` fills it from the
#:   dataset file when the prompt's text there is the same).
#: - ``samples``: a sampled run's replies beyond the first (``[[models]] samples`` = k > 1 with
#:   temperature > 0): sample s (1..k−1) of the base reply (``variant_id`` NULL) or of a variant's,
#:   with the seed it was drawn with (``seeds.sample_seed``) and the columns its ``responses`` row
#:   would have; sample 0 is the ``responses`` row. Key ``sago_engine.measure.samples.sample_response_id``.
#: - ``sample_deltas``: in a sampled run, each sample's Δ per axis against the base prompt's sample 0
#:   (base samples 1..k−1: the dice alone, ``variant_id`` NULL; variant samples 0..k−1: rephrasing +
#:   dice), rows as ``deltas`` keyed by the sample's ``response_id`` (``measure.sample_deltas``).
_CORRECTNESS_DDL = """
CREATE TABLE IF NOT EXISTS correctness (
    run_id VARCHAR NOT NULL,
    response_id VARCHAR NOT NULL,
    prompt_id VARCHAR NOT NULL,
    variant_id VARCHAR,
    repeat INTEGER,
    scorer VARCHAR NOT NULL,
    scorer_version VARCHAR NOT NULL,
    verdict VARCHAR NOT NULL,
    score DOUBLE,
    reason VARCHAR,
    raw VARCHAR,
    PRIMARY KEY (run_id, response_id, scorer)
);
"""
_SAMPLES_DDL = """
CREATE TABLE IF NOT EXISTS samples (
    response_id VARCHAR PRIMARY KEY,
    run_id VARCHAR NOT NULL,
    prompt_id VARCHAR NOT NULL,
    variant_id VARCHAR,
    sample INTEGER NOT NULL,
    seed BIGINT NOT NULL,
    response VARCHAR NOT NULL,
    n_tokens INTEGER,
    token_ids INTEGER[],
    seq_logprob DOUBLE,
    mean_entropy DOUBLE,
    finish_reason VARCHAR,
    latency_s DOUBLE,
    error VARCHAR,
    flags VARCHAR[]
);
"""
_SAMPLE_DELTAS_DDL = """
CREATE TABLE IF NOT EXISTS sample_deltas (
    run_id VARCHAR NOT NULL,
    dataset VARCHAR NOT NULL,
    prompt_id VARCHAR NOT NULL,
    variant_id VARCHAR,
    sample INTEGER NOT NULL,
    response_id VARCHAR NOT NULL,
    axis VARCHAR NOT NULL,
    delta DOUBLE,
    delta_norm DOUBLE,
    available BOOLEAN NOT NULL,
    reason VARCHAR,
    PRIMARY KEY (run_id, response_id, axis)
);
"""
_V5_DDL = """
ALTER TABLE responses ADD COLUMN IF NOT EXISTS flags VARCHAR[];
ALTER TABLE base_repeats ADD COLUMN IF NOT EXISTS flags VARCHAR[];
ALTER TABLE prompts ADD COLUMN IF NOT EXISTS meta JSON;
ALTER TABLE mirroring_verdicts ADD COLUMN IF NOT EXISTS flags VARCHAR[];
""" + _CORRECTNESS_DDL + _SAMPLES_DDL + _SAMPLE_DELTAS_DDL
# ================================================================== end schema v5

# ====================================================================== the versions, declared once
#: A migration step: SQL text, or a function of the (writable) connection.
Step = str | Callable[[duckdb.DuckDBPyConnection], None]


@dataclass(frozen=True)
class SchemaVersion:
    """One store schema version: what it added, the additive idempotent steps that bring an older
    store to it, and the tables it added (beyond the core ``TABLES``)."""

    version: int
    what: str
    steps: tuple[Step, ...]
    tables: tuple[str, ...] = ()


#: Every schema version after 1, oldest first: the one list ``migrate_if_needed`` walks, from which
#: ``SCHEMA_VERSION``, ``EXTRA_TABLES`` and ``READABLE_VERSIONS`` follow. A new version is one more
#: record at the end (its DDL in its own block above); a version never changes once released.
VERSIONS: tuple[SchemaVersion, ...] = (
    SchemaVersion(2, "LLM judge and rewriter, API usage", (_EXTRA_DDL,),
                  ("mirroring_verdicts", "templates", "run_usage", "api_responses")),
    SchemaVersion(3, "token ids, API fidelity (billed token classes, base repeats, noise floor), the statistics "
                  "tables instead of the score views",
                  (_TOKEN_IDS_DDL, _DROP_VIEWS, _FIDELITY_DDL, suffstats.STATS_DDL, suffstats.materialise),
                  ("base_repeats", "noise_floor")),
    SchemaVersion(4, "imported runs: runs.origin, skip reasons, requests and raw replies, imported rows",
                  (_V4_DDL,), ("imported_rows",)),
    SchemaVersion(5, "reply flags, correctness verdicts, prompt meta, sampled replies and their deltas",
                  (_V5_DDL,), ("correctness", "samples", "sample_deltas")),
)
SCHEMA_VERSION = VERSIONS[-1].version
#: Tables added after version 1, in the order their versions added them.
EXTRA_TABLES: tuple[str, ...] = tuple(t for v in VERSIONS for t in v.tables)
#: Schema versions this sago opens (older ones are migrated on a writable open).
READABLE_VERSIONS: tuple[int, ...] = (1, *(v.version for v in VERSIONS))
#: Every migration step in order (``VERSIONS`` flattened).
_MIGRATIONS: tuple[Step, ...] = tuple(step for v in VERSIONS for step in v.steps)
#: Extra ``run_usage`` counters (summed over chunks and shards like the others): v3's billed token
#: classes and v4's ``invalid_logprobs``.
USAGE_EXTRA_COUNTERS = ("reasoning_tokens", "cached_tokens", "cache_write_tokens", "invalid_logprobs")
#: Every table of a fresh store (the statistics tables last).
CREATE_SQL = _DDL + _FIDELITY_DDL + _V4_DDL + _V5_DDL + suffstats.STATS_DDL


#: What reading a store can raise for a missing, locked, foreign or damaged file (pages catch these).
READ_ERRORS: tuple[type[BaseException], ...] = (StoreError, FileNotFoundError, OSError, duckdb.Error)


def has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether the open store has a base table ``name`` (schema ``main``; attached databases do not count)."""
    return name in trust.base_tables(con)


#: Why a store with a view, macro or type is refused (the end of ``check``'s message).
_CATALOG_WHY = ("a sago store holds base tables only; a view, macro or type in a store file could read files of "
                "this server or change what sago's queries return")


def check(con: duckdb.DuckDBPyConnection, path: Path) -> dict[str, tuple[str, ...]]:
    """Raise StoreError unless ``con`` is a sago store of a readable schema version whose tables sago can trust.

    Refused (``trust``): any view, macro or user type (checked first, before a table is read:
    ``"<path> is not a sago store (view `prompts`): …"``; only a schema-1/2 store may keep its
    ``LEGACY_VIEWS``); a missing ``meta`` or core table
    (``TABLES``); a sago table that lacks a column of its schema, has one of another type, a
    generated column or a CHECK constraint (``"… (table `prompts` has no column `text`)"``).

    Returns:
        The known columns the store holds, per table (``trust.present_columns``): the only
        columns sago selects, so columns a file adds never reach a page.
    """
    try:
        return _check_inner(con, path)
    except duckdb.Error as e:
        raise StoreError(f"{path} is not a sago store: {e}") from e


#: The SQL views of schema versions 1 and 2: tolerated in such a store only. sago never selects
#: from them (a read-only open sums its scores from ``deltas``) and a writable open drops them
#: before anything else (``_MIGRATIONS``).
LEGACY_VIEWS = ("prompt_scores", "sgs_dataset", "sgs_total")


def _check_inner(con: duckdb.DuckDBPyConnection, path: Path) -> dict[str, tuple[str, ...]]:
    objects = trust.catalog_objects(con)
    problem = trust.catalog_problem(objects, allowed_views=LEGACY_VIEWS)
    if problem:
        raise StoreError(f"{path} is not a sago store ({problem}): {_CATALOG_WHY}")
    tables = trust.base_tables(con)
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
    problem = trust.catalog_problem(objects) if v >= 3 else None
    if problem:
        raise StoreError(f"{path} is not a sago store ({problem}): {_CATALOG_WHY}")
    ref = trust.reference(CREATE_SQL, "\n".join(step for step in _MIGRATIONS if isinstance(step, str)))
    cols = trust.store_columns(con)
    problem = trust.table_problem(con, ref, TABLES, cols)
    if problem:
        raise StoreError(f"{path} is not a sago store ({problem})")
    return trust.present_columns(cols, ref)


def create(con: duckdb.DuckDBPyConnection) -> None:
    """Create every table of this schema version in an empty database and record the version and the
    layout rules (``layout.LAYOUT_VERSION``: an empty store is in prompt order)."""
    con.execute(CREATE_SQL)
    con.execute("INSERT INTO meta VALUES ('app', ?), ('schema_version', ?), ('layout_version', ?)",
                [APP_ID, str(SCHEMA_VERSION), str(layout.LAYOUT_VERSION)])


def migrate_if_needed(con: duckdb.DuckDBPyConnection) -> bool:
    """On a writable connection: run every step of ``VERSIONS`` in order (one transaction) when the store is older than
    ``SCHEMA_VERSION`` or lacks a statistics table or one of ``EXTRA_TABLES`` (every step is idempotent).
    Returns True if it migrated."""
    version = int(dict(con.execute("SELECT key, value FROM meta").fetchall())["schema_version"])
    if version >= SCHEMA_VERSION and suffstats.has_stats(con) and all(has_table(con, t) for t in EXTRA_TABLES):
        return False
    con.execute("BEGIN TRANSACTION")
    try:
        for v in VERSIONS:  # every step of every version: each is idempotent, and a current-version store
            for step in v.steps:  # may still lack a table an older sago dropped or never wrote
                step(con) if callable(step) else con.execute(step)
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
    return True
