"""OpenAI chat completions backend (``openai``) and any OpenAI-compatible server (``openai_compatible``).

Uses the official ``openai`` SDK with its own retries off (``max_retries=0``); retries, the
cache, concurrency and usage come from ``api_backend.ApiBackend``.
"""

from __future__ import annotations

from typing import Any

import openai

from sago_engine.backends.api.backend import ApiBackend
from sago_engine.backends.api.errors import normalise_param
from sago_engine.backends.api.reply import ApiReply
from sago_engine.backends.api.server_limits import ServerLimitsMixin
from sago_engine.backends.api.utf8_body import Utf8Body

__all__ = ["OpenAIBackend", "OpenAICompatibleBackend"]


class OpenAIBackend(ApiBackend):
    """``client.chat.completions.create`` with one user message, temperature 0, ``seed``,
    ``logprobs=True`` and ``top_logprobs=k`` (k ≤ 20; default 20).

    Measures: Δ-Prob (sum of the returned per-token log-probs) and Δ-Ent (top-k lower bound,
    see ``logprobs.topk_entropy``). Never Δ-Cos (no activations). The completion cap is sent
    as ``max_completion_tokens`` (reasoning models spend it on hidden reasoning too; set
    ``reasoning_effort``). ``omit_params`` leaves out temperature / seed / log-probs for models
    that reject them. Usage records reasoning tokens (inside ``completion_tokens``) and cached
    prompt tokens (inside ``prompt_tokens``).
    """

    name = "openai"
    sdk = "openai"
    default_top_logprobs = 20
    max_top_logprobs = 20
    token_param = "max_completion_tokens"

    def _make_client(self, api_key: str | None) -> Any:
        return openai.OpenAI(api_key=api_key or "EMPTY", base_url=self.base_url, max_retries=0,
                             timeout=self.timeout_s, http_client=openai.DefaultHttpxClient(transport=Utf8Body()))

    def _request_kw(self, prompt: str, max_new_tokens: int) -> dict[str, Any]:
        """The ``chat.completions.create`` arguments of one request."""
        kw: dict[str, Any] = {"model": self.model_id, "messages": [{"role": "user", "content": prompt}],
                              self.token_param: max_new_tokens}
        if self.sends("temperature"):
            kw["temperature"] = 0.0
        if self.sends("seed"):
            kw["seed"] = self.seed
        if self.reasoning_effort is not None:
            kw["reasoning_effort"] = self.reasoning_effort
        if self.top_logprobs is not None:
            kw["logprobs"] = True
            if self.top_logprobs > 0:
                kw["top_logprobs"] = self.top_logprobs
        return kw

    def sent_params(self) -> frozenset[str]:
        """Normalised names of the settings ``_request_kw`` sends (the model and the prompt
        aside; ``extra_body`` fields by their own names)."""
        kw = self._request_kw("", 1)
        names = {normalise_param(k) for k in kw if k not in ("model", "messages", "prompt", "extra_body")}
        return frozenset(names | {normalise_param(k) for k in kw.get("extra_body") or {}})

    def request_body(self, prompt: str, max_new_tokens: int) -> dict[str, Any]:
        """The ``chat.completions.create`` arguments (``_request_kw``)."""
        return self._request_kw(prompt, max_new_tokens)

    def _request(self, prompt: str, max_new_tokens: int) -> ApiReply:
        r = self._client.chat.completions.create(**self._request_kw(prompt, max_new_tokens))
        if not r.choices:
            raise ValueError("the API returned no choices")
        ch = r.choices[0]
        content = ch.logprobs.content if ch.logprobs is not None else None
        lps = tops = textless = None
        if content is not None:
            lps = [float(t.logprob) for t in content]
            textless = [i for i, t in enumerate(content) if not t.token and not t.bytes]  # end-of-text entries
            if self.top_logprobs:
                tops = [[float(a.logprob) for a in (t.top_logprobs or [])] for t in content]
        u = r.usage
        # completion_tokens already include reasoning tokens; prompt_tokens include cached ones
        out_d = getattr(u, "completion_tokens_details", None)
        in_d = getattr(u, "prompt_tokens_details", None)
        msg = ch.message
        text = (msg.content or "") if msg is not None else ""
        finish = ch.finish_reason
        if msg is not None and getattr(msg, "refusal", None) and not text:
            finish = "refusal"  # the model refused: not an answer
        return ApiReply(
            text=text,
            finish_raw=finish,
            model=r.model,
            prompt_tokens=getattr(u, "prompt_tokens", None),
            completion_tokens=getattr(u, "completion_tokens", None),
            token_logprobs=lps,
            top_logprobs=tops,
            textless=textless,
            reasoning_tokens=getattr(out_d, "reasoning_tokens", None),
            cached_tokens=getattr(in_d, "cached_tokens", None),
        )


class OpenAICompatibleBackend(ServerLimitsMixin, OpenAIBackend):
    """The OpenAI backend pointed at a required ``base_url`` (vLLM, TGI, llama.cpp server…).

    Same request, but the cap is sent as ``max_tokens`` (what these servers accept). The key is
    optional for a local ``base_url``; log-probs are stored only where the server returns them
    (a reply without them leaves Δ-Prob/Δ-Ent unavailable for that prompt). Lower
    ``top_logprobs`` if the server caps it (vLLM: ``--max-logprobs``, default 20).

    The server's limits are read once from its ``/models`` listing (``server_limits``: vLLM's
    ``max_model_len``) and recorded in ``info()["decoding"]["server_limits"]``; a reply whose
    prompt plus the cap exceeds ``max_model_len``, or that the server cut short (finish
    "length" below the cap), is an error row with the reason, never a shortened reply
    (``server_limits.ServerLimitsMixin``).
    """

    name = "openai_compatible"
    requires_base_url = True
    token_param = "max_tokens"
