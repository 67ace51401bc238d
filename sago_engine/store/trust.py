"""A store file is untrusted input: how sago connects to one, and what a file must hold to be read as a store.

A DuckDB file can hold more than tables, and each extra kind of object runs when sago reads:
a VIEW runs its query (``read_text('/any/file')``, ``read_csv``) whenever a page selects from
it, a MACRO replaces the function of the same name in every query (``count``), a user TYPE
replaces a type name (``json``), and a generated column computes its value on every read. A
store handed to the host (a colleague's shard, a downloaded file) is therefore checked before a
row of it is read, and read through a connection that cannot reach the file system:

* ``connect(path, read_only=True)`` turns DuckDB's external access off and locks the
  configuration (``READ_CONFIG``). DuckDB still reads the database the connection was opened on
  and replays its write-ahead log; ``read_text``, ``read_csv``, ``glob``, ``COPY``, ``ATTACH``,
  ``INSTALL`` and ``LOAD`` raise ``PermissionException``, and no statement can switch the
  setting back (DuckDB PR #14568; the same fix as agno-agi/agno #8643).
* ``catalog_objects`` / ``catalog_problem`` name the first view, macro (scalar or table) or user
  type in the file; a store with any of them is refused before any of its tables is queried.
* ``table_problem`` checks every sago table the file has against the schema: a base table in
  schema ``main`` with its columns' names and types, no generated column and no CHECK
  constraint; ``present_columns`` gives the known columns, the only ones sago selects.

A read-only open of a file already checked, unchanged since (``file_identity``: the same inode,
size, modification and status-change times of the file and its log), reuses that check
(``remembered``): the catalog scan costs about 0.1 s and the dashboard opens a store per query.

Writable connections keep external access: the runner's publish writes its snapshot through
``ATTACH`` (``layout.write_clustered_copy``) and a merge attaches its shards. A writable open
runs the same checks first, so the only SQL such a connection then runs is sago's own, over base
tables of a file that passed them.
"""

from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path

import duckdb

#: Configuration of every connection sago opens (DuckDB settings): DuckDB never installs or loads an
#: extension on its own (opening a SQLite file as a database would fetch ``sqlite_scanner`` over
#: HTTP, or load whatever file of that name lies in ``~/.duckdb/extensions``).
NO_EXTENSIONS = {"autoinstall_known_extensions": False, "autoload_known_extensions": False,
                 "allow_community_extensions": False}
#: Configuration of every read connection to a store (DuckDB settings).
READ_CONFIG = {**NO_EXTENSIONS, "enable_external_access": False, "lock_configuration": True}

#: Every DuckDB database file holds these bytes at offset 8 (its storage header).
_MAGIC_AT, _MAGIC = 8, b"DUCK"
#: Other formats named in the refusal (a file's first bytes).
_FORMATS = ((b"SQLite format 3\x00", "a SQLite database"), (b"PAR1", "a Parquet file"), (b"PK\x03\x04", "a zip archive"),
            (b"\x1f\x8b", "a gzip file"))


def not_duckdb(path: str | Path) -> str | None:
    """Why ``path`` is not a DuckDB database file, or None (it is one, or it is missing or empty:
    DuckDB creates a new database there). Reads the first 16 bytes only, before DuckDB sees the
    file: DuckDB opens some other formats through an extension, which sago never does."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except (FileNotFoundError, IsADirectoryError):
        return None
    if not head or head[_MAGIC_AT:_MAGIC_AT + len(_MAGIC)] == _MAGIC:
        return None
    kind = next((name for magic, name in _FORMATS if head.startswith(magic)), None)
    return (f"{Path(path).name} is not a DuckDB database file ({kind or f'it starts with {head[:8]!r}'}); "
            "sago opens DuckDB files only and never loads a DuckDB extension to read another format")

_ADDED = re.compile(r"ALTER\s+TABLE\s+(\w+)\s+ADD\s+COLUMN\s+IF\s+NOT\s+EXISTS\s+(\w+)", re.I)


def connect(path: str | Path, read_only: bool = True) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection to the store file ``path``: without file-system access when ``read_only``,
    never installing or loading an extension (``NO_EXTENSIONS``).

    Raises:
        duckdb.Error: the file cannot be opened (locked by a writer, damaged, …); ``duckdb.IOException``
            before any connection when the file is not a DuckDB database at all (``not_duckdb``).
    """
    problem = not_duckdb(path)
    if problem:
        raise duckdb.IOException(problem)
    if read_only:
        return duckdb.connect(str(path), read_only=True, config=dict(READ_CONFIG))
    return duckdb.connect(str(path), config=dict(NO_EXTENSIONS))  # writable: sago's own files only (module docstring)


@lru_cache(maxsize=4)
def reference(ddl: str, migrations: str) -> dict[str, dict[str, tuple[str, bool]]]:
    """The tables of ``ddl`` (sago's DDL), as ``{table: {column: (data type, required)}}``.

    Built by running ``ddl`` in an in-memory DuckDB. A column is required unless ``migrations``
    (the SQL of the migration steps) adds it with ``ALTER TABLE … ADD COLUMN IF NOT EXISTS``: a
    later schema version added it, so an older store lacks it and is still read.
    """
    added = {(t.lower(), c.lower()) for t, c in _ADDED.findall(migrations)}
    con = duckdb.connect(config=dict(READ_CONFIG))
    try:
        con.execute(ddl)
        rows = con.execute("SELECT table_name, column_name, data_type FROM duckdb_columns() "
                           "WHERE schema_name = 'main' ORDER BY table_name, column_index").fetchall()
    finally:
        con.close()
    out: dict[str, dict[str, tuple[str, bool]]] = {}
    for t, c, typ in rows:
        out.setdefault(t, {})[c] = (typ, (t.lower(), c.lower()) not in added)
    return out


