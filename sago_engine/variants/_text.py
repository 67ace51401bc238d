"""Small text helpers shared by the families: mood detection, sentence spans, word counts."""

from __future__ import annotations

import re

WH_WORDS = frozenset({"what", "who", "whom", "whose", "when", "where", "which", "why", "how"})
AUX_WORDS = frozenset(
    {"is", "are", "was", "were", "am", "do", "does", "did", "can", "could", "will", "would",
     "shall", "should", "may", "might", "must", "has", "have", "had"}
)
#: After "do"/"have" an imperative is as likely as a question ("Do the math", "Have a look"):
#: count those as question starts only when a subject pronoun follows.
_WEAK_AUX = frozenset({"do", "have", "had"})
_SUBJECT_PRONOUNS = frozenset({"you", "i", "we", "they", "he", "she", "it", "people", "anyone"})
_CLOSERS = " \t\n\"'”’)]»"
_SENT_END = re.compile(r"(?<=[.!?])\s+|\n+")
#: tokens whose final "." does not end a sentence ("U.S.", "Mr.", "e.g.", "vs.")
_ABBREV = re.compile(r"^(?:[A-Za-z]\.)+$|^(?:mr|mrs|ms|dr|st|jr|sr|vs|etc|no|mt|ft|approx|fig|inc|ltd|co)\.$", re.I)


def words(text: str) -> list[str]:
    """Whitespace-separated tokens (the unit of length ratios)."""
    return text.split()


def word_count(text: str) -> int:
    """Number of whitespace-separated tokens."""
    return len(text.split())


def first_word(text: str) -> str:
    """Lower-cased first token stripped of punctuation, or ``""``."""
    toks = text.split()
    return re.sub(r"^\W+|\W+$", "", toks[0]).lower() if toks else ""


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of sentences (split after . ! ? + whitespace, and at newlines)."""
    spans, start = [], 0
    for m in _SENT_END.finditer(text):
        if "\n" not in m.group():
            last_tok = text[:m.start()].split()[-1] if text[:m.start()].split() else ""
            nxt = text[m.end():m.end() + 1]
            inside_quotes = text[start:m.start()].count('"') % 2 == 1
            if inside_quotes or _ABBREV.match(last_tok) or not (nxt.isupper() or nxt.isdigit() or nxt in "\"'“‘("):
                continue  # "the U.S. did", "approx. five", "e.g. this": not a sentence end
        if text[start:m.start()].strip():
            spans.append((start, m.start()))
        start = m.end()
    if text[start:].strip():
        spans.append((start, len(text.rstrip())))
    return spans


def ends_with_question_mark(text: str) -> bool:
    """True when the text ends with ``?`` (ignoring closing quotes/brackets/whitespace)."""
    return text.rstrip(_CLOSERS).endswith("?")


def _norm(tok: str) -> str:
    """Lower-cased token without edge punctuation or contraction ("Where's" -> "where",
    "Isn't" -> "is", "Won't" -> "will", "Can't" -> "can")."""
    t = re.sub(r"^\W+|\W+$", "", tok).lower().replace("’", "'")
    special = {"won't": "will", "can't": "can", "shan't": "shall"}
    if t in special:
        return special[t]
    if t.endswith("n't"):
        return t[:-3]
    return t.split("'")[0] if "'" in t else t


def starts_like_question(sentence: str) -> bool:
    """True when the sentence opens with a wh-word or an auxiliary in question position."""
    toks = [_norm(t) for t in sentence.split()[:2]]
    if not toks:
        return False
    if toks[0] in WH_WORDS:
        return True
    if toks[0] in AUX_WORDS:
        if toks[0] in _WEAK_AUX:
            return len(toks) > 1 and toks[1] in _SUBJECT_PRONOUNS
        return len(toks) > 1
    return False


def detect_mood(text: str) -> str:
    """``"question"`` or ``"imperative"`` (SAGO §Variants, structural/mood).

    Interrogative when the text ends with ``?``, or its first or last sentence opens with a
    wh-word or an auxiliary ("is", "can", "did", ...); everything else (commands, statements,
    fragments) counts as imperative.
    """
    if ends_with_question_mark(text):
        return "question"
    spans = sentence_spans(text)
    if not spans:
        return "imperative"
    for a, b in (spans[0], spans[-1]):
        if starts_like_question(text[a:b]):
            return "question"
    return "imperative"


def terminal_for(text: str) -> str:
    """Punctuation to append before adding a sentence after ``text``: ``""`` if it already ends
    a sentence, else ``"?"`` for a question and ``"."`` otherwise."""
    core = text.rstrip()
    if not core or core.rstrip("\"'”’)]»")[-1:] in {".", "?", "!", ":", ";", "…"}:
        return ""
    return "?" if detect_mood(core) == "question" else "."


def lower_first(word: str) -> str:
    """Lower-case the first letter of a plain capitalised word ("Render" -> "render"); leave
    "I", acronyms ("NASA", "3D") and mixed-case names ("iPhone", "McDonald") alone."""
    if len(word) > 1 and word[0].isupper() and word[1:].islower() and word[1:].isalpha():
        return word[0].lower() + word[1:]
    return word


def upper_first(text: str) -> str:
    """Upper-case the first character if it is a lower-case letter."""
    return text[:1].upper() + text[1:] if text[:1].islower() else text
