"""Labels are not keys: a run is its ``run_id``; ``runs.model`` (its label) is only what a page shows.

Two runs of one store may carry the same label (a rerun under other settings into the same file,
a store written by another tool). Every page groups, pairs and pools by the label, so a repeated
label would average two runs per prompt (Model vs model) and pool their prompts (SGS). Here:

* ``unique_labels`` gives each run a label no other run of the store has: a repeated label gets
  the shortest prefix of its run id that makes it unique (``"gpt-4o [3f2a91c0]"``), never a label
  another run already carries.
* ``disambiguate`` applies them to a read-only connection: a TEMP view ``runs`` over the file's
  table with those labels, which every query of the store package reads instead (DuckDB resolves
  an unqualified name in the temporary catalog first). The file is not changed; a store without a
  repeated label gets no view.
* ``repeated`` names the repeated labels (a merge refuses them unless asked to relabel);
  ``refuse_taken`` refuses a new run whose label another run of the store carries (an import).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import duckdb

from sago_engine.store.errors import StoreError

__all__ = ["disambiguate", "file_runs", "refuse_taken", "repeated", "unique_labels"]

_MIN_PREFIX = 8


def repeated(rows: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """``{label: [run_id, …]}`` of every label carried by more than one run (sorted), of ``(run_id, label)`` rows."""
    by: dict[str, set[str]] = {}
    for run_id, label in rows:
        by.setdefault(str(label), set()).add(str(run_id))
    return {lab: sorted(ids) for lab, ids in sorted(by.items()) if len(ids) > 1}


def unique_labels(rows: Iterable[tuple[str, str]]) -> dict[str, str]:
    """A label per run, unique in the store.

    Args:
        rows: ``(run_id, label)`` of every run (run ids unique).
    Returns:
        ``{run_id: label}``: the run's own label when no other run carries it, else
        ``"<label> [<run id prefix>]"`` with the shortest prefix (at least 8 characters) that tells
        the runs of that label apart and that no other run's label, given or made, equals; ``" #k"`` is appended in the one case no prefix
        can (a hostile label that spells out the full form).
    """
    rows = sorted((str(r), str(lab)) for r, lab in rows)
    count = Counter(lab for _, lab in rows)
    taken = set(count)
    out: dict[str, str] = {}
    for run_id, lab in rows:
        if count[lab] == 1:
            out[run_id] = lab
            continue
        group = [r for r, x in rows if x == lab]
        longest = max(map(len, group))
        start = next((n for n in range(min(_MIN_PREFIX, longest), longest + 1)  # one prefix length per label
                      if len({r[:n] for r in group}) == len(group)), longest)
        cand = None
        for n in range(start, len(run_id) + 1):
            c = f"{lab} [{run_id[:n]}]"
            if c not in taken:
                cand = c
                break
        k = 2
        while cand is None or cand in taken:
            cand, k = f"{lab} [{run_id}] #{k}", k + 1
        taken.add(cand)
        out[run_id] = cand
    return out


def _file_db(con: duckdb.DuckDBPyConnection) -> str:
    return con.execute("SELECT current_database()").fetchall()[0][0].replace('"', '""')


def file_runs(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, str | None]]:
    """``(run_id, label, status)`` of every run as the file holds them (past any ``disambiguate`` view)."""
    return con.execute(f'SELECT run_id, model, status FROM "{_file_db(con)}".main.runs').fetchall()


def disambiguate(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """On a read-only connection to a store: make every run's label unique for this connection.

    Returns:
        ``{run_id: shown label}`` of the runs whose label was changed (``{}``: none repeated,
        nothing created). Creates the TEMP table ``sago_run_labels`` and the TEMP view ``runs``.
    """
    rows = con.execute("SELECT run_id, model FROM runs").fetchall()
    if not repeated(rows):
        return {}
    labels = unique_labels(rows)
    changed = {r: lab for r, lab in labels.items() if lab != dict(rows).get(r)}
    db = _file_db(con)
    con.execute("CREATE TEMP TABLE sago_run_labels (run_id VARCHAR PRIMARY KEY, label VARCHAR NOT NULL)")
    con.executemany("INSERT INTO sago_run_labels VALUES (?, ?)", list(changed.items()))
    con.execute(f'CREATE TEMP VIEW runs AS SELECT r.* REPLACE (coalesce(l.label, r.model) AS model) '
                f'FROM "{db}".main.runs r LEFT JOIN temp.main.sago_run_labels l USING (run_id)')
    return changed


def refuse_taken(con: duckdb.DuckDBPyConnection, runs: Iterable[tuple[str, str]], fix: str) -> None:
    """Raise ``StoreError`` when a run of ``runs`` (``(run_id, label)`` about to be written) carries a
    label that another run of the store (another run id) already carries; ``fix`` ends the message."""
    have = {(str(r), str(lab)) for r, lab, _ in file_runs(con)}
    for run_id, label in runs:
        other = sorted(r for r, lab in have if lab == label and r != run_id)
        if other:
            raise StoreError(f"the store already holds run {other[0]} labelled {label!r}; run {run_id} would carry "
                             f"the same label, and pages group, pair and pool by label. {fix}")
