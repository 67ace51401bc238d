"""Physical layout of a store: the per-prompt tables written in prompt order when a store is published.

The Prompts page reads one prompt's rows of ``variants``, ``responses`` and ``deltas`` (equality
on ``prompt_id``). DuckDB stores a table in row groups of 122,880 rows and keeps the min/max of
every column per row group (zone maps); a scan with ``prompt_id = ?`` skips every row group whose
range excludes the value. The runner appends rows model by model and chunk by chunk, so one
prompt's rows lie in every row group of its dataset and the lookup reads them all. Written sorted
by prompt (``CLUSTER_ORDER``), the same rows lie in one or two row groups, and the lookup reads
only those (at the paper's scale: 1 of 33 row groups of ``deltas``, 1 of 6 of ``responses``).

``write_clustered_copy`` writes a new DuckDB file holding every table of the store: the tables
of ``CLUSTER_ORDER`` sorted by their order, the others as they are (a logical copy: the file is
compact, without the free blocks an in-place rewrite would leave). The runner's final publish
writes its snapshot this way, a merge writes its output this way, and a writable open of a store
written before this layout existed (no ``meta.layout_version``) rewrites the file once
(``rewrite_file``). Only the physical order changes: every table keeps its rows, columns, types
and keys, and every query returns the same rows (queries that need an order state it).

``meta.layout_version`` records the layout rules a store is kept by. A fresh store has it from
its creation; it is in prompt order as of its last publish or merge, and rows appended after that
(a run in progress, a live probe) follow in later row groups — read correctly, found more slowly
until the next publish.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from pathlib import Path

import duckdb

from sago_engine.store import trust
from sago_engine.store.errors import StoreError

log = logging.getLogger("sago.store")

#: Version of the layout rules (``meta.layout_version``); a store without it is rewritten on a writable open.
LAYOUT_VERSION = 1

#: Tables written in prompt order, with their sort keys (the lookup column first; the rest only
#: makes the order total, so the same rows always give the same file order). ``deltas`` leads
#: with ``dataset``: the statistics upkeep and the raw-Δ queries prune by dataset, and a
#: prompt_id belongs to one dataset, so the prompt order within a dataset is unchanged by it.
CLUSTER_ORDER: dict[str, tuple[str, ...]] = {
    "variants": ("prompt_id", "variant_id"),
    "responses": ("prompt_id", "run_id", "variant_id"),
    "deltas": ("dataset", "prompt_id", "run_id", "variant_id", "axis"),
}

_DST = "_sago_clustered"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def layout_version(con: duckdb.DuckDBPyConnection) -> int:
    """``meta.layout_version`` of the open store; 0 for a store written before layouts were versioned."""
    rows = con.execute("SELECT value FROM meta WHERE key = 'layout_version'").fetchall()
    try:
        return int(rows[0][0]) if rows else 0
    except (TypeError, ValueError):
        return 0


def needs_rewrite(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether a writable open must rewrite the store in prompt order (its layout is older than ``LAYOUT_VERSION``)."""
    return layout_version(con) < LAYOUT_VERSION


def write_clustered_copy(con: duckdb.DuckDBPyConnection, dest: str | Path) -> dict[str, int]:
    """Write every table of the store open on ``con`` into the new DuckDB file ``dest``, the tables of
    ``CLUSTER_ORDER`` sorted by prompt, and set ``meta.layout_version`` there to ``LAYOUT_VERSION``.

    The copy has the same tables, columns, types, keys and rows (``COPY FROM DATABASE … (SCHEMA)``
    for the definitions, then one ``INSERT … SELECT`` per table); ``con``'s store is not changed.
    Rows not yet checkpointed are included (the copy reads through ``con``). Time and memory
    grow with the rows copied (DuckDB sorts out of core); at the paper's scale (3.96 M deltas)
    about 20 s of CPU.

    Args:
        con: an open connection to a sago store (read-only or writable).
        dest: the file to create; it must not exist.
    Returns:
        Rows copied per table.
    Raises:
        FileExistsError: ``dest`` exists.
        duckdb.Error: the copy failed (``dest`` may then hold a partial file; the caller removes it).
    """
    dest = Path(dest)
    if dest.exists():
        raise FileExistsError(f"{dest} exists; a clustered copy is written only to a new file")
    db = con.execute("SELECT current_database()").fetchall()[0][0]
    tables = [r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main' AND NOT temporary "
        "ORDER BY table_name", [db]).fetchall()]
    path_sql = str(dest).replace("'", "''")
    con.execute(f"ATTACH '{path_sql}' AS {_DST} (READ_WRITE)")
    counts = {}
    try:
        con.execute(f"COPY FROM DATABASE {_ident(db)} TO {_DST} (SCHEMA)")
        con.execute("BEGIN TRANSACTION")
        for t in tables:
            order = CLUSTER_ORDER.get(t)
            sql = f"INSERT INTO {_DST}.main.{_ident(t)} SELECT * FROM {_ident(db)}.main.{_ident(t)}"
            if order:
                sql += " ORDER BY " + ", ".join(_ident(c) for c in order)
            counts[t] = int(con.execute(sql).fetchall()[0][0])
        con.execute(f"INSERT OR REPLACE INTO {_DST}.main.meta VALUES ('layout_version', ?)", [str(LAYOUT_VERSION)])
        con.execute("COMMIT")
    except BaseException:
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:
            pass  # no transaction open (the schema copy failed)
        raise
    finally:
        con.execute(f"DETACH {_DST}")
    return counts


