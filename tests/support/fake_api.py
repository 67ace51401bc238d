"""A loopback HTTP server that speaks the OpenAI, Anthropic and Gemini wire formats, with scripted failures.

Routes: ``POST /v1/chat/completions`` (OpenAI; base_url ``{url}/v1``), ``POST /v1/messages``
(Anthropic; base_url ``{url}``), ``POST /{v1,v1beta}/models/{model}:generateContent`` (Gemini;
``HttpOptions(base_url=url)``). The reply text is a deterministic function of the prompt.

Behaviours (``FakeAPI.script(prompt, [...])`` queues them per prompt; ``default`` otherwise):
``"normal"`` (no log-probs), ``"logprobs"`` (per-token log-probs, top-3 alternatives with
probabilities 0.5/0.25/0.125), ``("429", retry_after)`` (``Retry-After: <retry_after>``; a dict
``{"headers": {...}, "retry_delay": "12s"}`` sends those headers and, with ``retry_delay``, a
``google.rpc.RetryInfo`` in the error details), ``"500"``, ``("timeout", seconds)``
(sleep, then answer normally), ``"malformed"`` (200 with a broken JSON body), ``"empty"``
(empty completion), ``"400"`` (bad request whose message echoes the caller's key, as careless
servers do), ``"401"``; and ``("thinking", n)`` (a thinking model that spent the
whole budget on ``n`` hidden reasoning tokens: no visible text, finish "length" / MAX_TOKENS /
max_tokens), ``"refusal"`` (content filter / SAFETY / refusal stop, no text), ``"paraphrase"``
(a seeded random paraphrase of one fixed answer, whatever the prompt: a fresh one per request,
as a provider that samples even at temperature 0), ``("text", s)`` (a reply of exactly ``s``; a
lone surrogate goes out as its JSON escape ``\\ud83d``), ``("bytes", b)`` (a reply whose text is
the raw bytes ``b`` in the body, e.g. invalid UTF-8).
Server log-probs that must not be summed: ``"logprobs-eot"`` (the ``"logprobs"`` reply plus a
trailing end-of-text entry as vLLM sends it, ``{"token": "", "logprob": -9999.0, "bytes": [],
"top_logprobs": []}``; Gemini: a chosen candidate without token at −9999 and no top candidates),
``("logprobs-value", v)`` (the ``"logprobs"`` reply with the first token's log-prob replaced by
``v``, e.g. NaN, inf, 0.69 or −9999; non-finite values go out as ``NaN`` / ``Infinity``, which
Python's JSON reader accepts).

OpenAI-compatible server limits, as vLLM reports them: ``("400_context", n)`` (vLLM's 400 for a
prompt of ``n`` tokens over the context: ``param: "input_tokens"``), ``("400_param", name)`` (a 400
whose ``param`` is ``name``, with no other hint), ``("cut", n)`` (finish "length" after ``n``
completion tokens, whatever the cap: a server that shortened the reply). ``served`` lists models
on ``GET /v1/models`` (``{"name": {"max_model_len": 64}}``: each entry's extra fields);
``max_logprobs`` refuses a larger ``top_logprobs`` with vLLM's 400 (``param: "logprobs"``).

``FakeAPI(reject={"temperature", "logprobs"})`` answers every request that carries one of those
parameters with the provider's own 400 naming it (OpenAI: ``param``/``unsupported_value``;
Gemini: "Logprobs is not enabled for models/…"; Anthropic: "temperature: … not supported").
``cached_tokens`` reports that many prompt tokens as read from the provider's prompt cache;
``prompt_tokens`` overrides the per-provider prompt token count.
"""

from __future__ import annotations

import json
import math
import random
import re
import threading
import time
from collections import defaultdict, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOP_P = (0.5, 0.25, 0.125)
#: Entropy (nats) of one position of the "logprobs" behaviour under ``topk_entropy`` (leftover 0.125).
TOKEN_ENTROPY = -sum(p * math.log(p) for p in TOP_P) - 0.125 * math.log(0.125)


