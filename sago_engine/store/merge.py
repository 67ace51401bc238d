"""Shard merge (``python -m precompute merge``) and per-table fingerprints (identity of two stores).

A merge never makes a run look better than its shards, and never counts a shard's API usage twice:

- **Status.** Each run keeps the worst status of the input records it was merged from:
  failed > incomplete > partial > complete. ``failed: …`` (most replies are errors) and
  ``incomplete: …`` (units left pending after transient failures) are kept word for word; a
  record still ``running`` (a killed run's store) or with a status sago does not know counts as
  incomplete. The merged run is ``complete`` only when every input record is ``complete`` or
  ``shard K/N complete`` and the merged units cover every prompt; otherwise it is
  ``partial: merged units cover k of n prompts`` (a merge's own statement about coverage, which
  a later merge with the missing shards lifts) or an input's own ``partial`` (a live probe's,
  never lifted).
- **Usage.** A shard is identified by the fingerprint of its run records, prompt units (with
  their finish times) and ``run_usage`` rows (``shard_fingerprint``): a second copy of the same
  shard — the same file given twice, or a copy of it — has the same fingerprint, and its usage
  is counted once (its rows are keyed, so they add nothing either). A merged store records the
  fingerprints it was made of (``meta.merged_shards``): a later merge skips the usage of an
  input already inside another input, and refuses an input that overlaps the others only in
  part (its usage cannot then be counted once).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import duckdb
import pandas as pd

from sago_engine.store import runlabels, suffstats
from sago_engine.store.facade import open_store
from sago_engine.store.layout import rewrite_file, set_aside_wal, wal_path
from sago_engine.store.schema import EXTRA_TABLES, TABLES, USAGE_EXTRA_COUNTERS, StoreError, has_table

log = logging.getLogger("sago.merge")

#: Columns ignored when comparing two stores for identity (wall-clock facts, not results).
VOLATILE_COLUMNS = {"runs": ("started_at", "finished_at", "status"), "units": ("finished_at",),
                    "responses": ("latency_s",), "samples": ("latency_s",)}

#: ``run_usage`` counters summed over shards.
USAGE_COUNTERS = ("requests", "cache_hits", "retries", "errors", "prompt_tokens", "completion_tokens",
                  *USAGE_EXTRA_COUNTERS)

#: Status ranks, best to worst.
COMPLETE, PARTIAL, INCOMPLETE, FAILED = range(4)
_SHARD_DONE = re.compile(r"shard \d+/\d+ complete")
_MERGE_PARTIAL = "partial: merged units cover"


def status_rank(status: str | None) -> int:
    """``COMPLETE`` (complete, shard K/N complete, a merge's coverage ``partial``), ``PARTIAL`` (any
    other partial), ``FAILED`` (failed: …) or ``INCOMPLETE`` (incomplete: …, running, unknown, None)."""
    s = (status or "").strip()
    if s == "complete" or _SHARD_DONE.fullmatch(s) or s.startswith(_MERGE_PARTIAL):
        return COMPLETE
    if s.startswith("failed"):
        return FAILED
    if s.startswith("partial"):
        return PARTIAL
    return INCOMPLETE


def combine_statuses(statuses: Sequence[str | None], n_units: int, n_prompts: int) -> str:
    """The merged status of one run from its input records' statuses (module docstring).

    Args:
        statuses: the run's status in each input that has its record (at least one).
        n_units / n_prompts: the merged store's prompt units of the run / prompts.
    Returns:
        ``complete``, a ``partial`` status, or the worst input status (failed / incomplete) as it is.
    """
    worst = max(range(len(statuses)), key=lambda i: status_rank(statuses[i]))  # the first of the worst
    rank, text = status_rank(statuses[worst]), (statuses[worst] or "").strip()
    if rank == FAILED or (rank == INCOMPLETE and text.startswith("incomplete")):
        return text
    if rank == INCOMPLETE:
        return f"incomplete: a merged input's run record says {text or 'nothing'!r} (it did not finish)"
    if rank == PARTIAL:
        return text
    if n_units >= n_prompts:
        return "complete"
    return f"{_MERGE_PARTIAL} {n_units} of {n_prompts} prompts"


def shard_fingerprint(con: duckdb.DuckDBPyConnection) -> str:
    """sha256 over a store's ``runs``, ``units`` and ``run_usage`` rows (all columns, sorted): equal
    for two copies of the same shard, different for another run of it (other unit finish times)."""
    h = hashlib.sha256()
    for t in ("runs", "units", "run_usage"):
        if has_table(con, t):
            rows = con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
            h.update(json.dumps([t, rows], default=str, ensure_ascii=False).encode())
    return h.hexdigest()


def _identity(path: Path) -> tuple[int, int, int, int]:
    """(device, inode, size, modification time in ns) of a file: a new snapshot put in its place
    (``os.replace``) or a write changes it."""
    s = os.stat(path)
    return s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns


def _inspect(path: Path) -> dict:
    """Validate one input (a readable sago store) and read what the merge decides on."""
    ident = _identity(path) if path.exists() else None
    with open_store(path, read_only=True) as st:
        con = st.con
        fp = shard_fingerprint(con)
        meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        try:
            parts = frozenset(json.loads(meta["merged_shards"])) if meta.get("merged_shards") else frozenset({fp})
        except (TypeError, ValueError):
            parts = frozenset({fp})
        runs = {r[0]: (r[1], r[2]) for r in runlabels.file_runs(con)}  # the file's own labels
    return {"path": path, "fingerprint": fp, "parts": parts, "runs": runs, "identity": ident}


def _conflicts(con: duckdb.DuckDBPyConnection, table: str, src: str) -> int:
    """Rows of ``src.table`` that are not in the merged table although their key is (an earlier
    input holds other values under the same key: ``INSERT OR IGNORE`` kept those); columns of
    ``VOLATILE_COLUMNS`` (wall-clock facts) are not compared."""
    cols = [r[0] for r in con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_catalog = current_database() "
        "AND table_name = ? AND column_name IN (SELECT column_name FROM information_schema.columns "
        "WHERE table_catalog = ? AND table_name = ?) ORDER BY ordinal_position", [table, src, table]).fetchall()
        if r[0] not in VOLATILE_COLUMNS.get(table, ())]
    sel = ", ".join(f'"{c}"' for c in cols)
    return int(con.execute(f"SELECT count(*) FROM (SELECT {sel} FROM {src}.{table} "
                           f"EXCEPT SELECT {sel} FROM {table})").fetchone()[0])


def _plan_usage(infos: list[dict]) -> list[str]:
    """Mark which inputs' usage is added (``info["usage"]``); lines saying why one is not.

    Raises:
        StoreError: an input overlaps the shards of the others only in part.
    """
    seen: dict[str, Path] = {}
    notes = []
    for info in infos:
        parts, inside = info["parts"], {seen[p] for p in info["parts"] if p in seen}
        info["usage"] = not inside
        if inside and not parts <= seen.keys():
            raise StoreError(f"{info['path']} holds some of the shards already merged from "
                             f"{', '.join(sorted(map(str, inside)))} and others besides: its API usage cannot be "
                             f"counted once. Merge the original shard stores instead.")
        if inside:
            notes.append(f"{info['path']}: the same shard as {', '.join(sorted(map(str, inside)))} "
                         f"(fingerprint {info['fingerprint'][:12]}): its rows and API usage are counted once")
        for p in parts:
            seen.setdefault(p, info["path"])
    return notes


def _add_usage(con: duckdb.DuckDBPyConnection, src: str) -> None:
    """Add ``src.run_usage`` to the merged ``run_usage`` (counters and cost summed, model strings united)."""
    sums = ",\n".join(f"{c} = run_usage.{c} + excluded.{c}" for c in USAGE_COUNTERS)
    con.execute(f"""
        INSERT INTO run_usage BY NAME SELECT * FROM {src}.run_usage s
        ON CONFLICT (run_id) DO UPDATE SET
            {sums},
            cost_usd = run_usage.cost_usd + excluded.cost_usd,
            models_returned = CAST(list_sort(list_distinct(list_concat(
                CAST(run_usage.models_returned AS VARCHAR[]),
                CAST(excluded.models_returned AS VARCHAR[])))) AS JSON),
            updated_at = greatest(run_usage.updated_at, excluded.updated_at)""")


def _check_labels(infos: list[dict], relabel: bool) -> dict[str, str]:
    """The labels the merged runs get: ``{run_id: label}`` of the runs to relabel (``{}``: every
    label names one run). Raises StoreError for a repeated label unless ``relabel``."""
    labels: dict[str, str] = {}
    where: dict[str, list[str]] = {}
    for info in infos:
        for run_id, (model, _) in info["runs"].items():
            labels.setdefault(run_id, model)
            where.setdefault(run_id, []).append(str(info["path"]))
    rep = runlabels.repeated(labels.items())
    if not rep:
        return {}
    if not relabel:
        lab, ids = next(iter(rep.items()))
        runs = "; ".join(f"{r} (in {', '.join(where[r])})" for r in ids)
        raise StoreError(
            f"{len(rep)} label(s) name more than one run, e.g. {lab!r}: runs {runs}. A label is what every page "
            f"groups, pairs and pools by, so these runs would be averaged as one model. Fix: rerun one with "
            f"another `label` in its [[models]] entry, or pass --relabel-repeated to label each such run "
            f"'<label> [<run id prefix>]' in the merged store")
    unique = runlabels.unique_labels(labels.items())
    return {r: lab for r, lab in unique.items() if lab != labels[r]}


def merge_stores(out: str | Path, inputs: Sequence[str | Path], overwrite: bool = False,
                 report: Callable[[str], None] | None = None, relabel_repeated: bool = False) -> dict[str, int]:
    """Merge shard stores into one (``python -m precompute merge``).

    Rows are keyed deterministically, so ``INSERT OR IGNORE`` of every table of every input
    gives the same rows as one unsharded run. Run records keep the earliest start, the latest
    finish and the worst status of their inputs; API usage is added once per shard (see the
    module docstring). The merged file is written with its per-prompt tables in prompt order
    (``layout.rewrite_file``), as the runner's final publish writes a store; a write-ahead log
    left beside ``out`` is moved aside first (``layout.set_aside_wal``).

    Args:
        out: the merged store to create.
        inputs: shard stores (each must be a readable sago store).
        overwrite: replace ``out`` if it exists (otherwise refuse: nothing is overwritten unasked).
        relabel_repeated: when runs with different run ids carry one label, label each
            ``"<label> [<run id prefix>]"`` in the merged store (``runlabels.unique_labels``)
            instead of refusing.
        report: called with one line per merged run ("<run_id> (<model>): <input>: <status>; … →
            <merged status>") and per input whose usage is already counted; every line is also
            logged (``sago.merge``; a run that did not end complete at WARNING).
    Returns:
        Row counts per table of the merged store, and ``conflicting_rows``: {table: rows of a later
        input that differ from an earlier input's under the same key (the earlier kept; each
        input's count is also a report line)}.
    Raises:
        FileExistsError: ``out`` exists and ``overwrite`` is False.
        StoreError / FileNotFoundError: an input is not a readable sago store, overlaps the
            shards of the other inputs only in part, or changed (was replaced or written) between
            its inspection and its copy; nothing is written then.
    """
    out = Path(out)
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} exists; pass --force to overwrite it")
    infos = [_inspect(Path(p)) for p in inputs]  # every input validated before anything is written
    relabel = _check_labels(infos, relabel_repeated)  # labels are not keys: one label, one run
    lines = _plan_usage(infos)
    tmp = out.with_name(f".{out.name}.merging")
    for p in (tmp, wal_path(tmp)):  # a killed merge's leftovers
        p.unlink(missing_ok=True)
    try:
        counts = _merge_into(tmp, infos, lines, relabel)
    except BaseException:
        for p in (tmp, wal_path(tmp)):
            p.unlink(missing_ok=True)
        raise
    for line in lines:
        log.log(logging.INFO if line.endswith("→ complete") else logging.WARNING, "%s", line)
        if report is not None:
            report(line)
    rewrite_file(tmp)  # the merged store in prompt order (store.layout)
    set_aside_wal(out)
    os.replace(tmp, out)
    return counts


def _merge_into(tmp: Path, infos: list[dict], lines: list[str], relabel: dict[str, str]) -> dict:
    """The merge itself, into the new store ``tmp``; appends its report lines to ``lines``; ``relabel``
    (run id → label) gives a repeated label's runs their own labels.

    Raises:
        StoreError: an input changed (was replaced or written) since it was inspected.
    """
    conflicts: dict[str, int] = {}
    with open_store(tmp, read_only=False, create=True) as st:
        for i, info in enumerate(infos):
            st.con.execute(f"ATTACH '{str(info['path']).replace(chr(39), chr(39) * 2)}' AS src{i} (READ_ONLY)")
            if _identity(info["path"]) != info["identity"]:  # what is copied must be what was inspected
                raise StoreError(f"{info['path']} changed while it was merged (a run published a new snapshot, "
                                 "or a copy finished): nothing was written; merge again")
            with st.transaction():
                src_tables = {r[0] for r in st.con.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_catalog = ?", [f"src{i}"]).fetchall()}
                for t in TABLES + tuple(t for t in EXTRA_TABLES if t in src_tables):
                    if t in ("runs", "run_usage"):
                        continue
                    before = st.con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                    st.con.execute(f"INSERT OR IGNORE INTO {t} BY NAME SELECT * FROM src{i}.{t}")
                    added = st.con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] - before
                    if added < st.con.execute(f"SELECT count(*) FROM src{i}.{t}").fetchone()[0]:
                        n = _conflicts(st.con, t, f"src{i}")
                        if n:
                            conflicts[t] = conflicts.get(t, 0) + n
                            lines.append(f"{info['path']}: {n} row(s) of {t} differ from rows of an earlier input "
                                         "under the same key; the earlier input's are kept")
                if "run_usage" in src_tables and info["usage"]:  # shards of one API run: usage adds up
                    _add_usage(st.con, f"src{i}")
                st.con.execute(f"""
                    INSERT INTO runs BY NAME SELECT * FROM src{i}.runs s
                    ON CONFLICT (run_id) DO UPDATE SET
                        started_at = least(runs.started_at, excluded.started_at),
                        finished_at = greatest(runs.finished_at, excluded.finished_at)""")
            st.con.execute(f"DETACH src{i}")
        n_prompts = st.con.execute("SELECT count(*) FROM prompts").fetchone()[0]
        units = dict(st.con.execute("SELECT run_id, count(*) FROM units GROUP BY run_id").fetchall())
        with st.transaction():
            for run_id, label in relabel.items():
                st.con.execute("UPDATE runs SET model = ? WHERE run_id = ?", [label, run_id])
            for run_id, model in st.con.execute("SELECT run_id, model FROM runs ORDER BY model, run_id").fetchall():
                had = [(info["path"], info["runs"][run_id][1]) for info in infos if run_id in info["runs"]]
                status = combine_statuses([s for _, s in had], units.get(run_id, 0), n_prompts)
                st.con.execute("UPDATE runs SET status = ? WHERE run_id = ?", [status, run_id])
                lines.append(f"{run_id} ({model}): " + "; ".join(f"{p}: {s}" for p, s in had) + f" → {status}")
            st.set_meta(merged_shards=json.dumps(sorted(set().union(*(i["parts"] for i in infos)))))
            suffstats.materialise(st.con)  # the statistics of the merged deltas, rebuilt in one pass
        counts: dict = {**st.counts(), "conflicting_rows": conflicts}
        st.checkpoint()
    return counts


def table_fingerprints(path: str | Path) -> dict[str, str]:
    """sha256 per table over all rows (sorted, volatile columns dropped): equal ⇔ identical results."""
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
