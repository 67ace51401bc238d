"""Reads and writes of a rescore: a run's record and stored replies, and the in-place replacement of
some of its ``deltas`` rows with the statistics tables brought up to date, and of a sampled run's
``sample_deltas`` rows (``sago_engine.verify.rescore``)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import duckdb
import pandas as pd

from sago_engine.store import suffstats
from sago_engine.store.errors import StoreError

#: ``meta`` key prefix of a run's rescore record: ``rescore:<run_id>`` holds a JSON list, one entry per
#: rescore that changed rows (``Rescoring.replace_deltas``).
RESCORE_META_PREFIX = "rescore:"

_DELTA_COLUMNS = ("run_id", "dataset", "prompt_id", "variant_id", "axis", "delta", "delta_norm", "available", "reason",
                  "detector")

_SAMPLE_DELTA_COLUMNS = ("run_id", "dataset", "prompt_id", "variant_id", "sample", "response_id", "axis", "delta",
                         "delta_norm", "available", "reason")


def _obj(v: Any) -> Any:
    return json.loads(v) if isinstance(v, str) else v


class Rescoring:
    """Rescore methods of ``Store`` (``self.con``: a DuckDB connection)."""

    con: duckdb.DuckDBPyConnection
    columns: dict[str, tuple[str, ...]]
    read_only: bool

    def run_record(self, run_id: str) -> dict[str, Any]:
        """One run's record: run_id, model, backend, status and the JSON columns normalizers,
        capabilities, config parsed (None where not recorded).

        Raises:
            StoreError: no run ``run_id`` in the store.
        """
        rows = self.con.execute("""SELECT run_id, model, backend, status, CAST(normalizers AS VARCHAR),
                                          CAST(capabilities AS VARCHAR), CAST(config AS VARCHAR)
                                   FROM runs WHERE run_id = ?""", [run_id]).fetchall()
        if not rows:
            known = [r[0] for r in self.con.execute("SELECT run_id FROM runs ORDER BY run_id").fetchall()]
            raise StoreError(f"no run {run_id!r} in this store; runs: {', '.join(known) or 'none'}")
        r = rows[0]
        return {"run_id": r[0], "model": r[1], "backend": r[2], "status": r[3], "normalizers": _obj(r[4]),
                "capabilities": _obj(r[5]), "config": _obj(r[6])}

    def stored_replies(self, run_id: str) -> pd.DataFrame:
        """The run's base and variant replies as stored, with the hidden reasoning tokens an API reported.

        Columns: response_id, prompt_id, variant_id (NULL for the base reply), response,
        finish_reason, error, reasoning_tokens (``api_responses.reasoning_tokens``; NULL for a local
        run or a store without that column); ordered by prompt, base first.
        """
        api = "reasoning_tokens" in self.columns.get("api_responses", ())
        sel, join = ("a.reasoning_tokens", "LEFT JOIN api_responses a USING (response_id)") if api \
            else ("CAST(NULL AS INTEGER) AS reasoning_tokens", "")
        return self.con.execute(f"""
            SELECT x.response_id, x.prompt_id, x.variant_id, x.response, x.finish_reason, x.error, {sel}
            FROM responses x {join} WHERE x.run_id = ?
            ORDER BY x.prompt_id, x.variant_id NULLS FIRST""", [run_id]).df()

    def rescore_records(self, run_id: str) -> list[dict[str, Any]]:
        """The rescore entries recorded for ``run_id`` (``RESCORE_META_PREFIX``), oldest first; [] if none."""
        rows = self.con.execute("SELECT value FROM meta WHERE key = ?", [RESCORE_META_PREFIX + run_id]).fetchall()
        return list(json.loads(rows[0][0])) if rows and rows[0][0] else []

    def _note_rescore(self, run_ids, at: str, note: dict[str, Any]) -> None:
        """Append ``{"at": at, **note}`` to each run's ``rescore:<run_id>`` record (inside the caller's transaction)."""
        for run_id in sorted(run_ids):
            entries = self.rescore_records(run_id) + [{"at": at, **note}]
            self.con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                             [RESCORE_META_PREFIX + run_id, json.dumps(entries, sort_keys=True, default=str)])

    def replace_deltas(self, rows: pd.DataFrame, note: dict[str, Any]) -> None:
        """Overwrite stored ``deltas`` rows in place and record why, in one transaction.

        Args:
            rows: frame with the ``deltas`` columns; each row replaces the stored row of its key
                (run_id, variant_id, axis), which must exist (the row keeps its place in the file,
                so a prompt-ordered store stays so). The statistics tables of the (run, prompt) and
                (run, dataset) pairs touched are recomputed (``suffstats.refresh``).
            note: JSON-able record appended, with ``at`` (UTC time), to the meta key
                ``rescore:<run_id>`` of each run in ``rows``.
        Raises:
            StoreError: the store is read-only, or a row's key is not stored (nothing is written).
        """
        self._update_in_place("deltas", rows, _DELTA_COLUMNS, ("run_id", "variant_id", "axis"),
                              ("delta", "delta_norm", "available", "reason", "detector"), note,
                              then=lambda df: suffstats.refresh(self.con, df))

    def stored_samples(self, run_id: str) -> pd.DataFrame:
        """A sampled run's samples ≥ 1 as stored (``samples``): response_id, prompt_id, variant_id (NULL:
        a base sample), sample, seed, response, finish_reason, error, reasoning_tokens (NULL: samples
        are local replies); ordered by prompt, base first, then sample. Empty for a greedy run or a
        store without the table."""
        cols = ["response_id", "prompt_id", "variant_id", "sample", "seed", "response", "finish_reason", "error",
                "reasoning_tokens"]
        if "samples" not in self.columns:
            return pd.DataFrame(columns=cols)
        return self.con.execute("""
            SELECT response_id, prompt_id, variant_id, sample, seed, response, finish_reason, error,
                   CAST(NULL AS INTEGER) AS reasoning_tokens
            FROM samples WHERE run_id = ? ORDER BY prompt_id, variant_id NULLS FIRST, sample""", [run_id]).df()[cols]

    def stored_sample_deltas(self, run_id: str, axes: list[str]) -> pd.DataFrame:
        """The run's ``sample_deltas`` rows of ``axes`` (all columns), ordered by prompt, reply and axis;
        empty (same columns) without the table."""
        cols = list(_SAMPLE_DELTA_COLUMNS)
        if "sample_deltas" not in self.columns:
            return pd.DataFrame(columns=cols)
        return self.con.execute(f"""SELECT {", ".join(cols)} FROM sample_deltas WHERE run_id = ? AND axis IN
                                    (SELECT unnest(?::VARCHAR[])) ORDER BY prompt_id, response_id, axis""",
                                [run_id, list(axes)]).df()[cols]

    def replace_sample_deltas(self, rows: pd.DataFrame, note: dict[str, Any]) -> None:
        """Overwrite stored ``sample_deltas`` rows in place (key run_id, response_id, axis; each must
        exist) and append ``{"at", **note}`` to the ``rescore:<run_id>`` record, in one transaction.

        Raises:
            StoreError: the store is read-only, or a row's key is not stored (nothing is written).
        """
        self._update_in_place("sample_deltas", rows, _SAMPLE_DELTA_COLUMNS, ("run_id", "response_id", "axis"),
                              ("delta", "delta_norm", "available", "reason"), note)

    def _update_in_place(self, table: str, rows: pd.DataFrame, columns: tuple[str, ...], keys: tuple[str, ...],
                         values: tuple[str, ...], note: dict[str, Any], then=None) -> None:
        """Overwrite the stored rows of ``table`` keyed like ``rows`` (``keys``; each must exist) with
        their ``values`` columns, call ``then(frame)`` and append ``{"at", **note}`` to each run's
        ``rescore:<run_id>`` record, all in one transaction (``replace_deltas``, ``replace_sample_deltas``).

        Raises:
            StoreError: the store is read-only, or a row's key is not stored (nothing is written).
        """
        if self.read_only:
            raise StoreError("the store is open read-only; a rescore needs a writable open")
        if rows.empty:
            return
        df = rows[list(columns)].copy()
        for c in ("delta", "delta_norm"):
            df[c] = df[c].astype(object).where(df[c].notna(), None)
        df["available"] = df["available"].astype(bool)
        at = dt.datetime.now(dt.UTC).replace(tzinfo=None).isoformat(timespec="seconds")
        on = " AND ".join(f"d.{k} = n.{k}" for k in keys)
        where = " AND ".join(f"{table}.{k} = n.{k}" for k in keys)
        sets = ", ".join(f"{c} = n.{c}::DOUBLE" if c in ("delta", "delta_norm") else f"{c} = n.{c}" for c in values)
        self.con.execute("BEGIN TRANSACTION")
        try:
            self.con.register("_sago_new", df)
            try:
                missing = self.con.execute(f"SELECT count(*) FROM _sago_new n ANTI JOIN {table} d ON {on}"
                                           ).fetchall()[0][0]
                if missing:
                    raise StoreError(f"{missing} of {len(df)} rows to replace are not stored {table} rows")
                self.con.execute(f"UPDATE {table} SET {sets} FROM _sago_new n WHERE {where}")
            finally:
                self.con.unregister("_sago_new")
            if then is not None:
                then(df)
            self._note_rescore(df["run_id"].unique(), at, note)
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    def replies_without_request(self, run_id: str) -> pd.DataFrame:
        """The run's replies whose rendered request is not stored, with the text each answered.

        Columns: response_id, prompt_id, variant_id (NULL for the base reply), text (the base
        prompt's text, or the variant's); ordered by prompt, base first. Empty on a store whose
        ``responses`` has no ``request`` column.
        """
        if "request" not in self.columns.get("responses", ()):
            return pd.DataFrame(columns=["response_id", "prompt_id", "variant_id", "text"])
        return self.con.execute("""
            SELECT x.response_id, x.prompt_id, x.variant_id, coalesce(v.text, p.text) AS text
            FROM responses x JOIN prompts p USING (prompt_id) LEFT JOIN variants v USING (variant_id)
            WHERE x.run_id = ? AND x.request IS NULL
            ORDER BY x.prompt_id, x.variant_id NULLS FIRST""", [run_id]).df()

    def set_requests(self, rows: pd.DataFrame, note: dict[str, Any]) -> None:
        """Store rendered requests of replies that have none, and record it under ``rescore:<run_id>``.

        Args:
            rows: frame with response_id, run_id, request; a reply that already holds a request
                keeps it (the update touches NULL requests only).
            note: JSON-able record appended, with ``at`` (UTC time), to each run's rescore record.
        Raises:
            StoreError: the store is read-only.
        """
        if self.read_only:
            raise StoreError("the store is open read-only; rendering requests needs a writable open")
        if rows.empty:
            return
        at = dt.datetime.now(dt.UTC).replace(tzinfo=None).isoformat(timespec="seconds")
        self.con.execute("BEGIN TRANSACTION")
        try:
            self.con.register("_sago_req", rows[["response_id", "run_id", "request"]])
            try:
                self.con.execute("""UPDATE responses SET request = n.request FROM _sago_req n
                                    WHERE responses.response_id = n.response_id AND responses.request IS NULL""")
            finally:
                self.con.unregister("_sago_req")
            self._note_rescore(rows["run_id"].unique(), at, note)
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")
