"""Correctness scorers: is a reply right against its prompt's reference? Pure functions, named and versioned.

Every scorer maps (reply, reference) to a ``Verdict``: ``correct``, ``wrong``, ``undecided`` (the
scorer cannot tell; never counted as right) or ``unavailable`` (no reference, an error, no text —
with the reason; never counted as wrong). Short-answer QA uses the SQuAD normalisation (Rajpurkar
et al. 2016, the official ``evaluate-v1.1.py``: lower-case, strip punctuation, strip the articles
a/an/the, collapse whitespace) with three verdicts: exact match, token F1 and "contains any
accepted answer" (the default: a chat reply is a sentence, not a bare answer, so exact match is
almost never met and F1 is diluted by the sentence around the answer; containment is the
accuracy of Kandpal et al. 2023 / Liu et al. 2024 "Lost in the middle" for NQ-open). TruthfulQA
is scored against its correct *and* incorrect answer lists (Lin et al. 2022; the comparison of
lm-eval's ``truthfulqa_gen`` ``*_acc``: best match to a correct answer vs best match to an
incorrect one). docs/METHOD.md ("Correctness") gives the rules and known failure cases.
"""

from __future__ import annotations

import json
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: The four verdicts a scorer gives.
CORRECT, WRONG, UNDECIDED, UNAVAILABLE = "correct", "wrong", "undecided", "unavailable"
VERDICTS: tuple[str, ...] = (CORRECT, WRONG, UNDECIDED, UNAVAILABLE)

#: Version of each scorer: a change to its rules (or to ``normalize_answer``) bumps it, so stored
#: verdicts of another version are told apart (``correctness.scorer_version``).
SCORER_VERSIONS: dict[str, str] = {
    "exact": "squad-norm-1", "f1": "squad-norm-1", "contains": "squad-norm-1", "truthfulqa": "tqa-contrast-1",
    "none": "1",
}
#: The scorers of this module (the LLM judge, ``correctness.judge``, is named ``judge``).
SCORERS: tuple[str, ...] = tuple(SCORER_VERSIONS)
#: Every scorer name a config may declare.
SCORER_NAMES: tuple[str, ...] = (*SCORERS, "judge")

#: The default scorer of each bundled dataset (a user's dataset declares its own: ``[data] correctness``).
DEFAULT_SCORERS: dict[str, str] = {
    "nq_open": "contains", "triviaqa": "contains", "simpleqa_verified": "contains", "hotpotqa": "contains",
    "truthfulqa": "truthfulqa", "alpaca": "none",
}

#: Token F1 at or above this is "correct" under the ``f1`` scorer, and a "match" of a TruthfulQA answer.
F1_THRESHOLD = 0.5

_ARTICLES = frozenset({"a", "an", "the"})
_UNITS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
          "sixteen seventeen eighteen nineteen").split()
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
#: English number words 0–99 (single words, and tens-units joined as SQuAD's punctuation removal
#: leaves "twenty-one": "twentyone") → digits.
NUMBER_WORDS: dict[str, str] = {w: str(i) for i, w in enumerate(_UNITS)}
NUMBER_WORDS.update({t: str(v) for t, v in _TENS.items()})
NUMBER_WORDS.update({t + u: str(v + i) for t, v in _TENS.items() for i, u in enumerate(_UNITS[1:10], start=1)})


def _is_cjk(ch: str) -> bool:
    """A character of a script written without spaces between words (Han, kana, Hangul syllables, Thai)."""
    o = ord(ch)
    return (0x3040 <= o <= 0x30FF or 0x3400 <= o <= 0x4DBF or 0x4E00 <= o <= 0x9FFF or 0xF900 <= o <= 0xFAFF
            or 0xAC00 <= o <= 0xD7AF or 0x0E00 <= o <= 0x0E7F or 0x20000 <= o <= 0x2FA1F)


def answer_tokens(text: str | None) -> list[str]:
    """The SQuAD-normalised tokens of ``text`` (sago's normalisation, version ``squad-norm-1``).

    Steps: Unicode NFKC and lower-case; every punctuation character (Unicode category P*, which
    includes SQuAD's ASCII ``string.punctuation`` except the symbols ``$+<=>^`|~``, also removed)
    deleted, as SQuAD deletes it ("1,000" → "1000", "U.S." → "us"); split on whitespace; each
    character of a script written without spaces (Han, kana, Hangul, Thai) its own token (MLQA's
    mixed segmentation); the English articles a / an / the dropped; English number words 0–99 → digits
    ("ten" → "10", "twenty-one" / "twenty one" → "21").

    Args:
        text: any text; None or "" gives [].
    Returns:
        The tokens, in order. "The Eiffel Tower!" → ["eiffel", "tower"]; "答案是东京。" → ["答", "案", "是", "东", "京"].
    Source: SQuAD v1.1 ``normalize_answer`` (Rajpurkar et al. 2016); MLQA ``mixed_segmentation`` (Lewis et al. 2020).
    """
    if not text:
        return []
    s = unicodedata.normalize("NFKC", text).lower()
    s = "".join(ch for ch in s if not unicodedata.category(ch).startswith("P") and ch not in "$+<=>^`|~")
    s = "".join(f" {ch} " if _is_cjk(ch) else ch for ch in s)
    return _numbers([w for w in s.split() if w not in _ARTICLES])


