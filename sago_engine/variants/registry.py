"""The registry of variant families: a ``sago_engine.registry.Registry`` that builds each family on first use."""

from __future__ import annotations

from typing import Any

from ..registry import Registry, UnknownNameError
from .base import Family

__all__ = ["UnknownFamilyError", "family_registry"]


class UnknownFamilyError(UnknownNameError):
    """A family name that is not registered (a KeyError and a ValueError); the message suggests close names."""


def _build(name: str, factory: Any) -> Family:
    """Instantiate a registered family class (or call its factory) and check it carries its registered name."""
    family = factory()
    if family.name != name:
        raise ValueError(f"{factory!r} built family {family.name!r}, registered as {name!r}")
    return family


def family_registry() -> Registry[Family]:
    """An empty registry of families: targets are ``"module:Class"`` paths or zero-argument
    factories, each built once on first access; a miss raises ``UnknownFamilyError``."""
    return Registry("family", build=_build, error=UnknownFamilyError)
