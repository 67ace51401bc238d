"""Environment variables are input: every one sago reads, checked before any work starts.

``check_environment`` validates each variable of ``ENV_VARS`` that is set (and not empty) for its
type and range, and names the variable and what is valid: the runner CLI (``python -m precompute``)
and the dashboard (``app.py``) call it first, so a typo'd ``SAGO_THREADS=nan`` stops the start with
one clear line instead of failing (or being silently ignored) deep inside a run. The modules that
read a variable keep their own checks; this is the same rule, applied once, up front.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

__all__ = ["ENV_VARS", "EnvError", "check_environment"]


class EnvError(ValueError):
    """An environment variable sago reads holds a value it cannot use (the message names it)."""


_BOOL = ("0", "1", "true", "false", "yes", "no", "on", "off")


def _int_in(lo: int, hi: int) -> Callable[[str], str | None]:
    def check(v: str) -> str | None:
        try:
            n = int(v.strip())
        except ValueError:
            return f"an integer from {lo} to {hi}"
        return None if lo <= n <= hi else f"an integer from {lo} to {hi}"
    return check


def _one_of(*choices: str) -> Callable[[str], str | None]:
    def check(v: str) -> str | None:
        return None if v.strip().lower() in choices else f"one of {', '.join(choices)}"
    return check


def _folder(v: str) -> str | None:
    p = Path(v).expanduser()
    return "a folder path (it names a file)" if p.exists() and not p.is_dir() else None


def _file(v: str) -> str | None:
    return "a file path (it names a folder)" if Path(v).expanduser().is_dir() else None


def _no_nul(v: str) -> str | None:
    return "text without NUL characters" if "\x00" in v else None


#: Every variable sago reads, with its check (the reading module in the comment).
ENV_VARS: dict[str, Callable[[str], str | None]] = {
    "SAGO_THREADS": _int_in(1, 4096),            # threads.apply_threads
    "SAGO_LIVE_THREADS": _int_in(1, 4096),       # live_models
    "SAGO_LIVE_MAX_CHARS": _int_in(1, 1_000_000),  # live.max_prompt_chars
    "SAGO_LINEAR_KERNEL": _one_of("onednn", "torch"),  # kernels.requested_kernel
    "SAGO_PACK_WEIGHTS": _one_of(*_BOOL),        # kernels
    "SAGO_LIVE": _one_of(*_BOOL),                # dashboard.access
    "SAGO_LIVE_WARMUP": _one_of(*_BOOL),         # app.py
    "HF_HUB_OFFLINE": _one_of(*_BOOL),           # models.resolve
    "SAGO_CACHE_DIR": _folder,                   # models.cache, backends.caching, live_save
    "SAGO_SHARE_DIR": _folder,                   # dashboard.access
    "SAGO_STORE": _file,                         # dashboard.data / frame
    "SAGO_USER_STORE": _file,                    # live_save
    "RAY_ADDRESS": _no_nul,                      # precompute.ray_launch
}


def check_environment(environ: Mapping[str, str] | None = None, names: tuple[str, ...] | None = None) -> None:
    """Raise ``EnvError`` for the first set variable of ``ENV_VARS`` (or of ``names``) with a value
    sago cannot use; unset or empty variables are not checked.

    Args:
        environ: the environment (default ``os.environ``).
        names: the variables to check (default: all of ``ENV_VARS``).
    Raises:
        EnvError: ``"SAGO_THREADS='nan' is not valid: it must be an integer from 1 to 4096"``
            (the value shown with ``repr``, cut at 80 characters: never raw control characters).
    """
    env = os.environ if environ is None else environ
    for name in names or tuple(ENV_VARS):
        v = env.get(name)
        if v is None or not v.strip():
            continue
        want = ENV_VARS[name](v)
        if want:
            raise EnvError(f"environment variable {name}={v[:80]!r} is not valid: it must be {want}")