def _numbers(words: list[str]) -> list[str]:
    """Number words → digits; a tens word followed by a unit word 1–9 is one number ("twenty one" → "21")."""
    out: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if w in _TENS and nxt in _UNITS[1:10]:
            out.append(str(_TENS[w] + _UNITS.index(nxt)))
            i += 2
            continue
        out.append(NUMBER_WORDS.get(w, w))
        i += 1
    return out


def normalize_answer(text: str | None) -> str:
    """``answer_tokens`` joined by single spaces: the normalised form exact match compares."""
    return " ".join(answer_tokens(text))


def exact_match(reply: str, answer: str) -> bool:
    """Whether the normalised reply equals the normalised answer (SQuAD EM); two empty forms never match."""
    r, a = answer_tokens(reply), answer_tokens(answer)
    return bool(a) and r == a


def token_f1(reply: str, answer: str) -> float:
    """SQuAD token F1 of the normalised reply against the normalised answer, in [0, 1].

    F1 = 2·P·R / (P + R) over the multiset of shared tokens (P = shared / reply tokens, R = shared /
    answer tokens); 0.0 when either side has no token or nothing is shared.
    Source: SQuAD v1.1 ``f1_score``.
    """
    r, a = answer_tokens(reply), answer_tokens(answer)
    shared = sum((Counter(r) & Counter(a)).values())
    if shared == 0:
        return 0.0
    p, rc = shared / len(r), shared / len(a)
    return 2 * p * rc / (p + rc)


def contains_answer(reply: str, answer: str) -> bool:
    """Whether the normalised answer occurs in the normalised reply as a whole run of tokens.

    "The answer is Paris, France." contains "paris"; "In 2010" does not contain "10" (tokens, not
    characters); an answer with no token is never contained.
    """
    r, a = answer_tokens(reply), answer_tokens(answer)
    n = len(a)
    return n > 0 and any(r[i:i + n] == a for i in range(len(r) - n + 1))


@dataclass(frozen=True)
class Verdict:
    """One scorer's verdict on one reply."""

    verdict: str
    """``correct``, ``wrong``, ``undecided`` or ``unavailable`` (``VERDICTS``)."""
    score: float | None = None
    """The scorer's number in [0, 1] (1/0 for exact and contains, the best F1 for f1, the best
    correct-answer similarity for truthfulqa); None when unavailable."""
    reason: str | None = None
    """Why the verdict is ``unavailable`` or ``undecided``; None otherwise."""
    raw: str | None = None
    """A judge's raw answer (the LLM-judge scorer only)."""


def answers(reference: Any) -> list[str]:
    """The accepted answers of a stored reference: a JSON list or string (or its JSON text) → the
    non-blank answers as strings, in order. None, "", [] → []."""
    if isinstance(reference, str):
        try:
            reference = json.loads(reference)
        except ValueError:
            pass
    if reference is None:
        return []
    items = reference if isinstance(reference, (list, tuple)) else [reference]
    return [str(x) for x in items if x is not None and str(x).strip()]


def _unavailable_reason(reply: str | None, refs: Sequence[str], error: str | None) -> str | None:
    if error:
        return "the reply is an error"
    if reply is None or not reply.strip():
        return "no reply text"
    if not refs:
        return "no reference answer"
    return None


def score_short_answer(scorer: str, reply: str | None, reference: Any, error: str | None = None) -> Verdict:
    """A short-answer QA verdict: ``exact``, ``f1`` or ``contains`` against any accepted answer.

    Args:
        scorer: ``"exact"`` (normalised reply equals an answer), ``"f1"`` (best token F1 ≥
            ``F1_THRESHOLD``; score = best F1) or ``"contains"`` (an answer's tokens occur in the reply).
        reply: the reply text; reference: the stored reference (``answers``); error: the reply's error.
    Returns:
        ``Verdict``: correct / wrong with score 1.0 / 0.0 (F1: the best F1), or unavailable with the
        reason (an error, no text, no reference). Never undecided.
    Raises:
        ValueError: another scorer name.
    Source: SQuAD v1.1 EM and F1 (Rajpurkar et al. 2016); containment as in Liu et al. 2024.
    """
    refs = answers(reference)
    why = _unavailable_reason(reply, refs, error)
    if why:
        return Verdict(UNAVAILABLE, reason=why)
    if scorer == "exact":
        hit = any(exact_match(reply, a) for a in refs)
        return Verdict(CORRECT if hit else WRONG, 1.0 if hit else 0.0)
    if scorer == "contains":
        hit = any(contains_answer(reply, a) for a in refs)
        return Verdict(CORRECT if hit else WRONG, 1.0 if hit else 0.0)
    if scorer == "f1":
        best = max(token_f1(reply, a) for a in refs)
        return Verdict(CORRECT if best >= F1_THRESHOLD else WRONG, best)
    raise ValueError(f"not a short-answer scorer: {scorer!r} (exact, f1, contains)")


