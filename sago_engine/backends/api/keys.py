"""API keys and secrets: which environment variable holds a provider's key, whether a server needs
one, and redaction of keys (known values and key-looking strings) from every text sago logs,
stores or raises.

Keys are read from environment variables only, never from a config file or the store.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit, urlunsplit

__all__ = ["API_BACKENDS", "KEY_ENV_VARS", "REDACTED", "is_local_url", "missing_key_vars", "public_url", "redact",
           "resolve_api_key"]

#: Registered API backend names (no SDK import needed to know them).
API_BACKENDS: tuple[str, ...] = ("openai", "openai_compatible", "anthropic", "gemini")

#: Environment variables a backend reads its key from, in order of preference (the first one set
#: wins). A config's ``api_key_env`` replaces this list with the one name it gives.
KEY_ENV_VARS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "openai_compatible": (),  # only the variable named by ``api_key_env``: never OPENAI_API_KEY (a third-party server)
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}

REDACTED = "[REDACTED]"

#: Key-like strings scrubbed even when their value is not known (defence in depth).
_KEY_PATTERNS = (
    re.compile(r"sk-[A-Za-z0-9_\-]{6,}"),  # OpenAI / Anthropic style
    re.compile(r"AIza[0-9A-Za-z_\-]{20,}"),  # Google API keys
    re.compile(r"(?i)((?:api[_-]?key|key|token|authorization)\s*[=:]\s*)(?:Bearer\s+)?[^\s&'\"]{6,}"),
)


def is_local_url(url: str | None) -> bool:
    """True when ``url``'s host is loopback, private (RFC 1918 / ULA) or ``localhost``.

    Used to let an ``openai_compatible`` server on the local machine or network run without a key.
    """
    if not url:
        return False
    host = (urlsplit(url).hostname or "").lower()
    if host in ("localhost", "host.docker.internal") or host.endswith(".localhost") or host.endswith(".local"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private or ip.is_link_local


def _key_vars(backend: str, api_key_env: str | None) -> tuple[str, ...]:
    return (api_key_env,) if api_key_env else KEY_ENV_VARS.get(backend, ())


def resolve_api_key(backend: str, api_key_env: str | None = None,
                    environ: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """The key value and the name of the variable it came from (``(None, None)`` if none is set).

    Keys are read only from environment variables, never from a config file.
    """
    env = os.environ if environ is None else environ
    for var in _key_vars(backend, api_key_env):
        val = env.get(var, "").strip()
        if val:
            return val, var
    return None, None


def missing_key_vars(backend: str, api_key_env: str | None = None, base_url: str | None = None,
                     environ: Mapping[str, str] | None = None) -> list[str]:
    """What must be set before this backend can run: ``[]`` when a key is present or not needed.

    Returns one entry per missing requirement, e.g. ``["GEMINI_API_KEY (or GOOGLE_API_KEY)"]``.
    An ``openai_compatible`` server reads its key only from the variable ``api_key_env`` names
    (never OPENAI_API_KEY); at a local ``base_url`` it needs none.
    """
    if backend not in KEY_ENV_VARS:
        return []
    if backend == "openai_compatible" and not api_key_env:
        # a server on this machine/network runs without a key; a remote one must name its key's
        # variable (OPENAI_API_KEY is never sent to a server other than OpenAI's)
        return [] if is_local_url(base_url) else [
            "api_key_env = \"NAME\" is needed in the model's config: the name of the environment variable "
            "holding the remote openai_compatible server's key (OPENAI_API_KEY is never sent to it)"]
    key, _ = resolve_api_key(backend, api_key_env, environ)
    if key:
        return []
    names = _key_vars(backend, api_key_env)
    return [names[0] + (f" (or {', '.join(names[1:])})" if len(names) > 1 else "")]


def redact(text: object, secrets: Iterable[str | None] = ()) -> str:
    """``str(text)`` with every given secret value and every key-looking token replaced by
    ``[REDACTED]``. Apply to any error text before it is logged, stored or raised."""
    s = str(text)
    for sec in sorted({x for x in secrets if x and len(x) >= 4}, key=len, reverse=True):
        s = s.replace(sec, REDACTED)
    for pat in _KEY_PATTERNS:
        s = pat.sub(lambda m: (m.group(1) if m.re.groups else "") + REDACTED, s)
    return s


def public_url(url: str | None) -> str | None:
    """``url`` without user:password and query string (which may carry credentials)."""
    if not url:
        return url
    p = urlsplit(url)
    host = p.hostname or ""
    if p.port:
        host = f"{host}:{p.port}"
    return urlunsplit((p.scheme, host, p.path, "", ""))
