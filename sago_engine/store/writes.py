"""Writes: transactions, keyed bulk inserts (which keep the statistics tables current), run records, usage, meta."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from sago_engine.pricing import cost_usd
from sago_engine.runrecord import ENGINE_DECODING_KEYS
from sago_engine.store import layout, suffstats
from sago_engine.store.schema import EXTRA_TABLES, TABLES, USAGE_EXTRA_COUNTERS, StoreError

#: The tables one measured chunk writes, in the order ``Writes.write_chunk`` writes them (prompts and
#: variants before the responses and deltas that name them; ``units`` marks the prompts done).
CHUNK_TABLES = ("prompts", "variants", "responses", "deltas", "mirroring_verdicts", "base_repeats", "noise_floor",
                "samples", "sample_deltas", "units", "api_responses")


def _json(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str, ensure_ascii=False)


class Writes:
    """Write methods of ``Store`` (``self.con``: a writable DuckDB connection)."""

    con: duckdb.DuckDBPyConnection
    read_only: bool

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
        (one of ``TABLES`` or ``EXTRA_TABLES``). Inserting ``deltas`` also recomputes the
        statistics tables of the (run, prompt) pairs it touches (``suffstats.refresh``); a
        delta's variant must be stored before it."""
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
        if table == "deltas":
            suffstats.refresh(self.con, df)

    def upsert_run(self, run: dict[str, Any]) -> None:
        """Insert the run record; if it exists (a resumed run) update only ``status``/``finished_at``.

        The first record of a run (settings, versions, hashes) is what produced its first rows,
        so a resume never rewrites it. A resume under other numerics that do not change the run
        id (``RESUME_WATCH`` keys of ``decoding``: linear kernel, threads, row dropping, KV cache,
        prefill buckets, packed weights — a key the new record lacks counts as changed to None;
        any library version) is appended to ``decoding["resumed_with"]`` as ``{"started_at",
        "decoding": {key: new}, "versions": {name: new}}``, so the record says the run is mixed.
        """
        row = {k: (_json(v) if isinstance(v, (dict, list, tuple)) else v) for k, v in run.items()}
        exists = self.con.execute("SELECT decoding, versions FROM runs WHERE run_id = ?", [row["run_id"]]).fetchall()
        if exists:
            self._note_resume_changes(row["run_id"], exists[0], run)
            upd = {k: v for k, v in row.items() if k in ("status", "finished_at")}
            if upd:
                sets = ", ".join(f'"{k}" = ?' for k in upd)
                self.con.execute(f"UPDATE runs SET {sets} WHERE run_id = ?", [*upd.values(), row["run_id"]])
        else:
            self.insert_df("runs", pd.DataFrame([row]))

    #: ``decoding`` keys whose change on a resume is recorded (they do not enter the run id).
    RESUME_WATCH = ENGINE_DECODING_KEYS

    def _note_resume_changes(self, run_id: str, stored: tuple, run: dict[str, Any]) -> None:
        def obj(v: Any) -> dict:
            v = json.loads(v) if isinstance(v, str) else v
            return v if isinstance(v, dict) else {}

        dec_old, ver_old = obj(stored[0]), obj(stored[1])
        dec_new, ver_new = obj(run.get("decoding")), obj(run.get("versions"))
        # absent counts as None (e.g. packing turned off); an update without a decoding record
        # (status, finished_at) changes nothing
        dec = {k: dec_new.get(k) for k in self.RESUME_WATCH if dec_new.get(k) != dec_old.get(k)} if dec_new else {}
        ver = {k: v for k, v in ver_new.items() if ver_old and v != ver_old.get(k)}
        if not dec and not ver:
            return
        started = run.get("started_at")
        entry = {"started_at": str(started) if started is not None else None, "decoding": dec, "versions": ver}
        dec_old["resumed_with"] = [*dec_old.get("resumed_with", []), entry]
        self.con.execute("UPDATE runs SET decoding = ? WHERE run_id = ?", [_json(dec_old), run_id])

    def add_run_usage(self, run_id: str, usage: dict[str, Any], price_in_per_mtok: float | None = None,
                      price_out_per_mtok: float | None = None, price_cached_in_per_mtok: float | None = None) -> None:
        """Add one chunk's API usage to the run's ``run_usage`` row (created on first use).

        Args:
            usage: counters as ``ApiBackend.take_usage()`` returns them (requests, cache_hits,
                retries, errors, prompt_tokens, completion_tokens, models).
            price_in_per_mtok / price_out_per_mtok: USD per million tokens; the cost is
                recomputed from the cumulative tokens (``pricing.cost_usd``: reasoning tokens
                are output, cached input at ``price_cached_in_per_mtok`` or else the input
                price), NULL when either price is None.
        """
        cols = ("requests", "cache_hits", "retries", "errors", "prompt_tokens", "completion_tokens",
                *USAGE_EXTRA_COUNTERS)  # reasoning / cached / cache-write tokens
        old = self.con.execute(f"SELECT {', '.join(cols)}, models_returned FROM run_usage WHERE run_id = ?",
                               [run_id]).fetchall()
        tot = {c: int(usage.get(c) or 0) for c in cols}
        models = set(usage.get("models") or ())
        if old:
            for c, v in zip(cols, old[0][: len(cols)]):
                tot[c] += int(v or 0)
            models |= set(json.loads(old[0][-1] or "[]"))
        price_cached = price_cached_in_per_mtok
        cost = cost_usd(tot["prompt_tokens"], tot["completion_tokens"], price_in_per_mtok, price_out_per_mtok,
                        tot["cached_tokens"], price_cached)
        now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
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

    def write_clustered_copy(self, dest: str | Path) -> dict[str, int]:
        """Write this store into the new file ``dest`` with its per-prompt tables in prompt order
        (``layout.write_clustered_copy``: the runner's final publish and a merge write their
        output so; the Prompts page's lookups then read one row group per table instead of all).

        Returns rows copied per table. Raises FileExistsError if ``dest`` exists."""
        return layout.write_clustered_copy(self.con, dest)

    def write_chunk(self, frames: Mapping[str, pd.DataFrame], run: dict[str, Any] | None = None,
                    usage: dict[str, Any] | None = None) -> None:
        """Write one chunk of measured rows in one transaction — the one writer of the offline runner
        (a chunk of prompts) and of the Live page's "save to store" (one probe as a run).

        Args:
            frames: table name → rows with that table's columns (a subset); written in
                ``CHUNK_TABLES`` order (a variant before its deltas), empty or absent ones skipped;
                a name outside ``CHUNK_TABLES`` is a ValueError. Rows are keyed (``INSERT OR
                IGNORE``), so writing the same chunk twice adds nothing.
            run: a run record to upsert first (``upsert_run``), or None.
            usage: keyword arguments of ``add_run_usage`` (an API chunk's usage), or None.
        Raises:
            StoreError: the store is read-only.
        """
        if self.read_only:
            raise StoreError(f"{self.path} is open read-only; rows go to a writable store")
        unknown = sorted(set(frames) - set(CHUNK_TABLES))
        if unknown:
            raise ValueError(f"write_chunk: not a table of a chunk: {', '.join(unknown)}; valid: {', '.join(CHUNK_TABLES)}")
        with self.transaction():
            if run is not None:
                self.upsert_run(run)
            for table in CHUNK_TABLES:
                if table in frames and not frames[table].empty:
                    self.insert_df(table, frames[table])
            if usage is not None:
                self.add_run_usage(**usage)

