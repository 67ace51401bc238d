"""surface_noise: spacing, punctuation and letter-case noise confined to a region of the prompt."""

from __future__ import annotations

import random
import re
import unicodedata
from typing import Any

from ._text import markdown_spans, protected_spans
from .base import SubtypeInfo

_POS = ("PREFIX", "SUFFIX", "GLOBAL")
_MARKS = ("!!", "??", "...", ",,", "!?", "!", "?", ";", ",", "..")
_TOKEN = re.compile(r"\S+")
_NOT_REPEATED = "\"'“”‘’«»()[]{}<>"


def _is_punct(ch: str) -> bool:
    return unicodedata.category(ch).startswith("P")


def _trailing_punct(token: str) -> str:
    """The run of Unicode punctuation (category P*) that ends ``token``."""
    k = len(token)
    while k > 0 and _is_punct(token[k - 1]):
        k -= 1
    return token[k:]


def _plain(text: str) -> str:
    """Casefolded, Unicode punctuation deleted, whitespace runs collapsed to one space."""
    t = "".join(ch for ch in text.casefold() if not unicodedata.category(ch).startswith("P"))
    return " ".join(t.split())


def denoise(text: str) -> str:
    """Canonical form that every surface_noise variant shares with its base prompt.

    Outside the protected spans (``_text.protected_spans``: numbers, math, code, URLs,
    e-mail addresses, quoted strings): casefolds, deletes every Unicode punctuation character
    (category P*), collapses whitespace runs to one space. Each protected span is kept byte
    for byte, wrapped in ``⟦ ⟧``; the pieces are joined by single spaces. So
    ``denoise(variant) == denoise(base)`` says the words survive and every protected span is
    byte-identical ("2n+3=11" -> "2n+3=11!!" or "2N+3=11" is not meaning-preserving).
    A text without protected spans gives the plain form ("What  IS it?!" -> "what is it").

    Args:
        text: any string.
    Returns:
        the canonical string ("" for whitespace/punctuation-only text).
    Source: SAGO (arXiv 2610.01428) §Variants ("meaning is kept by construction"); the
    protected spans are sago's rule (``_text.protected_spans``).
    """
    parts, last = [], 0
    for a, b in protected_spans(text):
        parts += [_plain(text[last:a]), "⟦" + text[a:b] + "⟧"]
        last = b
    parts.append(_plain(text[last:]))
    return " ".join(p for p in parts if p)


def region_bounds(text: str, position: str) -> tuple[int, int]:
    """Character span [a, b) that a variant at ``position`` may edit.

    PREFIX: the first third of the characters, extended forward to the end of the word it
    cuts; SUFFIX: the last third, extended backward to the start of the word it cuts;
    GLOBAL: the whole text. Everything outside the span stays byte-identical.

    Args:
        text: base prompt; position: "PREFIX" | "SUFFIX" | "GLOBAL".
    Returns:
        (a, b) with 0 <= a <= b <= len(text); PREFIX has a = 0, SUFFIX has b = len(text).
    Raises:
        ValueError: unknown position.
    Source: SAGO (arXiv 2610.01428) §Variants (positions PREFIX / SUFFIX / GLOBAL).
    """
    n = len(text)
    if position == "GLOBAL" or n == 0:
        return 0, n
    if position == "PREFIX":
        b = n // 3
        while b < n and not text[b].isspace():
            b += 1
        if not text[:b].strip():  # only whitespace so far: take the first word
            b = len(text) - len(text.lstrip())
            while b < n and not text[b].isspace():
                b += 1
        return 0, b
    if position == "SUFFIX":
        a = n - n // 3
        while a > 0 and not text[a - 1].isspace():
            a -= 1
        if not text[a:].strip():
            a = len(text.rstrip())
            while a > 0 and not text[a - 1].isspace():
                a -= 1
        return a, n
    raise ValueError(f"invalid position {position!r}; valid positions: {list(_POS)}")


