"""An Inspect task's own scorer as a correctness scorer: inspect_ai's code run on each stored reply.

A run on an Inspect task (``[[data.sources]] inspect = "tasks.py@task"``) records each scorer of
the task as its registry name and parameters (``sources.inspect_task``). Where the scorer is one of
inspect_ai's built-in offline scorers (``OFFLINE``: match, includes, exact, pattern, answer, f1),
sago recreates it from that record through inspect_ai's registry — as ``inspect score`` recreates a
scorer from an eval log — and awaits it on a ``TaskState`` holding the stored reply as the model's
output and the sample's target, one reply at a time. The verdicts go to the ``correctness`` table as
the scorer ``inspect:<name>`` at version ``inspect-ai==<installed version>`` (plus its parameters).
Any other scorer is stored "not run" (every reply ``unavailable`` with the reason): a model-graded
scorer asks a grader model, ``choice`` reads choices the ``multiple_choice`` solver marks (sago runs
no solver), and a custom scorer is the task's own code, which may call a model or the network.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import pandas as pd

from sago_engine.correctness.scorers import CORRECT, F1_THRESHOLD, UNAVAILABLE, UNDECIDED, WRONG, answers
from sago_engine.store.reads.correctness import CORRECTNESS_COLUMNS

#: inspect_ai's built-in scorers sago runs: pure functions of the reply and the target.
OFFLINE: tuple[str, ...] = ("match", "includes", "exact", "pattern", "answer", "f1")
#: The prefix of an Inspect scorer's name in the ``correctness`` table.
PREFIX = "inspect:"
#: Parameters that carry the task's own code (a function), kept only as its name in the record.
_CODE_PARAMS: dict[str, tuple[str, ...]] = {"f1": ("answer_fn",)}
#: Why other inspect_ai built-ins are not run.
_BUILTIN_REASONS: dict[str, str] = {
    "model_graded_qa": "model-graded: it asks a grader model, which sago does not call for a task's scorer "
                       "(rescore --correctness --scorer DATASET=judge grades with a model you choose)",
    "model_graded_fact": "model-graded: it asks a grader model, which sago does not call for a task's scorer "
                         "(rescore --correctness --scorer DATASET=judge grades with a model you choose)",
    "choice": "it reads the choices the multiple_choice solver marks, and sago runs no solver",
}
#: The prefix of every "not run" reason.
NOT_RUN = "not run: "


@dataclass(frozen=True)
class InspectScorer:
    """One scorer of an Inspect task, as sago runs it (or says why not)."""

    name: str
    """The ``correctness.scorer`` name: ``inspect:<name>`` (``inspect:match``; a custom scorer keeps its
    registry name, ``inspect:mytasks/grader``); ``#2``, ``#3`` … when a task has a name twice."""
    registry: str
    """inspect_ai's registry name (``inspect_ai/match``)."""
    params: dict
    """The scorer's arguments as the task gave them (``{"location": "any"}``)."""
    version: str
    """``inspect-ai==<version>``, then the parameters as JSON when there are any."""
    reason: str | None
    """Why it is not run (starts ``NOT_RUN``); None when it runs."""


def inspect_version() -> str:
    """The installed inspect_ai's version ("0.3.285"); raises ImportError without it."""
    from importlib.metadata import version

    return version("inspect-ai")


def _reason(registry: str, params: dict) -> str | None:
    pkg, _, short = registry.rpartition("/")
    if pkg != "inspect_ai":
        return NOT_RUN + (f"{registry} is a custom scorer, the task's own code, which may call a model or the "
                          f"network; sago runs only inspect_ai's offline scorers ({', '.join(OFFLINE)})")
    if short in _BUILTIN_REASONS:
        return NOT_RUN + _BUILTIN_REASONS[short]
    if short not in OFFLINE:
        return NOT_RUN + f"sago runs only inspect_ai's offline scorers ({', '.join(OFFLINE)})"
    code = [p for p in _CODE_PARAMS.get(short, ()) if p in params]
    if code:
        return NOT_RUN + f"its {', '.join(code)} is the task's own code, which the run record keeps by name only"
    return None


