"""The LLM-judge correctness scorer: a model over any ``Backend`` says whether a reply answers the
question correctly, given the reference. Raw answers are stored; only an unambiguous YES/NO counts
(``sago_engine.measure.judge.parse_verdict``, the strict parsing of the Δ-MR judge); anything else is
``undecided`` with the raw answer kept, never silently right.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sago_engine.correctness.scorers import CORRECT, UNAVAILABLE, UNDECIDED, WRONG, Verdict, answers
from sago_engine.measure.judge import parse_verdict
from sago_engine.seeds import template_id

#: The correctness judge's prompt. Placeholders: ``question``, ``reference`` (the accepted answers,
#: one per line, or the reference text of an open-ended task), ``reply``.
CORRECTNESS_TEMPLATE = """You are grading a chatbot's reply against a reference.

Question or task: {question}
Reference answer(s):
{reference}
Chatbot reply: {reply}

Is the chatbot reply correct: does it give an answer that agrees with the reference (for a task, \
does it do the task as well as the reference in substance)? Ignore tone, length and style.
Answer with exactly one word: YES or NO."""

#: Scorer version of the judge: the template's id, so a changed prompt gives another version.
JUDGE_SCORER_VERSION = "judge-" + template_id(CORRECTNESS_TEMPLATE)
#: Decoding budget of a judgement (room for YES/NO and a stray token).
JUDGE_MAX_NEW_TOKENS = 4


@dataclass(frozen=True)
class JudgeCase:
    """One reply to grade."""

    question: str
    """The prompt the reply answers (the base prompt, also for a variant's reply: the task is the same)."""
    reference: Any
    """The stored reference (a list of answers, or a text)."""
    reply: str | None
    """The reply text."""
    error: str | None = None
    """The reply's error, if any (then unavailable, not judged)."""


def render(case: JudgeCase, template: str = CORRECTNESS_TEMPLATE) -> str:
    """The exact judge prompt of ``case``."""
    refs = "\n".join(f"- {a}" for a in answers(case.reference))
    return template.format(question=case.question, reference=refs, reply=case.reply or "")


def judge_correctness(backend, cases: Sequence[JudgeCase], max_new_tokens: int = JUDGE_MAX_NEW_TOKENS) -> list[Verdict]:
    """Grade replies with an LLM judge in one batched ``backend.generate`` call.

    Args:
        backend: any object with the ``Backend`` protocol (``generate(prompts, max_new_tokens)``
            returning results with ``text`` and ``error``); sago backends decode greedily.
        cases: n ``JudgeCase``; one with an error, no reply text or no reference is not sent.
        max_new_tokens: the judge's decoding budget (≥ 1).
    Returns:
        n ``Verdict`` in order: YES → correct (score 1), NO → wrong (score 0), anything else →
        undecided ("the judge gave no unambiguous YES/NO"), a judge error → undecided with the
        error; each judged verdict keeps the raw answer in ``raw``.
    Raises:
        RuntimeError: the backend returned another number of results than prompts.
        ValueError: max_new_tokens < 1.
    """
    if int(max_new_tokens) < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    out: list[Verdict | None] = []
    send: list[int] = []
    for k, c in enumerate(cases):
        if c.error:
            out.append(Verdict(UNAVAILABLE, reason="the reply is an error"))
        elif c.reply is None or not c.reply.strip():
            out.append(Verdict(UNAVAILABLE, reason="no reply text"))
        elif not answers(c.reference):
            out.append(Verdict(UNAVAILABLE, reason="no reference answer"))
        else:
            out.append(None)
            send.append(k)
    if send:
        results = backend.generate([render(cases[k]) for k in send], int(max_new_tokens))
        if len(results) != len(send):
            raise RuntimeError(f"judge backend returned {len(results)} results for {len(send)} prompts")
        for k, r in zip(send, results):
            raw = r.text or ""
            if r.error:
                out[k] = Verdict(UNDECIDED, reason=f"judge error: {r.error}", raw=raw)
                continue
            v = parse_verdict(raw)
            out[k] = (Verdict(UNDECIDED, reason="the judge gave no unambiguous YES/NO", raw=raw) if v is None
                      else Verdict(CORRECT if v == 1 else WRONG, float(v), raw=raw))
    return [v for v in out if v is not None]
