"""How a failed API request is handled: retry, stop the run, or one prompt's error row.

``classify_error`` sorts an SDK or transport exception by its attributes (never by SDK class, so
nothing here imports a provider SDK); a 400 that names a refused request parameter becomes an
``ApiConfigError`` whose message says the config change that fixes it (``config_fix``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass

from sago_engine.backends.api.retry import retry_hint

__all__ = ["CONTENT_PARAMS", "OMITTABLE_PARAMS", "OVER_CONTEXT_400", "ApiConfigError", "ApiFatalError", "ErrorClass",
           "classify_error", "config_fix", "context_limit_reason", "logprobs_cap", "normalise_param"]


class ApiFatalError(RuntimeError):
    """An API answer that would be the same for every prompt (bad key, no access, unknown model):
    the run stops instead of storing one error row per prompt. The message is redacted."""


class ApiConfigError(ApiFatalError):
    """A 400 that names a request parameter the model does not accept (e.g. OpenAI reasoning
    models and ``temperature``, a Gemini model without log-probs): a configuration error found
    at request time. The run stops before any row is written; the message names the parameter
    and the config change that fixes it (``config_fix``)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


#: Request parameters a model's config can leave out (``omit_params``): ``temperature`` and
#: ``seed`` are then not sent (the provider's default applies, recorded in the run's decoding);
#: ``logprobs`` requests no log-probs (Δ-Prob/Δ-Ent unavailable).
OMITTABLE_PARAMS: tuple[str, ...] = ("temperature", "seed", "logprobs")

#: Parameter names recognised in a 400's message when the body has no ``param`` field
#: (normalised name → words that name it in provider messages).
_PARAM_WORDS: dict[str, tuple[str, ...]] = {
    "temperature": ("temperature",),
    "seed": ("seed",),
    "logprobs": ("logprobs", "top_logprobs", "response_logprobs", "responselogprobs", "log probs", "log-probs"),
    "reasoning_effort": ("reasoning_effort", "reasoning effort"),
    "thinking": ("thinking_budget", "thinking_config", "thinkingbudget", "thinking.budget_tokens", "thinking"),
    "max_tokens": ("max_tokens", "max_completion_tokens", "max_output_tokens", "maxoutputtokens"),
    "top_p": ("top_p",),
    "top_k": ("top_k",),
}
_PARAM_NORMAL = {w: k for k, ws in _PARAM_WORDS.items() for w in ws}


#: A refusal of how many log-probs were asked for, with the most the server allows (vLLM: "Requested
#: sample logprobs of 21, which is greater than max allowed: 20"; OpenAI: "top_logprobs … at most 20").
_MAX_LOGPROBS = re.compile(r"max(?:imum)? allowed:?\s*(\d+)|at most\s*(\d+)|less than or equal to\s*(\d+)|"
                           r"<=\s*(\d+)|maximum (?:value )?(?:is|of)\s*(\d+)", re.IGNORECASE)


def logprobs_cap(message: str) -> int | None:
    """The most log-probs per token a refusal message allows (``"… greater than max allowed: 5"`` → 5),
    or None when the message names no number."""
    m = _MAX_LOGPROBS.search(message or "")
    return None if m is None else int(next(g for g in m.groups() if g is not None))


def config_fix(param: str, message: str = "") -> str:
    """The config change that stops a model's 400 on ``param`` (text for the error message).

    ``message``: the provider's error text. A refusal of the *number* of log-probs (vLLM's
    ``--max-logprobs`` cap, OpenAI's 20) is fixed by asking for fewer (or by raising the server's
    cap), which keeps Δ-Prob and Δ-Ent; leaving log-probs out is advised only for a model that
    returns none at all (e.g. "Logprobs is not enabled for models/…").
    """
    if param in ("temperature", "seed"):
        return f'add omit_params = ["{param}"] to the model\'s [[models]] table (the provider default is then used)'
    if param == "logprobs":
        cap = logprobs_cap(message)
        if cap is not None or re.search(r"greater than|too (?:many|large)|exceed", message or "", re.IGNORECASE):
            lower = f"to {cap} (the most the server allows)" if cap is not None else "to what the server allows"
            return (f"lower top_logprobs in the model's [[models]] table {lower}, or start the server with a higher "
                    f"cap (vLLM: --max-logprobs K, K >= the top_logprobs you ask for); Δ-Prob and Δ-Ent stay available")
        return ('add omit_params = ["logprobs"] to the model\'s [[models]] table (or remove top_logprobs): '
                'Δ-Prob and Δ-Ent are then unavailable for it')
    if param == "reasoning_effort":
        return "remove reasoning_effort from the model's [[models]] table (this model does not reason)"
    if param == "thinking":
        return "remove thinking_budget from the model's [[models]] table (or use a value the model accepts)"
    if param == "max_tokens":
        return "lower [run] max_new_tokens (or raise it past the model's minimum)"
    return f"remove {param} from the request (see the model's [[models]] table)"


#: How the error row of a prompt a server refused as over its context begins.
OVER_CONTEXT_400 = "the server refused the prompt as longer than its context"

#: Request fields that carry the prompt itself (vLLM names ``input_tokens`` when a prompt is over
#: its context, OpenAI ``messages``): a 400 naming one is about that prompt, not about a setting.
CONTENT_PARAMS: frozenset[str] = frozenset({"input_tokens", "prompt", "prompt_tokens", "messages", "input",
                                            "contents", "content", "system"})