def reply_text(prompt: str) -> str:
    """The deterministic answer to ``prompt``."""
    words = re.findall(r"\w+", prompt.lower())
    return "Answer: " + " ".join(words[:6][::-1]) if words else "Answer."


#: Placeholder of the ``("bytes", b)`` behaviour, replaced by ``b`` in the encoded body.
_BYTES_MARK = "Answer: @@RAW-BYTES@@"

_OPENERS = ("Answer:", "Sure:", "Well,", "In short:", "Here it is:", "OK:")
_FILLERS = ("indeed", "basically", "probably", "clearly", "so", "then", "really", "I think")


def paraphrase(prompt: str, rng: random.Random) -> str:
    """A random paraphrase of one fixed answer ("Lima is the capital of Peru"): another opener,
    a shuffled word order and one or two fillers, drawn from ``rng``. It does not depend on the
    prompt, so a variant's reply and a repeat's reply come from the same process: the only
    instability is the "provider's" own noise."""
    words = ["lima", "is", "the", "capital", "of", "peru"]
    rng.shuffle(words)
    for _ in range(rng.randint(1, 2)):
        words.insert(rng.randrange(len(words) + 1), rng.choice(_FILLERS))
    return rng.choice(_OPENERS) + " " + " ".join(words)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request, client_address):  # a client that timed out closed the socket
        pass


