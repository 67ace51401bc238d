"""Google Gemini backend (``gemini``) through the official ``google-genai`` SDK.

``client.models.generate_content`` on the Gemini Developer API (``v1beta``); the SDK retries
nothing unless asked (no ``retry_options``), so ``api_backend.ApiBackend``'s retries are the only
ones.
"""

from __future__ import annotations

from typing import Any

from google import genai
from google.genai import types

from sago_engine.backends.api.backend import ApiBackend
from sago_engine.backends.api.reply import ApiReply
from sago_engine.backends.api.utf8_body import http_client

__all__ = ["GeminiBackend"]


class GeminiBackend(ApiBackend):
    """``generate_content`` with the prompt as the only content, temperature 0, ``seed``
    (the run seed folded into 31 bits), ``max_output_tokens``.

    Log-probs are requested only when the config sets ``top_logprobs = k`` (k in 0..20:
    ``response_logprobs=True, logprobs=k``), because not every Gemini model accepts them. Then
    Δ-Prob comes from ``logprobs_result.chosen_candidates`` and Δ-Ent from ``top_candidates``
    (top-k lower bound); a reply without ``logprobs_result`` leaves them unavailable. Without
    it ``capabilities`` is empty. Key: ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``. ``api_version``
    defaults to ``v1beta`` (where the log-prob fields are served).

    Thinking models (2.5+) spend ``max_output_tokens`` on hidden thoughts too (an empty reply
    with ``MAX_TOKENS``); thought parts are not part of the response text. ``thinking_budget``
    sets ``thinking_config.thinking_budget`` (0 = off where the model allows it). Usage:
    ``completion_tokens`` = candidates + thoughts (both billed as output), ``reasoning_tokens``
    = thoughts, ``cached_tokens`` = ``cached_content_token_count``.
    """

    name = "gemini"
    sdk = "google-genai"
    default_top_logprobs = None
    max_top_logprobs = 20

    def __init__(self, model: str, api_version: str | None = None, **kw: Any) -> None:
        self.api_version = api_version or "v1beta"
        super().__init__(model, **kw)

    @property
    def seed31(self) -> int:
        return self.seed & 0x7FFFFFFF

    def _make_client(self, api_key: str | None) -> Any:
        opts = types.HttpOptions(base_url=self.base_url, api_version=self.api_version,
                                 timeout=int(self.timeout_s * 1000), httpx_client=http_client())
        return genai.Client(api_key=api_key, vertexai=False, http_options=opts)

    def request_params(self, max_new_tokens: int) -> dict[str, Any]:
        d = {**super().request_params(max_new_tokens), "api_version": self.api_version}
        if d.get("seed") is not None:
            d["seed"] = self.seed31
        return d

    def info(self) -> dict[str, Any]:
        d = super().info()
        d["api_version"] = self.api_version
        if d["decoding"].get("seed") is not None:
            d["decoding"]["seed"] = self.seed31
        return d

    def request_body(self, prompt: str, max_new_tokens: int) -> dict[str, Any]:
        """The ``models.generate_content`` arguments, ``config`` as the fields of its
        ``GenerateContentConfig`` (``thinking_config`` as the fields of its ``ThinkingConfig``)."""
        cfg: dict[str, Any] = {"max_output_tokens": max_new_tokens, "candidate_count": 1}
        if self.sends("temperature"):
            cfg["temperature"] = 0.0
        if self.sends("seed"):
            cfg["seed"] = self.seed31
        if self.thinking_budget is not None:
            cfg["thinking_config"] = {"thinking_budget": self.thinking_budget}
        if self.top_logprobs is not None:
            cfg["response_logprobs"] = True
            if self.top_logprobs > 0:
                cfg["logprobs"] = self.top_logprobs
        return {"model": self.model_id, "contents": prompt, "config": cfg}

    def _request(self, prompt: str, max_new_tokens: int) -> ApiReply:
        body = self.request_body(prompt, max_new_tokens)
        cfg = dict(body["config"])
        if "thinking_config" in cfg:
            cfg["thinking_config"] = types.ThinkingConfig(**cfg["thinking_config"])
        r = self._client.models.generate_content(model=body["model"], contents=body["contents"],
                                                 config=types.GenerateContentConfig(**cfg))
        if not r.candidates:
            fb = getattr(r, "prompt_feedback", None)
            raise ValueError(f"the API returned no candidates (prompt_feedback: {fb})")
        c = r.candidates[0]
        parts = (c.content.parts or []) if c.content is not None else []
        text = "".join(p.text for p in parts if p.text and not p.thought)
        lps = tops = textless = None
        lr = c.logprobs_result
        if lr is not None and lr.chosen_candidates is not None:
            # proto3 JSON leaves out a field at its default: an absent log_probability is 0.0
            lps = [float(x.log_probability or 0.0) for x in lr.chosen_candidates]
            textless = [i for i, x in enumerate(lr.chosen_candidates) if not x.token]
            if self.top_logprobs and lr.top_candidates is not None:
                tops = [[float(a.log_probability or 0.0) for a in (t.candidates or [])] for t in lr.top_candidates]
        u = r.usage_metadata
        fr = c.finish_reason
        # thoughts are billed as output but reported apart from candidates_token_count
        cand = getattr(u, "candidates_token_count", None)
        thoughts = getattr(u, "thoughts_token_count", None)
        completion = None if cand is None and thoughts is None else (cand or 0) + (thoughts or 0)
        return ApiReply(text=text, finish_raw=None if fr is None else str(getattr(fr, "value", fr)),
                        model=r.model_version or None,
                        prompt_tokens=getattr(u, "prompt_token_count", None),
                        completion_tokens=completion,
                        token_logprobs=lps, top_logprobs=tops, textless=textless, reasoning_tokens=thoughts,
                        cached_tokens=getattr(u, "cached_content_token_count", None))
