"""Token salad: replies that are not text in any language, and models whose replies are mostly that.

Rule (measurable, on the reply alone). Words are maximal runs of letters; a word is *known* when
its lower-cased form is a whole word of the MiniLM encoder's uncased word-piece vocabulary (30,522
entries, the BERT English vocabulary sago's Δ-BERT already ships). A script is the first word of a
letter's Unicode name (LATIN, CYRILLIC, ARABIC, CJK, HANGUL, THAI, …), counted when it has at least
``MIN_SCRIPT_LETTERS`` letters. A reply is salad when it mixes at least ``SALAD_SCRIPTS`` scripts,
or has at least ``MIN_WORDS`` words of which fewer than ``MIN_KNOWN_SHARE`` are known. An English
reply scores a known share near 0.9 and one script; a Chinese answer two scripts; the token soup of
a model that broke under float16 four or more scripts and a known share near 0.3.

A pair (base reply, variant reply) is *degenerate* when both replies are salad; a model is flagged
when at least ``MODEL_SHARE`` of its pairs are degenerate.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

MIN_WORDS = 8
MIN_KNOWN_SHARE = 0.5
SALAD_SCRIPTS = 4
MIN_SCRIPT_LETTERS = 2
MODEL_SHARE = 0.5

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


@lru_cache(maxsize=1)
def known_words() -> frozenset[str]:
    """Whole alphabetic words of the MiniLM uncased vocabulary (``bertscore.encoder_dir()/vocab.txt``)."""
    from sago_engine.models.bertscore import encoder_dir

    words = (encoder_dir() / "vocab.txt").read_text(encoding="utf-8").split("\n")
    return frozenset(w for w in words if w.isalpha())


def _script(ch: str) -> str:
    try:
        return unicodedata.name(ch).split(" ", 1)[0]
    except ValueError:
        return "UNKNOWN"


@dataclass(frozen=True)
class SaladScore:
    """words: number of words; known_share: share of them in the vocabulary (NaN when none);
    scripts: scripts with ≥ ``MIN_SCRIPT_LETTERS`` letters; salad: the rule's verdict."""

    words: int
    known_share: float
    scripts: int
    salad: bool


def score(text: str | None) -> SaladScore:
    """Apply the module's rule to one reply (non-strings count as empty, which is not salad)."""
    t = text if isinstance(text, str) else ""
    words = [w.lower() for w in _WORD.findall(t)]
    vocab = known_words()
    known = sum(w in vocab for w in words)
    share = known / len(words) if words else float("nan")
    letters = Counter(_script(c) for c in t if c.isalpha())
    scripts = sum(1 for n in letters.values() if n >= MIN_SCRIPT_LETTERS)
    salad = scripts >= SALAD_SCRIPTS or (len(words) >= MIN_WORDS and share < MIN_KNOWN_SHARE)
    return SaladScore(len(words), share, scripts, salad)


def is_salad(text: str | None) -> bool:
    """True when ``text`` is token salad under the module's rule."""
    return score(text).salad


def rule_record() -> dict:
    """The rule's settings, for a run record."""
    return {"min_words": MIN_WORDS, "min_known_share": MIN_KNOWN_SHARE, "salad_scripts": SALAD_SCRIPTS,
            "min_script_letters": MIN_SCRIPT_LETTERS, "model_share": MODEL_SHARE,
            "vocabulary": "MiniLM uncased word pieces (whole alphabetic words)",
            "rule": "salad = scripts >= salad_scripts or (words >= min_words and known share < min_known_share); "
                    "a pair is degenerate when both replies are salad; a model when >= model_share of its pairs are"}
