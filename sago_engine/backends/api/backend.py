"""``ApiBackend``: the base class of the API backends (keys: ``api_keys``; errors and their handling:
``api_errors``; replies and usage counters: ``api_reply``; retry timing: ``retry``; server log-probs
and the top-k entropy: ``logprobs``; reply cache: ``caching``; usage cost: ``sago_engine.pricing``).

The provider modules (``openai_api``, ``anthropic_api``, ``gemini_api``) only build their SDK
client, send one request and parse one reply; this class adds what every provider shares, so that
it exists once: a bounded thread pool, retries with backoff, usage counters, the run record.
Nothing in this module imports a provider SDK.

SAGO (arXiv 2610.01428) §Axes: closed API models expose no activations (Δ-Cos is never
available) and, at most, per-token log-probs of the produced text with the top-k alternatives;
§Decoding: temperature 0 for all models.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sago_engine.backends.api.errors import OMITTABLE_PARAMS, ApiConfigError, ApiFatalError, classify_error, config_fix
from sago_engine.backends.api.keys import missing_key_vars, public_url, redact, resolve_api_key
from sago_engine.backends.api.logprobs import check_server_logprobs
from sago_engine.backends.api.reply import ApiReply, Usage, normalise_finish_reason
from sago_engine.backends.api.retry import RetryPolicy
from sago_engine.backends.api.utf8_body import took_invalid_utf8
from sago_engine.backends.protocol import Backend
from sago_engine.pricing import cost_usd
from sago_engine.runtime import progress
from sago_engine.seeds import stable_hash
from sago_engine.types import DEFAULT_MAX_NEW_TOKENS, GenerationResult

__all__ = ["ApiBackend"]

log = logging.getLogger("sago.api")


class ApiBackend(Backend):
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

    def request_body(self, prompt: str, max_new_tokens: int) -> dict[str, Any]:  # pragma: no cover - abstract
        """The arguments ``_request`` passes to the provider's SDK for ``prompt`` (JSON types only; no
        key or header: those live on the client). Stored per reply as ``responses.request``."""
        raise NotImplementedError

    def request_record(self, prompt: str, max_new_tokens: int) -> str:
        """``request_body`` as JSON text (keys sorted, Unicode kept): the request exactly as sent."""
        return json.dumps(self.request_body(prompt, max_new_tokens), ensure_ascii=False, sort_keys=True)

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
            "source": f"{self.name}:{public_url(self.base_url) or 'default'}",
            "sdk": self.sdk,
            "sdk_version": self.sdk_version(),
            "base_url": public_url(self.base_url),
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
        sink = progress.current()  # read here: the worker threads do not share this context

        def one(pk: tuple[str, int]) -> GenerationResult:
            r = self._one(pk[0], max_new_tokens, pk[1])
            progress.advance(1, sink)
            return r

        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"sago-{self.name}") as ex:
            return list(ex.map(one, zip(prompts, reps)))

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
            took_invalid_utf8()  # reset: the flag below is this request's
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
        res = self._result(reply, latency, cached=False, attempts=attempts)
        res.meta["request"] = self.request_record(prompt, max_new_tokens)
        if took_invalid_utf8():  # the body was repaired (utf8_body) before the SDK parsed it
            res.meta["flags"] = ["invalid_utf8", *res.flags]
        return res

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
        return f"{type(self).__name__}({self.model_id!r}, base_url={public_url(self.base_url)!r})"
