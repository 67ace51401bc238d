"""Shared machinery of the API backends: keys, retries, concurrency, usage (retry timing: ``retry``;
server log-probs and the top-k entropy: ``logprobs``; reply cache: ``caching``; usage cost: ``sago_engine.pricing``).

The provider modules (``openai_api``, ``anthropic_api``, ``gemini_api``) only build their SDK
client, send one request and parse one reply; everything else lives here so that it exists once.
Nothing in this module imports a provider SDK.

SAGO (arXiv 2610.01428) §Axes: closed API models expose no activations (Δ-Cos is never
available) and, at most, per-token log-probs of the produced text with the top-k alternatives;
§Decoding: temperature 0 for all models.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import random
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Collection, Iterable, Mapping, Sequence
from urllib.parse import urlsplit, urlunsplit

from ..pricing import cost_usd
from ..seeds import stable_hash
from ..types import DEFAULT_MAX_NEW_TOKENS, GenerationResult
from .logprobs import check_server_logprobs, topk_entropy  # noqa: F401 (topk_entropy re-exported)
from .retry import RetryPolicy, parse_retry_after, retry_hint  # noqa: F401 (parse_retry_after re-exported)

__all__ = [
    "API_BACKENDS",
    "KEY_ENV_VARS",
    "ApiBackend",
    "ApiConfigError",
    "ApiFatalError",
    "ApiReply",
    "ErrorClass",
    "RetryPolicy",
    "OMITTABLE_PARAMS",
    "Usage",
    "CONTENT_PARAMS",
    "OVER_CONTEXT_400",
    "config_fix",
    "context_limit_reason",
    "cost_usd",
    "classify_error",
    "is_local_url",
    "logprobs_cap",
    "missing_key_vars",
    "normalise_param",
    "normalise_finish_reason",
    "parse_retry_after",
    "redact",
    "resolve_api_key",
    "topk_entropy",
]

log = logging.getLogger("sago.api")

#: Registered API backend names (no SDK import needed to know them).
API_BACKENDS: tuple[str, ...] = ("openai", "openai_compatible", "anthropic", "gemini")

#: Environment variables a backend reads its key from, in order of preference (the first one set
#: wins). A config's ``api_key_env`` replaces this list with the one name it gives.
KEY_ENV_VARS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "openai_compatible": (),  # only the variable named by ``api_key_env``: never OPENAI_API_KEY (a third-party server)
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}

REDACTED = "[REDACTED]"

#: Key-like strings scrubbed even when their value is not known (defence in depth).
_KEY_PATTERNS = (
    re.compile(r"sk-[A-Za-z0-9_\-]{6,}"),  # OpenAI / Anthropic style
    re.compile(r"AIza[0-9A-Za-z_\-]{20,}"),  # Google API keys
    re.compile(r"(?i)((?:api[_-]?key|key|token|authorization)\s*[=:]\s*)(?:Bearer\s+)?[^\s&'\"]{6,}"),
)


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


# ---------------------------------------------------------------------------- keys and secrets


def is_local_url(url: str | None) -> bool:
    """True when ``url``'s host is loopback, private (RFC 1918 / ULA) or ``localhost``.

    Used to let an ``openai_compatible`` server on the local machine or network run without a key.
    """
    if not url:
        return False
    host = (urlsplit(url).hostname or "").lower()
    if host in ("localhost", "host.docker.internal") or host.endswith(".localhost") or host.endswith(".local"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private or ip.is_link_local


def _key_vars(backend: str, api_key_env: str | None) -> tuple[str, ...]:
    return (api_key_env,) if api_key_env else KEY_ENV_VARS.get(backend, ())


def resolve_api_key(backend: str, api_key_env: str | None = None,
                    environ: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """The key value and the name of the variable it came from (``(None, None)`` if none is set).

    Keys are read only from environment variables, never from a config file.
    """
    env = os.environ if environ is None else environ
    for var in _key_vars(backend, api_key_env):
        val = env.get(var, "").strip()
        if val:
            return val, var
    return None, None


def missing_key_vars(backend: str, api_key_env: str | None = None, base_url: str | None = None,
                     environ: Mapping[str, str] | None = None) -> list[str]:
    """What must be set before this backend can run: ``[]`` when a key is present or not needed.

    Returns one entry per missing requirement, e.g. ``["GEMINI_API_KEY (or GOOGLE_API_KEY)"]``.
    An ``openai_compatible`` server reads its key only from the variable ``api_key_env`` names
    (never OPENAI_API_KEY); at a local ``base_url`` it needs none.
    """
    if backend not in KEY_ENV_VARS:
        return []
    if backend == "openai_compatible" and not api_key_env:
        # a server on this machine/network runs without a key; a remote one must name its key's
        # variable (OPENAI_API_KEY is never sent to a server other than OpenAI's)
        return [] if is_local_url(base_url) else [
            "api_key_env = \"NAME\" is needed in the model's config: the name of the environment variable "
            "holding the remote openai_compatible server's key (OPENAI_API_KEY is never sent to it)"]
    key, _ = resolve_api_key(backend, api_key_env, environ)
    if key:
        return []
    names = _key_vars(backend, api_key_env)
    return [names[0] + (f" (or {', '.join(names[1:])})" if len(names) > 1 else "")]


def redact(text: object, secrets: Iterable[str | None] = ()) -> str:
    """``str(text)`` with every given secret value and every key-looking token replaced by
    ``[REDACTED]``. Apply to any error text before it is logged, stored or raised."""
    s = str(text)
    for sec in sorted({x for x in secrets if x and len(x) >= 4}, key=len, reverse=True):
        s = s.replace(sec, REDACTED)
    for pat in _KEY_PATTERNS:
        s = pat.sub(lambda m: (m.group(1) if m.re.groups else "") + REDACTED, s)
    return s


def _public_url(url: str | None) -> str | None:
    """``url`` without user:password and query string (which may carry credentials)."""
    if not url:
        return url
    p = urlsplit(url)
    host = p.hostname or ""
    if p.port:
        host = f"{host}:{p.port}"
    return urlunsplit((p.scheme, host, p.path, "", ""))


# ---------------------------------------------------------------------------- errors and retries


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


# ---------------------------------------------------------------------------- log-probs
# ``topk_entropy`` and the checks on a server's log-probs live in ``logprobs`` (re-exported here).


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


# ---------------------------------------------------------------------------- the base class


class ApiBackend:
    """Base of the API backends (implements the ``Backend`` protocol).

    Subclasses set ``name``, ``sdk``, ``default_top_logprobs``, ``max_top_logprobs`` and
    implement ``_make_client(api_key)`` and ``_request(prompt, max_new_tokens) -> ApiReply``
    (one attempt, may raise). This class adds: a key from the environment only; a bounded
    thread pool (results in input order); retries with backoff; usage/cost counters; redaction
    of the key from every error text. The on-disk cache of successful replies is the
    ``caching.CachingBackend`` wrapper (``get_backend`` applies it; ``cache_key`` is its key).

    ``capabilities`` ⊆ {"prob", "ent"} (never "cos": no activations). "prob" when log-probs are
    requested, "ent" when top-k alternatives (k ≥ 1) are requested too. A reply without them
    gives ``token_logprobs=None`` and the pipeline stores those axes as unavailable.

    Sequence log-prob from an API is the sum over the produced tokens; APIs do not return the
    end-of-sequence token's log-prob (the local backend counts it), so the two are not
    comparable across backends — only Δ within one model is used.
    """

    name: str = "api"
    sdk: str = ""
    """Distribution name of the SDK (its version is recorded)."""
    default_top_logprobs: int | None = None
    """k used when the config gives none; None = do not request log-probs."""
    max_top_logprobs: int = 20
    requires_base_url: bool = False

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        top_logprobs: int | None = -1,
        max_concurrency: int = 4,
        timeout_s: float = 60.0,
        max_retries: int = 5,
        price_in_per_mtok: float | None = None,
        price_out_per_mtok: float | None = None,
        price_cached_in_per_mtok: float | None = None,
        omit_params: Sequence[str] | None = None,
        thinking_budget: int | None = None,
        reasoning_effort: str | None = None,
        seed: int = 0,
        backoff_base_s: float = 0.5,
        backoff_cap_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """Check settings, read the key from the environment and build the SDK client.

        Args:
            model: the provider's model name, e.g. ``"gpt-4o-mini"``.
            base_url: API root (required for ``openai_compatible``; else the SDK default).
            api_key_env: name of the env var holding the key (default per provider, see
                ``KEY_ENV_VARS``).
            top_logprobs: k alternatives per token for the entropy approximation (0 = chosen
                token's log-prob only, None = request no log-probs, -1 = the backend default).
            max_concurrency: parallel requests (≥ 1).
            timeout_s: per-request timeout in seconds (> 0).
            max_retries: retries after the first attempt (≥ 0).
            price_in_per_mtok / price_out_per_mtok: USD per million prompt / completion tokens
                (both None → cost unknown); completion includes reasoning tokens.
            price_cached_in_per_mtok: USD per million cached input tokens (None → input price).
            omit_params: request parameters not to send, from ``OMITTABLE_PARAMS``
                (``temperature``, ``seed``, ``logprobs``) — for models that reject them.
            thinking_budget: hidden-reasoning token budget (gemini ``thinking_budget``, 0 = off;
                anthropic extended thinking ``budget_tokens`` ≥ 1024, added on top of the
                completion cap). None = the model's default.
            reasoning_effort: OpenAI ``reasoning_effort`` (e.g. ``"none"``, ``"minimal"``, ``"low"``).
            seed: sent where the API accepts one (recorded; APIs promise best effort only).
            backoff_base_s / backoff_cap_s: full-jitter backoff (see ``retry.RetryPolicy``).
            sleep: the sleep function (tests record instead of sleeping).
        Raises:
            ValueError: a bad setting, or no key set where one is needed (the message names
                the variables, never a value).
        """
        if not model:
            raise ValueError(f"{self.name}: a model name is required")
        if self.requires_base_url and not base_url:
            raise ValueError(f"{self.name}: base_url is required (e.g. http://localhost:8000/v1)")
        omit = tuple(sorted(set(omit_params or ())))
        bad = [p for p in omit if p not in OMITTABLE_PARAMS]
        if bad:
            raise ValueError(f"{self.name}: omit_params may hold {', '.join(OMITTABLE_PARAMS)}, got {bad}")
        if thinking_budget is not None and (isinstance(thinking_budget, bool) or int(thinking_budget) < 0):
            raise ValueError(f"{self.name}: thinking_budget must be an integer >= 0, got {thinking_budget!r}")
        if top_logprobs == -1:
            top_logprobs = self.default_top_logprobs
        if "logprobs" in omit:
            top_logprobs = None
        if top_logprobs is not None and not (0 <= int(top_logprobs) <= self.max_top_logprobs):
            raise ValueError(f"{self.name}: top_logprobs must be in 0..{self.max_top_logprobs}, got {top_logprobs}")
        if int(max_concurrency) < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        if not float(timeout_s) > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if int(max_retries) < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        missing = missing_key_vars(self.name, api_key_env, base_url)
        if missing:
            raise ValueError(f"{self.name}: no API key: set {' and '.join(missing)} in the environment")
        key, self.api_key_var = resolve_api_key(self.name, api_key_env)
        self._secrets = (key,) if key else ()
        self.model_id = model
        self.base_url = base_url
        self.top_logprobs = None if top_logprobs is None else int(top_logprobs)
        self.max_concurrency = int(max_concurrency)
        self.timeout_s = float(timeout_s)
        self.policy = RetryPolicy(max_retries=int(max_retries), base_s=float(backoff_base_s), cap_s=float(backoff_cap_s))
        self.price_in_per_mtok = price_in_per_mtok
        self.price_out_per_mtok = price_out_per_mtok
        self.price_cached_in_per_mtok = price_cached_in_per_mtok
        self.omit_params: tuple[str, ...] = omit
        self.thinking_budget = None if thinking_budget is None else int(thinking_budget)
        self.reasoning_effort = reasoning_effort
        self.seed = int(seed)
        caps = set()
        if self.top_logprobs is not None:
            caps.add("prob")
            if self.top_logprobs > 0:
                caps.add("ent")
        self.capabilities: frozenset[str] = frozenset(caps)
        self._sleep = sleep
        self._rng = random.Random()
        self._lock = threading.Lock()
        self._usage = Usage()
        self._totals = Usage()
        self.sleeps: list[float] = []
        """Every backoff delay taken, in seconds (for tests and the run log)."""
        self._closed = False
        self._fatal: str | None = None
        self._fatal_param: str | None = None
        try:
            self._client = self._make_client(key)
        except Exception as exc:
            raise ValueError(f"{self.name}: cannot create the client: {self.redact(exc)}") from None

    # ------------------------------------------------------------------ provider hooks

    def _make_client(self, api_key: str | None) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _request(self, prompt: str, max_new_tokens: int) -> ApiReply:  # pragma: no cover - abstract
        raise NotImplementedError

    def request_params(self, max_new_tokens: int) -> dict[str, Any]:
        """Every setting that can change the answer (part of the cache key and the run record)."""
        d = {"max_new_tokens": int(max_new_tokens), "temperature": 0.0, "seed": self.seed,
             "top_logprobs": self.top_logprobs}
        return self._fidelity_params(d)

    def _fidelity_params(self, d: dict[str, Any]) -> dict[str, Any]:
        """``d`` with omitted parameters set to None and thinking settings added (only when set,
        so the cache keys of configs without them are unchanged)."""
        for p in self.omit_params:
            if p in ("temperature", "seed") and p in d:
                d[p] = None
        return self._with_settings(d)

    def _with_settings(self, d: dict[str, Any]) -> dict[str, Any]:
        """``d`` plus the omitted parameters and thinking settings, each only when set (so cache
        keys and records of configs without them are unchanged)."""
        if self.omit_params:
            d["omit_params"] = list(self.omit_params)
        if self.thinking_budget is not None:
            d["thinking_budget"] = self.thinking_budget
        if self.reasoning_effort is not None:
            d["reasoning_effort"] = self.reasoning_effort
        return d

    def sends(self, param: str) -> bool:
        """Whether ``param`` (``"temperature"`` / ``"seed"``) goes into the request."""
        return param not in self.omit_params

    def sent_params(self) -> frozenset[str] | None:
        """Normalised names (``normalise_param``) of the request fields this backend sets, for
        ``classify_error``: a 400 naming a parameter outside them is not a configuration error.
        None (this default) = not known: every parameter a 400 names counts as sent."""
        return None

    def config_fix(self, param: str, message: str) -> str:
        """The config change that stops a 400 on ``param`` (module ``config_fix``; a backend whose
        request is not set by those config keys says what applies to it)."""
        return config_fix(param, message)

    # ------------------------------------------------------------------ record

    def redact(self, text: object) -> str:
        """``text`` with this backend's key (and key-like strings) replaced by ``[REDACTED]``."""
        return redact(text, self._secrets)

    def sdk_version(self) -> str:
        import importlib.metadata as md

        try:
            return md.version(self.sdk) if self.sdk else ""
        except md.PackageNotFoundError:
            return "not installed"

    def info(self) -> dict[str, Any]:
        """Run-record facts (never the key; the env var's *name* only).

        Returns:
            dict with backend, model_id, provider SDK and version, base_url (without
            credentials), api_key_env, capabilities, top_logprobs (k), entropy (how "ent" is
            approximated), decoding (temperature, seed, greedy), max_concurrency, timeout_s,
            max_retries, prices (USD per million tokens, None = unknown), device "api".
        """
        return {
            "backend": self.name,
            "model_id": self.model_id,
            "source": f"{self.name}:{_public_url(self.base_url) or 'default'}",
            "sdk": self.sdk,
            "sdk_version": self.sdk_version(),
            "base_url": _public_url(self.base_url),
            "api_key_env": self.api_key_var,
            "capabilities": sorted(self.capabilities),
            "top_logprobs": self.top_logprobs,
            "entropy": ("top-k lower bound: H ≈ −Σ_topk p log p − r log r, r = 1 − Σ_topk p"
                        if "ent" in self.capabilities else None),
            "decoding": self._decoding({"greedy": True, "temperature": 0.0, "seed": self.seed}),
            "max_concurrency": self.max_concurrency,
            "timeout_s": self.timeout_s,
            "max_retries": self.policy.max_retries,
            "price_in_per_mtok": self.price_in_per_mtok,
            "price_out_per_mtok": self.price_out_per_mtok,
            "price_cached_in_per_mtok": self.price_cached_in_per_mtok,
            "device": "api",
        }

    def _decoding(self, d: dict[str, Any]) -> dict[str, Any]:
        """The run record's decoding with omitted parameters (provider default, not greedy when
        temperature is left out) and the thinking settings."""
        if "temperature" in self.omit_params:
            d.update(greedy=False, temperature=None,
                     note="temperature not sent (the model rejects it): the provider's default applies")
        if "seed" in self.omit_params:
            d["seed"] = None
        return self._with_settings(d)

    def take_usage(self) -> dict[str, Any]:
        """Counters since the previous call (then reset), plus ``cost_usd`` at the configured prices.

        Returns:
            dict: requests (HTTP attempts, retries included), cache_hits (0 here: the
            ``CachingBackend`` wrapper adds its hits), retries, errors
            (prompts that ended in an error), prompt_tokens (all billed input, cached
            included), completion_tokens (all billed output, reasoning included),
            reasoning_tokens, cached_tokens, cache_write_tokens (fresh requests only), models
            (sorted distinct model strings the API returned), cost_usd (``cost_usd``; None
            when prices are not configured).
        """
        with self._lock:
            u, self._usage = self._usage, Usage()
        d = u.as_dict()
        d["cost_usd"] = cost_usd(u.prompt_tokens, u.completion_tokens, self.price_in_per_mtok, self.price_out_per_mtok,
                                 u.cached_tokens, self.price_cached_in_per_mtok)
        return d

    def totals(self) -> dict[str, Any]:
        """Counters since the backend was built (not reset by ``take_usage``)."""
        with self._lock:
            return self._totals.as_dict()

    def _count(self, **inc: int) -> None:
        with self._lock:
            for u in (self._usage, self._totals):
                for k, v in inc.items():
                    setattr(u, k, getattr(u, k) + v)

    # ------------------------------------------------------------------ generation

    def cache_key(self, prompt: str, max_new_tokens: int, repeat: int = 0) -> str:
        """sha256 (``stable_hash``) of backend, model, base_url, prompt and ``request_params``;
        a repeat ``k ≥ 1`` of the same prompt (noise floor) adds ``k``, so it is asked afresh
        instead of read back from the cache."""
        parts = ["sago-api-reply-v1", self.name, self.model_id, self.base_url or "", prompt,
                 self.request_params(max_new_tokens)]
        if repeat:
            parts.append({"repeat": int(repeat)})
        return stable_hash(*parts, length=64)

    def generate(self, prompts: list[str], max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                 repeats: Sequence[int] | None = None) -> list[GenerationResult]:
        """Answer each prompt (one user message, temperature 0), up to ``max_concurrency`` at a time.

        Args:
            prompts: raw user prompts.
            max_new_tokens: completion token cap per prompt (≥ 1).
            repeats: per prompt, its repeat index (0 = first asking; k ≥ 1 = the k-th repeat of
                the same prompt for the noise floor, cached under its own key). None = all 0.
        Returns:
            One ``GenerationResult`` per prompt in input order: ``text`` (may be ""),
            ``n_tokens`` (completion tokens as the API counts them), ``token_logprobs`` /
            ``token_entropies`` float64 (T,) or None, ``hidden_last`` None, ``finish_reason``
            "stop" | "length" | "error", ``latency_s`` of the successful attempt (the original
            one for a cache hit), ``error`` (redacted) for a prompt that failed permanently or
            ran out of retries, ``meta`` with model (returned), prompt_tokens,
            completion_tokens, cached, attempts, finish_raw; on an error also ``status`` and
            ``retryable`` (True: a transient failure — 429/5xx/timeout/connection — that ran
            out of retries; the runner leaves that prompt unit pending so a rerun retries it).
        Raises:
            ApiFatalError: 401/403/404 — bad key, no access or unknown model (same for every
                prompt, so the run stops rather than storing an error per prompt).
            ApiConfigError: a 400 naming a request parameter the model refuses (message: the
                parameter and the config change that fixes it).
            RuntimeError: the backend is closed; ValueError: ``max_new_tokens < 1``.
        """
        if self._closed:
            raise RuntimeError("backend is closed")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if not prompts:
            return []
        reps = [0] * len(prompts) if repeats is None else [int(k) for k in repeats]
        if len(reps) != len(prompts):
            raise ValueError(f"repeats has {len(reps)} entries for {len(prompts)} prompts")
        workers = min(self.max_concurrency, len(prompts))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"sago-{self.name}") as ex:
            return list(ex.map(lambda pk: self._one(pk[0], max_new_tokens, pk[1]), zip(prompts, reps)))

    def _one(self, prompt: str, max_new_tokens: int, repeat: int = 0) -> GenerationResult:
        if self._fatal:  # another prompt hit 401/403/404 or a parameter-level 400: send nothing more
            if self._fatal_param is not None:
                raise ApiConfigError(self._fatal, self._fatal_param)
            raise ApiFatalError(self._fatal)
        attempts = 0
        while True:
            attempts += 1
            self._count(requests=1)
            t0 = time.perf_counter()
            try:
                reply = self._request(prompt, max_new_tokens)
                break
            except Exception as exc:  # one prompt's failure becomes its row
                ec = classify_error(exc, self.sent_params())
                msg = self.redact(ec.message)[:1000]
                if ec.fatal and ec.param is not None:
                    self._fatal = (f"{self.name} model {self.model_id!r} rejects the request parameter "
                                   f"{ec.param!r} (HTTP {ec.status}: {msg[:300]}). Fix: {self.config_fix(ec.param, msg)}")
                    self._fatal_param = ec.param
                    raise ApiConfigError(self._fatal, ec.param) from None
                if ec.fatal:
                    self._fatal = f"{self.name} model {self.model_id!r}: HTTP {ec.status}: {msg}"
                    raise ApiFatalError(self._fatal) from None
                if ec.retryable and attempts <= self.policy.max_retries:
                    delay = self.policy.delay(attempts - 1, ec.retry_after, self._rng)
                    if delay is not None:  # None: the server asks for more than max_retry_after_s
                        with self._lock:
                            self.sleeps.append(delay)
                        self._count(retries=1)
                        log.warning("%s %s: attempt %d failed (%s); retrying in %.2fs", self.name, self.model_id,
                                    attempts, msg[:200], delay)
                        self._sleep(delay)
                        continue
                self._count(errors=1)
                if ec.retryable:
                    msg = f"{self.policy.give_up(attempts, ec.retry_after)}: {msg}"
                log.warning("%s %s: prompt failed: %s", self.name, self.model_id, msg[:300])
                return GenerationResult(text="", n_tokens=0, finish_reason="error",
                                        latency_s=time.perf_counter() - t0, error=msg,
                                        meta={"model": None, "cached": False, "attempts": attempts,
                                              "status": ec.status, "retryable": bool(ec.retryable)})
        latency = time.perf_counter() - t0
        with self._lock:
            for u in (self._usage, self._totals):
                u.prompt_tokens += reply.prompt_tokens or 0
                u.completion_tokens += reply.completion_tokens or 0
                u.reasoning_tokens += reply.reasoning_tokens or 0
                u.cached_tokens += reply.cached_tokens or 0
                u.cache_write_tokens += reply.cache_write_tokens or 0
                if reply.model:
                    u.models.add(reply.model)
        return self._result(reply, latency, cached=False, attempts=attempts)

    def result_from_cache(self, value: dict) -> GenerationResult | None:
        """A reply cached by an older sago (``{"reply": ApiReply fields, "latency_s": s}``) as this
        backend's ``GenerationResult`` (``CachingBackend`` calls this for old entries)."""
        if "reply" not in value:
            return None
        return self._result(ApiReply(**value["reply"]), value.get("latency_s", 0.0), cached=True, attempts=0)

    def _result(self, reply: ApiReply, latency: float, cached: bool, attempts: int) -> GenerationResult:
        """The reply as a ``GenerationResult``; its log-probs pass ``logprobs.check_server_logprobs``
        first (trailing end-of-text entries dropped, ``meta["logprobs_dropped"]``; a reply with a
        placeholder, positive or non-finite value keeps none, ``meta["invalid_logprobs"]`` says why)."""
        text = reply.text or ""
        lp = ent = checked = None
        if "prob" in self.capabilities and reply.token_logprobs is not None and (text or reply.token_logprobs):
            checked = check_server_logprobs(reply.token_logprobs,
                                            reply.top_logprobs if "ent" in self.capabilities else None,
                                            reply.textless)
            lp, ent = checked.logprobs, checked.entropies
        n = reply.completion_tokens if reply.completion_tokens is not None else (0 if lp is None else len(lp))
        n = max(0, n - (reply.reasoning_tokens or 0))  # visible tokens only
        finish = normalise_finish_reason(reply.finish_raw)
        meta = {"model": reply.model, "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens, "reasoning_tokens": reply.reasoning_tokens,
                "cached_tokens": reply.cached_tokens, "cache_write_tokens": reply.cache_write_tokens,
                "cached": cached, "attempts": attempts, "finish_raw": reply.finish_raw}
        if checked is not None and checked.invalid:
            meta["invalid_logprobs"] = checked.invalid
        if checked is not None and checked.dropped:
            meta["logprobs_dropped"] = checked.dropped
        if finish == "length" and not text.strip() and (not text or (reply.reasoning_tokens or 0) > 0):
            meta["no_output"] = ("token budget spent with no visible text"
                                 + (f" ({reply.reasoning_tokens} hidden reasoning tokens)" if reply.reasoning_tokens
                                    else "") + ": raise max_new_tokens or set thinking_budget / reasoning_effort")
        return GenerationResult(
            text=text, n_tokens=int(n), token_logprobs=lp, token_entropies=ent, hidden_last=None,
            finish_reason=finish, latency_s=float(latency), error=None, token_ids=None, meta=meta,
        )

    def close(self) -> None:
        """Close the SDK client. Idempotent."""
        if self._closed:
            return
        self._closed = True
        closer = getattr(self._client, "close", None)
        if callable(closer):
            try:
                closer()
            except Exception:
                pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model_id!r}, base_url={_public_url(self.base_url)!r})"
