"""Which store files exist and how fresh they are: the bundled demo store, store discovery, snapshot captions."""

from __future__ import annotations

from pathlib import Path

#: The demo store shipped with the repository (rebuilt by ``python -m precompute``; docs/STORES.md).
DEMO_STORE = Path(__file__).resolve().parents[2] / "data" / "sago_demo.duckdb"


def find_stores(folder: str | Path) -> list[Path]:
    """DuckDB files (``*.duckdb``) directly in ``folder``, sorted by name; the demo store first when present."""
    found = sorted(Path(folder).glob("*.duckdb"))
    return sorted(found, key=lambda p: (p.name != DEMO_STORE.name, p.name))


def snapshot_caption(meta: dict[str, str]) -> str:
    """One line on how fresh a store is, from its ``meta`` (published_at, status, progress).

    The runner publishes consistent snapshots while it runs; readers see the last one.
    """
    when = meta.get("published_at")
    status = meta.get("status")
    if not when:
        return "Store written without snapshot publishing (no timestamp recorded)."
    if status == "running":
        return f"Snapshot of a run in progress ({meta.get('progress', '?')} generations) published {when} UTC."
    return f"Complete store, published {when} UTC."