def plan_scorers(specs: list[dict], version: str | None = None) -> list[InspectScorer]:
    """The task's scorers as sago runs them.

    Args:
        specs: the source record's ``scorer_specs``: ``{"name": registry name, "params": {...}}`` each.
        version: inspect_ai's version (default: the installed one; None installed → every scorer
            not run, the reason naming the extra).
    Returns:
        One ``InspectScorer`` per spec, in order.
    """
    try:
        version = version or inspect_version()
        missing = None
    except ImportError:
        version, missing = "not installed", NOT_RUN + "inspect-ai is not installed: pip install 'sago[inspect]'"
    out, seen = [], {}
    for spec in specs:
        registry, params = str(spec["name"]), dict(spec.get("params") or {})
        short = registry.removeprefix("inspect_ai/")
        seen[short] = seen.get(short, 0) + 1
        name = PREFIX + short + (f"#{seen[short]}" if seen[short] > 1 else "")
        ver = f"inspect-ai=={version}" + (f" {json.dumps(params, sort_keys=True)}" if params else "")
        out.append(InspectScorer(name, registry, params, ver, missing or _reason(registry, params)))
    return out


def task_scorers(sources: list[dict] | None) -> dict[str, list[InspectScorer]]:
    """dataset → its Inspect task's scorers, over a run's ``data_sources`` records (the other sources
    left out). A task without scorers maps to []."""
    out = {}
    for rec in sources or []:
        if isinstance(rec, dict) and rec.get("inspect"):
            out[str(rec["name"])] = plan_scorers(rec.get("scorer_specs") or [])
    return out


def _verdict(value: Any) -> tuple[str, float]:
    """(verdict, score in [0, 1]) of an Inspect ``Score.value``: "C" correct, "I" wrong, "P" (partial
    credit) and "N" (no answer) undecided; a number (f1) correct at or above ``F1_THRESHOLD``."""
    from inspect_ai.scorer import value_to_float

    x = float(value_to_float()(value))
    if isinstance(value, str) and value in ("C", "I", "P", "N"):
        return {"C": CORRECT, "I": WRONG}.get(value, UNDECIDED), x
    return (CORRECT if x >= F1_THRESHOLD else WRONG), x


async def _score_all(fn, cases: list[tuple[str, str, list[str]]]) -> list:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, ModelOutput
    from inspect_ai.scorer import Target
    from inspect_ai.solver import TaskState

    out = []
    for i, (question, reply, targets) in enumerate(cases):
        state = TaskState(model="sago/stored", sample_id=i, epoch=1, input=question,
                          messages=[ChatMessageUser(content=question), ChatMessageAssistant(content=reply)],
                          target=Target(targets), output=ModelOutput.from_content("sago/stored", reply))
        out.append(await fn(state, Target(targets)))
    return out


def score_rows(replies: pd.DataFrame, scorer: InspectScorer) -> pd.DataFrame:
    """``correctness`` rows of ``replies`` (``Store.replies_to_score`` columns) under one Inspect scorer.

    A reply that is an error or blank, or whose prompt has no target, is ``unavailable`` with the
    reason (the scorer is not asked); a scorer that is not run gives every reply ``unavailable`` with
    ``scorer.reason``. ``raw`` holds the answer the scorer read from the reply (``Score.answer``).

    Returns:
        A frame with ``CORRECTNESS_COLUMNS``, one row per reply, in order.
    Source: inspect_ai's scorers (``inspect_ai.scorer``), run unchanged; the value mapping of
    ``inspect_ai.scorer.value_to_float``.
    """
    replies = replies.astype(object).where(replies.notna(), None)
    verdicts: list[tuple[str, float | None, str | None, str | None]] = []
    todo = []
    for r in replies.itertuples():
        refs = answers(r.reference)
        why = scorer.reason or ("the reply is an error" if r.error else "no reply text" if not (r.response or "").strip()
                                else "no target" if not refs else None)
        verdicts.append((UNAVAILABLE, None, why, None))
        if why is None:
            todo.append((len(verdicts) - 1, (str(r.question), str(r.response), refs)))
    if todo:
        from inspect_ai.util import registry_create

        fn = registry_create("scorer", scorer.registry, **scorer.params)
        for (i, _), s in zip(todo, asyncio.run(_score_all(fn, [c for _, c in todo]))):
            verdict, x = _verdict(s.value)
            verdicts[i] = (verdict, x, "partial credit" if s.value == "P" else "no answer" if s.value == "N" else None,
                           None if s.answer is None else str(s.answer))
    out = replies[["run_id", "response_id", "prompt_id", "variant_id", "repeat"]].copy()
    out["scorer"], out["scorer_version"] = scorer.name, scorer.version
    for k, col in enumerate(("verdict", "score", "reason", "raw")):
        out[col] = [v[k] for v in verdicts]
    return out[list(CORRECTNESS_COLUMNS)]
