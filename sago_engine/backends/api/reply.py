"""What one API answer is, provider-neutral (``ApiReply``, the value the reply cache stores), how
its stop reason maps to sago's, and the usage counters of a backend (``Usage``; cost: ``sago_engine.pricing``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["ApiReply", "Usage", "normalise_finish_reason"]


_FINISH = {
    "stop": "stop", "end_turn": "stop", "stop_sequence": "stop", "eos": "stop", "eos_token": "stop",
    "finish_reason_unspecified": "stop",
    "length": "length", "max_tokens": "length", "model_length": "length", "model_context_window_exceeded": "length",
}


def normalise_finish_reason(raw: object) -> str:
    """Map a provider's stop reason to ``"stop"`` / ``"length"`` / ``"error"``.

    stop, end_turn, stop_sequence, STOP → "stop"; length, max_tokens, MAX_TOKENS → "length";
    anything else (content filter, safety, refusal, tool call, unknown, None) → "error" — the
    raw value is kept in ``GenerationResult.meta["finish_raw"]``.
    """
    if raw is None:
        return "error"
    s = str(getattr(raw, "value", raw)).lower()
    if "." in s:  # "FinishReason.STOP"
        s = s.rsplit(".", 1)[1]
    return _FINISH.get(s, "error")


# ---------------------------------------------------------------------------- replies and usage


@dataclass
class ApiReply:
    """One successful API answer, provider-neutral (this is what the cache stores)."""

    text: str
    finish_raw: str | None
    """The provider's own stop reason."""
    model: str | None
    """The model string the API says answered (e.g. a dated snapshot)."""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    token_logprobs: list[float] | None = None
    """Natural-log probability of each produced token (T,), or None when not returned."""
    top_logprobs: list[list[float]] | None = None
    """Per produced token, the log-probs of the top-k alternatives (T × ≤k), or None."""
    textless: list[int] | None = None
    """Positions of entries whose token has neither text nor bytes (end-of-text entries, e.g.
    vLLM's for a token it cannot detokenize); ``[]`` when the provider's token strings show
    none, None when it gave no token strings (``logprobs.check_server_logprobs``)."""
    reasoning_tokens: int | None = None
    """Hidden reasoning/thinking tokens, billed as output and included in ``completion_tokens``
    (OpenAI ``completion_tokens_details.reasoning_tokens``, Gemini ``thoughts_token_count``);
    None where the provider does not report them apart (Anthropic counts thinking inside
    ``output_tokens``)."""
    cached_tokens: int | None = None
    """Input tokens read from the provider's prompt cache, included in ``prompt_tokens``
    (OpenAI ``prompt_tokens_details.cached_tokens``, Anthropic ``cache_read_input_tokens``,
    Gemini ``cached_content_token_count``)."""
    cache_write_tokens: int | None = None
    """Input tokens written to the prompt cache, included in ``prompt_tokens`` (Anthropic
    ``cache_creation_input_tokens``)."""


@dataclass
class Usage:
    """Counters of one backend since the last ``take_usage`` (requests include retries)."""

    requests: int = 0
    cache_hits: int = 0
    retries: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    """All billed input tokens (cached and cache-write included)."""
    completion_tokens: int = 0
    """All billed output tokens (reasoning included)."""
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    models: set[str] = field(default_factory=set)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["models"] = sorted(self.models)
        return d
