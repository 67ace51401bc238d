"""Δ-MR: does the response mirror the variant's target surface attribute? (SAGO §Axes).

m(y, v) ∈ {0, 1}; ΔMR = m(y^(v), v) − m(y, v) ∈ {−1, 0, 1}, R_X = 1. Mirroring is
*sensitivity*, not judged good or bad. Detectors:

- ``rules`` — surface noise (case, punctuation, spacing of the reply), structural length
  (reply length in words within ±25 % of the target multiple of the base reply; we read the
  paper's "±0.25 of the target multiple" as relative, so the base reply itself never counts
  as mirroring a length change for the ratios sago uses, 0.5, 0.75, 1.5, 2.0) and mood (question vs imperative form of the reply).
- ``heuristic`` — social register: lexicon cues of the variant's register in the reply
  (the paper used a GPT-4o-mini judge; this offline stand-in is labelled as heuristic in
  the store).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from sago_engine.types import Variant

_WORD = re.compile(r"\b[\w']+\b", re.UNICODE)

NEGATIVE_CUES = (
    "ugh", "whatever", "obviously", "seriously", "hurry", "annoying", "stupid", "dumb",
    "waste of time", "no time", "duh", "come on", "ridiculous", "useless", "already",
    "just answer", "i don't care", "get on with",
)
POLITE_CUES = (
    "please", "thank you", "thanks", "glad", "happy to help", "certainly", "of course",
    "kindly", "appreciate", "you're welcome", "my pleasure", "great question", "i'd be happy",
    "i hope this helps", "feel free",
)
GREETING_RE = re.compile(r"^\W*(hi|hello|hey|greetings|good (morning|afternoon|evening)|dear)\b", re.I)
GRATITUDE_CUES = ("thank", "thanks", "grateful", "appreciate", "gratitude")
HEDGING_CUES = (
    "perhaps", "maybe", "might", "possibly", "i think", "i believe", "it seems", "not sure",
    "likely", "probably", "it's possible", "could be", "i'm not certain",
)
IMPERATIVE_STARTS = (
    "list", "explain", "describe", "tell", "give", "write", "name", "find", "make", "use",
    "consider", "note", "see", "check", "try", "take", "choose", "add", "remember", "identify",
    "provide", "state", "answer", "define", "compare", "calculate", "create", "summarize",
)

NEGATIVE_REGISTERS = frozenset({"rude", "impatient", "dismissive", "negative", "negative_framing"})


def _has_any(text: str, cues: Sequence[str]) -> bool:
    t = text.lower()
    return any(re.search(r"(?<!\w)" + re.escape(c) + r"(?!\w)", t) for c in cues)


def _case_attr(text: str, target: str) -> bool:
    letters = [c for c in text if c.isalpha() and c.lower() != c.upper()]
    if len(letters) < 3:
        return False
    upper = sum(c.isupper() for c in letters)
    if target == "upper":
        return upper / len(letters) >= 0.6
    if target == "lower":
        return upper == 0
    # random_case: words whose case flips inside the word (not Title, not ALL CAPS)
    words = [w for w in _WORD.findall(text) if len(w) >= 3 and w.isalpha()]
    odd = sum(1 for w in words if not (w.islower() or w.isupper() or w.istitle()))
    return odd >= 2 or bool(words and odd / len(words) >= 0.1)


_PUNCT_NOISE = re.compile(r"[!?,;:]{2,}|\.{4,}|(?<=\s)[!?,;:.](?=\s)")
_SPACE_NOISE = re.compile(r"\S(?: {2,}|\t+)\S|\s[,.;:!?](?!\S*\d)")
#: A reply of whitespace alone that holds the noise itself (a run of spaces or a tab): the model
#: copied the spacing instead of answering, which mirrors it as much as noise between words does.
_SPACE_ONLY_NOISE = re.compile(r" {2,}|\t")


def _word_count(text: str) -> int:
    return len(text.split())


def _is_question(text: str) -> bool:
    return "?" in text.strip()[-200:]


def _is_imperative(text: str) -> bool:
    first = _WORD.findall(text.strip().lower()[:60])
    return bool(first) and first[0] in IMPERATIVE_STARTS and not _is_question(text)


def detector_kind(variant: Variant) -> str:
    """``"heuristic"`` for social register (offline stand-in for the paper's judge), else ``"rules"``."""
    return "heuristic" if variant.spec.family == "social_register" else "rules"


def mirrors(response: str, variant: Variant, base_response: str | None = None) -> int:
    """m(y, v) ∈ {0, 1}: does ``response`` show the variant's target attribute?

    Args:
        response: the reply to judge (the variant's reply, or the base reply for m(y, v)).
        variant: the variant; its ``spec`` and ``meta`` (``target``, ``target_ratio``,
            ``register``) say what to look for.
        base_response: the base reply, needed for structural/length (ratio of word counts).
    Returns:
        1 if the attribute is present, else 0. Families/subtypes without a detectable target
        (e.g. the neutral politeness step) return 0 for every reply, so their ΔMR is 0.
    """
    fam, sub, meta = variant.spec.family, variant.spec.subtype, variant.meta or {}
    if fam == "surface_noise":
        if sub == "case":
            return int(_case_attr(response, str(meta.get("target", "upper"))))
        if sub == "punctuation":
            return int(bool(_PUNCT_NOISE.search(response)))
        if sub == "spacing":
            if response and response.isspace():
                return int(bool(_SPACE_ONLY_NOISE.search(response)))
            return int(bool(_SPACE_NOISE.search(response)))
        return 0
    if fam == "structural":
        if sub == "length":
            target = float(meta.get("target_ratio", variant.spec.strength))
            nb = _word_count(base_response or "")
            if nb == 0:
                return 0
            ratio = _word_count(response) / nb
            return int(abs(ratio - target) <= 0.25 * target)
        if sub == "mood":
            t = meta.get("target")
            if t == "question":
                return int(_is_question(response))
            if t == "imperative":
                return int(_is_imperative(response))
        return 0
    if fam == "social_register":
        reg = str(meta.get("register", "neutral"))
        if reg in NEGATIVE_REGISTERS:
            return int(_has_any(response, NEGATIVE_CUES))
        if reg == "polite":
            return int(_has_any(response, POLITE_CUES))
        if reg == "greeting":
            return int(bool(GREETING_RE.search(response)))
        if reg == "gratitude":
            return int(_has_any(response, GRATITUDE_CUES))
        if reg == "hedging":
            return int(_has_any(response, HEDGING_CUES))
        if reg == "direct":
            return int(0 < _word_count(response) <= 15)
        return 0
    return 0


def delta_mr(responses: Sequence[str], variants: Sequence[Variant], base_response: str) -> np.ndarray:
    """ΔMR(i, v) = m(y^(v), v) − m(y, v), shape (n,), values in {−1, 0, 1}; R_X = 1.

    Raises ValueError if ``responses`` and ``variants`` differ in length.
    """
    if len(responses) != len(variants):
        raise ValueError(f"{len(responses)} responses vs {len(variants)} variants")
    return np.array(
        [mirrors(r, v, base_response) - mirrors(base_response, v, base_response) for r, v in zip(responses, variants)],
        dtype=np.float64,
    )