def context_limit_reason(message: str) -> bool:
    """Whether a server's error message says the request does not fit the model's context.

    Recognises vLLM's ("This model's maximum context length is 2048 tokens. However, your
    prompt contains 2130 input tokens…"), OpenAI's (``context_length_exceeded``, "maximum
    context length"), Anthropic's ("prompt is too long") and Gemini's ("exceeds the maximum
    number of tokens") wording; case-insensitive.
    """
    return bool(re.search(r"maximum context length|context[ _]length[ _]exceeded|context window|max_model_len|"
                          r"prompt is too long|input is too long|too many (input )?tokens|"
                          r"exceeds the maximum number of tokens|input tokens exceed", message, re.IGNORECASE))


def normalise_param(name: str) -> str:
    """A request field's name as ``ErrorClass.param`` spells it (``top_logprobs`` → ``logprobs``,
    ``max_completion_tokens`` → ``max_tokens``; a dotted path's last part; other names as given)."""
    c = name.lower()
    if c not in _PARAM_NORMAL:
        c = c.rsplit(".", 1)[-1]
    return _PARAM_NORMAL.get(c, c)


def _param_of(exc: BaseException, status: int) -> str | None:
    """The request parameter a 400/422 names: the body's ``param`` (OpenAI), else a known
    parameter word in the message (Anthropic, Gemini: "Logprobs is not enabled for models/…")."""
    if status not in (400, 422):
        return None
    cands: list[str] = []
    p = getattr(exc, "param", None)
    if isinstance(p, str) and p:
        cands.append(p)
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        if isinstance(inner.get("param"), str) and inner.get("param"):
            cands.append(inner["param"])
    for c in cands:
        return normalise_param(c)
    text = str(getattr(exc, "message", "") or exc).lower()
    # only messages about a parameter being refused, not any 400 that happens to say "seed"
    if not re.search(r"unsupported|not supported|not enabled|does not support|isn't supported|not allowed|"
                     r"deprecated|only the default|invalid value|is not available", text):
        return None
    for w in sorted(_PARAM_NORMAL, key=len, reverse=True):
        if re.search(r"(?<![a-z_])" + re.escape(w) + r"(?![a-z_])", text):
            return _PARAM_NORMAL[w]
    return None


@dataclass(frozen=True)
class ErrorClass:
    """How one failed request is handled."""

    retryable: bool
    """429, 408, 409, 5xx, timeouts and connection errors: worth another attempt."""
    fatal: bool
    """401, 403, 404: the same for every prompt, so the run stops (``ApiFatalError``)."""
    status: int | None
    """HTTP status, when there was a response."""
    retry_after: float | None
    """Seconds the server asked us to wait (``retry.retry_hint``: each provider's form), if usable."""
    message: str
    """``ExceptionType: message`` (not yet redacted)."""
    param: str | None = None
    """A 400 that names a request parameter the model refuses (``fatal`` is then True): the
    normalised name (temperature, seed, logprobs, reasoning_effort, thinking, max_tokens…)."""
    context: bool = False
    """The server says this prompt (with the reply cap) does not fit the model's context: that
    prompt's error row (``fatal`` False, not retried)."""


_RETRY_NAMES = {"APITimeoutError", "APIConnectionError", "TimeoutException", "TransportError", "NetworkError",
                "ConnectError", "RemoteProtocolError", "ConnectionError", "TimeoutError", "timeout"}


def classify_error(exc: BaseException, sent: Collection[str] | None = None) -> ErrorClass:
    """Sort an SDK or transport exception into retryable / fatal / permanent (item error).

    Works on the exception's attributes, not on SDK classes: ``status_code`` (openai, anthropic)
    or an integer ``code`` (google-genai), ``retry.retry_hint`` for the server's wait; timeouts and
    connection errors are recognised by class name in the MRO (``APITimeoutError``,
    ``APIConnectionError``, httpx ``TimeoutException``/``TransportError``, ``ConnectionError``).

    A 400/413/422 about the prompt itself — its message says it does not fit the context
    (``context_limit_reason``), or it names a field that carries the prompt (``CONTENT_PARAMS``:
    vLLM's ``input_tokens``) — is that prompt's error (``context`` set when the message is about
    the context; the message then starts with ``OVER_CONTEXT_400``). A 400/422 that
    names a request parameter (OpenAI's ``param`` field, or a parameter named as unsupported / not
    enabled in the message) is fatal with ``param`` set — a configuration error, the same for
    every prompt — when sago sent that parameter: ``sent`` holds the normalised names of the
    fields the request carried (``normalise_param``; None = unknown, every named parameter counts
    as sent); a parameter sago did not send is that prompt's error. Malformed JSON, schema
    mismatches and every other 4xx are permanent (one error row per prompt).
    """
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        code = getattr(exc, "code", None)
        status = code if isinstance(code, int) and 100 <= code <= 599 else None
    msg = f"{type(exc).__name__}: {exc}"
    if status is not None:
        retryable = status in (408, 409, 429) or status >= 500
        fatal = status in (401, 403, 404)
        if status in (400, 413, 422) and context_limit_reason(msg):
            return ErrorClass(False, False, status, None, f"{OVER_CONTEXT_400}: {msg}", None, context=True)
        param = _param_of(exc, status)
        if param is not None and (param in CONTENT_PARAMS or (sent is not None and param not in sent)):
            param = None  # about this prompt's content, or a field sago never set: not a setting to fix
        return ErrorClass(retryable, fatal or param is not None, status,
                          retry_hint(exc) if retryable else None, msg, param)
    names = {c.__name__ for c in type(exc).__mro__}
    if isinstance(exc, json.JSONDecodeError):
        return ErrorClass(False, False, None, None, msg)
    return ErrorClass(bool(names & _RETRY_NAMES), False, None, None, msg)
