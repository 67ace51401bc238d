"""Hybrid backend: replies from an OpenAI-compatible server (vLLM), white-box statistics from a local copy.

Its parts: ``hybrid_server`` (the completions request), ``hybrid_scoring`` (the local
teacher-forced pass), ``hybrid_check`` (server-vs-local log-prob agreement); this module joins them.

Generation at scale runs on a server (vLLM: tensor parallel on one node, Ray across nodes); the
white-box axes need the model's activations and full predictive distribution, which no server
returns. ``HybridBackend`` splits the work:

1. The prompt is rendered locally, exactly as ``hf_local`` renders it
   (``HFLocalBackend.format_prompt`` / ``encode_prompt``: the recorded chat template and its
   variables), and sent to the server's **completions** endpoint (``/v1/completions``) as those
   token ids (``prompt_format="token_ids"``, default) — not as chat messages, which the server
   would render with its own copy of the template (possibly another revision, other defaults
   such as a thinking switch, a second BOS). The server continues exactly the tokens the local
   model scores. ``prompt_format="text"`` sends the rendered text instead, for servers that take
   no token ids; a prompt whose text spells a control token is then an error row (the server would
   tokenize the string and read the control token; the ids keep it text, ``prompt_render``).
2. The server answers greedily (temperature 0; with vLLM's ``repetition_penalty=1``, ``top_k=-1``,
   ``min_p=0`` so no folder default changes a greedy choice) and returns its per-token log-probs
   and, with vLLM's ``return_tokens_as_token_ids``, the generated token ids (``"token_id:N"``
   strings). A server that returns no ids gets its text re-tokenized with the local tokenizer;
   the reply's ``meta["token_ids_source"]`` says which (``"server"`` / ``"re-tokenized"``). A reply
   that stopped (finish "stop") without an EOS token among its ids gets the EOS id appended
   (``meta["eos_appended"]``), since ``hf_local`` counts the EOS token in Δ-Prob / Δ-Ent.
3. The local ``transformers`` copy of the same weights runs one batched teacher-forced forward
   pass over prompt + returned tokens (no local decoding): the hidden state of the last prompt
   token at the embedding output and after every layer (Δ-Cos; also at the last token of the
   user's text and averaged over its tokens, the Δ-Cos options), exact log-probs of the returned
   tokens and full-vocabulary entropies (Δ-Prob, Δ-Ent), in float32 (``hf_local.token_stats``).
   SAGO (arXiv 2610.01428) §Axes defines Δ-Prob / Δ-Ent under teacher forcing.
4. Per reply, the largest |server log-prob − local log-prob| over the returned tokens is kept in
   ``meta["logprob_max_abs_diff"]``; a reply beyond ``logprob_tol`` (default 0.05 nats: fp32
   locally against a bf16 server) is counted and warned about — wrong weights or another
   revision on one side. ``logprob_check()`` gives the counts; a probe at start-up (one fixed
   prompt) puts the same check in ``info()`` and so in the run record, before any work.

5. The server's limits are read at start-up (``GET /v1/models``: vLLM's ``max_model_len``;
   ``server_limits.ServerLimitsMixin``) and recorded in ``decoding["hybrid"]["server_limits"]``.
   A prompt whose tokens plus the reply cap exceed ``max_model_len`` is an error row with the
   reason (``context.check_context``, as for a local model's context) and is not sent — vLLM
   would shorten the reply without an error; a reply the server still ends early with finish
   "length", or a 400 on one prompt's content, is that prompt's error row and the run goes on.

Stored ``token_ids`` are the scored ids; the stored reply is their decode (special tokens skipped,
no clean-up), as for ``hf_local``. So a hybrid run's responses and deltas equal a pure ``hf_local``
run's whenever the server returns the tokens the local model would generate (tested with a
loopback fake server: token ids and texts identical, deltas within float noise).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from sago_engine.backends.api.errors import ApiFatalError
from sago_engine.backends.api.keys import public_url
from sago_engine.backends.api.server_limits import server_over_context
from sago_engine.backends.context import check_context, over_context_result
from sago_engine.backends.hf_local import HFLocalBackend
from sago_engine.backends.hybrid.check import DEFAULT_LOGPROB_TOL, LogprobCheck, max_abs_diff
from sago_engine.backends.hybrid.scoring import TeacherForcedScorer
from sago_engine.backends.hybrid.server import VLLM_EXTRA_BODY, CompletionServer
from sago_engine.backends.protocol import Backend
from sago_engine.types import DEFAULT_MAX_NEW_TOKENS, GenerationResult

__all__ = ["HybridBackend", "PROBE_PROMPT"]

log = logging.getLogger("sago.hybrid")

#: The start-up probe's prompt (one reply, ``PROBE_TOKENS`` tokens at most).
PROBE_PROMPT = "Name the capital of France in one word."
PROBE_TOKENS = 8


class HybridBackend(Backend):
    """Replies from an OpenAI-compatible server, Δ-Cos / Δ-Prob / Δ-Ent from a local teacher-forced pass.

    See the module docstring for the protocol. ``capabilities`` = {"cos", "prob", "ent"}, all
    exact (no top-k bound). Registered as ``"hybrid"``; config: ``backend = "hybrid"`` with
    ``key`` the local model (zoo key, ``tiny-random``, folder or hub id) and ``base_url`` the
    server (docs/BACKENDS.md, "Hybrid backend (vLLM)").
    """

    name = "hybrid"
    capabilities = frozenset({"cos", "prob", "ent"})

    def __init__(
        self,
        model: str,
        base_url: str,
        server_model: str | None = None,
        dtype: str = "float32",
        device: str = "auto",
        batch_size: int = 8,
        chat_template_kwargs: dict[str, Any] | None = None,
        template_date: str | None = None,
        api_key_env: str | None = None,
        max_concurrency: int = 4,
        timeout_s: float = 60.0,
        max_retries: int = 5,
        logprob_tol: float = DEFAULT_LOGPROB_TOL,
        server_extra_body: dict[str, Any] | None = None,
        prompt_format: str = "token_ids",
        seed: int = 0,
        weights_seed: int = 0,
        check_server: bool = True,
        sleep=time.sleep,
    ) -> None:
        """Load the local copy, connect to the server and (``check_server``) probe it once.

        Args:
            model: the local model: zoo key, ``"tiny-random"``, model folder or hub id (as
                ``HFLocalBackend``); also the served name unless ``server_model`` is given.
            base_url: the server's API root, e.g. ``"http://localhost:8000/v1"``.
            server_model: the model name the server serves (vLLM ``--served-model-name``).
            dtype, device, batch_size, chat_template_kwargs, template_date: the local copy's settings
                (``HFLocalBackend``); ``batch_size`` = rows per teacher-forced forward pass.
            api_key_env, max_concurrency, timeout_s, max_retries: the server side
                (``api_backend.ApiBackend``: key from that variable only; none at a local URL).
            logprob_tol: tolerance in nats (> 0) on max |server − local| log-prob per reply.
            server_extra_body: extra request fields (None: ``VLLM_EXTRA_BODY``; ``{}``: none).
            prompt_format: ``"token_ids"`` (the rendered prompt's ids) or ``"text"``.
            seed: request seed (recorded; greedy needs none).
            weights_seed: weight seed of ``"tiny-random"`` only.
            check_server: send ``PROBE_PROMPT`` once now and record the check in ``info()``
                (a probe the server does not answer raises ``ApiFatalError``: nothing is run).
                The server's limits (``GET /models``) are read now either way.
            sleep: backoff sleep function (tests).
        Raises:
            ValueError: bad settings (message names them), no key for a remote server;
            ModelUnavailableError: local weights missing; ApiFatalError: the probe failed
            (server unreachable after retries, unknown model, refused request).
        """
        if prompt_format not in ("token_ids", "text"):
            raise ValueError(f"prompt_format must be 'token_ids' or 'text', got {prompt_format!r}")
        if not (isinstance(logprob_tol, (int, float)) and not isinstance(logprob_tol, bool) and logprob_tol > 0):
            raise ValueError(f"logprob_tol must be a number > 0 (nats), got {logprob_tol!r}")
        self.server = CompletionServer(server_model or model, base_url=base_url, api_key_env=api_key_env,
                                        max_concurrency=max_concurrency, timeout_s=timeout_s,
                                        max_retries=max_retries, seed=seed, sleep=sleep,
                                        prompt_format=prompt_format,
                                        extra_body=VLLM_EXTRA_BODY if server_extra_body is None else server_extra_body)
        try:
            self.local = HFLocalBackend(model, dtype=dtype, device=device, batch_size=batch_size, seed=weights_seed,
                                        chat_template_kwargs=chat_template_kwargs, template_date=template_date)
        except BaseException:
            self.server.close()
            raise
        self.model_id = model
        self.logprob_tol = float(logprob_tol)
        self.prompt_format = prompt_format
        self.template = self.local.template
        self.tokenizer = self.local.tokenizer
        self.scorer = TeacherForcedScorer(self.local)
        self._agreement = LogprobCheck(self.logprob_tol)
        self._closed = False
        self.server_check: dict[str, Any] | None = None
        self.server.server_limits()
        if check_server:
            try:
                self.server_check = self._probe()
            except BaseException:
                self.close()
                raise

    # ------------------------------------------------------------------ record

    def logprob_check(self) -> dict[str, Any]:
        """Server-vs-local log-prob agreement over every reply since the backend was built.

        Returns:
            ``{"replies": successful replies, "checked": replies compared (the server sent one
            log-prob per scored token), "beyond_tol": replies with max |server − local| >
            tol, "max_abs_diff": the largest difference seen (nats; None before any check),
            "re_tokenized": replies whose ids were re-derived from the text, "tol": nats}``.
            The start-up probe is not counted.
        """
        return self._agreement.counts()

    def info(self) -> dict[str, Any]:
        """Run-record facts of both endpoints.

        Returns:
            The local copy's ``HFLocalBackend.info()`` (weights hash, dtype, device, chat
            template, decoding…) with ``backend`` "hybrid", ``source`` naming both ends, and
            ``decoding["hybrid"]``: ``server`` (base_url without credentials, served model,
            api_key_env name, endpoint, prompt_format, request fields, sdk version),
            ``local`` (what the local pass computes), ``logprob_tol`` (nats), ``token_ids``
            (where ids come from), ``server_check`` (the start-up probe: model string the
            server returned, max |Δ log-prob|, within tolerance; None when not probed) and
            ``server_limits`` (``ServerLimitsMixin.server_limits``: max_model_len, max_logprobs).
        """
        li = self.local.info()
        srv = self.server
        dec = dict(li.get("decoding") or {})
        dec["hybrid"] = {
            "server": {"base_url": public_url(srv.base_url), "model": srv.model_id, "api_key_env": srv.api_key_var,
                       "endpoint": "completions", "prompt_format": self.prompt_format,
                       "request": {"temperature": 0.0, "top_p": 1.0, "logprobs": 1, "seed": srv.seed,
                                   "extra_body": dict(sorted(srv.extra_body.items()))},
                       "sdk": srv.sdk, "sdk_version": srv.sdk_version(), "max_concurrency": srv.max_concurrency,
                       "timeout_s": srv.timeout_s, "max_retries": srv.policy.max_retries},
            "local": "one teacher-forced forward pass over prompt + returned ids: hidden state of the last prompt "
                     "token (embeddings + every layer), float32 log-probs and full-vocabulary entropies",
            "logprob_tol": self.logprob_tol,
            "token_ids": "server (return_tokens_as_token_ids) where returned, else the reply text re-tokenized "
                         "locally (+ EOS on a stop): per reply in meta token_ids_source",
            "server_check": self.server_check,
            "server_limits": srv.server_limits(),
        }
        return {**li, "backend": self.name, "model_id": self.model_id, "capabilities": sorted(self.capabilities),
                "source": f"hybrid: server {public_url(srv.base_url)} model {srv.model_id}; local {li.get('source')}",
                "decoding": dec}

    def template_record(self) -> dict[str, Any] | str:
        """The local copy's ``HFLocalBackend.template_record()`` (the server gets its rendering)."""
        return self.local.template_record()

    def teacher_force(self, prompts: list[str], responses: list[list[int] | str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """``HFLocalBackend.teacher_force`` of the local copy (for ``sago_engine.verify.replay``)."""
        return self.local.teacher_force(prompts, responses)

    def take_usage(self) -> dict[str, Any]:
        """The server's ``ApiBackend.take_usage()`` (requests, retries, errors, tokens, models) plus
        ``logprob_check()`` under ``"logprob_check"``."""
        return {**self.server.take_usage(), "logprob_check": self.logprob_check()}

    def totals(self) -> dict[str, Any]:
        """The server's counters since the backend was built."""
        return self.server.totals()

    # ------------------------------------------------------------------ generation

    def generate(self, prompts: list[str], max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                 repeats: Sequence[int] | None = None) -> list[GenerationResult]:
        """Server replies, scored by the local copy; in input order.

        Args:
            prompts: raw user prompts (rendered locally, see the module docstring).
            max_new_tokens: generation cap per reply (≥ 1; the EOS token counts, as in hf_local).
            repeats: accepted for the runner's noise floor and ignored (nothing is cached, so a
                repeat is always asked afresh).
        Returns:
            One ``GenerationResult`` per prompt: ``token_ids`` the scored ids (up to and including
            the first EOS); ``text`` their decode (special tokens skipped, no clean-up);
            ``n_tokens = len(token_ids)``; ``token_logprobs`` / ``token_entropies`` float64 (T,)
            from the local pass (nats); ``hidden_last`` float32 (L+1, H); ``finish_reason`` "stop"
            (ends with EOS, or the server stopped) or "length"; ``latency_s`` the server's
            latency plus this reply's share of the local pass; ``meta``: the server's (model
            returned, tokens, attempts, finish_raw…) plus ``token_ids_source``,
            ``eos_appended``, ``server_n_tokens``, ``logprob_max_abs_diff`` (nats or None) and ``logprob_mismatch``.
            A prompt the server failed on (or that encodes to nothing, or, with
            ``prompt_format="text"``, spells a control token: the server would parse it) is a result
            with ``error`` set and ``meta["retryable"]`` as ``ApiBackend.generate`` sets it; a
            prompt whose tokens plus ``max_new_tokens`` exceed the server's ``max_model_len`` is one
            too (``server_limits.server_over_context``: ``meta["over_context"]``), never sent.
        Raises:
            ApiFatalError / ApiConfigError: as ``ApiBackend.generate`` (bad key, unknown model,
                a refused parameter); RuntimeError: closed; ValueError: ``max_new_tokens < 1``.
        """
        if self._closed:
            raise RuntimeError("backend is closed")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        out: list[GenerationResult | None] = [None] * len(prompts)
        limit = self.server.max_model_len
        rendered: dict[str, tuple[list[int], str]] = {}
        spans: dict[str, tuple[int, int] | None] = {}  # the user's text among the prompt tokens
        valid: list[int] = []
        for i, p in enumerate(prompts):
            try:
                if p not in rendered:
                    ids, span = self.local.prompt_layout(p)
                    if not ids:
                        raise ValueError("prompt encodes to zero tokens")
                    if self.prompt_format == "text" and self.local.renderer.spells_control_tokens(p):
                        raise ValueError("the prompt spells a control token, which a server tokenizing the rendered "
                                         "text would read as one (prompt_format='token_ids' sends it as text)")
                    rendered[p] = (ids, self.local.format_prompt(p))
                    spans[p] = span
            except Exception as exc:  # one bad prompt becomes a row
                out[i] = GenerationResult(text="", n_tokens=0, finish_reason="error",
                                          error=f"{type(exc).__name__}: {exc}")
                continue
            if check_context(len(rendered[p][0]), max_new_tokens, limit) is not None:
                # never sent: the server would shorten the reply or refuse the prompt
                out[i] = server_over_context(len(rendered[p][0]), max_new_tokens, limit)
                continue
            local_ctx = self.local.context_length
            if check_context(len(rendered[p][0]), max_new_tokens, local_ctx) is not None:
                # the local copy scores positions past its own context: its statistics would not hold
                out[i] = over_context_result(len(rendered[p][0]), max_new_tokens, local_ctx)
                continue
            valid.append(i)
        self.server.rendered = rendered
        served = self.server.generate([prompts[i] for i in valid], max_new_tokens) if valid else []
        todo: list[tuple[int, list[int], GenerationResult, str]] = []
        for i, r in zip(valid, served):
            if r.error is not None:
                out[i] = r
                continue
            ids, source, appended = self.scorer.scored_ids(r)
            todo.append((i, ids, r, (source, appended)))
        n_beyond = 0
        for batch in self.local.batches([len(rendered[prompts[i]][0]) + len(ids) for i, ids, _, _ in todo]):
            rows = [todo[b] for b in batch]
            t0 = time.perf_counter()
            scored = self.scorer.score([(rendered[prompts[i]][0], ids) for i, ids, _, _ in rows],
                                 [spans[prompts[i]] for i, _, _, _ in rows])
            per = (time.perf_counter() - t0) / len(rows)
            for (i, ids, r, how), (lp, ent, hid, user) in zip(rows, scored):
                out[i] = self._result(ids, r, how, lp, ent, hid, per, user)
                out[i].meta["request"] = rendered[prompts[i]][1]  # as hf_local: the prompt as the model reads it
                n_beyond += bool(out[i].meta["logprob_mismatch"])
        if n_beyond:
            log.warning("hybrid %s: %d of %d replies have server log-probs more than %.3g nats from the local "
                        "model's (max %.3g): the server and the local copy may not hold the same weights/revision",
                        self.model_id, n_beyond, len(todo), self.logprob_tol, self.logprob_check()["max_abs_diff"])
        return out  # type: ignore[return-value]

    def _result(self, ids: list[int], r: GenerationResult, how: tuple[str, bool], lp: np.ndarray, ent: np.ndarray,
                hid: np.ndarray, local_s: float,
                user: tuple[np.ndarray | None, np.ndarray | None] = (None, None)) -> GenerationResult:
        source, appended = how
        srv = r.token_logprobs
        diff = max_abs_diff(srv, lp, len(ids), appended)
        mismatch = self._agreement.record(diff, re_tokenized=source != "server")
        finish = "stop" if (ids and ids[-1] in self.scorer.eos) else r.finish_reason  # else the server's: length / stop
        meta = {**(r.meta or {}), "token_ids_source": source, "eos_appended": appended,
                "server_n_tokens": None if srv is None else len(srv),
                "logprob_max_abs_diff": diff, "logprob_mismatch": mismatch}
        text = self.local.tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        return GenerationResult(text=text, n_tokens=len(ids), token_logprobs=lp, token_entropies=ent,
                                hidden_last=hid, hidden_user_last=user[0], hidden_user_mean=user[1],
                                finish_reason=finish, latency_s=float(r.latency_s) + local_s,
                                token_ids=list(ids), meta=meta)

    def _probe(self) -> dict[str, Any]:
        """Ask the server ``PROBE_PROMPT`` once and compare its log-probs with the local copy's."""
        before = self.logprob_check()
        try:
            r = self.generate([PROBE_PROMPT], PROBE_TOKENS)[0]
        finally:
            self._agreement.restore(before)
            self.server.take_usage()  # the probe is not the run's usage
        if r.error is not None:  # a server that cannot answer one prompt will not answer the run's
            raise ApiFatalError(
                f"hybrid {self.model_id}: the server at {public_url(self.server.base_url)} (model "
                f"{self.server.model_id!r}) did not answer the start-up probe: {r.error[:300]}. Check base_url and "
                f"server_model; a server that rejects vLLM's request fields needs server_extra_body = {{}}")
        diff = r.meta["logprob_max_abs_diff"]
        ok = None if diff is None else diff <= self.logprob_tol
        if ok is False:
            log.warning("hybrid %s: server and local log-probs differ by %.3g nats (> %.3g) on the probe: "
                        "different weights or revision?", self.model_id, diff, self.logprob_tol)
        return {"prompt": PROBE_PROMPT, "model_returned": r.meta.get("model"), "n_tokens": r.n_tokens,
                "token_ids_source": r.meta["token_ids_source"], "max_abs_diff": diff, "within_tol": ok}

    def close(self) -> None:
        """Close the server client and drop the local model. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self.server.close()
        finally:
            self.local.close()

    def __repr__(self) -> str:
        return f"HybridBackend({self.model_id!r}, server={public_url(self.server.base_url)!r})"