class FakeAPI:
    """Start with ``FakeAPI()`` (or as a context manager); ``url`` is ``http://127.0.0.1:<port>``."""

    def __init__(self, default: Any = "normal", model_suffix: str = "-2026-01-01", reject=(),
                 cached_tokens: int = 0, prompt_tokens: dict | None = None, seed: int = 0,
                 served: dict | None = None, max_logprobs: int | None = None) -> None:
        self.default = default
        self.served = dict(served or {})
        self.max_logprobs = max_logprobs
        self.gets: list[str] = []
        """Paths of every GET request."""
        self.model_suffix = model_suffix
        self.reject = set(reject)
        self.cached_tokens = int(cached_tokens)
        self.prompt_tokens = {"openai": 10, "anthropic": 12, "gemini": 8, **(prompt_tokens or {})}
        self._rng = random.Random(seed)
        self._queues: dict[str, deque] = defaultdict(deque)
        self._lock = threading.Lock()
        self.requests: list[dict] = []
        """Every request: path, prompt, body (parsed JSON), headers (lower-case names)."""
        self.inflight = 0
        self.max_inflight = 0
        """Most requests served at the same time."""
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def do_GET(self):
                path = self.path.split("?")[0]
                with api._lock:
                    api.gets.append(path)
                if path.endswith("/models") and api.served:
                    data = [{"id": k, "object": "model", "owned_by": "fake", **v} for k, v in api.served.items()]
                    return api._send(self, 200, {"object": "list", "data": data})
                return api._send(self, 404, {"error": {"message": f"no route {path}"}})

            def do_POST(self):
                n = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                with api._lock:
                    api.inflight += 1
                    api.max_inflight = max(api.max_inflight, api.inflight)
                try:
                    api._handle(self, body)
                finally:
                    with api._lock:
                        api.inflight -= 1

        self._srv = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._srv.server_address[1]}"
        self._thread = threading.Thread(target=self._srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ control
    def script(self, prompt: str, behaviours: list) -> None:
        """Queue behaviours for the next requests carrying exactly ``prompt``."""
        with self._lock:
            self._queues[prompt].extend(behaviours)

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def close(self) -> None:
        self._srv.shutdown()
        self._srv.server_close()

    def __enter__(self) -> FakeAPI:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ serving
    def _handle(self, h: BaseHTTPRequestHandler, body: dict) -> None:
        path = h.path.split("?")[0]
        if path.endswith("/chat/completions"):
            kind, prompt = "openai", body["messages"][-1]["content"]
        elif path.endswith("/messages"):
            kind, prompt = "anthropic", body["messages"][-1]["content"]
        elif ":generateContent" in path:
            kind = "gemini"
            prompt = "".join(p.get("text", "") for c in body.get("contents", []) for p in c.get("parts", []))
        else:
            return self._send(h, 404, {"error": {"message": f"no route {path}"}})
        headers = {k.lower(): v for k, v in h.headers.items()}
        with self._lock:
            self.requests.append({"path": path, "prompt": prompt, "body": body, "headers": headers})
            q = self._queues.get(prompt)
            beh = q.popleft() if q else self.default
        name, arg = (beh if isinstance(beh, tuple) else (beh, None))
        rejected = self._rejected(kind, body)
        if rejected is not None:
            return self._send(h, 400, rejected)
        if name == "429":
            if isinstance(arg, dict):  # each provider's own hint: headers and/or Gemini's RetryInfo
                err = self._err(kind, 429, "rate limited")
                if "retry_delay" in arg:
                    err["error"]["details"] = [
                        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
                        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": arg["retry_delay"]}]
                return self._send(h, 429, err, arg.get("headers"))
            return self._send(h, 429, self._err(kind, 429, "rate limited"), {"Retry-After": str(arg)} if arg is not None else None)
        if name == "500":
            return self._send(h, 500, self._err(kind, 500, "internal error"))
        if name == "400":
            key = headers.get("authorization") or headers.get("x-api-key") or headers.get("x-goog-api-key") or ""
            return self._send(h, 400, self._err(kind, 400, f"bad request for key {key}"))
        if name == "401":
            return self._send(h, 401, self._err(kind, 401, "invalid api key"))
        if name == "400_context":
            return self._send(h, 400, {"error": {
                "message": f"This model's maximum context length is 64 tokens. However, your prompt contains {arg} "
                           f"input tokens, which exceeds this limit even without any output tokens. Please reduce the "
                           f"length of the input prompt. (parameter=input_tokens, value={arg})",
                "type": "BadRequestError", "param": "input_tokens", "code": 400}})
        if name == "400_param":
            return self._send(h, 400, {"error": {"message": f"Invalid request (parameter={arg})",
                                                 "type": "BadRequestError", "param": arg, "code": 400}})
        k = body.get("top_logprobs") if kind == "openai" else None
        if self.max_logprobs is not None and isinstance(k, int) and k > self.max_logprobs:
            return self._send(h, 400, {"error": {
                "message": f"Requested sample logprobs of {k}, which is greater than max allowed: {self.max_logprobs} "
                           f"(parameter=logprobs, value={k})", "type": "BadRequestError", "param": "logprobs",
                "code": 400}})
        if name == "cut" and kind == "openai":
            d = self._openai(body, reply_text(prompt), False)
            d["choices"][0]["finish_reason"] = "length"
            d["usage"] = self._openai_usage(int(arg), 0)
            return self._send(h, 200, d)
        if name == "malformed":
            return self._send_raw(h, 200, b'{"id": "x", "choices": [', "application/json")
        if name == "timeout":
            time.sleep(float(arg or 1.0))
            name = "normal"
        if name in ("thinking", "refusal"):
            return self._send(h, 200, getattr(self, f"_{kind}_{name}")(body, int(arg or 0)))
        if name == "paraphrase":
            with self._lock:
                text = paraphrase(prompt, self._rng)
        elif name in ("text", "bytes"):  # a reply of exactly this text / with these raw bytes in the body
            text = arg if name == "text" else _BYTES_MARK
        else:
            text = "" if name == "empty" else reply_text(prompt)
        reply = getattr(self, f"_{kind}")(body, text, name.startswith("logprobs"))
        if name in ("logprobs-eot", "logprobs-value"):
            self._bad_logprobs(kind, reply, arg if name == "logprobs-value" else None)
        if name == "bytes":
            return self._send_raw(h, 200, json.dumps(reply).encode().replace(_BYTES_MARK.encode(), arg),
                                  "application/json")
        self._send(h, 200, reply)

    @staticmethod
    def _bad_logprobs(kind: str, reply: dict, value: Any) -> None:
        """Add the end-of-text entry (``value`` None) or put ``value`` at the first token."""
        if kind == "openai" and reply["choices"][0]["logprobs"]:
            content = reply["choices"][0]["logprobs"]["content"]
            if value is None:
                content.append({"token": "", "logprob": -9999.0, "bytes": [], "top_logprobs": []})
            else:
                content[0]["logprob"] = value
        elif kind == "gemini" and "logprobsResult" in reply["candidates"][0]:
            res = reply["candidates"][0]["logprobsResult"]
            if value is None:
                res["chosenCandidates"].append({"logProbability": -9999.0})
                res["topCandidates"].append({"candidates": []})
            else:
                res["chosenCandidates"][0]["logProbability"] = value

    def _rejected(self, kind: str, body: dict) -> dict | None:
        """The provider's 400 for a rejected parameter the request carries, else None."""
        gc = body.get("generationConfig", {})
        sent = {"temperature": ("temperature" in body) if kind != "gemini" else ("temperature" in gc),
                "logprobs": bool(body.get("logprobs")) if kind != "gemini" else bool(gc.get("responseLogprobs")),
                "seed": ("seed" in body) if kind != "gemini" else ("seed" in gc)}
        for p in sorted(self.reject):
            if not sent.get(p):
                continue
            if kind == "openai":
                return {"error": {"message": f"Unsupported value: '{p}' does not support 0 with this model. Only "
                                             f"the default (1) value is supported.", "type": "invalid_request_error",
                                  "param": p, "code": "unsupported_value"}}
            if kind == "gemini":
                what = "Logprobs" if p == "logprobs" else p
                return {"error": {"code": 400, "message": f"{what} is not enabled for models/{body.get('model', 'm')}",
                                  "status": "INVALID_ARGUMENT"}}
            return {"type": "error", "error": {"type": "invalid_request_error",
                                               "message": f"{p}: is not supported for this model"}}
        return None

    @staticmethod
    def _err(kind: str, code: int, msg: str) -> dict:
        if kind == "anthropic":
            return {"type": "error", "error": {"type": "api_error", "message": msg}}
        if kind == "gemini":
            return {"error": {"code": code, "message": msg, "status": "ERROR"}}
        return {"error": {"message": msg, "type": "error", "code": None}}

    def _send(self, h, code: int, obj: dict, headers: dict | None = None) -> None:
        self._send_raw(h, code, json.dumps(obj).encode(), "application/json", headers)

    @staticmethod
    def _send_raw(h, code: int, data: bytes, ctype: str, headers: dict | None = None) -> None:
        try:
            h.send_response(code)
            h.send_header("Content-Type", ctype)
            h.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(data)
        except OSError:
            pass

    # ------------------------------------------------------------------ wire formats
    @staticmethod
    def _tokens(text: str) -> list[str]:
        return re.findall(r"\S+\s*", text)

    def _openai(self, body: dict, text: str, logprobs: bool) -> dict:
        toks = self._tokens(text)
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text},
                                  "finish_reason": "stop", "logprobs": None}
        if logprobs and body.get("logprobs"):
            k = min(int(body.get("top_logprobs") or 0), len(TOP_P))
            choice["logprobs"] = {"content": [
                {"token": t, "logprob": math.log(TOP_P[0]), "bytes": None,
                 "top_logprobs": [{"token": t if j == 0 else f"alt{j}", "logprob": math.log(TOP_P[j]), "bytes": None}
                                  for j in range(k)]}
                for t in toks], "refusal": None}
        return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0,
                "model": body["model"] + self.model_suffix, "choices": [choice],
                "usage": self._openai_usage(len(toks), 0)}

    def _anthropic(self, body: dict, text: str, logprobs: bool) -> dict:
        toks = self._tokens(text)
        return {"id": "msg_fake", "type": "message", "role": "assistant", "model": body["model"] + self.model_suffix,
                "content": [{"type": "text", "text": text}] if text else [],
                "stop_reason": "end_turn", "stop_sequence": None,
                "usage": self._anthropic_usage(len(toks))}

    def _gemini(self, body: dict, text: str, logprobs: bool) -> dict:
        toks = self._tokens(text)
        cand: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP",
                                "index": 0}
        gc = body.get("generationConfig", {})
        if logprobs and gc.get("responseLogprobs"):
            k = min(int(gc.get("logprobs") or 0), len(TOP_P))
            cand["logprobsResult"] = {
                "chosenCandidates": [{"token": t, "logProbability": math.log(TOP_P[0])} for t in toks],
                "topCandidates": [{"candidates": [{"token": t if j == 0 else f"alt{j}", "logProbability": math.log(TOP_P[j])}
                                                  for j in range(k)]} for t in toks],
            }
        return {"candidates": [cand], "modelVersion": "gemini-fake" + self.model_suffix,
                "usageMetadata": self._gemini_usage(len(toks), 0)}

    # ------------------------------------------------------------------ usage and the replies that are not answers
    def _openai_usage(self, completion: int, reasoning: int) -> dict:
        n = self.prompt_tokens["openai"]
        return {"prompt_tokens": n, "completion_tokens": completion, "total_tokens": n + completion,
                "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
                "completion_tokens_details": {"reasoning_tokens": reasoning}}

    def _anthropic_usage(self, output: int) -> dict:
        # input_tokens exclude cache reads (Anthropic bills them apart)
        return {"input_tokens": self.prompt_tokens["anthropic"] - self.cached_tokens, "output_tokens": output,
                "cache_read_input_tokens": self.cached_tokens, "cache_creation_input_tokens": 0}

    def _gemini_usage(self, candidates: int, thoughts: int) -> dict:
        n = self.prompt_tokens["gemini"]
        u = {"promptTokenCount": n, "totalTokenCount": n + candidates + thoughts}
        if candidates:
            u["candidatesTokenCount"] = candidates
        if thoughts:
            u["thoughtsTokenCount"] = thoughts
        if self.cached_tokens:
            u["cachedContentTokenCount"] = self.cached_tokens
        return u

    def _openai_thinking(self, body: dict, n: int) -> dict:
        return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": body["model"] + self.model_suffix,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "length",
                             "logprobs": {"content": [], "refusal": None} if body.get("logprobs") else None}],
                "usage": self._openai_usage(n, n)}

    def _anthropic_thinking(self, body: dict, n: int) -> dict:
        return {"id": "msg_fake", "type": "message", "role": "assistant", "model": body["model"] + self.model_suffix,
                "content": [{"type": "thinking", "thinking": "hmm " * 3, "signature": "sig"}],
                "stop_reason": "max_tokens", "stop_sequence": None, "usage": self._anthropic_usage(n)}

    def _gemini_thinking(self, body: dict, n: int) -> dict:
        return {"candidates": [{"content": {"role": "model"}, "finishReason": "MAX_TOKENS", "index": 0}],
                "modelVersion": "gemini-fake" + self.model_suffix, "usageMetadata": self._gemini_usage(0, n)}

    def _openai_refusal(self, body: dict, n: int) -> dict:
        return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": body["model"] + self.model_suffix,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": None, "refusal": "I can't help."},
                             "finish_reason": "stop", "logprobs": None}],
                "usage": self._openai_usage(4, 0)}

    def _anthropic_refusal(self, body: dict, n: int) -> dict:
        return {"id": "msg_fake", "type": "message", "role": "assistant", "model": body["model"] + self.model_suffix,
                "content": [], "stop_reason": "refusal", "stop_sequence": None, "usage": self._anthropic_usage(0)}

    def _gemini_refusal(self, body: dict, n: int) -> dict:
        return {"candidates": [{"finishReason": "SAFETY", "index": 0}],
                "modelVersion": "gemini-fake" + self.model_suffix, "usageMetadata": self._gemini_usage(0, 0)}
