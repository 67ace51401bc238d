"""The run config's error and the checks every section shares: a name with its valid choices, an integer setting."""

from __future__ import annotations

import difflib


class ConfigError(ValueError):
    """A config that names something unknown or invalid; the message lists what is valid."""


def unknown(kind: str, name: object, valid) -> ConfigError:
    """``unknown <kind> 'name'. Did you mean 'x'? Valid: …`` (the closest valid name by difflib)."""
    valid = list(valid)
    close = difflib.get_close_matches(str(name), [str(v) for v in valid], n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return ConfigError(f"unknown {kind} {name!r}.{hint} Valid: {', '.join(map(str, valid))}")


def int_setting(section: dict, key: str, default: int, lo: int) -> int:
    """An integer setting ≥ ``lo`` (``default`` when absent); raises ConfigError naming the key otherwise."""
    v = section.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ConfigError(f"{key} must be an integer ≥ {lo}, got {v!r}")
    return v
