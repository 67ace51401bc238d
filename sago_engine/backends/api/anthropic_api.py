"""Anthropic messages backend (``anthropic``): responses only, no log-probs.

Uses the official ``anthropic`` SDK with its own retries off (``max_retries=0``); retries, the
cache, concurrency and usage come from ``api_backend.ApiBackend``.
"""

from __future__ import annotations

from typing import Any

import anthropic

from sago_engine.backends.api.backend import ApiBackend
from sago_engine.backends.api.reply import ApiReply
from sago_engine.backends.api.utf8_body import Utf8Body

__all__ = ["AnthropicBackend", "LEGACY_API_VERSION"]

#: The last Messages API version that accepts ``temperature`` (SDK 2.x sends 2026-10-21, which
#: rejects temperature/top_p/top_k with HTTP 400 even at their default values).
LEGACY_API_VERSION = "2023-06-01"


class AnthropicBackend(ApiBackend):
    """``client.messages.create`` with one user message and ``max_tokens``.

    The Messages API returns neither token log-probs nor activations, so ``capabilities`` is
    empty: Δ-Cos, Δ-Prob and Δ-Ent are stored as unavailable; Δ-BLEU, Δ-BERT and Δ-MR use the
    text. The API takes no seed (the run seed is recorded but not sent).

    Decoding: the SDK's default API version (2026-10-21) rejects any ``temperature``, so by
    default responses are **sampled at the model's default temperature**, not greedy as SAGO
    (arXiv 2610.01428) §Decoding asks; ``info()["decoding"]`` says so. With
    ``api_version = "2023-06-01"`` the request carries that ``anthropic-version`` header and
    ``temperature: 0`` (for models that still accept it). ``thinking_budget`` (≥ 1024) turns
    on extended thinking with that budget on top of the visible cap (thinking blocks are not
    part of the text; their tokens are inside ``output_tokens``, billed as output). Usage
    records cache reads and writes as input tokens.
    """

    name = "anthropic"
    sdk = "anthropic"
    default_top_logprobs = None
    max_top_logprobs = 0

    def __init__(self, model: str, api_version: str | None = None, **kw: Any) -> None:
        if kw.get("top_logprobs") not in (None, -1):
            raise ValueError("anthropic: the Messages API returns no log-probs; leave top_logprobs unset")
        kw["top_logprobs"] = None
        self.api_version = api_version
        super().__init__(model, **kw)

    def _make_client(self, api_key: str | None) -> Any:
        headers = {"anthropic-version": self.api_version} if self.api_version else None
        return anthropic.Anthropic(api_key=api_key, base_url=self.base_url, max_retries=0, timeout=self.timeout_s,
                                   default_headers=headers,
                                   http_client=anthropic.DefaultHttpxClient(transport=Utf8Body()))

    def request_params(self, max_new_tokens: int) -> dict[str, Any]:
        return self._fidelity_params({"max_new_tokens": int(max_new_tokens),
                                      "temperature": 0.0 if self.greedy else None, "api_version": self.api_version})

    def info(self) -> dict[str, Any]:
        d = super().info()
        d["api_version"] = self.api_version or "SDK default"
        d["decoding"] = self._decoding(
            {"greedy": True, "temperature": 0.0, "seed": None} if self.greedy else
            {"greedy": False, "temperature": None, "seed": None,
             "note": "sampled at the model's default temperature: the SDK's API version "
                     "rejects temperature (set api_version = \"2023-06-01\" for T=0)"})
        d["decoding"]["seed"] = None
        return d

    @property
    def greedy(self) -> bool:
        return self.api_version == LEGACY_API_VERSION and self.sends("temperature") and not self.thinking_budget

    def request_body(self, prompt: str, max_new_tokens: int) -> dict[str, Any]:
        """The ``messages.create`` arguments."""
        extra: dict[str, Any] = {"temperature": 0.0} if self.greedy else {}
        max_tokens = max_new_tokens
        if self.thinking_budget:  # extended thinking: its budget comes on top of the visible cap
            extra["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
            max_tokens += self.thinking_budget
        return {"model": self.model_id, "max_tokens": max_tokens, "messages": [{"role": "user", "content": prompt}],
                "extra_body": extra or None}

    def _request(self, prompt: str, max_new_tokens: int) -> ApiReply:
        r = self._client.messages.create(**self.request_body(prompt, max_new_tokens))
        text = "".join(getattr(b, "text", "") or "" for b in (r.content or []) if getattr(b, "type", None) == "text")
        u = r.usage
        inp = getattr(u, "input_tokens", None)
        read = getattr(u, "cache_read_input_tokens", None) or 0
        write = getattr(u, "cache_creation_input_tokens", None) or 0
        # input_tokens exclude cache reads and writes, which are billed too: prompt_tokens = all three
        return ApiReply(text=text, finish_raw=r.stop_reason, model=r.model,
                        prompt_tokens=None if inp is None else inp + read + write,
                        completion_tokens=getattr(u, "output_tokens", None),
                        cached_tokens=read or None, cache_write_tokens=write or None)
