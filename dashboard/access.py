"""Who may open what: local mode (this machine only, any store, Live page, writes) vs share mode.

``bash scripts/dashboard.sh`` listens on 127.0.0.1 only (local mode). ``--share DIR`` sets
``$SAGO_SHARE_DIR``: the server is reachable from the network, read-only, and opens stores only
from DIR (no free path box; a store is chosen by its file name among DIR's ``*.duckdb``), with no
Live page and no writes unless ``--live`` (``$SAGO_LIVE=1``) is also given. Visitors land on the
store the host names (``--store NAME``: ``$SAGO_STORE``), else the demo store, else DIR's only
store — never on whichever file sorts first (``landing_store``). A file that is not a readable
DuckDB database is listed by name with the reason, and not offered (``unreadable_stores``).
Pure functions, no Streamlit: the frame (``dashboard.frame``) applies them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SHARE_ENV = "SAGO_SHARE_DIR"
LIVE_ENV = "SAGO_LIVE"
#: Key of the optional meeting password in Streamlit secrets (``.streamlit/secrets.toml``).
PASSWORD_SECRET = "sago_password"
#: File name of the bundled demo store (``sago_engine.store.catalog.DEMO_STORE``), where visitors land.
DEMO_NAME = "sago_demo.duckdb"
#: A DuckDB database file holds these 4 bytes at offset 8 (its main header, after an 8-byte checksum).
DUCKDB_MAGIC, MAGIC_OFFSET = b"DUCK", 8


@dataclass(frozen=True)
class Access:
    """The server's access mode. ``share_dir`` is None in local mode (then everything is allowed)."""

    share_dir: Path | None = None
    live: bool = True

    @property
    def shared(self) -> bool:
        """True in share mode (network, read-only, stores from ``share_dir`` only)."""
        return self.share_dir is not None

    @property
    def free_paths(self) -> bool:
        """Whether a visitor may type any store path or model folder (local mode only)."""
        return not self.shared

    def probe_store(self, default: Path) -> Path:
        """Where "Save to store" writes: ``default`` in local mode; in share mode (with ``--live``)
        ``share_dir/probes.duckdb``, so a shared server never writes outside its folder."""
        return default if self.share_dir is None else self.share_dir / "probes.duckdb"

    def label_store(self, store: Path) -> Path:
        """Where the Method choices page writes hand labels of judge calls: a sidecar beside ``store``
        (``sago_engine.store.sidecar.judge_labels.sidecar_path``); in share mode always inside ``share_dir``, so a
        shared server never writes outside its folder. The store itself is never written."""
        from sago_engine.store.sidecar.judge_labels import sidecar_path

        return sidecar_path(store, None if self.share_dir is None else self.share_dir)

    @property
    def writes(self) -> bool:
        """Whether "Save to store" is offered: local mode, or share mode with ``--live``."""
        return self.live


def access_from_env(environ: Mapping[str, str] = os.environ) -> Access:
    """Read the mode from ``$SAGO_SHARE_DIR`` / ``$SAGO_LIVE`` (set by scripts/dashboard.sh).

    Raises ``ValueError`` when ``$SAGO_SHARE_DIR`` is set but is not a folder (refuse to start
    rather than fall back to local mode on a network-facing server).
    """
    share = environ.get(SHARE_ENV, "").strip()
    if not share:
        return Access(None, live=True)
    d = Path(share).expanduser().resolve()
    if not d.is_dir():
        raise ValueError(f"{SHARE_ENV}={share!r} is not a folder")
    return Access(d, live=environ.get(LIVE_ENV, "") in ("1", "true", "yes"))


def shared_stores(share_dir: Path) -> list[Path]:
    """The ``*.duckdb`` regular files directly in ``share_dir`` (sorted by name).

    A symlink is listed only when its target is itself a regular file directly inside
    ``share_dir``; one that points out of the folder is left out.
    """
    root = Path(share_dir).resolve()
    out = []
    for p in sorted(root.glob("*.duckdb")):
        real = p.resolve()
        if real.parent == root and real.is_file():
            out.append(p)
    return out


def store_problem(path: Path) -> str | None:
    """Why ``path`` cannot be offered as a store (a short reason naming no folder), or None when its
    first bytes are a DuckDB database header. Reads 12 bytes; never opens the database."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(MAGIC_OFFSET + len(DUCKDB_MAGIC))
    except OSError:
        return "cannot be read (permission or I/O error)"
    if head[MAGIC_OFFSET:] != DUCKDB_MAGIC:
        return "not a DuckDB database file" if head else "empty file"
    return None


def readable_stores(share_dir: Path) -> list[Path]:
    """``shared_stores`` whose file is a readable DuckDB database (``store_problem`` is None)."""
    return [p for p in shared_stores(share_dir) if store_problem(p) is None]


def unreadable_stores(share_dir: Path) -> list[tuple[str, str]]:
    """(file name, reason) of each ``shared_stores`` file that is not offered: unreadable or not DuckDB."""
    return [(p.name, why) for p in shared_stores(share_dir) if (why := store_problem(p)) is not None]


def landing_store(share_dir: Path, named: str | os.PathLike | None = None) -> Path | None:
    """The store a visitor sees first in share mode, or None (then the visitor picks one).

    ``named`` (``$SAGO_STORE``, set by ``--store NAME``) when it is a readable store of the folder
    (``confined_store``), else ``DEMO_NAME`` when the folder holds it, else the folder's only
    readable store. Several stores and no name: None — never the first file by name.
    """
    ok = readable_stores(share_dir)
    pick = confined_store(named, share_dir)
    if pick is not None and pick in ok:
        return pick
    demo = [p for p in ok if p.name == DEMO_NAME]
    if demo:
        return demo[0]
    return ok[0] if len(ok) == 1 else None


def confined_store(choice: str | os.PathLike | None, share_dir: Path) -> Path | None:
    """The store a visitor's ``choice`` names in share mode, or None when it is refused.

    Accepted: the file name of one of ``shared_stores(share_dir)`` (``"run.duckdb"``), or that
    file's own path. Refused: anything else — names with ``/`` or ``..``, absolute paths outside
    the folder, symlinks that lead out of it, missing files. Never tells why (no existence
    oracle for paths outside the folder).
    """
    if choice is None:
        return None
    s = str(choice).strip()
    if not s:
        return None
    allowed = {p.name: p for p in shared_stores(share_dir)}
    if s in allowed:
        return allowed[s]
    root = Path(share_dir).resolve()
    cand = Path(s)
    if cand.is_absolute() and cand.parent.resolve() == root and cand.name in allowed:
        return allowed[cand.name]
    return None
