"""``Store``, the one object callers hold (composed of the package's parts), and ``open_store``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from sago_engine.store import layout, runlabels, schema, sessions, suffstats, trust
from sago_engine.store.reads.browse import Browse
from sago_engine.store.reads.correctness import CorrectnessQueries
from sago_engine.store.reads.health import HealthQueries
from sago_engine.store.reads.prompt_rows import PromptRowQueries
from sago_engine.store.reads.samples import SampleQueries
from sago_engine.store.reads.scores import ScoreQueries
from sago_engine.store.reads.worst import WorstQueries
from sago_engine.store.rescoring import Rescoring
from sago_engine.store.schema import StoreError
from sago_engine.store.writes import Writes


@dataclass
class Store(Writes, Browse, ScoreQueries, WorstQueries, Rescoring, CorrectnessQueries, HealthQueries, SampleQueries,
            PromptRowQueries):
    """An open sago store. Use ``open_store``; close with ``close()`` or as a context manager.

    The methods come from ``writes.Writes`` (transactions, inserts, run records),
    ``browse.Browse`` (stored rows, page lists and details), ``rescoring.Rescoring`` (a rescore's
    reads and in-place deltas replacement), ``correctness.CorrectnessQueries`` (correctness verdicts), ``health.HealthQueries`` (replies cut at the cap), ``samples.SampleQueries`` (sampled runs), ``prompt_rows.PromptRowQueries`` (every row about some prompts),
    ``scores.ScoreQueries``
    (sufficient statistics → scores) and ``worst.WorstQueries`` (worst prompts and variants, search). ``stats_materialised`` is False only for a read-only store
    written before the statistics tables existed (its scores are then summed from ``deltas``).
    ``columns``: per table, the known columns the file holds (``schema.check``); reads select
    only these.
    """

    path: Path
    con: duckdb.DuckDBPyConnection
    read_only: bool
    stats_materialised: bool = True
    columns: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False)
    turn: int | None = field(default=None, repr=False)
    """This open's turn on the file among the sessions of this process (``sessions.hold``)."""
    relabelled: dict[str, str] = field(default_factory=dict)
    """Runs whose label is repeated in the file, shown under a unique one (``runlabels``):
    ``{run_id: shown label}``; ``{}`` when every label is unique (or the store is writable)."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.con.close()
        finally:
            if self.turn is not None:
                turn, self.turn = self.turn, None
                sessions.release(self.path, turn)


def open_store(path: str | Path, read_only: bool = True, create: bool = False) -> Store:
    """Open (or with ``create=True`` create) a sago store.

    A writable open of a schema-1/2 store (or a schema-3 store without the statistics tables)
    migrates it to this version in one transaction (the steps of ``schema.VERSIONS``); a writable open of a
    store written before the prompt-ordered layout (no ``meta.layout_version``) then rewrites the
    file in prompt order once (``layout.rewrite_file``: same rows, an atomic rename; at the paper's
    scale about 20 s of CPU). A read-only open reads a store as it is, except that runs sharing a
    label are shown under one label each (``runlabels.disambiguate``; ``Store.relabelled``).

    Args:
        path: the DuckDB file.
        read_only: open without write access (the dashboard always does).
        create: create the schema when the file is new; an existing file must be a sago store.
    Raises:
        FileNotFoundError: the file does not exist and ``create`` is False.
        StoreError: the file is not a sago store or has another schema version, or a
            write-ahead log of another file lies beside it (the message names the fix), or
            another session of this process kept it open (writable, or read-only for a writable
            open) longer than ``sessions.WAIT_S``: opens of one file in one process take turns.
    """
    path = Path(path)
    if not path.exists() and not create:
        raise FileNotFoundError(f"no store at {path}")
    if create and read_only:
        raise ValueError("create=True needs read_only=False")
    turn = sessions.hold(path, write=not read_only)  # sessions of this process take turns on one file
    try:
        return _open(path, read_only, create, turn)
    except BaseException:
        sessions.release(path, turn)
        raise


def _open(path: Path, read_only: bool, create: bool, turn: int) -> Store:
    identity = trust.file_identity(path) if read_only else None  # before connecting: a later write is a miss
    try:
        con = trust.connect(path, read_only=read_only)  # read: no file-system access (store.trust)
    except duckdb.Error as e:
        raise StoreError(f"{path} cannot be opened as a DuckDB sago store: {e}{layout.wal_mismatch_fix(path, e)}") from e
    if create and not trust.base_tables(con) and not trust.catalog_objects(con):  # a new, empty file
        schema.create(con)
    columns = trust.remembered(identity) if identity else None
    if columns is None:
        try:
            columns = schema.check(con, path)
        except StoreError:
            con.close()
            raise
        if identity:
            trust.remember(identity, columns)
    if not read_only:
        schema.migrate_if_needed(con)
        if layout.needs_rewrite(con):
            con.close()
            layout.rewrite_file(path)
            con = trust.connect(path, read_only=False)
        columns = schema.check(con, path)
    relabelled = runlabels.disambiguate(con) if read_only else {}  # labels are not keys: one per run
    return Store(path=path, con=con, read_only=read_only, stats_materialised=suffstats.has_stats(con), columns=columns,
                 turn=turn, relabelled=relabelled)