def _name(schema: str, name: str) -> str:
    return name if schema == "main" else f"{schema}.{name}"


def catalog_objects(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, str]]:
    """Every object of the open file that is not a table: ``(kind, schema, name)`` with kind
    ``"view"``, ``"macro"`` (scalar or table) or ``"type"``, sorted. Reads the catalog only: no
    view is run. (``duckdb_functions()`` lists every built-in function too: about 0.1 s.)"""
    db = con.execute("SELECT current_database()").fetchall()[0][0]
    out = []
    for kind, sql in (
        ("view", "SELECT schema_name, view_name FROM duckdb_views() WHERE database_name = ? AND NOT internal"),
        ("macro", "SELECT schema_name, function_name FROM duckdb_functions() WHERE database_name = ? AND NOT internal"),
        ("type", "SELECT schema_name, type_name FROM duckdb_types() WHERE database_name = ? AND NOT internal"),
    ):
        out += sorted((kind, schema, name) for schema, name in con.execute(sql, [db]).fetchall())
    return out


def catalog_problem(objects: list[tuple[str, str, str]], allowed_views: tuple[str, ...] = ()) -> str | None:
    """The first of ``objects`` (``catalog_objects``) as ``"view `prompts`"``, ``"macro `count`"`` or
    ``"type `json`"`` (``schema.name`` outside schema ``main``); None when there is none.
    ``allowed_views``: views of schema ``main`` not reported (the caller decides about them)."""
    for kind, schema, name in objects:
        if not (kind == "view" and schema == "main" and name in allowed_views):
            return f"{kind} `{_name(schema, name)}`"
    return None


def base_tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    """Names of the base tables in schema ``main`` of the open file (not of attached databases)."""
    return {r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main' "
        "AND NOT temporary").fetchall()}


def table_problem(con: duckdb.DuckDBPyConnection, ref: dict[str, dict[str, tuple[str, bool]]],
                  required: tuple[str, ...], cols: dict[str, dict[str, tuple[str, bool]]]) -> str | None:
    """What makes the open file's sago tables differ from ``ref`` (``reference``), or None.

    ``required``: tables the file must have; ``cols``: the file's columns (``store_columns``). Each table of ``ref`` the file has must hold every
    required column with its type, and its other known columns (if present) with their types; no
    column of it may be generated and it may have no CHECK constraint. Columns sago does not know
    are allowed (never read: ``present_columns``).
    """
    have = base_tables(con)
    for t in required:
        if t not in have:
            return f"no table `{t}`"
    checks = {r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_constraints() WHERE database_name = current_database() "
        "AND schema_name = 'main' AND constraint_type = 'CHECK'").fetchall()}
    for t, known in ref.items():
        if t not in have:
            continue
        got = cols.get(t, {})
        for c, (typ, req) in known.items():
            if c not in got:
                if req:
                    return f"table `{t}` has no column `{c}`"
                continue
            gtyp, generated = got[c]
            if generated:
                return f"column `{t}.{c}` is a generated column"
            if gtyp != typ:
                return f"column `{t}.{c}` is {gtyp}, not {typ}"
        if t in checks:
            return f"table `{t}` has a CHECK constraint"
    return None


def present_columns(cols: dict[str, dict[str, tuple[str, bool]]],
                    ref: dict[str, dict[str, tuple[str, bool]]]) -> dict[str, tuple[str, ...]]:
    """Per table of ``ref`` the file has (``cols``: ``store_columns``): its known columns that the file
    holds, in ``ref``'s order."""
    return {t: tuple(c for c in known if c in cols[t]) for t, known in ref.items() if t in cols}


def store_columns(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, tuple[str, bool]]]:
    """The columns of the open file's base tables in schema ``main``: ``{table: {column: (type, generated)}}``."""
    out: dict[str, dict[str, tuple[str, bool]]] = {}
    for t, c, typ, gen in con.execute(
            "SELECT c.table_name, c.column_name, c.data_type, c.is_generated FROM duckdb_columns() c "
            "JOIN duckdb_tables() t USING (database_name, schema_name, table_name) "
            "WHERE c.database_name = current_database() AND c.schema_name = 'main' AND NOT t.temporary").fetchall():
        out.setdefault(t, {})[c] = (typ, bool(gen))
    return out


_CHECKED: OrderedDict[tuple, dict[str, tuple[str, ...]]] = OrderedDict()
_CHECKED_LOCK = threading.Lock()
_CHECKED_MAX = 64


def file_identity(path: str | Path) -> tuple:
    """What changes whenever the store file or its write-ahead log is written: path, device, inode,
    size, mtime and ctime of both (ctime cannot be set back by a user). Raises OSError when missing."""
    def stat(p: str) -> tuple | None:
        try:
            st = os.stat(p)
        except FileNotFoundError:
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    p = os.path.realpath(path)
    me = stat(p)
    if me is None:
        raise FileNotFoundError(p)
    return (p, me, stat(p + ".wal"))


def remembered(identity: tuple) -> dict[str, tuple[str, ...]] | None:
    """The check result of a file of this ``identity`` (``remember``), or None."""
    with _CHECKED_LOCK:
        got = _CHECKED.get(identity)
        if got is not None:
            _CHECKED.move_to_end(identity)
        return got


def remember(identity: tuple, columns: dict[str, tuple[str, ...]]) -> None:
    """Keep the check result of a file that passed (the last ``_CHECKED_MAX`` files)."""
    with _CHECKED_LOCK:
        _CHECKED[identity] = columns
        _CHECKED.move_to_end(identity)
        while len(_CHECKED) > _CHECKED_MAX:
            _CHECKED.popitem(last=False)
