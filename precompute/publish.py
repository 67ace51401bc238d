"""The runner's private working copy of a store and its atomic publishing at the store's path."""

from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path

from sago_engine.store import Store, StoreError, open_store
from sago_engine.store.layout import set_aside_wal


def work_path(target: str | Path) -> Path:
    """The runner's private working copy next to the published store (``.<name>.work``)."""
    target = Path(target)
    return target.with_name(f".{target.name}.work")


def open_work(target: str | Path) -> tuple[Path, bool]:
    """The working copy of ``target`` to run in, and whether it is a killed run's (resumed).

    A killed run's working copy is resumed (it may hold units not yet published); otherwise a
    published ``target`` is copied to a fresh working copy (none is made for a new store).

    Raises:
        StoreError: ``target`` exists but is not a sago store of this schema (never overwritten),
            or the working copy left beside it is unreadable.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        open_store(target, read_only=True).close()  # refuses a foreign file or another schema
    work = work_path(target)
    if work.exists():
        try:
            open_store(work, read_only=True).close()
        except StoreError:
            raise StoreError(f"the working copy {work} is not a readable sago store; move it away to restart "
                             f"from the published store {target}") from None
        return work, True
    if target.exists():
        tmp = work.with_name(work.name + ".tmp")
        shutil.copyfile(target, tmp)
        os.replace(tmp, work)
    return work, False


def remove_work(work: Path, only_if_empty: bool = False) -> None:
    """Delete the working copy and its write-ahead log; with ``only_if_empty`` only when it holds
    no committed unit (a run that failed before any leaves nothing to resume; an unreadable one is
    left for the user to inspect)."""
    if only_if_empty:
        if not work.exists():
            return
        try:
            with open_store(work, read_only=True) as st:
                if st.counts()["units"]:
                    return
        except Exception:  # noqa: BLE001 - unreadable: leave it for the user to inspect
            return
    work.unlink(missing_ok=True)
    work.with_name(work.name + ".wal").unlink(missing_ok=True)


def publish(store: Store, target: str | Path, *, clustered: bool = False, **meta) -> None:
    """Atomically publish a consistent snapshot of the working store at ``target``.

    CHECKPOINT folds the write-ahead log into the working file, which is then copied to a
    temporary file beside ``target``, fsynced and renamed over it (``os.replace`` is atomic):
    a dashboard reading ``target`` sees either the previous snapshot or this one, never a
    half-written file, and is never locked out by the writer. With ``clustered=True`` (the
    run's final publish) the snapshot is written with the per-prompt tables in prompt order
    (``Store.write_clustered_copy``; at the paper's scale about 20 s of CPU instead of a file
    copy), so the Prompts page's lookups skip all but one row group; the snapshots published
    while the run goes on are plain copies. A write-ahead log left beside ``target`` by a
    writable session that died is moved to ``<name>.wal.stale-<UTC time>`` first
    (``layout.set_aside_wal``, logged): it belongs to the file being replaced, and DuckDB would
    refuse to open the new file under it.
    """
    target = Path(target)
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None).isoformat(timespec="seconds")
    store.set_meta(published_at=now, **meta)
    store.checkpoint()
    tmp = target.with_name(f".{target.name}.publish-{os.getpid()}")
    try:
        tmp.unlink(missing_ok=True)
        if clustered:
            store.write_clustered_copy(tmp)
        else:
            shutil.copyfile(store.path, tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        set_aside_wal(target)  # a dead writable session's log would not match the new file
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
        tmp.with_name(tmp.name + ".wal").unlink(missing_ok=True)
