"""Word-level difference between a base prompt and its variant, as segments and as escaped HTML.

SAGO (arXiv 2610.01428) §Variants: a variant x_i^(v) = T_v(x_i) edits the base prompt; the
Prompts page highlights what the edit changed. Text from datasets and models is untrusted: the
HTML form escapes every piece of data (``html.escape``), so ``<script>`` shows as text.

The work is bounded. ``difflib.SequenceMatcher`` is quadratic in the expected case and worse on
texts with a small vocabulary (python/cpython #106865: minutes for 70 kB), so the edit is a
longest common subsequence (LCS) of tokens computed bit-parallel (Allison & Dix 1986; Hyyrö 2004,
"Bit-parallel LCS-length computation revisited"): one pass over the variant's tokens with
Python integers as bit vectors over the base's tokens, O(n·m / word size) time and n·m bits of
memory for an n × m comparison, whatever the text. A diff compares at most ``MAX_PAIRS`` token
pairs in all. A longer text is compared line by line (sentence by sentence inside a line), its
changed lines word by word while the budget lasts; a text too long even for that is not diffed
(``TextDiff.level == "none"``).
"""

from __future__ import annotations

import html
import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from sago_engine.textsafe import PAGE_KEEPS, neutral

#: Tokens: runs of whitespace, runs of word characters, or one other character each.
_TOKEN = re.compile(r"\s+|\w+|[^\w\s]", re.UNICODE)

OPS = ("equal", "delete", "insert")


def tokenize(text: str) -> list[str]:
    """Split ``text`` into whitespace runs, word runs and single punctuation characters; ``"".join`` restores it."""
    return _TOKEN.findall(text)


#: Most token pairs one diff compares, summed over its LCS passes (n · m each; n · m bits of memory
#: for the pass): 10⁸ pairs (e.g. 10,000 × 10,000 tokens, 12.5 MB) is a fraction of a second on one core.
MAX_PAIRS = 100_000_000
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
        pairs: token (or line) pairs compared, ≤ the budget given.
    """

    segments: tuple[tuple[str, str], ...]
    level: str
    words: int
    pairs: int


def lcs_ops(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[tuple[str, int]]:
    """An edit script from ``a`` to ``b`` along a longest common subsequence: ("equal" | "delete" |
    "insert", index into ``a`` for equal/delete, into ``b`` for insert), in text order.

    Bit-parallel LCS (Hyyrö 2004): bit i of the row V_j is 0 where LCS(a[:i+1], b[:j]) exceeds
    LCS(a[:i], b[:j]); V_{j+1} = (V_j + U) | (V_j − U) with U = V_j & mask(b_j), the bits of ``a``
    equal to b_j. Time O(len(a)·len(b)/word size), memory len(a)·len(b) bits (the rows kept for
    the walk back), no data-dependent worst case.
    """
    n, m = len(a), len(b)
    full = (1 << n) - 1
    mask: dict[Hashable, int] = {}
    for i, t in enumerate(a):
        mask[t] = mask.get(t, 0) | (1 << i)
    rows = [full]
    v = full
    for t in b:
        u = v & mask.get(t, 0)
        v = ((v + u) | (v - u)) & full
        rows.append(v)
    out: list[tuple[str, int]] = []
    i, j = n, m
    while i > 0 and j > 0:
        if a[i - 1] == b[j - 1]:
            i, j = i - 1, j - 1
            out.append(("equal", i))
        elif (rows[j] >> (i - 1)) & 1:  # LCS(a[:i-1], b[:j]) == LCS(a[:i], b[:j]): a[i-1] is not needed
            i -= 1
            out.append(("delete", i))
        else:
            j -= 1
            out.append(("insert", j))
    out.extend(("delete", k) for k in range(i - 1, -1, -1))
    out.extend(("insert", k) for k in range(j - 1, -1, -1))
    out.reverse()
    return out


class _Segments:
    """Segments under construction: empty texts dropped; each run of changes becomes one delete then
    one insert, a whitespace-only equal text between two changes joining both (so a replaced phrase
    reads as one struck and one added piece, not word-by-word around shared spaces)."""

    def __init__(self) -> None:
        self.out: list[tuple[str, str]] = []
        self._dele: list[str] = []
        self._ins: list[str] = []
        self._gap = ""  # whitespace seen after a change, not yet known to be inside a run of changes

    def add(self, op: str, text: str) -> None:
        if not text:
            return
        if op == "equal":
            if (self._dele or self._ins) and not text.strip() and not self._gap:
                self._gap = text
                return
            self._flush()
            self._put("equal", text)
            return
        if self._gap:  # the whitespace lay between two changes: part of both texts of the run
            self._dele.append(self._gap)
            self._ins.append(self._gap)
            self._gap = ""
        (self._dele if op == "delete" else self._ins).append(text)

    def _put(self, op: str, text: str) -> None:
        if self.out and self.out[-1][0] == op:
            self.out[-1] = (op, self.out[-1][1] + text)
        else:
            self.out.append((op, text))

    def _flush(self) -> None:
        gap, self._gap = self._gap, ""
        if self._dele:
            self._put("delete", "".join(self._dele))
        if self._ins:
            self._put("insert", "".join(self._ins))
        self._dele, self._ins = [], []
        if gap:
            self._put("equal", gap)

    def done(self) -> tuple[tuple[str, str], ...]:
        self._flush()
        return tuple(self.out)


def _match(a: list[str], b: list[str], seg: _Segments) -> None:
    """One LCS pass over two token lists, appended to ``seg``."""
    for op, k in lcs_ops(a, b):
        seg.add(op, b[k] if op == "insert" else a[k])


def _chunks(text: str) -> list[str]:
    """``text`` cut after each newline and each sentence end; ``"".join`` restores it."""
    return [c for c in _CHUNK.findall(text) if c]


def _words(tokens: list[str]) -> int:
    return sum(1 for t in tokens if t[:1].isalnum() or t[:1] == "_")


def bounded_diff(base: str, variant: str, max_pairs: int = MAX_PAIRS) -> TextDiff:
    """The edit from ``base`` to ``variant`` with at most ``max_pairs`` token pairs compared.

    Common leading and trailing tokens are matched first (linear). When the rest fits, one
    word-level LCS pass (``level`` "word"); else lines and sentences are matched as whole units
    (an LCS over them) and each changed run is refined word by word while the budget lasts, the
    rest shown as deleted + inserted (``level`` "line"); when even the units do not fit, or a
    text is a single unit, nothing is compared (``level`` "none").
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
        run_a: list[str] = []
        run_b: list[str] = []

        def refine() -> None:
            nonlocal pairs
            ta, tb = tokenize("".join(run_a)), tokenize("".join(run_b))
            if pairs + len(ta) * len(tb) <= max_pairs:
                pairs += len(ta) * len(tb)
                _match(ta, tb, seg)
            else:
                seg.add("delete", "".join(ta))
                seg.add("insert", "".join(tb))
            run_a.clear()
            run_b.clear()

        for op, k in lcs_ops(ca, cb):
            if op == "equal":
                if run_a or run_b:
                    refine()
                seg.add("equal", ca[k])
            else:
                (run_a if op == "delete" else run_b).append(ca[k] if op == "delete" else cb[k])
        if run_a or run_b:
            refine()
    seg.add("equal", "".join(a[len(a) - post:]))
    return TextDiff(seg.done(), level, words, pairs)