def rewrite_file(path: str | Path) -> dict[str, int]:
    """Rewrite the store file ``path`` in prompt order (``write_clustered_copy`` to a file beside it,
    fsync, atomic rename over ``path``). Readers holding the old file keep reading it; a reader that
    opens ``path`` afterwards sees the new one. No connection to ``path`` may be open.

    Returns:
        Rows copied per table.
    Raises:
        StoreError: the old file still has a write-ahead log after its connection closed (the
            rename would separate them; nothing is replaced).
        duckdb.Error / OSError: the copy failed; ``path`` is unchanged.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.cluster-{os.getpid()}")
    for p in (tmp, tmp.with_name(tmp.name + ".wal")):
        p.unlink(missing_ok=True)
    try:
        con = trust.connect(path, read_only=False)  # writable: the ATTACH below needs external access
        try:
            con.execute("CHECKPOINT")
            counts = write_clustered_copy(con, tmp)
        finally:
            con.close()
        if path.with_name(path.name + ".wal").exists() or tmp.with_name(tmp.name + ".wal").exists():
            raise StoreError(f"{path}: a write-ahead log remained after the clustered copy; the store was not replaced")
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        for p in (tmp, tmp.with_name(tmp.name + ".wal")):
            p.unlink(missing_ok=True)
    return counts


# ---------------------------------------------------------------------------- files beside the store
# DuckDB keeps uncommitted-to-file changes in ``<name>.wal`` and, since 1.4 (duckdb/duckdb PR
# #18849), refuses a WAL that belongs to another database file ("WAL does not match database
# file"). A writable session on a published store that died leaves its WAL; renaming a new file
# over the store would then leave a store nobody can open until the WAL is moved.


def wal_path(path: str | Path) -> Path:
    """The write-ahead log DuckDB keeps beside ``path`` (``<name>.wal``)."""
    path = Path(path)
    return path.with_name(path.name + ".wal")


def set_aside_wal(path: str | Path) -> Path | None:
    """Move the write-ahead log beside ``path`` to ``<name>.wal.stale-<UTC time>`` (logged as a
    warning), before a new file is renamed over ``path``: the log belongs to the file being
    replaced, whose content the new file supersedes, and DuckDB would refuse it for the new one.

    Returns:
        Where the log went, or None when there was none.
    Raises:
        OSError: the log cannot be moved (then the caller must not replace ``path``).
    """
    wal = wal_path(path)
    if not wal.exists():
        return None
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    dest, k = wal.with_name(f"{wal.name}.stale-{stamp}"), 1
    while dest.exists():
        dest, k = wal.with_name(f"{wal.name}.stale-{stamp}-{k}"), k + 1
    os.replace(wal, dest)
    log.warning("%s: a write-ahead log left by an earlier writable session lay beside it; moved to %s "
                "before the new file replaces the store (the new file supersedes it)", Path(path), dest.name)
    return dest


def wal_mismatch_fix(path: str | Path, error: BaseException) -> str:
    """The fix to add to the message of an open that failed because the write-ahead log beside
    ``path`` belongs to another file (the file itself is a complete snapshot), or "" for any other
    error (a store's own log is never to be moved: it holds committed rows)."""
    if "does not match" not in str(error) or not wal_path(path).exists():  # DuckDB: "WAL does not match database file"
        return ""
    name = Path(path).name
    return (f" — a write-ahead log from an older file lies beside the store; move `{name}.wal` away "
            f"(e.g. to `{name}.wal.stale`): the store opens without it")
