"""What a backend takes in a ``[[models]]`` table: a frozen dataclass per backend (or family of
backends) that the run config validates an entry against, and the checks its values share.

A settings class lists its keys as dataclass fields (each with its default and a docstring),
validates a raw table in ``check_table`` (a ``ValueError`` names the key and what is valid, never
the model: the config adds that) and gives the backend's constructor arguments (``spec``).
``base.SETTINGS`` maps each backend name to its class; docs/CONFIG.md documents every field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

__all__ = ["MAX_NUMBER", "BackendSettings", "check_int", "check_number", "check_text"]

#: The largest value a numeric backend setting takes (seconds, USD per million tokens, …): a
#: finite 1e308 would overflow every sum or sleep it enters.
MAX_NUMBER = 1e9


def check_int(t: Mapping[str, Any], key: str, lo: int) -> None:
    """``t[key]``, when given, is an integer ≥ ``lo`` and ≤ ``MAX_NUMBER``; raises ValueError naming the key otherwise."""
    if key in t:
        v = t[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < lo or v > MAX_NUMBER:
            raise ValueError(f"{key} must be an integer ≥ {lo} and ≤ {MAX_NUMBER:.0f}, got {v!r}")


def check_number(t: Mapping[str, Any], key: str, lo: float, *, strict: bool = False) -> None:
    """``t[key]``, when given and not None, is a finite number ≥ ``lo`` (> ``lo`` with ``strict``)
    and at most ``MAX_NUMBER`` (NaN fails every comparison, so it is refused by name)."""
    v = t.get(key)
    if v is None:
        return
    if (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
            or (v <= lo if strict else v < lo) or v > MAX_NUMBER):
        raise ValueError(f"{key} must be a number {'>' if strict else '≥'} {lo:g}, finite and ≤ {MAX_NUMBER:g}, "
                         f"got {v!r}")


def check_text(t: Mapping[str, Any], *keys: str) -> None:
    """Each of ``keys`` that is given is a non-empty string."""
    for k in keys:
        if k in t and (not isinstance(t[k], str) or not t[k].strip()):
            raise ValueError(f"{k} must be a non-empty string, got {t[k]!r}")


def check_env_name(t: Mapping[str, Any], key: str = "api_key_env") -> None:
    """``t[key]``, when given, is the NAME of an environment variable (never a key value)."""
    if key in t and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", t[key]):
        raise ValueError(f"{key} must be the NAME of an environment variable (e.g. \"MY_SERVER_KEY\"), "
                         f"never the key itself")


@dataclass(frozen=True)
class BackendSettings:
    """Settings of a backend that takes no keys beyond the ones every ``[[models]]`` entry has."""

    label: ClassVar[str] = "backends"
    """How messages name the backends sharing these settings when there are several of them."""
    takes_run_seed: ClassVar[bool] = False
    """Whether the backend's constructor gets the run seed (``seed``) beside these settings."""

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The ``[[models]]`` keys these settings hold, in declaration order."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def check_table(cls, t: dict[str, Any], backend: str, *, check_devices: bool = True) -> None:
        """Validate the given keys of ``t`` for ``backend``; may normalise values in place.

        Raises:
            ValueError: a bad value (the message names the key and what is valid).
        """

    @classmethod
    def from_table(cls, table: Mapping[str, Any], backend: str, *, check_devices: bool = True) -> BackendSettings:
        """The settings of one ``[[models]]`` table (only these settings' keys; unset keys keep
        their defaults), validated by ``check_table``."""
        t = dict(table)
        cls.check_table(t, backend, check_devices=check_devices)
        return cls(**t)

    def spec(self) -> dict[str, Any]:
        """The backend constructor's keyword arguments: every setting that is not None (a table
        copied), so unset settings keep the backend's own defaults."""
        out = {}
        for k in self.keys():
            v = getattr(self, k)
            if v is not None:
                out[k] = dict(v) if isinstance(v, dict) else v
        return out