def diff_segments(base: str, variant: str) -> list[tuple[str, str]]:
    """The edit from ``base`` to ``variant`` as (op, text) segments, op ∈ {"equal", "delete", "insert"}.

    Word-level (an LCS of ``tokenize`` tokens) within the work bound of ``bounded_diff``, which
    also says how coarse a long text's diff is; a text too long to compare is one delete and one
    insert. Each run of changes is one delete followed by one insert. Invariants: joining the
    equal+delete texts gives ``base``, joining equal+insert texts gives ``variant``.
    """
    d = bounded_diff(base, variant)
    if d.level != "none":
        return list(d.segments)
    return [(op, t) for op, t in (("delete", base), ("insert", variant)) if t]


_STYLE = {
    "equal": "",
    "delete": "background:#fde2e1;color:#8a1c1c;text-decoration:line-through;",
    "insert": "background:#dff5e3;color:#125c24;font-weight:600;",
}
_TAG = {"equal": "span", "delete": "del", "insert": "ins"}


def diff_html(segments: list[tuple[str, str]]) -> str:
    """An HTML fragment for ``segments``: deletions struck through in red, insertions in green.

    Every text is passed through ``textsafe.neutral`` (control and bidi characters as U+FFFD, the
    page rule) and ``html.escape`` (quotes too), and the markup around it is constant, so the
    fragment contains no markup, control or bidi character that came from the data.
    """
    parts = []
    for op, text in segments:
        if op not in _TAG:
            raise ValueError(f"unknown op {op!r}; expected one of {OPS}")
        style = f' style="{_STYLE[op]}"' if _STYLE[op] else ""
        parts.append(f"<{_TAG[op]}{style}>{html.escape(neutral(text, PAGE_KEEPS), quote=True)}</{_TAG[op]}>")
    # overflow-wrap:anywhere breaks a word longer than the box (a reply of one 700-character token) inside it
    return ('<div style="white-space:pre-wrap;overflow-wrap:anywhere;font-family:ui-monospace,monospace;'
            'line-height:1.6;padding:0.5rem 0.75rem;border:1px solid #ddd;border-radius:6px;">' + "".join(parts)
            + "</div>")