def _grow(text: str, a: int, b: int, position: str) -> tuple[int, int]:
    """The region [a, b) grown by one word: SUFFIX backward, PREFIX forward, GLOBAL (already
    the whole text) unchanged. Used when protected spans fill the whole region."""
    n = len(text)
    if position == "SUFFIX":
        while a > 0 and text[a - 1].isspace():
            a -= 1
        while a > 0 and not text[a - 1].isspace():
            a -= 1
        return a, b
    if position == "PREFIX":
        while b < n and text[b].isspace():
            b += 1
        while b < n and not text[b].isspace():
            b += 1
        return a, b
    return 0, n


def _pick(rng: random.Random, sites: list, strength: int) -> list:
    """Choose the edit sites: 1 at strength 1, ~35% (≥2) at 2, ~70% (≥3) at 3."""
    if not sites:
        return []
    k = {1: 1, 2: max(2, round(0.35 * len(sites))), 3: max(3, round(0.7 * len(sites)))}[strength]
    return sorted(rng.sample(sites, min(k, len(sites))))


def _inside(p: int, spans: list[tuple[int, int]]) -> bool:
    """True when position ``p`` lies strictly inside a span."""
    return any(a < p < b for a, b in spans)


def _touches(p: int, spans: list[tuple[int, int]]) -> bool:
    """True when position ``p`` lies inside a span or on either of its edges."""
    return any(a <= p <= b for a, b in spans)


def _at_line_edge(text: str, p: int) -> bool:
    """True when whitespace inserted at ``p`` would start a line (only whitespace since the
    previous newline or the text start) or end one (a newline or the text end follows)."""
    return not text[text.rfind("\n", 0, p) + 1:p].strip() or p >= len(text) or text[p] == "\n"


def _case_char(ch: str, upper: bool) -> str:
    """Change one character's case only if that keeps its casefold (so denoise undoes it)."""
    new = ch.upper() if upper else ch.lower()
    return new if len(new) == 1 and new.casefold() == ch.casefold() else ch


