"""Word-level difference between a base prompt and its variant, as segments and as escaped HTML.

SAGO (arXiv 2610.01428) §Variants: a variant x_i^(v) = T_v(x_i) edits the base prompt; the
Prompts page highlights what the edit changed. Text from datasets and models is untrusted: the
HTML form escapes every piece of data (``html.escape``), so ``<script>`` shows as text.

The work is bounded: ``difflib.SequenceMatcher`` is quadratic in the worst case (python/cpython
#106865), so a diff compares at most ``MAX_PAIRS`` token pairs in all. A longer text is compared
line by line (sentence by sentence inside a line), its changed lines word by word while the
budget lasts; a text too long even for that is not diffed (``TextDiff.level == "none"``).
"""

from __future__ import annotations

import difflib
import html
import re
from dataclasses import dataclass

#: Tokens: runs of whitespace, runs of word characters, or one other character each.
_TOKEN = re.compile(r"\s+|\w+|[^\w\s]", re.UNICODE)

OPS = ("equal", "delete", "insert")


def tokenize(text: str) -> list[str]:
    """Split ``text`` into whitespace runs, word runs and single punctuation characters; ``"".join`` restores it."""
    return _TOKEN.findall(text)


#: Most token pairs one diff compares, summed over its SequenceMatcher passes (len(a) · len(b)
#: each): about 2,000 × 2,000 tokens, a fraction of a second on one core.
MAX_PAIRS = 4_000_000
#: Lines, and sentences inside a line (after ``.``, ``!``, ``?`` before whitespace): the units of
#: the coarse pass for texts too long for one word-level pass.
_CHUNK = re.compile(r"[^\n]*?(?:[.!?](?=\s)|\n|$)")
LEVELS = ("word", "line", "none")


@dataclass(frozen=True)
class TextDiff:
    """The result of ``bounded_diff``.

    Attributes:
        segments: (op, text) pairs, op ∈ ``OPS`` (empty when ``level`` is "none").
        level: "word" (one word-level pass), "line" (lines/sentences first, changed ones word by
            word within the budget), or "none" (too long to compare within ``MAX_PAIRS``).
        words: word tokens in the longer of the two texts.
        pairs: token (or chunk) pairs compared, ≤ the budget given.
    """

    segments: tuple[tuple[str, str], ...]
    level: str
    words: int
    pairs: int


class _Segments:
    """Segments under construction: empty texts dropped, adjacent segments of one op merged."""

    def __init__(self) -> None:
        self.out: list[tuple[str, str]] = []

    def add(self, op: str, text: str) -> None:
        if not text:
            return
        if self.out and self.out[-1][0] == op:
            self.out[-1] = (op, self.out[-1][1] + text)
        else:
            self.out.append((op, text))


def _match(a: list[str], b: list[str], seg: _Segments) -> None:
    """One SequenceMatcher pass (autojunk off) over token or chunk lists; a replacement is a delete then an insert."""
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            seg.add("equal", "".join(a[i1:i2]))
        else:
            seg.add("delete", "".join(a[i1:i2]))
            seg.add("insert", "".join(b[j1:j2]))


def _chunks(text: str) -> list[str]:
    """``text`` cut after each newline and each sentence end; ``"".join`` restores it."""
    return [c for c in _CHUNK.findall(text) if c]


def _words(tokens: list[str]) -> int:
    return sum(1 for t in tokens if t[:1].isalnum() or t[:1] == "_")


def bounded_diff(base: str, variant: str, max_pairs: int = MAX_PAIRS) -> TextDiff:
    """The edit from ``base`` to ``variant`` with at most ``max_pairs`` token pairs compared.

    Common leading and trailing tokens are matched first (linear). When the rest fits,
    one word-level pass (``level`` "word", as ``diff_segments`` always gave); else lines and
    sentences are matched as whole units and each changed run is refined word by word while the
    budget lasts, the rest shown as deleted + inserted (``level`` "line"); when even the
    units do not fit, or a text is a single unit, nothing is compared (``level`` "none").
    Invariants (levels "word" and "line"): joining the equal+delete texts gives ``base``,
    equal+insert gives ``variant``.
    """
    a, b = tokenize(base), tokenize(variant)
    words = max(_words(a), _words(b))
    pre = 0
    while pre < min(len(a), len(b)) and a[pre] == b[pre]:
        pre += 1
    post = 0
    while post < min(len(a), len(b)) - pre and a[len(a) - 1 - post] == b[len(b) - 1 - post]:
        post += 1
    mid_a, mid_b = a[pre:len(a) - post], b[pre:len(b) - post]
    seg = _Segments()
    seg.add("equal", "".join(a[:pre]))
    pairs = len(mid_a) * len(mid_b)
    if pairs <= max_pairs:
        level = "word"
        _match(mid_a, mid_b, seg)
    else:
        ca, cb = _chunks("".join(mid_a)), _chunks("".join(mid_b))
        pairs = len(ca) * len(cb)
        if pairs > max_pairs or min(len(ca), len(cb)) < 2:
            return TextDiff((), "none", words, 0)
        level = "line"
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ca, cb, autojunk=False).get_opcodes():
            if tag == "equal":
                seg.add("equal", "".join(ca[i1:i2]))
                continue
            ta, tb = tokenize("".join(ca[i1:i2])), tokenize("".join(cb[j1:j2]))
            if pairs + len(ta) * len(tb) <= max_pairs:
                pairs += len(ta) * len(tb)
                _match(ta, tb, seg)
            else:
                seg.add("delete", "".join(ta))
                seg.add("insert", "".join(tb))
    seg.add("equal", "".join(a[len(a) - post:]))
    return TextDiff(tuple(seg.out), level, words, pairs)


def diff_segments(base: str, variant: str) -> list[tuple[str, str]]:
    """The edit from ``base`` to ``variant`` as (op, text) segments, op ∈ {"equal", "delete", "insert"}.

    Word-level (difflib.SequenceMatcher over ``tokenize`` tokens, autojunk off) within the work
    bound of ``bounded_diff``, which also says how coarse a long text's diff is; a text too long
    to compare is one delete and one insert. A replacement becomes a delete followed by an insert;
    adjacent segments of one op are merged. Invariants: joining the equal+delete texts gives
    ``base``, joining equal+insert texts gives ``variant``.
    """
    d = bounded_diff(base, variant)
    if d.level != "none":
        return list(d.segments)
    seg = _Segments()
    seg.add("delete", base)
    seg.add("insert", variant)
    return seg.out


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
