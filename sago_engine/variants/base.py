"""The family protocol: a named set of subtypes, each with valid strengths and positions.

SAGO (arXiv 2610.01428) §Variants: a variant is v = (F, u, s, p). A family F owns its subtypes
u, each subtype owns its valid strengths s and positions p, and one pure method turns a base
prompt into the variant text plus a meta record.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..registry import suggest


@dataclass(frozen=True)
class SubtypeInfo:
    """The valid settings of one subtype u of a family (SAGO §Variants)."""

    strengths: tuple[float, ...]
    """Valid strengths s, in increasing order, on the family's own scale."""
    positions: tuple[str, ...]
    """Valid positions p, a subset of ``types.POSITIONS`` in the order PREFIX, SUFFIX, GLOBAL."""
    description: str = ""
    """One line: what the subtype changes and what its strength scale means."""


@runtime_checkable
class Family(Protocol):
    """A variant family (SAGO §Variants). Implementations are small, stateless classes.

    A family may also offer ``editable(text, subtype, strength, position) -> bool``: whether
    ``apply`` can change ``text`` in that cell at all (``variants.spec_applies``; surface noise
    does); a family without it is taken to always change the text."""

    name: str
    """Unique family name, e.g. ``"surface_noise"``."""
    generator: str
    """Implementation id stored as ``Variant.generator`` (e.g. ``"rules-v1"``)."""
    subtypes: Mapping[str, SubtypeInfo]
    """Subtype name -> its valid strengths and positions."""

    def apply(
        self, text: str, subtype: str, strength: float, position: str, rng: random.Random
    ) -> tuple[str, dict[str, Any]]:
        """Return ``(variant_text, meta)``; pure given ``rng`` (no global state)."""
        ...


def check_setting(family: Family, subtype: str, strength: float, position: str) -> None:
    """Raise ValueError naming the invalid field of (u, s, p) and listing the valid options.

    Args:
        family: the family the setting belongs to.
        subtype, strength, position: the (u, s, p) of a variant.
    Raises:
        ValueError: unknown subtype, a strength not on the subtype's ladder, or a position the
            subtype does not support.
    Source: SAGO (arXiv 2610.01428) §Variants.
    """
    info = family.subtypes.get(subtype)
    if info is None:
        raise ValueError(
            f"unknown subtype {subtype!r} for family {family.name!r}"
            f"{suggest(subtype, family.subtypes)}; valid subtypes: {sorted(family.subtypes)}"
        )
    try:
        s = float(strength)
    except (TypeError, ValueError):
        raise ValueError(f"strength must be a number, got {strength!r}") from None
    if not any(abs(s - v) < 1e-9 for v in info.strengths):
        raise ValueError(
            f"invalid strength {strength!r} for {family.name}/{subtype}; "
            f"valid strengths: {[_fmt(v) for v in info.strengths]}"
        )
    if position not in info.positions:
        raise ValueError(
            f"invalid position {position!r} for {family.name}/{subtype}"
            f"{suggest(str(position), info.positions)}; valid positions: {list(info.positions)}"
        )


def _fmt(v: float) -> float | int:
    return int(v) if float(v).is_integer() else v
