"""The DuckDB store of sago: schema, writes, page queries, shard merge. All SQL of sago lives in this package.

Modules (docs/ARCHITECTURE.md has the full map):

* ``schema``    — tables, schema version, additive migrations, validity checks.
* ``trust``     — a store file is untrusted: connections without file access, catalog and column checks.
* ``suffstats`` — the sufficient-statistics tables (n, ΣΔ̃, ΣΔ̃² per group) and their upkeep.
* ``layout``    — the published file's physical order (per-prompt tables sorted by prompt) and
  the write-ahead log beside a store that is replaced.
* ``writes``    — transactions, keyed bulk inserts, run records, API usage, meta.
* ``browse``    — reads of stored rows and the Prompts / Variants pages' lists and details.
* ``rescoring`` — a run's record and replies for a rescore, and deltas rows replaced in place.
* ``correctness`` — the replies a correctness scorer reads, its verdicts, ``prompts.meta`` filled in.
* ``scores``    — score queries of the summary pages (statistics → ``sago_engine.scoring.scores``).
* ``where``     — ``Filters`` → a parameterised SQL condition.
* ``facade``    — ``Store`` (composed of the above) and ``open_store``.
* ``merge``     — shard merge (worst status, usage once per shard) and table fingerprints.
* ``sessions`` — opens of one store file inside one process take turns (a Live save and a page read).
* ``runlabels`` — a label repeated by two runs shown as one label per run (labels are not keys).
* ``labels``    — the sidecar DuckDB of hand labels of judge calls (never in the store).
* ``reply_cache`` — the model-reply cache's sqlite table (a ``backends.caching.ReplyCache``).
* ``errors``    — ``StoreError``.
"""

from sago_engine.store.facade import Store, open_store  # noqa: F401
from sago_engine.store.merge import VOLATILE_COLUMNS, merge_stores, table_fingerprints  # noqa: F401
from sago_engine.store.schema import (  # noqa: F401
    _DDL,
    _MIGRATIONS,
    APP_ID,
    EXTRA_TABLES,
    READ_ERRORS,
    READABLE_VERSIONS,
    SCHEMA_VERSION,
    TABLES,
    VERSIONS,
    StoreError,
)
from sago_engine.store.suffstats import STATS_TABLES  # noqa: F401
