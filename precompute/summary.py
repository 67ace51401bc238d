"""How a model's run went: reply health counted per chunk, the warnings, the run's final status."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from sago_engine.backends.context import OVER_CONTEXT_META
from sago_engine.measure.pipeline import budget_spent
from sago_engine.types import GenerationResult

log = logging.getLogger("sago.precompute")

#: A run whose replies are more than this share errors ends "failed", never "complete".
MAX_ERROR_SHARE = 0.5
#: Above this share of replies with no visible text (token budget spent), the run warns.
WARN_NO_OUTPUT_SHARE = 0.03


@dataclass
class Health:
    """Counts over the replies a run stored: errors, no visible text, over the context, invalid log-probs."""

    replies: int = 0
    errors: int = 0
    no_output: int = 0
    """Replies with no visible text because the token budget ran out (``pipeline.budget_spent``)."""
    over_context: int = 0
    """Prompts refused because prompt + reply cap exceed the model's context (``backends.context``)."""
    invalid_logprobs: int = 0
    """Replies whose log-probs are placeholders, positive or non-finite (Δ-Prob/Δ-Ent unavailable)."""
    first_error: str | None = None

    def add(self, replies: Iterable[GenerationResult]) -> int:
        """Count ``replies``; returns how many of them have invalid log-probs."""
        bad = 0
        for r in replies:
            self.replies += 1
            self.errors += bool(r.error)
            self.no_output += budget_spent(r) is not None
            self.over_context += bool((r.meta or {}).get(OVER_CONTEXT_META))
            bad += r.logprob_issue is not None
            if r.error and self.first_error is None:
                self.first_error = r.error[:200]
        self.invalid_logprobs += bad
        return bad

    def counts(self) -> dict[str, int]:
        """The summary's counters: errors, no_output, replies, invalid_logprobs, over_context."""
        return {"errors": self.errors, "no_output": self.no_output, "replies": self.replies,
                "invalid_logprobs": self.invalid_logprobs, "over_context": self.over_context}


def final_status(model: str, health: Health, retry_pending: int, shard: tuple[int, int] | None, cap: int) -> str:
    """The run's status after its last chunk, with the warnings its reply health calls for.

    "complete" (or "shard K/N complete"); "incomplete: …" when prompt units failed transiently
    (a rerun retries them); "failed: …" when more than ``MAX_ERROR_SHARE`` of the replies are errors.
    """
    n = max(1, health.replies)
    if health.invalid_logprobs:
        log.warning("%s: %d of %d replies came with invalid log-probs (placeholders, positive or non-finite "
                    "values): their Δ-Prob/Δ-Ent are stored as unavailable with the reason.", model,
                    health.invalid_logprobs, health.replies)
    if health.over_context:
        log.warning("%s: %d of %d prompts (base or variant) are longer than the model's context with the reply cap "
                    "of %d tokens: stored as error rows, unavailable on every axis (python -m precompute --plan "
                    "lists them)", model, health.over_context, health.replies, cap)
    if health.no_output / n > WARN_NO_OUTPUT_SHARE:
        log.warning("%s: %d of %d replies (%.1f%%) have no visible text: the token budget went to hidden reasoning. "
                    "Their text axes are stored as unavailable. Raise [run] max_new_tokens or set thinking_budget / "
                    "reasoning_effort for this model.", model, health.no_output, health.replies,
                    100.0 * health.no_output / n)
    if retry_pending:
        return f"incomplete: {retry_pending} prompt units failed transiently (rerun to retry)"
    if health.errors / n > MAX_ERROR_SHARE:
        status = f"failed: {health.errors} of {health.replies} replies are errors (first: {health.first_error})"
        log.error("%s: %s", model, status)
        return status
    return "complete" if shard is None else f"shard {shard[0]}/{shard[1]} complete"
