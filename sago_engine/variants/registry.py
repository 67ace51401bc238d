"""One explicit, lazily loading registry of variant families (refuses duplicates)."""

from __future__ import annotations

import importlib
import threading
from typing import Callable, Iterator, Mapping

from ._names import suggest
from .base import Family


class UnknownFamilyError(KeyError, ValueError):
    """A family name that is not registered; the message suggests close names.

    Subclasses both KeyError (mapping miss) and ValueError (bad argument), so either catch works.
    """

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class Registry(Mapping[str, Family]):
    """Name -> family. Entries are ``"module:Class"`` paths or zero-argument factories,
    imported/built on first access and cached, so a heavy family costs nothing at startup.
    Registering a name twice raises ValueError (never silently overwrites).
    """

    def __init__(self, kind: str = "family") -> None:
        self._kind = kind
        self._loaders: dict[str, str | Callable[[], Family]] = {}
        self._cache: dict[str, Family] = {}
        self._lock = threading.Lock()

    def register(self, name: str, target: str | Callable[[], Family]) -> None:
        """Register ``name`` -> ``target`` ("pkg.module:Class" or a factory).

        Raises:
            ValueError: ``name`` is already registered, or is empty.
        """
        if not name:
            raise ValueError(f"{self._kind} name must be non-empty")
        if name in self._loaders:
            raise ValueError(f"{self._kind} {name!r} is already registered; refusing to overwrite")
        self._loaders[name] = target

    def names(self) -> tuple[str, ...]:
        """Registered names, in registration order (the stable order of every listing)."""
        return tuple(self._loaders)

    def __getitem__(self, name: str) -> Family:
        if name not in self._loaders:
            raise UnknownFamilyError(
                f"unknown {self._kind} {name!r}{suggest(str(name), self._loaders)}; "
                f"valid {self._kind} names: {list(self._loaders)}"
            )
        with self._lock:
            if name not in self._cache:
                target = self._loaders[name]
                if isinstance(target, str):
                    mod, _, attr = target.partition(":")
                    family = getattr(importlib.import_module(mod), attr)()
                else:
                    family = target()
                if family.name != name:
                    raise ValueError(f"{target!r} built family {family.name!r}, registered as {name!r}")
                self._cache[name] = family
            return self._cache[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaders)

    def __len__(self) -> int:
        return len(self._loaders)

    def __contains__(self, name: object) -> bool:
        return name in self._loaders

    def __repr__(self) -> str:
        return f"Registry({self._kind}: {list(self._loaders)})"
