"""A reply cache any backend can use: ``CachingBackend(backend, cache)`` (as lm-eval wraps any
model in a caching one).

Successful results are stored under a key that covers everything that can change the answer; a
rerun or a resumed run reads them back instead of asking again. Failed results (``error`` set) are
never stored. The wrapper sees the cache only through the ``ReplyCache`` protocol; whoever builds
the backend passes one in (``get_backend``: the on-disk table of ``sago_engine.store.reply_cache``
under ``default_cache_dir()`` unless the caller gives another).
"""

from __future__ import annotations

import base64
import io
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .. import progress
from ..seeds import stable_hash
from ..types import DEFAULT_MAX_NEW_TOKENS, GenerationResult

__all__ = ["CachingBackend", "ReplyCache", "default_cache_dir"]


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
    """``${SAGO_CACHE_DIR:-~/.cache/sago}/api_cache`` (created on first use)."""
    root = os.environ.get("SAGO_CACHE_DIR") or str(Path.home() / ".cache" / "sago")
    return Path(root).expanduser() / "api_cache"


def _arr(a: np.ndarray | None) -> str | None:
    if a is None:
        return None
    buf = io.BytesIO()
    np.save(buf, np.asarray(a), allow_pickle=False)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _unarr(s: str | None) -> np.ndarray | None:
    return None if s is None else np.load(io.BytesIO(base64.b64decode(s)), allow_pickle=False)


def _dump(r: GenerationResult) -> dict:
    return {"result": {"text": r.text, "n_tokens": int(r.n_tokens), "token_logprobs": _arr(r.token_logprobs),
                       "token_entropies": _arr(r.token_entropies), "hidden_last": _arr(r.hidden_last),
                       "finish_reason": r.finish_reason, "latency_s": float(r.latency_s),
                       "token_ids": None if r.token_ids is None else [int(t) for t in r.token_ids],
                       "meta": r.meta}}


def _load(v: dict) -> GenerationResult:
    d = dict(v["result"])
    for k in ("token_logprobs", "token_entropies", "hidden_last"):
        d[k] = _unarr(d[k])
    return GenerationResult(**d)


class CachingBackend:
    """Wrap any ``Backend`` so that successful results are cached on disk.

    ``generate`` looks every prompt up first and sends only the misses to the wrapped backend
    (in one call, input order kept); hits come back with ``meta["cached"] = True``,
    ``meta["attempts"] = 0`` and their original ``latency_s``. Everything else (``info``,
    ``capabilities``, ``sleeps``…) is the wrapped backend's.

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
                ``sago_engine.store.reply_cache.ResponseCache(default_cache_dir() / "responses.sqlite3")``.
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

    def cache_key(self, prompt: str, max_new_tokens: int, repeat: int = 0) -> str:
        """The key of one (prompt, max_new_tokens, repeat)."""
        fn = getattr(self.backend, "cache_key", None)
        if callable(fn):
            return fn(prompt, max_new_tokens, repeat)
        parts: list[Any] = ["sago-reply-v1", self.backend.info(), prompt, int(max_new_tokens)]
        if repeat:
            parts.append({"repeat": int(repeat)})
        return stable_hash(*parts, length=64)

    def _from_cache(self, value: dict) -> GenerationResult | None:
        if "result" in value:
            return _load(value)
        conv = getattr(self.backend, "result_from_cache", None)  # an API reply cached in the ApiReply format
        return conv(value) if callable(conv) else None

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
            hit = self.cache.get(key)
            r = self._from_cache(hit) if hit is not None else None
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
                    self.cache.put(keys[i], _dump(r))
        return out  # type: ignore[return-value]

    def _merge(self, d: dict, which: int, reset: bool) -> dict:
        with self._lock:
            d["cache_hits"] = int(d.get("cache_hits") or 0) + self._hits[which]
            d["models"] = sorted(set(d.get("models") or ()) | self._models[which])
            if reset:
                self._hits[which], self._models[which] = 0, set()
        return d

    def take_usage(self) -> dict[str, Any]:
        """The wrapped backend's ``take_usage()`` (or ``{}``) with this wrapper's cache hits added; resets."""
        fn = getattr(self.backend, "take_usage", None)
        return self._merge(dict(fn()) if callable(fn) else {}, 0, True)

    def totals(self) -> dict[str, Any]:
        """The wrapped backend's ``totals()`` (or ``{}``) with all cache hits added."""
        fn = getattr(self.backend, "totals", None)
        return self._merge(dict(fn()) if callable(fn) else {}, 1, False)

    def close(self) -> None:
        """Close the wrapped backend and the cache. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self.backend.close()
        finally:
            self.cache.close()