def _similarity(reply: str, answer: str) -> float:
    """1.0 when the answer is contained in the reply, else their token F1."""
    return 1.0 if contains_answer(reply, answer) else token_f1(reply, answer)


def score_truthfulqa(reply: str | None, correct: Any, incorrect: Any, error: str | None = None) -> Verdict:
    """TruthfulQA verdict against the correct and the incorrect answer lists.

    Similarity of the reply to an answer: 1.0 when the answer is contained in it, else token F1.
    c = best similarity to a correct answer, w = best to an incorrect one. Neither reaches
    ``F1_THRESHOLD`` → ``undecided`` ("matches neither"); otherwise ``correct`` when c > w, and
    ``wrong`` when w ≥ c (a reply that matches an incorrect answer as well as any correct one is wrong,
    never silently right). Score = c.

    Args:
        reply: the reply; correct: the reference (correct answers); incorrect: the incorrect
            answers (``meta.incorrect_answers``); error: the reply's error.
    Returns:
        ``Verdict``; unavailable with the reason for an error, no text, no correct answers, or no
        incorrect answers (the contrast needs both lists).
    Source: Lin et al. 2022 (TruthfulQA) §4; lm-eval ``truthfulqa_gen`` (max similarity to correct
    vs to incorrect answers).
    """
    good, bad = answers(correct), answers(incorrect)
    why = _unavailable_reason(reply, good, error)
    if why:
        return Verdict(UNAVAILABLE, reason=why)
    if not bad:
        return Verdict(UNAVAILABLE, reason="no incorrect answers to contrast with")
    c = max(_similarity(reply, a) for a in good)
    w = max(_similarity(reply, a) for a in bad)
    if max(c, w) < F1_THRESHOLD:
        return Verdict(UNDECIDED, c, reason="matches neither a correct nor an incorrect answer")
    return Verdict(CORRECT if c > w else WRONG, c)


#: Why the ``none`` scorer gives no verdict.
NO_SCORER_REASON = "no correctness scorer for this dataset (open-ended; choose the judge scorer)"


def score(scorer: str, reply: str | None, reference: Any, incorrect: Any = None, error: str | None = None) -> Verdict:
    """The verdict of the named offline scorer on one reply (``judge`` is ``correctness.judge``).

    Args:
        scorer: one of ``SCORERS``; reply: the reply text (None / blank: unavailable);
        reference: the stored reference; incorrect: TruthfulQA's incorrect answers (else unused);
        error: the reply's error (unavailable).
    Returns:
        ``Verdict``. ``none`` → unavailable (``NO_SCORER_REASON``).
    Raises:
        ValueError: an unknown scorer name (the valid ones listed).
    """
    if scorer in ("exact", "f1", "contains"):
        return score_short_answer(scorer, reply, reference, error)
    if scorer == "truthfulqa":
        return score_truthfulqa(reply, reference, incorrect, error)
    if scorer == "none":
        return Verdict(UNAVAILABLE, reason=NO_SCORER_REASON)
    raise ValueError(f"unknown correctness scorer {scorer!r}; valid: {', '.join(SCORERS)}")


def scorer_for(dataset: str, declared: dict[str, str] | None = None) -> str:
    """The scorer of ``dataset``: the config's declaration (``[data] correctness``), else
    ``DEFAULT_SCORERS``, else ``none`` (a user's dataset that declares nothing gets no verdicts)."""
    if declared and dataset in declared:
        return declared[dataset]
    return DEFAULT_SCORERS.get(dataset, "none")


def unscored_datasets(scorers_by_dataset: dict[str, Any]) -> list[str]:
    """Datasets (sorted) whose only scorer is ``none`` although they are not open-ended by default
    (``DEFAULT_SCORERS``): a user's dataset that declares no scorer, whose every verdict is unavailable.

    Args:
        scorers_by_dataset: dataset → a scorer name or a list of them (``CorrectnessResult.scorers``,
            ``compare.chosen_scorers``).
    """
    out = []
    for dataset, names in scorers_by_dataset.items():
        names = [names] if isinstance(names, str) else list(names)
        if names == ["none"] and DEFAULT_SCORERS.get(str(dataset)) != "none":
            out.append(str(dataset))
    return sorted(out)


def no_scorer_fix(dataset: str) -> str:
    """One line naming ``dataset`` (raw: the caller escapes it for its medium) and the two ways to give it a scorer."""
    return (f"dataset {dataset} has no correctness scorer (scorer none), so every verdict is unavailable: "
            f"rescore with --scorer {dataset}=contains, or declare [data] correctness = {{ {dataset} = \"contains\" }} "
            "in the run's config")
