"""Hand labels of mirroring-judge calls, kept in a sidecar DuckDB file next to a store (never in the store).

SAGO (arXiv 2610.01428) hand-checked 10% of its judge calls. The Method choices page lets a user
record their own label for a sampled judge call; the label goes to ``<store stem>.judge-labels.db``
beside the store (or, on a shared server, in its shared folder: ``dashboard.access.Access.label_store``),
so a read-only or shipped store is never written. The extension is not ``.duckdb`` on purpose: the
store picker lists ``*.duckdb`` files, and a label file is not a sago store.

One table, ``judge_labels``, keyed like ``mirroring_verdicts`` (run_id, variant_id, response_of);
labelling the same call again replaces the label. A sidecar is read and written like an untrusted
store (``store.trust``): no file-system access, and a file with a view, macro or type is refused.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import duckdb
import pandas as pd

from sago_engine.store import trust

#: File name suffix of the sidecar (``run.duckdb`` → ``run.judge-labels.db``).
LABELS_SUFFIX = ".judge-labels.db"

_DDL = """
CREATE TABLE IF NOT EXISTS judge_labels (
    store_name VARCHAR NOT NULL,
    run_id VARCHAR NOT NULL,
    variant_id VARCHAR NOT NULL,
    response_of VARCHAR NOT NULL,
    label INTEGER NOT NULL,
    labelled_at TIMESTAMP NOT NULL,
    PRIMARY KEY (store_name, run_id, variant_id, response_of)
);
"""
_COLS = ["run_id", "variant_id", "response_of", "label", "labelled_at"]


def sidecar_path(store: str | Path, folder: str | Path | None = None) -> Path:
    """The label file of ``store``: ``<folder or the store's folder>/<store stem>.judge-labels.db``."""
    p = Path(store)
    return (Path(folder) if folder is not None else p.parent) / f"{p.stem}{LABELS_SUFFIX}"


def write_label(sidecar: str | Path, store: str | Path, run_id: str, variant_id: str, response_of: str,
                label: int) -> None:
    """Record (or replace) the user's label of one judge call in the sidecar, creating it when new.

    Args:
        sidecar: the label file (``sidecar_path``); its folder must exist.
        store: the store the judged call belongs to (its file name keys the rows, so one sidecar
            could serve stores of the same name only if they are the same store).
        run_id, variant_id, response_of: the key of the ``mirroring_verdicts`` row.
        label: 1 = the reply mirrors the variant's register, 0 = it does not.
    Raises:
        ValueError: ``label`` is not 0 or 1, ``sidecar`` is the store itself, or ``sidecar`` holds a
            view, macro or type (``_open``).
    """
    if int(label) not in (0, 1):
        raise ValueError(f"label must be 0 or 1, got {label!r}")
    if Path(sidecar).resolve() == Path(store).resolve():
        raise ValueError("labels are never written into the store itself")
    now = _dt.datetime.now(_dt.UTC).replace(tzinfo=None)
    con = _open(sidecar, read_only=False)
    try:
        con.execute(_DDL)
        con.execute("INSERT OR REPLACE INTO judge_labels VALUES (?, ?, ?, ?, ?, ?)",
                    [Path(store).name, str(run_id), str(variant_id), str(response_of), int(label), now])
    finally:
        con.close()


def no_labels() -> pd.DataFrame:
    """An empty labels frame (``read_labels``'s columns)."""
    return pd.DataFrame(columns=_COLS)


def read_labels(sidecar: str | Path, store: str | Path) -> pd.DataFrame:
    """The labels recorded for ``store`` in ``sidecar``: run_id, variant_id, response_of, label (0/1),
    labelled_at. Empty (same columns) when the file or table does not exist.

    Raises:
        ValueError: the file holds a view, macro or type, or is not a DuckDB database (``_open``).
    """
    p = Path(sidecar)
    if not p.exists():
        return pd.DataFrame(columns=_COLS)
    con = _open(p, read_only=True)
    try:
        if "judge_labels" not in trust.base_tables(con):
            return pd.DataFrame(columns=_COLS)
        return con.execute(f"SELECT {', '.join(_COLS)} FROM judge_labels WHERE store_name = ? "
                           "ORDER BY run_id, variant_id, response_of", [Path(store).name]).df()
    finally:
        con.close()


def _open(sidecar: str | Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A connection to the sidecar without file-system access (``trust.READ_CONFIG``; the sidecar
    needs none, even to write); ValueError when the file holds a view, macro or type, or is not a
    DuckDB database at all."""
    try:
        problem = trust.not_duckdb(sidecar)
        if problem:
            raise duckdb.IOException(problem)
        con = duckdb.connect(str(sidecar), read_only=read_only, config=dict(trust.READ_CONFIG))
    except duckdb.Error as e:  # broken, truncated or another format: untrusted input, refused
        raise ValueError(f"{Path(sidecar).name} is not a sago label file ({e})") from None
    problem = trust.catalog_problem(trust.catalog_objects(con))
    if problem:
        con.close()
        raise ValueError(f"{sidecar} is not a sago label file ({problem})")
    return con
