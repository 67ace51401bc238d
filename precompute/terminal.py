"""Text from a store or a config made safe for a terminal: control characters shown as escapes, long text cut."""

from __future__ import annotations

import unicodedata


def shown(text: object, limit: int = 80) -> str:
    """``text`` as one printable line: every control, format or other non-printing character
    (Unicode category C*, e.g. ESC, CR, BIDI overrides) written as its ``\\x..``/``\\u....`` escape,
    cut to ``limit`` characters with ``…`` (``limit`` ≥ 2). A model name or a prompt from a store
    can never move the cursor, recolour or rewrite the terminal."""
    out = []
    for ch in str(text):
        out.append(ch.encode("unicode_escape").decode("ascii") if unicodedata.category(ch).startswith("C") else ch)
    s = "".join(out)
    return s if len(s) <= limit else s[: limit - 1] + "…"
