"""Word-level difference between a base prompt and its variant, as segments and as escaped HTML.

SAGO (arXiv 2610.01428) §Variants: a variant x_i^(v) = T_v(x_i) edits the base prompt; the
Prompts page highlights what the edit changed. Text from datasets and models is untrusted: the
HTML form escapes every piece of data (``html.escape``), so ``<script>`` shows as text.
"""

from __future__ import annotations

import difflib
import html
import re

#: Tokens: runs of whitespace, runs of word characters, or one other character each.
_TOKEN = re.compile(r"\s+|\w+|[^\w\s]", re.UNICODE)

OPS = ("equal", "delete", "insert")


def tokenize(text: str) -> list[str]:
    """Split ``text`` into whitespace runs, word runs and single punctuation characters; ``"".join`` restores it."""
    return _TOKEN.findall(text)


def diff_segments(base: str, variant: str) -> list[tuple[str, str]]:
    """The edit from ``base`` to ``variant`` as (op, text) segments, op ∈ {"equal", "delete", "insert"}.

    Word-level (difflib.SequenceMatcher over ``tokenize`` tokens, autojunk off); a replacement
    becomes a delete followed by an insert; adjacent segments of one op are merged. Invariants:
    joining the equal+delete texts gives ``base``, joining equal+insert texts gives ``variant``.
    """
    a, b = tokenize(base), tokenize(variant)
    out: list[tuple[str, str]] = []

    def add(op: str, text: str) -> None:
        if not text:
            return
        if out and out[-1][0] == op:
            out[-1] = (op, out[-1][1] + text)
        else:
            out.append((op, text))

    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            add("equal", "".join(a[i1:i2]))
        else:
            add("delete", "".join(a[i1:i2]))
            add("insert", "".join(b[j1:j2]))
    return out


_STYLE = {
    "equal": "",
    "delete": "background:#fde2e1;color:#8a1c1c;text-decoration:line-through;",
    "insert": "background:#dff5e3;color:#125c24;font-weight:600;",
}
_TAG = {"equal": "span", "delete": "del", "insert": "ins"}


def diff_html(segments: list[tuple[str, str]]) -> str:
    """An HTML fragment for ``segments``: deletions struck through in red, insertions in green.

    Every text is passed through ``html.escape`` (quotes too), and the markup around it is
    constant, so the fragment contains no markup that came from the data.
    """
    parts = []
    for op, text in segments:
        if op not in _TAG:
            raise ValueError(f"unknown op {op!r}; expected one of {OPS}")
        style = f' style="{_STYLE[op]}"' if _STYLE[op] else ""
        parts.append(f"<{_TAG[op]}{style}>{html.escape(text, quote=True)}</{_TAG[op]}>")
    return ('<div style="white-space:pre-wrap;font-family:ui-monospace,monospace;line-height:1.6;'
            'padding:0.5rem 0.75rem;border:1px solid #ddd;border-radius:6px;">' + "".join(parts) + "</div>")
