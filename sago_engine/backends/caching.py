"""A reply cache any backend can use: ``CachingBackend(backend, cache)`` (as lm-eval wraps any
model in a caching one).

Successful results are stored under a key that covers everything that can change the answer; a
rerun or a resumed run reads them back instead of asking again. Failed results (``error`` set) are
never stored. The wrapper sees the cache only through the ``ReplyCache`` protocol; whoever builds
the backend passes one in (``get_backend``: the on-disk table of ``sago_engine.store.sidecar.reply_cache``
under ``default_cache_dir()`` unless the caller gives another).
"""

from __future__ import annotations

import base64
import io
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from sago_engine.runtime import progress

from ..models.cache import sago_cache_dir
from ..seeds import stable_hash
from ..types import DEFAULT_MAX_NEW_TOKENS, GenerationResult
from .protocol import Backend

__all__ = ["CachingBackend", "ReplyCache", "default_cache_dir"]

log = logging.getLogger("sago.cache")


@runtime_checkable
class ReplyCache(Protocol):
    """Key → JSON-serialisable dict, first write wins; safe to call from several threads."""

    def get(self, key: str) -> dict | None:
        """The value stored under ``key``, or None."""
        ...

    def put(self, key: str, value: dict) -> None:
        """Store ``value`` under ``key`` unless the key is taken (first write wins)."""
        ...

    def close(self) -> None:
        """Release the cache's resources."""
        ...


def default_cache_dir() -> Path:
    """``sago_cache_dir()/api_cache`` (``models.cache``; created on first use)."""
    return sago_cache_dir() / "api_cache"


def _arr(a: np.ndarray | None) -> str | None:
    if a is None:
        return None
    buf = io.BytesIO()
    np.save(buf, np.asarray(a), allow_pickle=False)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _unarr(s: str | None) -> np.ndarray | None:
    return None if s is None else np.load(io.BytesIO(base64.b64decode(s)), allow_pickle=False)


def _dump(r: GenerationResult, key: str) -> dict:
    return {"key": key, "result": {"text": r.text, "n_tokens": int(r.n_tokens), "token_logprobs": _arr(r.token_logprobs),
                       "token_entropies": _arr(r.token_entropies), "hidden_last": _arr(r.hidden_last),
                       "finish_reason": r.finish_reason, "latency_s": float(r.latency_s),
                       "token_ids": None if r.token_ids is None else [int(t) for t in r.token_ids],
                       "meta": r.meta}}


def _load(v: dict) -> GenerationResult:
    d = dict(v["result"])
    for k in ("token_logprobs", "token_entropies", "hidden_last"):
        d[k] = _unarr(d[k])
    return GenerationResult(**d)


