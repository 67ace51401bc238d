"""One small registry pattern for every pluggable kind of sago: variant families, backends, axes.

A ``Registry[T]`` maps a name to a target: the object itself, or a ``"package.module:attr"``
path imported on first use (so a heavy family or a backend with an SDK costs nothing at
start-up). Names are kept in registration order (the order of every listing), a name is
registered once (duplicates are refused, never overwritten), and a miss names the close
valid names (difflib).
"""

from __future__ import annotations

import difflib
import importlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

__all__ = ["Registry", "UnknownNameError", "suggest"]

T = TypeVar("T")


def suggest(name: str, valid: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest valid names (case-insensitive, difflib), or ``""``."""
    valid = list(valid)
    lower = {v.lower(): v for v in valid}
    close = difflib.get_close_matches(str(name).lower(), list(lower), n=3, cutoff=0.5)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(lower[c]) for c in close) + "?"


class UnknownNameError(KeyError, ValueError):
    """A name that is not registered; the message suggests close names and lists the valid ones.

    Subclasses both KeyError (mapping miss) and ValueError (bad argument), so either catch works.
    """

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class Registry(Mapping[str, T], Generic[T]):
    """Name → T, in registration order; targets given as ``"module:attr"`` are imported on first access.

    Args:
        kind: what the names are ("family", "backend", "axis"), used in messages.
        build: ``(name, loaded target) -> T``, applied once on first access (e.g. instantiate a
            family class and check its name); None keeps the target as it is.
        package: anchor of relative targets (``".hf_local:HFLocalBackend"``).
        error: the exception class of a miss (a subclass of ``UnknownNameError``).
    """

    def __init__(self, kind: str, *, build: Callable[[str, Any], T] | None = None, package: str | None = None,
                 error: type[UnknownNameError] = UnknownNameError) -> None:
        self.kind = kind
        self._build = build
        self._package = package
        self._error = error
        self._targets: dict[str, Any] = {}
        self._loaded: dict[str, T] = {}
        self._lock = threading.RLock()  # a target imported on first access may register others

    def register(self, name: str, target: Any) -> None:
        """Register ``name`` → ``target`` (the object, a zero-argument factory when ``build`` calls
        it, or a ``"package.module:attr"`` path imported on first access).

        Raises:
            ValueError: ``name`` is empty or already registered.
        """
        if not name:
            raise ValueError(f"{self.kind} name must be non-empty")
        with self._lock:
            if name in self._targets:
                raise ValueError(f"{self.kind} {name!r} is already registered ({self._targets[name]!r}); "
                                 "refusing to overwrite")
            self._targets[name] = target

    def unregister(self, name: str) -> None:
        """Remove ``name`` (a plug-in or a test that registered it for a while). Raises ``error`` when absent."""
        with self._lock:
            if name not in self._targets:
                raise self._miss(name)
            del self._targets[name]
            self._loaded.pop(name, None)

    def names(self) -> tuple[str, ...]:
        """Registered names, in registration order."""
        return tuple(self._targets)

    def get(self, name: str, default: Any = None) -> T | Any:  # type: ignore[override]
        """The entry ``name`` (loaded and built on first access), or ``default`` when not registered."""
        return self[name] if name in self._targets else default

    def _miss(self, name: object) -> UnknownNameError:
        return self._error(f"unknown {self.kind} {name!r}{suggest(str(name), self._targets)}; "
                           f"valid {self.kind} names: {list(self._targets)}")

    def __getitem__(self, name: str) -> T:
        if name not in self._targets:
            raise self._miss(name)
        with self._lock:
            if name not in self._loaded:
                target = self._targets[name]
                if isinstance(target, str):
                    mod, _, attr = target.partition(":")
                    target = getattr(importlib.import_module(mod, package=self._package), attr)
                self._loaded[name] = self._build(name, target) if self._build else target
            return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._targets))

    def __len__(self) -> int:
        return len(self._targets)

    def __contains__(self, name: object) -> bool:
        return name in self._targets

    def __repr__(self) -> str:
        return f"Registry({self.kind}: {list(self._targets)})"
