"""Dashboard filters: which models, datasets and variant tuples (F, u, s, p) a page shows.

A ``Filters`` value is passed from the sidebar to every store query; ``Store`` turns it into a
parameterised SQL WHERE clause (all SQL stays in ``sago_engine.store``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any


def _norm(values: Iterable[Any] | None) -> tuple | None:
    """``None`` stays ``None`` (no restriction); anything else becomes a sorted, de-duplicated tuple."""
    if values is None:
        return None
    return tuple(sorted(set(values), key=lambda v: (str(type(v)), v)))


@dataclass(frozen=True)
class Filters:
    """What the dashboard restricts to. Every field ``None`` means "no restriction".

    An empty tuple means "nothing selected" and yields empty results (it is not "all").
    Values are normalised to sorted tuples, so equal selections compare and hash equal.
    """

    models: tuple | None = None
    """Model names (``runs.model``) to keep."""
    datasets: tuple | None = None
    """Dataset names (``prompts.dataset`` / ``deltas.dataset``) to keep."""
    families: tuple | None = None
    """Variant families F (``social_register``, ``surface_noise``, ``structural``) to keep."""
    subtypes: tuple | None = None
    """Variant subtypes u (e.g. ``politeness``, ``case``, ``length``) to keep."""
    strengths: tuple | None = None
    """Variant strengths s (floats, on each family's own scale) to keep."""
    positions: tuple | None = None
    """Variant positions p (``PREFIX``, ``SUFFIX``, ``GLOBAL``) to keep."""

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "strengths" and v is not None:
                v = [float(x) for x in v]
            object.__setattr__(self, f.name, _norm(v))

    def key(self) -> tuple:
        """A hashable key (for ``st.cache_data`` and other caches): one entry per field."""
        return tuple((f.name, getattr(self, f.name)) for f in fields(self))

    def variant_restricted(self) -> bool:
        """True when the variant tuple (F, u, s, p) is restricted (scores differ from the stored views)."""
        return any(getattr(self, n) is not None for n in ("families", "subtypes", "strengths", "positions"))


#: The fields in sidebar order (name, label).
FILTER_FIELDS: tuple[tuple[str, str], ...] = (
    ("models", "Models"),
    ("datasets", "Datasets"),
    ("families", "Families (F)"),
    ("subtypes", "Subtypes (u)"),
    ("strengths", "Strengths (s)"),
    ("positions", "Positions (p)"),
)
