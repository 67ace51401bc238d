"""The run config's error and the checks every section shares: a name with its valid choices, an integer
setting, no non-finite number anywhere."""

from __future__ import annotations

import difflib
import math
from typing import Any


class ConfigError(ValueError):
    """A config that names something unknown or invalid; the message lists what is valid."""


def unknown(kind: str, name: object, valid) -> ConfigError:
    """``unknown <kind> 'name'. Did you mean 'x'? Valid: …`` (the closest valid name by difflib)."""
    valid = list(valid)
    close = difflib.get_close_matches(str(name), [str(v) for v in valid], n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return ConfigError(f"unknown {kind} {name!r}.{hint} Valid: {', '.join(map(str, valid))}")


#: The largest integer setting a config takes (TOML allows 2⁶³ − 1; no count of sago needs more).
MAX_INT_SETTING = 2**31 - 1


def int_setting(section: dict, key: str, default: int, lo: int, hi: int = MAX_INT_SETTING) -> int:
    """An integer setting from ``lo`` to ``hi`` (``default`` when absent); raises ConfigError naming the key otherwise."""
    v = section.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < lo or v > hi:
        raise ConfigError(f"{key} must be an integer ≥ {lo} and ≤ {hi}, got {v!r}")
    return v


def non_finite(value: Any, where: str = "") -> tuple[str, float] | None:
    """The first non-finite float (NaN, ±inf) anywhere in a parsed TOML value, as ``(key path, value)``
    (e.g. ``("models[1].price_in_per_mtok", inf)``), or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return where or "(value)", value
    if isinstance(value, dict):
        items = ((f"{where}.{k}" if where else str(k), v) for k, v in value.items())
    elif isinstance(value, list):
        items = ((f"{where}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for path, v in items:
        bad = non_finite(v, path)
        if bad:
            return bad
    return None
