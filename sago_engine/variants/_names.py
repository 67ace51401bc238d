"""Close-name suggestions (difflib) for registry and spec errors."""

from __future__ import annotations

import difflib
from typing import Iterable


def suggest(name: str, valid: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest valid names (case-insensitive), or ``""``."""
    valid = list(valid)
    lower = {v.lower(): v for v in valid}
    close = difflib.get_close_matches(str(name).lower(), list(lower), n=3, cutoff=0.5)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(lower[c]) for c in close) + "?"
