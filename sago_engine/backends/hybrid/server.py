"""The server side of the hybrid backend: ``completions`` requests over the locally rendered prompt.

The prompt goes to an OpenAI-compatible server (vLLM) as the token ids the local copy rendered
(or their text), greedily, asking for the chosen token's log-prob and, with vLLM's
``return_tokens_as_token_ids``, the generated ids (``parse_token_ids``). Everything a server
request needs besides (key rules, retries, concurrency, redaction, the server's limits) comes
from ``openai_api.OpenAICompatibleBackend``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sago_engine.backends.api.openai_api import OpenAICompatibleBackend
from sago_engine.backends.api.reply import ApiReply
from sago_engine.types import GenerationResult

__all__ = ["VLLM_EXTRA_BODY", "CompletionReply", "CompletionServer", "parse_token_ids"]

#: Extra request fields sent to a vLLM server (``extra_body``): token ids instead of token strings,
#: and every sampling knob vLLM would otherwise take from the model folder's
#: ``generation_config.json`` at its neutral value (as ``hf_local.NEUTRAL_DECODING``). Servers
#: that reject unknown fields: set ``server_extra_body = {}`` (ids are then re-tokenized).
VLLM_EXTRA_BODY: dict[str, Any] = {"return_tokens_as_token_ids": True, "repetition_penalty": 1.0, "top_k": -1,
                                   "min_p": 0.0}

_TOKEN_ID = re.compile(r"token_id:(\d+)")


def parse_token_ids(tokens: Sequence[str] | None) -> list[int] | None:
    """Token ids from vLLM's ``return_tokens_as_token_ids`` strings (``"token_id:123"``).

    Returns:
        The ids, or None when ``tokens`` is None or any entry is not of that form (a server that
        returned token strings: the caller re-tokenizes). ``[]`` for an empty list.
    """
    if tokens is None:
        return None
    out = []
    for t in tokens:
        m = _TOKEN_ID.fullmatch(str(t))
        if m is None:
            return None
        out.append(int(m.group(1)))
    return out


@dataclass
class CompletionReply(ApiReply):
    """An ``ApiReply`` plus the generated token ids the server returned (None: none given)."""

    token_ids: list[int] | None = None


class CompletionServer(OpenAICompatibleBackend):
    """The server side: ``client.completions.create`` over the locally rendered prompt.

    Keeps ``openai_compatible``'s name, key rules (the key only from ``api_key_env``; none at a
    local URL), retries, concurrency and redaction. ``prompts`` passed to ``generate`` are keys of
    ``self.rendered`` (set by ``HybridBackend`` before each call): raw prompt → token ids / text.
    """

    def __init__(self, model: str, *, prompt_format: str, extra_body: dict[str, Any], **kw: Any) -> None:
        super().__init__(model, top_logprobs=0, **kw)
        self.prompt_format = prompt_format
        self.extra_body = dict(extra_body)
        self.rendered: dict[str, tuple[list[int], str]] = {}

    def request_params(self, max_new_tokens: int) -> dict[str, Any]:
        d = super().request_params(max_new_tokens)
        d.update(endpoint="completions", prompt_format=self.prompt_format, logprobs=1, top_p=1.0,
                 extra_body=dict(sorted(self.extra_body.items())))
        return d

    def _request_kw(self, prompt: str, max_new_tokens: int) -> dict[str, Any]:
        """The ``completions.create`` arguments of one request (``prompt`` a key of ``rendered``)."""
        ids, text = self.rendered.get(prompt, ([], ""))
        kw: dict[str, Any] = {"model": self.model_id, "prompt": list(ids) if self.prompt_format == "token_ids" else text,
                              "max_tokens": max_new_tokens, "temperature": 0.0, "top_p": 1.0, "seed": self.seed,
                              "logprobs": 1}
        if self.extra_body:
            kw["extra_body"] = dict(self.extra_body)
        return kw

    def config_fix(self, param: str, message: str) -> str:
        """What fixes a refused field of the hybrid's fixed request (no config key sets them)."""
        if param == "logprobs":
            return ("the hybrid backend asks for the chosen token's log-prob only (logprobs = 1) for its check: start "
                    "the server with log-probs allowed (vLLM: --max-logprobs 1 or more; its default is 20)")
        if param in self.extra_body:
            return (f"set server_extra_body in the model's [[models]] table without {param!r} (server_extra_body = {{}} "
                    f"sends no vLLM field; token ids are then re-tokenized)")
        return super().config_fix(param, message)

    def _request(self, prompt: str, max_new_tokens: int) -> ApiReply:
        if prompt not in self.rendered:
            raise KeyError(f"prompt not rendered: {prompt[:80]!r}")
        r = self._client.completions.create(**self._request_kw(prompt, max_new_tokens))
        if not r.choices:
            raise ValueError("the server returned no choices")
        ch = r.choices[0]
        lp = ch.logprobs
        tokens = list(lp.tokens) if lp is not None and lp.tokens is not None else None
        lps = None
        if lp is not None and lp.token_logprobs is not None:
            lps = [float("nan") if x is None else float(x) for x in lp.token_logprobs]
        u = r.usage
        return CompletionReply(text=ch.text or "", finish_raw=ch.finish_reason, model=r.model,
                                prompt_tokens=getattr(u, "prompt_tokens", None),
                                completion_tokens=getattr(u, "completion_tokens", None),
                                token_logprobs=lps, token_ids=parse_token_ids(tokens))

    def _result(self, reply: ApiReply, latency: float, cached: bool, attempts: int) -> GenerationResult:
        res = super()._result(reply, latency, cached, attempts)
        if reply.token_logprobs is not None and res.token_logprobs is None:  # kept even for an empty text
            res.token_logprobs = np.asarray(reply.token_logprobs, dtype=np.float64)
        res.token_ids = getattr(reply, "token_ids", None)
        return res
