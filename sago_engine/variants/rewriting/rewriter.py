"""The Rewriter protocol behind structural variants (offline rules, or an LLM: ``llm_rewriter``)."""

from __future__ import annotations

import random
from typing import Protocol, runtime_checkable

from sago_engine.variants.rewriting.rules_length import rewrite_length
from sago_engine.variants.rewriting.rules_mood import rewrite_mood


@runtime_checkable
class Rewriter(Protocol):
    """Rewrites a prompt's length or mood while keeping its meaning (SAGO §Variants, family 3).

    The paper used GPT-4o-mini; ``RulesRewriter`` ("rules-v1") is the offline, deterministic
    stand-in, ``llm_rewriter.LLMRewriter`` the same through any backend. ``name`` is stored as
    ``Variant.generator`` and enters the variant's seed and id, so variants from different
    rewriters never collide.
    """

    name: str

    def rewrite_length(self, text: str, ratio: float, rng: random.Random) -> str:
        """Return ``text`` compressed (ratio < 1) or expanded (ratio > 1) to about ``ratio`` ×
        its length in whitespace words, keeping its meaning."""
        ...

    def rewrite_mood(self, text: str, target: str, rng: random.Random) -> str:
        """Return ``text`` turned into ``target`` mood: "question" or "imperative"."""
        ...


class RulesRewriter:
    """Deterministic offline rules ("rules-v1"): ``rules_length`` and ``rules_mood``."""

    name = "rules-v1"

    def rewrite_length(self, text: str, ratio: float, rng: random.Random) -> str:
        """See ``rules_length.rewrite_length``."""
        return rewrite_length(text, ratio, rng)

    def rewrite_mood(self, text: str, target: str, rng: random.Random) -> str:
        """See ``rules_mood.rewrite_mood``."""
        return rewrite_mood(text, target, rng)
