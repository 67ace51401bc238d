"""The reply cache's on-disk table (sqlite3, WAL): key → JSON value, first write wins.

A ``sago_engine.backends.caching.ReplyCache`` (get / put / close): ``get_backend`` opens one under
``default_cache_dir()`` for the API backends' ``CachingBackend``. It lives in the store package
because all SQL of sago does; the cache itself is not part of a DuckDB store.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

from sago_engine.store.errors import StoreError

__all__ = ["ResponseCache"]


class ResponseCache:
    """Key → JSON value on disk (sqlite3, WAL; safe across threads and processes).

    One table ``replies(key TEXT PRIMARY KEY, value TEXT, created REAL)``; first write wins.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._con = sqlite3.connect(str(self.path), timeout=30.0, check_same_thread=False, isolation_level=None)
        try:
            with self._lock:
                self._con.execute("PRAGMA journal_mode=WAL")
                self._con.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, value TEXT NOT NULL, "
                                  "created REAL NOT NULL)")
                cols = [r[1] for r in self._con.execute("PRAGMA table_info(replies)").fetchall()]
            if cols[:3] != ["key", "value", "created"]:
                raise sqlite3.DatabaseError(f"its table replies has columns {cols}")
        except sqlite3.Error as e:  # another file at the cache's path, or one damaged: never written into
            self._con.close()
            raise StoreError(f"{self.path} is not sago's reply cache ({e}); it is only a cache: move it away or "
                             f"delete it, or point SAGO_CACHE_DIR elsewhere") from None

    def get(self, key: str) -> dict | None:
        """The stored value for ``key`` or None."""
        with self._lock:
            row = self._con.execute("SELECT value FROM replies WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])  # ValueError for a damaged entry (the caller's miss)

    def discard(self, key: str) -> None:
        """Remove the entry of ``key`` (one found damaged or not this key's), so a fresh reply takes its place."""
        with self._lock:
            self._con.execute("DELETE FROM replies WHERE key = ?", (key,))

    def put(self, key: str, value: dict) -> None:
        """Store ``value`` (JSON-serialisable) under ``key`` (first write wins). Written as ASCII
        JSON, so any string (a reply's lone surrogate included) is stored and read back as given."""
        text = json.dumps(value, ensure_ascii=True, allow_nan=False)
        with self._lock:
            self._con.execute("INSERT OR IGNORE INTO replies VALUES (?, ?, ?)", (key, text, time.time()))

    def __len__(self) -> int:
        with self._lock:
            return int(self._con.execute("SELECT count(*) FROM replies").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._con.close()
