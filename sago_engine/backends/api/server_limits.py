"""An OpenAI-compatible server's limits as facts of the run: read once, recorded, enforced per reply.

vLLM lists each served model's context window in ``GET /v1/models`` (``max_model_len``); it does
not list its log-prob cap (``--max-logprobs``), which a server may expose as ``max_logprobs``.
Near its context limit vLLM shortens a reply without an error (finish "length" before the
cap), and over it answers 400 (``param: "input_tokens"``). ``ServerLimitsMixin`` turns both into
that prompt's error row (``context.check_context`` against ``max_model_len``, as for a local
model's context; a cut reply; ``api_errors.classify_error`` for the 400), so a cut reply is never
stored as a normal one and one long prompt never stops the run.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from sago_engine.backends.api.errors import ApiConfigError
from sago_engine.backends.api.keys import public_url
from sago_engine.backends.context import check_context, over_context_result
from sago_engine.types import DEFAULT_MAX_NEW_TOKENS, GenerationResult

__all__ = ["CONTRADICTED", "ServerLimitsMixin", "limits_from_models", "server_over_context"]

log = logging.getLogger("sago.api")

#: Where the limit of a server's context comes from, for messages.
WHERE = "the server's max_model_len"


def server_over_context(n_prompt: int, max_new_tokens: int, max_model_len: int) -> GenerationResult:
    """The error row of a prompt whose tokens plus the cap exceed a server's ``max_model_len``:
    ``context.over_context_result`` (counted as over-context by the runner) with the limit named
    as the server's, not retryable. Raises ValueError when it fits."""
    r = over_context_result(n_prompt, max_new_tokens, max_model_len)
    r.error = f"{r.error} ({WHERE}; the server would shorten the reply)"
    r.meta.update(status=None, retryable=False)
    return r


#: ``GenerationResult.meta["flags"]`` entry of a reply whose server-reported usage (prompt +
#: completion tokens) exceeds the listed ``max_model_len``: proof that the listing is wrong.
CONTRADICTED = "server_limit_contradicted"


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _positive_int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def limits_from_models(models: list[dict[str, Any]], model_id: str) -> dict[str, Any]:
    """The limits of ``model_id`` from a ``/models`` listing (a server's reply: untrusted).

    Args:
        models: the listing's ``data`` entries as dicts (``{"id": …, "max_model_len": 2048, …}``).
        model_id: the served model name sago asks for.
    Returns:
        ``{"max_model_len": tokens or None, "max_logprobs": per-token cap or None,
        "listed": whether ``model_id`` is in the listing, "source": "GET /models"}``. Values
        that are not positive integers are None.
    """
    entry = next((m for m in models if isinstance(m, dict) and m.get("id") == model_id), None)
    e = entry or {}
    return {"max_model_len": _positive_int(e.get("max_model_len")), "max_logprobs": _positive_int(e.get("max_logprobs")),
            "listed": entry is not None, "source": "GET /models"}


