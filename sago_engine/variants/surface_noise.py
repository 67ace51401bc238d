"""surface_noise: spacing, punctuation and letter-case noise confined to a region of the prompt."""

from __future__ import annotations

import random
import re
import unicodedata
from typing import Any

from .base import SubtypeInfo

_POS = ("PREFIX", "SUFFIX", "GLOBAL")
_MARKS = ("!!", "??", "...", ",,", "!?", "!", "?", ";", ",", "..")
_TOKEN = re.compile(r"\S+")


def _is_punct(ch: str) -> bool:
    return unicodedata.category(ch).startswith("P")


def _trailing_punct(token: str) -> str:
    """The run of Unicode punctuation (category P*) that ends ``token``."""
    k = len(token)
    while k > 0 and _is_punct(token[k - 1]):
        k -= 1
    return token[k:]


def denoise(text: str) -> str:
    """Canonical form that every surface_noise variant shares with its base prompt.

    Casefolds, deletes every Unicode punctuation character (category P*), collapses all
    whitespace runs to one space and strips. So ``denoise(variant) == denoise(base)`` for
    every variant of this family: the words survive, only their surface changes.
    Source: SAGO (arXiv 2610.01428) §Variants ("meaning is kept by construction").
    """
    t = "".join(ch for ch in text.casefold() if not unicodedata.category(ch).startswith("P"))
    return " ".join(t.split())


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


def _pick(rng: random.Random, sites: list, strength: int) -> list:
    """Choose the edit sites: 1 at strength 1, ~35% (≥2) at 2, ~70% (≥3) at 3."""
    if not sites:
        return []
    k = {1: 1, 2: max(2, round(0.35 * len(sites))), 3: max(3, round(0.7 * len(sites)))}[strength]
    return sorted(rng.sample(sites, min(k, len(sites))))


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
    """

    name = "surface_noise"
    generator = "rules-v1"
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
            ``n_edits``.
        """
        a, b = region_bounds(text, position)
        s = int(strength)
        seg = text[a:b]
        new, target, n = getattr(self, "_" + subtype)(seg, s, rng, text, a, b)
        return text[:a] + new + text[b:], {"target": target, "region": [a, b], "n_edits": n}

    # -- subtypes: each maps the region's text to its noisy version -----------------------
    def _spacing(self, seg, s, rng, text, a, b):
        gaps = [m.span() for m in re.finditer(r"\s+", seg) if 0 < m.start() and m.end() < len(seg)]
        sites = [("gap", e) for _, e in gaps]  # insert at the end of an inner gap
        # the gap that borders the region (outside whitespace) may widen from inside
        if b < len(text) and seg and not seg[-1].isspace():
            sites.append(("gap", len(seg)))
        if a > 0 and seg and not seg[0].isspace():
            sites.append(("gap", 0))
        if s == 3 or not sites:
            for m in _TOKEN.finditer(seg):
                tail = _trailing_punct(m.group())
                if tail and len(tail) < len(m.group()):
                    sites.append(("punct", m.end() - len(tail)))
        positions = sorted({pos for _, pos in sites})
        chosen = _pick(rng, positions, s)
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

    def _punctuation(self, seg, s, rng, text, a, b):
        toks = {m.end(): m.group() for m in _TOKEN.finditer(seg)}
        chosen = _pick(rng, list(toks), s)
        out, last = [], 0
        for pos in chosen:
            existing = _trailing_punct(toks[pos])
            if existing and s >= 2 and rng.random() < 0.5:
                mark = existing[-1] * rng.randint(1, 3)  # repeat the existing mark
            else:
                mark = rng.choice(_MARKS[:4] if s == 1 else _MARKS)
            if existing and s == 3 and rng.random() < 0.2:
                # drop the existing mark instead (denoise deletes punctuation anyway)
                out += [seg[last:pos - len(existing)]]
            else:
                out += [seg[last:pos], mark]
            last = pos
        out.append(seg[last:])
        return "".join(out), "punctuation", len(chosen)

    def _case(self, seg, s, rng, text, a, b):
        if s == 3:
            new = "".join(_case_char(c, True) for c in seg)
            return new, "upper", sum(x != y for x, y in zip(seg, new))
        if s == 2 and any(c.isupper() for c in seg):
            new = "".join(_case_char(c, False) for c in seg)
            return new, "lower", sum(x != y for x, y in zip(seg, new))
        if s == 2:  # already lower case: scramble letter case instead
            new = "".join(_case_char(c, rng.random() < 0.5) if c.isalpha() else c for c in seg)
            if new == seg:
                new = "".join(_case_char(c, True) if c.isalpha() else c for c in seg)
            return new, "random_case", sum(x != y for x, y in zip(seg, new))
        starts = [m.start() for m in re.finditer(r"\b[^\W\d_]", seg)]
        chosen = _pick(rng, starts, 2 if len(starts) > 4 else 1)
        chars = list(seg)
        for p in chosen:
            c = chars[p]
            chars[p] = _case_char(c, not c.isupper())
        new = "".join(chars)
        return new, "random_case", sum(x != y for x, y in zip(seg, new))