class SurfaceNoise:
    """SAGO (arXiv 2610.01428) §Variants, family 2: surface noise (meaning kept by construction).

    Strengths 1..3 for every subtype, more noise as strength grows:
      - ``spacing``: 1 = one extra space in one gap; 2 = ~35% of gaps widened by 1–3 spaces or
        a tab; 3 = ~70% of gaps widened by 2–6 mixed spaces/tabs, plus spaces before trailing
        punctuation. Words are never split or joined. meta target "spacing".
      - ``punctuation``: 1 = one inserted mark; 2 = ~35% of word ends get a mark ("!!", "??",
        "...", ",,", ...) or an existing mark repeated; 3 = ~70%, and existing marks may also be
        repeated or dropped. meta target "punctuation".
      - ``case``: 1 = the first letter of some words flipped ("what Is the capital", target
        "random_case"); 2 = all lower case (target "lower"; if the region has no upper-case
        letter, random letter case instead, target "random_case"); 3 = ALL CAPS (target "upper").
    Positions: PREFIX / SUFFIX / GLOBAL edit only ``region_bounds`` of the text.

    Protected spans (``_text.protected_spans``: numbers, math, code, URLs, e-mail addresses,
    quoted strings, Markdown block structure) stay byte-identical under every subtype: no letter
    in them changes case, nothing is inserted in them or dropped from them, no mark is glued to
    either edge of one ("2n+3=11" never becomes "2n+3=11!!", "# Task" never "#!? Task"; a token
    that ends with a span gets no mark). Spacing never inserts whitespace at a line start or a
    line end (no line gains indentation, so none becomes an indented code block) nor next to a
    Markdown marker or table row; elsewhere it may widen the gap next to a span's edge
    (``"the  5 cm"``). So a CommonMark parse of the variant has the base's block structure. When the
    region has nothing editable (a SUFFIX that is one long quotation, a code block), it grows
    one word at a time, SUFFIX backward and PREFIX forward, until an edit is possible
    (``meta.region`` records the region used); a text with nothing editable at all stays
    unchanged (``meta.changed`` false).
    """

    name = "surface_noise"
    generator = "rules-v3"  # v3: Markdown structure kept, no whitespace at line edges; v2, v1 texts differ
    subtypes = {
        "spacing": SubtypeInfo((1.0, 2.0, 3.0), _POS, "extra spaces/tabs between words"),
        "punctuation": SubtypeInfo((1.0, 2.0, 3.0), _POS, "inserted/repeated punctuation marks"),
        "case": SubtypeInfo((1.0, 2.0, 3.0), _POS, "1 odd word case, 2 lower case, 3 ALL CAPS"),
    }

    def apply(
        self, text: str, subtype: str, strength: float, position: str, rng: random.Random
    ) -> tuple[str, dict[str, Any]]:
        """Add noise of ``subtype`` at ``strength`` inside the ``position`` region of ``text``.

        Args:
            text: base prompt (non-empty).
            subtype: "spacing" | "punctuation" | "case"; strength: 1, 2 or 3;
            position: "PREFIX" | "SUFFIX" | "GLOBAL".
            rng: the variant's private generator (chooses edit sites and marks).
        Returns:
            (variant text, meta) with meta keys ``target`` ("spacing" | "punctuation" |
            "upper" | "lower" | "random_case"), ``region`` ([a, b) in base characters),
            ``n_edits``. The text is unchanged exactly when ``editable`` is False.
        """
        s = int(strength)
        a, b, spans = self._region(text, subtype, s, position)
        new, target, n = getattr(self, "_" + subtype)(text[a:b], s, rng, text, a, b, spans)
        return text[:a] + new + text[b:], {"target": target, "region": [a, b], "n_edits": n}

    def editable(self, text: str, subtype: str, strength: float, position: str) -> bool:
        """Whether ``apply`` can change ``text`` at all for this (u, s, p): False when nothing outside
        the protected spans can take the edit (case noise on Arabic, Chinese, Hebrew, Thai or
        Devanagari, which have no letter case; a prompt that is all protected spans). Pure, no rng.

        Args: as ``apply`` (without rng). Returns: True iff ``apply(...)[0] != text`` for every rng.
        """
        s = int(strength)
        a, b, spans = self._region(text, subtype, s, position)
        return bool(self._sites(subtype, text[a:b], s, text, a, b, spans))

    def _region(self, text: str, subtype: str, s: int, position: str):
        """The region [a, b) that gets the edit (``region_bounds``, grown word by word while it has
        no edit site) and the protected spans meeting it, in region coordinates."""
        a, b = region_bounds(text, position)
        protected = protected_spans(text)
        while True:
            spans = [(x - a, y - a) for x, y in protected if x <= b and y >= a]
            if self._sites(subtype, text[a:b], s, text, a, b, spans):
                return a, b, spans
            grown = _grow(text, a, b, position)  # everything editable was protected
            if grown == (a, b):  # the whole text, and nothing in it editable
                return a, b, spans
            a, b = grown

    def _sites(self, subtype, seg, s, text, a, b, spans) -> list:
        """The places the subtype may edit in the region; an edit at any of them changes the text."""
        if subtype == "spacing":
            return self._spacing_sites(seg, s, text, a, b, spans)
        if subtype == "punctuation":
            return list(self._punct_sites(seg, spans))
        return self._case_sites(seg, s, spans)

    # -- subtypes: each maps the region's text to its noisy version -----------------------
    # ``spans``: the protected spans meeting the region, in region coordinates (may reach
    # past either end of it)
    def _spacing_sites(self, seg, s, text, a, b, spans) -> list[int]:
        gaps = [m.span() for m in re.finditer(r"\s+", seg) if 0 < m.start() and m.end() < len(seg)]
        sites = [e for _, e in gaps]  # insert at the end of an inner gap
        # the gap that borders the region (outside whitespace) may widen from inside
        if b < len(text) and seg and not seg[-1].isspace():
            sites.append(len(seg))
        if a > 0 and seg and not seg[0].isspace():
            sites.append(0)
        if s == 3 or not sites:
            for m in _TOKEN.finditer(seg):
                tail = _trailing_punct(m.group())
                # not before "*", "/", "-", "&": split off, they would read as an operator
                if tail and len(tail) < len(m.group()) and tail[0] not in "*/-&":
                    sites.append(m.end() - len(tail))
        # never inside a span, never at a line start or end (no line gains indentation, which
        # could make it an indented code block, or trailing spaces, a hard line break), never
        # next to Markdown structure (a list item's text indented by 5+ spaces is code)
        md = [(x - a, y - a) for x, y in markdown_spans(text) if x <= b and y >= a]
        return sorted({pos for pos in sites if not _inside(pos, spans) and not _touches(pos, md)
                       and not _at_line_edge(text, a + pos)})

    def _spacing(self, seg, s, rng, text, a, b, spans):
        chosen = _pick(rng, self._spacing_sites(seg, s, text, a, b, spans), s)
        out, last = [], 0
        for pos in chosen:
            if s == 1:
                ws = " "
            elif s == 2:
                ws = rng.choice([" ", "  ", "   ", "\t"])
            else:
                ws = "".join(rng.choice(" \t") for _ in range(rng.randint(2, 6)))
            out += [seg[last:pos], ws]
            last = pos
        out.append(seg[last:])
        return "".join(out), "spacing", len(chosen)

    @staticmethod
    def _punct_sites(seg, spans) -> dict[int, str]:
        """Token end -> token, for tokens that do not end in or at a protected span."""
        return {m.end(): m.group() for m in _TOKEN.finditer(seg) if not _touches(m.end(), spans)}

    def _punctuation(self, seg, s, rng, text, a, b, spans):
        toks = self._punct_sites(seg, spans)
        chosen = _pick(rng, list(toks), s)
        out, last = [], 0
        for pos in chosen:
            existing = _trailing_punct(toks[pos])
            # a quote or bracket is never repeated (that would open a quotation or a group)
            last_mark = existing.rstrip(_NOT_REPEATED)[-1:]
            if last_mark and s >= 2 and rng.random() < 0.5:
                mark = last_mark * rng.randint(1, 3)  # repeat the existing mark
            else:
                mark = rng.choice(_MARKS[:4] if s == 1 else _MARKS)
            if existing and s == 3 and rng.random() < 0.2 and not any(c in _NOT_REPEATED for c in existing) \
                    and not any(x < pos and y > pos - len(existing) for x, y in spans):
                # drop the existing mark instead (denoise deletes punctuation anyway); a quote or
                # bracket is never dropped (that would unbalance a quotation or a group)
                out += [seg[last:pos - len(existing)]]
            else:
                out += [seg[last:pos], mark]
            last = pos
        out.append(seg[last:])
        return "".join(out), "punctuation", len(chosen)

    @staticmethod
    def _case_sites(seg, s, spans) -> list[int]:
        """Indices of the region's characters the case edit of strength ``s`` can change."""
        free = [not any(x <= i < y for x, y in spans) for i in range(len(seg))]
        ups = [i for i, c in enumerate(seg) if free[i] and _case_char(c, True) != c]
        if s == 3:
            return ups
        if s == 2:
            return [i for i, c in enumerate(seg) if free[i] and _case_char(c, False) != c] or ups
        return [m.start() for m in re.finditer(r"\b[^\W\d_]", seg)
                if free[m.start()] and _case_char(m.group(), not m.group().isupper()) != m.group()]

    def _case(self, seg, s, rng, text, a, b, spans):
        free = [not any(x <= i < y for x, y in spans) for i in range(len(seg))]  # editable chars
        if s == 3:
            new = "".join(_case_char(c, True) if f else c for c, f in zip(seg, free))
            return new, "upper", sum(x != y for x, y in zip(seg, new))
        if s == 2 and any(f and _case_char(c, False) != c for c, f in zip(seg, free)):
            new = "".join(_case_char(c, False) if f else c for c, f in zip(seg, free))
            return new, "lower", sum(x != y for x, y in zip(seg, new))
        if s == 2:  # already lower case: scramble letter case instead
            ups = set(self._case_sites(seg, 3, spans))
            new = "".join(_case_char(c, rng.random() < 0.5) if i in ups else c for i, c in enumerate(seg))
            if new == seg:
                new = "".join(_case_char(c, True) if i in ups else c for i, c in enumerate(seg))
            return new, "random_case", sum(x != y for x, y in zip(seg, new))
        starts = self._case_sites(seg, 1, spans)  # word starts whose case can flip
        chosen = _pick(rng, starts, 2 if len(starts) > 4 else 1)
        chars = list(seg)
        for p in chosen:
            c = chars[p]
            chars[p] = _case_char(c, not c.isupper())
        new = "".join(chars)
        return new, "random_case", sum(x != y for x, y in zip(seg, new))
