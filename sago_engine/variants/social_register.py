"""social_register: interpersonal framing (politeness ladder, directness, greeting, hedging, ...)."""

from __future__ import annotations

import random
from typing import Any

from ._text import terminal_for
from .base import SubtypeInfo
from .social_phrases import OTHER, POLITENESS, Step

_POS = ("PREFIX", "SUFFIX", "GLOBAL")


class SocialRegister:
    """SAGO (arXiv 2610.01428) §Variants, family 1: social register.

    Subtypes: ``politeness`` (strength −5..+5: −5 strongly rude, −3/−2 impatient, −1
    dismissive, 0 neutral framing, +1..+5 increasingly polite), and ``directness``,
    ``greeting``, ``hedging``, ``gratitude``, ``negative_framing`` (strength 1..3). PREFIX
    adds an opener, SUFFIX a closer, GLOBAL wraps the request in both. The base prompt is
    embedded verbatim; when a closer follows it, a missing terminal "?"/"." is added first.
    """

    name = "social_register"
    generator = "rules-v1"
    subtypes = {
        "politeness": SubtypeInfo(
            tuple(float(k) for k in range(-5, 6)), _POS,
            "−5 strongly rude/impatient/dismissive … 0 neutral … +5 strongly polite"),
        **{
            u: SubtypeInfo((1.0, 2.0, 3.0), _POS, f"{u.replace('_', ' ')}: 1 mild … 3 strong")
            for u in OTHER
        },
    }

    def apply(
        self, text: str, subtype: str, strength: float, position: str, rng: random.Random
    ) -> tuple[str, dict[str, Any]]:
        """Frame ``text`` in the register of (subtype, strength) at ``position``.

        Args:
            text: base prompt (non-empty).
            subtype, strength, position: a valid setting of this family (see ``subtypes``).
            rng: the variant's private generator; picks one of ≥3 phrasings.
        Returns:
            (variant text, meta) with meta keys ``register`` (see social_phrases.REGISTERS),
            ``tone`` ("negative" | "neutral" | "polite"), ``added_prefix``, ``added_suffix``,
            ``terminal_added`` and ``phrase_index``.
        """
        step: Step = POLITENESS[int(strength)] if subtype == "politeness" else OTHER[subtype][int(strength)]
        sep = "\n" if "\n" in text.strip() else " "
        pre = post = ""
        if position == "PREFIX":
            idx = rng.randrange(len(step.prefix))
            pre = step.prefix[idx]
        elif position == "SUFFIX":
            idx = rng.randrange(len(step.suffix))
            post = step.suffix[idx]
        else:
            idx = rng.randrange(len(step.wrap))
            pre, post = step.wrap[idx]
        body, term = text, ""
        if post:
            body = text.rstrip()
            term = terminal_for(body)
            body = body + term
        out = (pre + sep if pre else "") + body + (sep + post if post else "")
        meta = {
            "register": step.register,
            "tone": step.tone,
            "added_prefix": pre,
            "added_suffix": post,
            "terminal_added": term,
            "phrase_index": idx,
        }
        return out, meta
