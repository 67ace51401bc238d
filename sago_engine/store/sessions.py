"""One process, many sessions: opens of one store file inside this process take turns.

DuckDB refuses a second connection to a file with another configuration inside the same process
("Can't open a connection to same database file with a different configuration"): a dashboard
session saving a Live probe (writable) while another session's page reads the same store
(read-only) failed with that message, as if the store were broken. ``hold`` serialises them per
file: any number of read-only opens together, a writable open alone (re-entrant in its thread). A
wait is bounded (``WAIT_S``) and ends in ``StoreError`` saying who holds the file and what to do.
Other processes are DuckDB's business (its file lock), not this module's.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from sago_engine.store.errors import StoreError

__all__ = ["WAIT_S", "hold", "release"]

#: Longest wait, in seconds, for another session of this process to close the file.
WAIT_S = 60.0


class _FileTurns:
    """Readers together, one writer alone (re-entrant for the writing thread)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.readers: dict[int, int] = {}
        self.writer: int | None = None
        self.depth = 0


_turns: dict[str, _FileTurns] = {}
_guard = threading.Lock()


def _key(path: str | Path) -> str:
    return os.path.realpath(os.fspath(path))


def hold(path: str | Path, write: bool, wait_s: float | None = None) -> int:
    """Wait for this process's turn on ``path`` (shared for a read-only open, exclusive for a
    writable one); pair every call with ``release(path, owner)``.

    Returns:
        The owner of the turn (this thread's id), for ``release``.

    Raises:
        StoreError: the turn did not come within ``wait_s`` (default ``WAIT_S``) seconds, or this
            thread asks to write a file it holds open read-only (it would wait for itself).
    """
    key, me = _key(path), threading.get_ident()
    with _guard:
        t = _turns.setdefault(key, _FileTurns())
    limit = time.monotonic() + (WAIT_S if wait_s is None else wait_s)
    with t.cond:
        if write and t.readers.get(me) and t.writer != me:
            raise StoreError(f"{path} is open read-only in this thread; close that Store before opening it writable")
        while True:
            if t.writer == me or (t.writer is None and (not write or not t.readers)):
                break
            left = limit - time.monotonic()
            if left <= 0:
                what = "written by another session" if t.writer is not None else "read by another session"
                raise StoreError(f"{path} is being {what} of this dashboard or process for more than "
                                 f"{WAIT_S if wait_s is None else wait_s:g} s (a Live save, a long page query); "
                                 "nothing was changed — try again when it has finished")
            t.cond.wait(left)
        if write or t.writer == me:
            t.writer, t.depth = me, t.depth + 1
        else:
            t.readers[me] = t.readers.get(me, 0) + 1
    return me


def release(path: str | Path, owner: int) -> None:
    """Give back a turn ``hold`` gave ``owner`` (from any thread: a Store may be closed elsewhere)."""
    key, me = _key(path), owner
    with _guard:
        t = _turns.get(key)
    if t is None:
        return
    with t.cond:
        if t.writer == me and t.depth:
            t.depth -= 1
            if not t.depth:
                t.writer = None
        elif t.readers.get(me):
            t.readers[me] -= 1
            if not t.readers[me]:
                del t.readers[me]
        t.cond.notify_all()
