"""The store package's error: a file that is not a sago store, or one sago cannot open as asked."""

from __future__ import annotations

__all__ = ["StoreError"]


class StoreError(RuntimeError):
    """A file that is not a sago store, or a store of an unsupported schema version."""
