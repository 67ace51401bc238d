"""Text from a model is text: the one normalisation every reply passes where it enters sago.

A reply comes from a model or a server sago does not control (a local model, an API, a vLLM
server, the judge, the LLM rewriter). Before anything stores, caches, hashes or measures it,
``clean_reply`` turns it into text every UTF-8 writer accepts and that fits in memory:

- a lone UTF-16 surrogate (a JSON reply ending in ``"\\ud83d"``, half an emoji) → U+FFFD,
  flag ``surrogates_replaced`` (a surrogate cannot be encoded as UTF-8: sqlite, DuckDB and
  ``str.encode`` refuse it, which would abort the run that paid for the reply);
- bytes that are not UTF-8 (a reply handed over as bytes) → decoded with U+FFFD for each bad
  sequence, flag ``invalid_utf8``;
- NUL characters → removed, flag ``nul_removed`` (C strings, terminals and several stores end a
  string at NUL);
- more than ``MAX_REPLY_CHARS`` characters → cut there, flag ``cut_huge``.

``GenerationResult`` calls it for its ``text`` and ``error`` (``types.GenerationResult``), so every
backend is covered at the one place a reply becomes sago's; the flags land in
``meta["flags"]`` and from there in ``responses.flags`` / ``base_repeats.flags`` (schema v5).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["MAX_REPLY_CHARS", "REPLY_FLAGS", "clean_reply", "clean_value"]

#: Longest reply kept, in characters (16× a 32k-token reply at 2 characters a token: no real reply
#: reaches it; a server that streams megabytes is cut here instead of filling memory and the store).
MAX_REPLY_CHARS = 1_000_000

#: Every flag ``clean_reply`` can set, in the order it checks them.
REPLY_FLAGS = ("invalid_utf8", "surrogates_replaced", "nul_removed", "cut_huge")

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_reply(text: str | bytes | None, max_chars: int = MAX_REPLY_CHARS) -> tuple[str, list[str]]:
    """The reply as storable text and what was changed.

    Args:
        text: the reply as a backend received it (``str``, ``bytes`` or None → ``""``).
        max_chars: the longest text kept (default ``MAX_REPLY_CHARS``).
    Returns:
        ``(text, flags)``: text that encodes as UTF-8, without NUL, at most ``max_chars`` long;
        ``flags`` a sublist of ``REPLY_FLAGS`` (``[]`` when nothing changed).
    """
    flags: list[str] = []
    if text is None:
        return "", flags
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            text = bytes(text).decode("utf-8", errors="replace")
            flags.append("invalid_utf8")
    text = str(text)
    if _SURROGATE.search(text):
        # a valid surrogate pair (from a reader that kept UTF-16 halves) becomes its character; a lone one U+FFFD
        fixed = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        text = _SURROGATE.sub("\ufffd", fixed)
        flags.append("surrogates_replaced")
    if "\x00" in text:
        text = text.replace("\x00", "")
        flags.append("nul_removed")
    if len(text) > max_chars:
        text = text[:max_chars]
        flags.append("cut_huge")
    return text, flags


def clean_value(v: Any) -> Any:
    """``v`` with every string inside (dict keys and values, list items) passed through
    ``clean_reply`` without the length cap: a reply's metadata (the model string, the raw stop
    reason) is server text too, and must encode as UTF-8 in the reply cache and the store."""
    if isinstance(v, str):
        return clean_reply(v, max_chars=len(v))[0] if (_SURROGATE.search(v) or "\x00" in v) else v
    if isinstance(v, dict):
        return {clean_value(k): clean_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return type(v)(clean_value(x) for x in v)
    return v
