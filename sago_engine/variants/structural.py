"""structural: length compression/expansion to a target ratio, and interrogative ↔ imperative."""

from __future__ import annotations

import random
from typing import Any

from sago_engine.variants.rewriting.rewriter import Rewriter, RulesRewriter

from ._text import detect_mood, word_count
from .base import SubtypeInfo

LENGTH_RATIOS: tuple[float, ...] = (0.5, 0.75, 1.5, 2.0)


def mood_target(text: str) -> str:
    """The mood a structural/mood variant of ``text`` aims for: "imperative" when ``text`` reads
    as a question (``_text.detect_mood``), else "question"."""
    return "imperative" if detect_mood(text) == "question" else "question"


class Structural:
    """SAGO (arXiv 2610.01428) §Variants, family 3: structural rewrites, always GLOBAL.

    ``length``: strength = target ratio of variant words to base words (0.5, 0.75 compress;
    1.5, 2.0 expand). ``mood``: strength 1; an interrogative prompt becomes imperative and
    anything else becomes a question (``_text.detect_mood``). The text comes from a
    ``Rewriter`` (default: offline ``RulesRewriter``), whose name is ``generator``. A rewriter
    may also offer ``rewrite_meta(subtype, text, arg) -> dict`` (the LLM rewriter does: raw
    output, ``rewrite_issue`` for a degenerate rewrite); its keys are added to the meta.
    """

    name = "structural"
    subtypes = {
        "length": SubtypeInfo(LENGTH_RATIOS, ("GLOBAL",), "target ratio of words (<1 compress, >1 expand)"),
        "mood": SubtypeInfo((1.0,), ("GLOBAL",), "interrogative ↔ imperative"),
    }

    def __init__(self, rewriter: Rewriter | None = None) -> None:
        self.rewriter: Rewriter = rewriter or RulesRewriter()
        self.generator = self.rewriter.name

    def apply(
        self, text: str, subtype: str, strength: float, position: str, rng: random.Random
    ) -> tuple[str, dict[str, Any]]:
        """Rewrite ``text`` structurally.

        Args:
            text: base prompt (non-empty); subtype: "length" | "mood"; strength: a ratio in
            ``LENGTH_RATIOS`` for length, 1 for mood; position: "GLOBAL"; rng: private generator.
        Returns:
            (variant text, meta). length meta: ``target_ratio``, ``achieved_ratio`` (variant
            words / base words, rounded to 4 places), ``direction`` ("compress" | "expand").
            mood meta: ``source`` (detected mood of the base), ``target`` ("question" |
            "imperative", the variant's intended mood), ``changed`` (text differs and its
            detected mood is the target).
        """
        extra = getattr(self.rewriter, "rewrite_meta", None)
        if subtype == "length":
            out = self.rewriter.rewrite_length(text, float(strength), rng)
            achieved = word_count(out) / max(1, word_count(text))
            meta = {
                "target_ratio": float(strength),
                "achieved_ratio": round(achieved, 4),
                "direction": "compress" if strength < 1 else "expand",
            }
            if extra is not None:
                meta.update(extra("length", text, float(strength)))
            return out, meta
        source = detect_mood(text)
        target = mood_target(text)
        out = self.rewriter.rewrite_mood(text, target, rng)
        meta = {
            "source": source,
            "target": target,
            "changed": out != text and detect_mood(out) == target,
        }
        if extra is not None:
            meta.update(extra("mood", text, target))
        return out, meta