class CachingBackend(Backend):
    """Wrap any ``Backend`` so that successful results are cached on disk.

    ``generate`` looks every prompt up first and sends only the misses to the wrapped backend
    (in one call, input order kept); hits come back with ``meta["cached"] = True``,
    ``meta["attempts"] = 0`` and their original ``latency_s``. Everything else (``info``,
    ``capabilities``, ``sleeps``…) is the wrapped backend's: every member ``Backend`` declares is
    forwarded by name below (the protocol's defaults would answer otherwise), anything else
    through ``__getattr__``.

    Keys: the wrapped backend's ``cache_key(prompt, max_new_tokens, repeat)`` when it has one
    (the API backends: a hash of backend, model, base_url, prompt and every generation setting),
    else ``stable_hash`` of its ``info()`` and the prompt. A repeat index k ≥ 1 (noise floor) is
    part of the key, so a repeat is asked afresh. ``take_usage`` / ``totals`` add the hits to
    the wrapped backend's counters (``cache_hits``, and the model strings of cached replies).
    """

    def __init__(self, backend: Any, cache: ReplyCache) -> None:
        """
        Args:
            backend: any object with the ``Backend`` protocol.
            cache: where results are kept (``ReplyCache``; closed with the backend), e.g.
                ``sago_engine.store.sidecar.reply_cache.ResponseCache(default_cache_dir() / "responses.sqlite3")``.
        """
        self.backend = backend
        self.cache = cache
        self._lock = threading.Lock()
        self._hits = [0, 0]  # since take_usage, since start
        self._models: list[set[str]] = [set(), set()]
        self._closed = False

    def __getattr__(self, name: str) -> Any:  # everything not defined here is the wrapped backend's
        if name in ("backend", "cache"):
            raise AttributeError(name)
        return getattr(self.backend, name)

    def __repr__(self) -> str:
        return f"CachingBackend({self.backend!r})"

    # ---------------------------------------------------------------- the wrapped backend's members

    def info(self) -> dict[str, Any]:
        return self.backend.info()

    @property
    def template(self) -> str | None:  # type: ignore[override]
        return self.backend.template

    @property
    def context_length(self) -> int | None:  # type: ignore[override]
        return self.backend.context_length

    @property
    def model(self) -> Any:  # type: ignore[override]
        return self.backend.model

    @property
    def thread_choice(self) -> dict[str, Any] | None:  # type: ignore[override]
        return self.backend.thread_choice

    @property
    def sampling(self) -> Any:  # type: ignore[override]
        return self.backend.sampling

    @sampling.setter
    def sampling(self, value: Any) -> None:  # a Live probe sets the wrapped model's decoding
        self.backend.sampling = value

    def encode_prompt(self, prompt: str) -> list[int] | None:
        return self.backend.encode_prompt(prompt)

    def context_error(self, prompt: str, max_new_tokens: int) -> str | None:
        return self.backend.context_error(prompt, max_new_tokens)

    def teacher_force(self, prompts: list[str], responses: list[list[int] | str]) -> list | None:
        return self.backend.teacher_force(prompts, responses)

    def result_from_cache(self, value: dict) -> GenerationResult | None:
        return self.backend.result_from_cache(value)

    def logprob_check(self) -> dict[str, Any] | None:
        return self.backend.logprob_check()

    # ---------------------------------------------------------------- the cache

    def cache_key(self, prompt: str, max_new_tokens: int, repeat: int = 0) -> str:
        """The key of one (prompt, max_new_tokens, repeat): the wrapped backend's ``cache_key`` when
        it has one (not None), else ``stable_hash`` of its ``info()``, the prompt and the cap."""
        own = self.backend.cache_key(prompt, max_new_tokens, repeat)
        if own is not None:
            return own
        parts: list[Any] = ["sago-reply-v1", self.backend.info(), prompt, int(max_new_tokens)]
        if repeat:
            parts.append({"repeat": int(repeat)})
        return stable_hash(*parts, length=64)

    def _from_cache(self, key: str) -> GenerationResult | None:
        """The cached result of ``key``, or None (a miss). An entry is used only when it is this
        key's (its recorded ``key`` equals it; entries of older sago versions record none) and
        loads as a result; any other entry — another key's, damaged, of an unknown format — is
        logged, removed where the cache can (``discard``) and asked again, never trusted."""
        try:
            value = self.cache.get(key)
            if value is None:
                return None
            if not isinstance(value, dict) or value.get("key", key) != key:
                raise ValueError("the entry belongs to another request" if isinstance(value, dict) else
                                 f"the entry is a {type(value).__name__}, not a reply")
            if "result" in value:
                return _load(value)
            got = self.backend.result_from_cache(value) if "reply" in value else None  # an API reply (ApiReply format)
            if got is not None:
                return got
            raise ValueError("the entry holds no reply")
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            log.warning("reply cache entry %s… not used (%s); asking again", key[:12], str(e)[:200])
            drop = getattr(self.cache, "discard", None)  # the reply cache object's, not a backend ability
            if callable(drop):
                drop(key)
            return None

    def generate(self, prompts: list[str], max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                 repeats: Sequence[int] | None = None) -> list[GenerationResult]:
        """The wrapped backend's ``generate`` with cached results filled in.

        Args / returns / raises: as the wrapped backend's ``generate``; ``repeats`` (per prompt
        repeat index, None = all 0) is passed on only when given.
        """
        if self._closed:
            raise RuntimeError("backend is closed")
        reps = [0] * len(prompts) if repeats is None else [int(k) for k in repeats]
        keys = [self.cache_key(p, max_new_tokens, k) for p, k in zip(prompts, reps)]
        out: list[GenerationResult | None] = []
        for key in keys:
            r = self._from_cache(key)
            if r is not None:
                r.meta = {**(r.meta or {}), "cached": True, "attempts": 0}
                with self._lock:
                    for i in (0, 1):
                        self._hits[i] += 1
                        if r.meta.get("model"):
                            self._models[i].add(r.meta["model"])
            out.append(r)
        todo = [i for i, r in enumerate(out) if r is None]
        progress.advance(len(out) - len(todo))  # cache hits are finished replies
        if todo:
            kw = {} if repeats is None else {"repeats": [reps[i] for i in todo]}
            fresh = self.backend.generate([prompts[i] for i in todo], max_new_tokens, **kw)
            for i, r in zip(todo, fresh):
                out[i] = r
                if r.error is None:
                    self.cache.put(keys[i], _dump(r, keys[i]))
        return out  # type: ignore[return-value]

    def _merge(self, d: dict, which: int, reset: bool) -> dict:
        with self._lock:
            d["cache_hits"] = int(d.get("cache_hits") or 0) + self._hits[which]
            d["models"] = sorted(set(d.get("models") or ()) | self._models[which])
            if reset:
                self._hits[which], self._models[which] = 0, set()
        return d

    def take_usage(self) -> dict[str, Any]:
        """The wrapped backend's ``take_usage()`` (``{}`` for None) with this wrapper's cache hits added; resets."""
        return self._merge(dict(self.backend.take_usage() or {}), 0, True)

    def totals(self) -> dict[str, Any]:
        """The wrapped backend's ``totals()`` (``{}`` for None) with all cache hits added."""
        return self._merge(dict(self.backend.totals() or {}), 1, False)

    def close(self) -> None:
        """Close the wrapped backend and the cache. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self.backend.close()
        finally:
            self.cache.close()
