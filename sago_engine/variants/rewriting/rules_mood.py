"""Offline mood rules (rules-v1): interrogative ↔ imperative by templates over the key sentence."""

from __future__ import annotations

import random
import re

from sago_engine.variants._text import (
    AUX_WORDS,
    WH_WORDS,
    ends_with_question_mark,
    lower_first,
    sentence_spans,
    starts_like_question,
    upper_first,
)

_BE = frozenset({"is", "are", "was", "were"})
_DET = frozenset({"the", "a", "an", "this", "that", "these", "those", "my", "your", "his", "her",
                  "its", "our", "their"})
#: first words after which a sentence is not a command ("The sky is blue.", "In 1990 ...")
_NON_VERB = frozenset(
    "the a an this that these those my your his her its our their i you we they he she it there "
    "in on at for of from by with as to and or but if when while after before since because "
    "here some many most all each every one two three".split()
) | WH_WORDS | AUX_WORDS
_NAME_VERBS = ("Name", "Identify", "Tell me", "State")
_FRAMES = ("Answer the following: {q}.", "Give the answer to this: {q}.", "Respond to the following: {q}.")
_ASK_VERB = ("Can you {v}?", "Could you {v}?", "Will you {v}?", "Are you able to {v}?")
_ASK_OTHER = ("Can you help with the following: {s}?", "Could you respond to the following: {s}?",
              "Can you handle this: {s}?")


def _strip_q(s: str) -> str:
    return re.sub(r"\s*\?+\s*$", "", s.rstrip())


def _to_imperative(q: str, rng: random.Random) -> str:
    """One question sentence -> one command with the same content."""
    core = _strip_q(q)
    toks = core.split()
    low = [re.sub(r"^\W+|\W+$", "", t).lower() for t in toks]
    if not toks:
        return q
    # wh-phrase = leading words up to the first auxiliary ("who or what", "what cryptid")
    if low[0] in WH_WORDS:
        k = next((i for i, w in enumerate(low) if w in AUX_WORDS), None)
        if k == 1 and low[1] in _BE and len(toks) > 2 and low[2] in _DET and low[0] in {"what", "which", "who"}:
            # "What is the capital of X" -> "Name the capital of X"
            verb = rng.choice(_NAME_VERBS)
            if low[3:4] == ["name"] and verb == "Name":
                verb = "Tell me"
            return f"{verb} {' '.join(toks[2:])}."
        short_wh = k is not None and k <= 3 and not any("," in t for t in toks[:k])
        if short_wh and low[k] in _BE and 0 < len(toks) - k - 1 <= 4 and low[k + 1] not in _DET | AUX_WORDS:
            # "Who or what is nikkei" -> "Tell me who or what nikkei is"
            wh = " ".join([lower_first(toks[0])] + toks[1:k])
            return f"Tell me {wh} {' '.join(toks[k + 1:])} {toks[k]}."
        if (k is None or k > 1) and low[0] in {"who", "what", "which", "whose"}:
            # subject question ("Who wrote X", "What cryptid was shown ...") keeps its order
            wh = lower_first(toks[0])
            return f"Tell me {' '.join([wh] + toks[1:])}."
    return rng.choice(_FRAMES).format(q=core)


def _to_question(sent: str, rng: random.Random) -> str:
    """One command or statement -> one question with the same content."""
    core = sent.rstrip()
    core = re.sub(r"[.!:;]+$", "", core)
    toks = core.split()
    if not toks:
        return sent
    first = re.sub(r"^\W+|\W+$", "", toks[0]).lower()
    second = re.sub(r"^\W+|\W+$", "", toks[1]).lower() if len(toks) > 1 else ""
    if first.isalpha() and first not in _NON_VERB and second not in _BE | AUX_WORDS:
        v = " ".join([lower_first(toks[0])] + toks[1:])
        return rng.choice(_ASK_VERB).format(v=v)
    return rng.choice(_ASK_OTHER).format(s=core)


def rewrite_mood(text: str, target: str, rng: random.Random) -> str:
    """Turn ``text`` into ``target`` mood by rewriting its key sentence.

    question -> imperative: every sentence that ends in "?" or opens like a question (else
    the first sentence) becomes a command: "What is the capital of X?" -> "Name the capital of X.",
    "Who or what is nikkei?" -> "Tell me who or what nikkei is.", "Who wrote X?" -> "Tell me
    who wrote X.", anything else -> "Answer the following: <question>.".
    imperative -> question: the first sentence becomes "Can you <command>?" (verb-initial) or
    "Can you help with the following: <statement>?". Other sentences stay verbatim.

    Args:
        text: base prompt; target: "question" | "imperative"; rng: picks template phrasings.
    Returns:
        The rewritten prompt.
    Raises:
        ValueError: unknown target.
    Source: SAGO (arXiv 2610.01428) §Variants (structural, interrogative ↔ imperative), rules-v1.
    """
    if target not in ("question", "imperative"):
        raise ValueError(f"target must be 'question' or 'imperative', got {target!r}")
    spans = sentence_spans(text)
    if not spans:
        return text
    if target == "imperative":
        qs = [sp for sp in spans if ends_with_question_mark(text[sp[0]:sp[1]])
              or starts_like_question(text[sp[0]:sp[1]])] or [spans[0]]
        out, last = [], 0
        for a, b in qs:
            out += [text[last:a], upper_first(_to_imperative(text[a:b], rng))]
            last = b
        return "".join(out) + text[last:]
    else:
        a, b = spans[0]
        new = _to_question(text[a:b], rng)
    return text[:a] + new + text[b:]