class ServerLimitsMixin:
    """For an ``ApiBackend`` of an OpenAI-compatible server (needs ``_client``, ``model_id``,
    ``redact``, ``_count``, ``_one``, ``info``, ``top_logprobs``, ``config_fix``).

    ``server_limits()`` reads the listing once (the first of ``info()`` / ``generate()``);
    ``info()["decoding"]["server_limits"]`` records it. Every successful reply then passes
    ``limit_error``: prompt tokens (the server's usage count) + the cap over ``max_model_len`` →
    ``server_over_context`` row; finish "length" with fewer completion tokens than the cap → a
    cut-short row (``meta["cut_short"]``). A reply whose own usage (prompt + completion tokens)
    exceeds ``max_model_len`` proves the listing wrong: it is kept, flagged ``CONTRADICTED``, the
    contradiction recorded in ``server_limits()["contradicted"]``, and the limit no longer
    enforced for the run (``max_model_len`` None; the hybrid's pre-send check reads it too). A ``top_logprobs`` above a listed ``max_logprobs`` stops the run before any
    request (``ApiConfigError``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._limits: dict[str, Any] | None = None
        self._limits_lock = threading.Lock()

    def server_limits(self) -> dict[str, Any]:
        """The served model's limits (``limits_from_models``), read from ``GET /models`` once.

        Returns:
            That dict; when the listing cannot be read, every limit None and ``source``
            ``"unavailable: <error>"`` (redacted): replies are then checked for a cut only.
        """
        with self._limits_lock:
            if self._limits is None:
                try:
                    page = self._client.models.list()
                    rows = [m.model_dump() if hasattr(m, "model_dump") else dict(m) for m in page.data]
                    self._limits = limits_from_models(rows, self.model_id)
                except Exception as exc:  # a server without the listing: only the cut check applies
                    self._limits = {"max_model_len": None, "max_logprobs": None, "listed": None,
                                    "source": f"unavailable: {self.redact(f'{type(exc).__name__}: {exc}')[:300]}"}
            return dict(self._limits)

    @property
    def max_model_len(self) -> int | None:
        """The server's context window in tokens, as enforced (None: not listed, or the server's
        own usage proved the listing wrong: ``contradicted``)."""
        lim = self.server_limits()
        return None if lim.get("contradicted") else lim["max_model_len"]

    def _contradicted(self, pt: int, ct: int, lim: int) -> None:
        """Record that a reply of ``pt`` + ``ct`` tokens (the server's usage) exceeds the listed
        ``lim``: the listing is wrong, so the limit is no longer enforced for this backend's run."""
        with self._limits_lock:
            if self._limits is None or self._limits.get("contradicted"):
                return
            self._limits["contradicted"] = {"prompt_tokens": pt, "completion_tokens": ct, "listed": lim}
        log.warning("%s %s: the server served %d + %d tokens, more than the max_model_len %d it lists; the "
                    "listing is wrong, so that limit is no longer enforced in this run (replies flagged %s)",
                    self.name, self.model_id, pt, ct, lim, CONTRADICTED)

    def info(self) -> dict[str, Any]:
        d = super().info()
        d["decoding"] = {**d.get("decoding", {}), "server_limits": self.server_limits()}
        return d

    def generate(self, prompts: list[str], max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, repeats=None) -> list[GenerationResult]:
        if self._closed:
            raise RuntimeError("backend is closed")
        lim = self.server_limits()
        k = getattr(self, "top_logprobs", None)
        if lim["max_logprobs"] is not None and k and k > lim["max_logprobs"]:
            msg = f"max allowed: {lim['max_logprobs']}"
            raise ApiConfigError(
                f"{self.name} model {self.model_id!r}: top_logprobs = {k} is more than the server at "
                f"{public_url(self.base_url)} allows ({lim['max_logprobs']}, from GET /models). "
                f"Fix: {self.config_fix('logprobs', msg)}", "logprobs")
        return super().generate(prompts, max_new_tokens, repeats)

    def limit_error(self, r: GenerationResult, max_new_tokens: int) -> GenerationResult | None:
        """The error row that replaces a successful reply that is not a normal one, or None.

        Args:
            r: the reply (``meta`` with the server's ``prompt_tokens`` / ``completion_tokens``).
            max_new_tokens: the cap sent.
        Returns:
            The error row: ``server_over_context`` (the server's prompt token count + the cap over
            ``max_model_len``) or a cut-short row (finish "length" with fewer completion tokens
            than the cap); None for a normal reply.
        """
        meta = r.meta or {}
        listed = self.server_limits()["max_model_len"]
        pt = meta.get("prompt_tokens")
        ct = meta.get("completion_tokens")
        ct = r.n_tokens if not isinstance(ct, int) or isinstance(ct, bool) else ct
        if listed is not None and _count(pt) and _count(ct) and pt + ct > listed:
            # the server's own usage exceeds its listing: the reply is real, the listing wrong
            self._contradicted(pt, ct, listed)
            r.meta = {**meta, "flags": [*r.flags, CONTRADICTED]}
        lim = self.max_model_len
        if _count(pt) and check_context(pt, max_new_tokens, lim) is not None:
            return server_over_context(pt, max_new_tokens, lim)
        if r.finish_reason == "length" and ct < max_new_tokens:
            why = (f"the server cut the reply short: it ended at {ct} of {max_new_tokens} tokens with finish "
                   f"\"length\" (prompt {pt if pt is not None else '?'} tokens, {WHERE} "
                   f"{lim if lim is not None else 'not listed'}); not stored as a reply")
            return GenerationResult(text="", n_tokens=0, finish_reason="error", error=why,
                                    meta={"status": None, "retryable": False, "cut_short": True})
        return None

    def _one(self, prompt: str, max_new_tokens: int, repeat: int = 0) -> GenerationResult:
        r = super()._one(prompt, max_new_tokens, repeat)
        if r.error is not None:
            return r
        err = self.limit_error(r, max_new_tokens)
        if err is None:
            return r
        self._count(errors=1)
        log.warning("%s %s: prompt failed: %s", self.name, self.model_id, err.error[:300])
        err.latency_s = r.latency_s
        err.meta = {**{k: (r.meta or {}).get(k) for k in ("model", "prompt_tokens", "completion_tokens", "finish_raw",
                                                          "attempts")}, "cached": False, **err.meta}
        return err
