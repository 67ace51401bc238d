"""Hybrid backend: server replies + local teacher-forced statistics.

A loopback fake of vLLM's ``/v1/completions`` (threaded ``http.server`` on 127.0.0.1) answers
each rendered prompt (token ids) with exactly the greedy tokens tiny-random generated in a pure
``hf_local`` run, with their log-probs; the hybrid run must then store the same token ids and
replies and the same deltas on all six axes.

Tolerances (measured on this CPU, fp32): Δ-BLEU / Δ-BERT / Δ-MR depend only on the reply texts,
which are identical, so they agree to 1e-12; Δ-Cos / Δ-Prob / Δ-Ent compare hf_local's values from
``generate`` (prefill hidden states with the shared-prefix KV cache, step logits) with the hybrid's
single teacher-forced forward pass — float32 reduction-order noise, observed ≤ 7e-6 raw (Δ-Prob;
Δ-Ent 1.4e-6, Δ-Cos 9e-8), asserted
≤ 1e-4 (raw delta units: 1 − cos, nats).
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]

#: Largest |hybrid − hf_local| raw delta allowed on the white-box axes (float noise, see above).
WHITE_BOX_TOL = 1e-4
#: The same for the text axes (identical replies).
TEXT_TOL = 1e-12


class FakeVLLM:
    """Minimal vLLM-style completions server.

    ``answers``: rendered prompt ids (tuple) → (generated ids incl. EOS, per-token log-probs).
    Unknown prompts (the start-up probe) are answered by ``fallback(prompt_ids, max_tokens)``.
    ``token_ids=False`` ignores ``return_tokens_as_token_ids`` (token strings, as a non-vLLM server);
    ``shift`` is added to every returned log-prob (a server with other weights); ``drop_eos``
    leaves a final EOS token out of the returned tokens (finish stays "stop").
    ``max_model_len`` (with ``served``, the listed model name): listed on ``GET /v1/models`` and
    enforced as vLLM does — a prompt over it is a 400 (``param: "input_tokens"``), a reply that
    would pass it is cut there with finish "length" (``listed=False`` enforces it unlisted);
    ``max_logprobs``: a larger ``logprobs`` is vLLM's 400 (``param: "logprobs"``).
    """

    def __init__(self, answers, fallback, tokenizer, eos_ids, token_ids=True, shift=0.0, drop_eos=False,
                 max_model_len=None, served="tiny-random", listed=True, max_logprobs=None):
        self.answers, self.fallback, self.tok, self.eos = answers, fallback, tokenizer, set(eos_ids)
        self.token_ids, self.shift, self.drop_eos = token_ids, shift, drop_eos
        self.max_model_len, self.served, self.listed, self.max_logprobs = max_model_len, served, listed, max_logprobs
        self.requests: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                entry = {"id": fake.served, "object": "model"}
                if fake.max_model_len is not None and fake.listed:
                    entry["max_model_len"] = fake.max_model_len
                self._send(200, {"object": "list", "data": [entry]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(body)
                self._send(*fake.answer(body))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.timeout = 10
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def answer(self, body: dict) -> tuple[int, dict]:
        """(HTTP status, JSON body) of one completions request."""
        n, lim = len(body["prompt"]), self.max_model_len
        if lim is not None and n > lim:
            return 400, {"error": {"message": f"This model's maximum context length is {lim} tokens. However, your "
                                              f"prompt contains {n} input tokens (parameter=input_tokens, value={n})",
                                   "type": "BadRequestError", "param": "input_tokens", "code": 400}}
        if self.max_logprobs is not None and body.get("logprobs", 0) > self.max_logprobs:
            return 400, {"error": {"message": f"Requested sample logprobs of {body['logprobs']}, which is greater than "
                                              f"max allowed: {self.max_logprobs}", "type": "BadRequestError",
                                   "param": "logprobs", "code": 400}}
        return 200, self.reply(body)

    def reply(self, body: dict) -> dict:
        assert isinstance(body["prompt"], list), "the hybrid backend sends the rendered prompt as token ids"
        key = tuple(body["prompt"])
        cap = body["max_tokens"]
        if self.max_model_len is not None:  # vLLM shortens the reply to the room left, finish "length"
            cap = min(cap, self.max_model_len - len(key))
        ids, lps = self.answers[key] if key in self.answers else self.fallback(list(key), cap)
        ids, lps = list(ids)[:cap], [float(x) + self.shift for x in lps][:cap]
        stop = bool(ids) and ids[-1] in self.eos
        if self.drop_eos and stop:
            ids, lps = ids[:-1], lps[:-1]
        as_ids = self.token_ids and body.get("return_tokens_as_token_ids")
        tokens = [f"token_id:{t}" if as_ids else self.tok.decode([t]) for t in ids]
        return {"id": "cmpl-1", "object": "text_completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "text": self.tok.decode(ids, skip_special_tokens=True),
                             "logprobs": {"tokens": tokens, "token_logprobs": lps,
                                          "top_logprobs": [{tk: lp} for tk, lp in zip(tokens, lps)],
                                          "text_offset": list(range(len(ids)))},
                             "finish_reason": "stop" if stop else "length"}],
                "usage": {"prompt_tokens": len(key), "completion_tokens": len(ids), "total_tokens": len(key) + len(ids)}}

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def _generate_fallback(tiny):
    """Answer an unknown prompt as tiny-random would (greedy, step-logit log-probs)."""
    def fb(prompt_ids, max_tokens):
        r = tiny.generate_batch([prompt_ids], max_tokens)[0]
        return r.token_ids, list(r.token_logprobs)
    return fb


def _vid(v):
    """A stored variant id, or None for the base reply (read back as NaN)."""
    return v if isinstance(v, str) else None


TOML = """
[run]
store = "{store}"
seed = 5
max_new_tokens = 8
chunk_prompts = 2

[data]
dir = "{data}"
datasets = ["truthfulqa", "alpaca"]
n_prompts = 1

[variants]
# surface noise only: meaning kept by construction, no semantic-filter pass (keeps this test fast)
families = ["surface_noise"]
per_family = {{ surface_noise = 3 }}

[[models]]
key = "tiny-random"
batch_size = 8
{extra}
"""


def test_hybrid_run_equals_hf_local_run(tiny_backend, tmp_path):
    """Runner with backend = hf_local, then backend = hybrid against a fake server that returns
    hf_local's greedy tokens: identical token ids, replies and finish reasons; all six axes'
    deltas equal (text axes ≤ 1e-12, white-box ≤ 1e-4 raw); both endpoints in the run record;
    0 of N replies beyond the log-prob tolerance."""
    from precompute.config import load_config
    from precompute.runner import run
    from sago_engine.store import open_store
    from sago_engine.types import OPTION_AXES

    data = ROOT / "data" / "datasets"
    (tmp_path / "local.toml").write_text(TOML.format(store=tmp_path / "local.duckdb", data=data, extra=""))
    run(load_config(tmp_path / "local.toml"), progress=False)
    with open_store(tmp_path / "local.duckdb") as st:
        (local_run,) = st.runs()["run_id"]
        texts, local_resp = {}, {}
        for pid, ptext in st.prompts()[["prompt_id", "text"]].itertuples(index=False):
            texts[(pid, None)] = ptext
            for vid, vtext in st.variants(pid)[["variant_id", "text"]].itertuples(index=False):
                texts[(pid, vid)] = vtext
        for pid in {p for p, _ in texts}:
            for r in st.responses(pid).itertuples():
                local_resp[(r.prompt_id, _vid(r.variant_id))] = r  # the store's only run so far
        local_deltas = st.deltas(kept_only=False)
    assert len(local_resp) == 2 * (1 + 3)  # 2 prompts × (base + 3 variants)
    keys = sorted(local_resp, key=str)
    ids = [[int(t) for t in local_resp[k].token_ids] for k in keys]
    tf = tiny_backend.teacher_force([texts[k] for k in keys], ids)
    answers = {tuple(tiny_backend.encode_prompt(texts[k])): (i, list(lp)) for k, i, (lp, _) in zip(keys, ids, tf)}
    fake = FakeVLLM(answers, _generate_fallback(tiny_backend), tiny_backend.tokenizer, tiny_backend.eos_ids)
    try:
        extra = f'backend = "hybrid"\nbase_url = "{fake.url}"\nserver_model = "served-tiny"\nlogprob_tol = 0.01'
        # the same store: the plan (variants, semantic filter) is read back, not recomputed
        (tmp_path / "hybrid.toml").write_text(TOML.format(store=tmp_path / "local.duckdb", data=data, extra=extra))
        (summary,) = run(load_config(tmp_path / "hybrid.toml"), progress=False)
    finally:
        fake.close()
    n = len(local_resp)
    assert len(fake.requests) == n + 1  # + the start-up probe
    body = fake.requests[-1]
    assert body["model"] == "served-tiny" and body["temperature"] == 0 and body["return_tokens_as_token_ids"] is True
    assert body["repetition_penalty"] == 1.0 and body["logprobs"] == 1
    chk = summary["logprob_check"]
    assert (chk["replies"], chk["checked"], chk["beyond_tol"], chk["re_tokenized"]) == (n, n, 0, 0)
    assert chk["max_abs_diff"] < 1e-4 and chk["tol"] == 0.01
    with open_store(tmp_path / "local.duckdb") as st:
        runs = st.runs()
        assert len(runs) == 2
        rec = runs[runs["run_id"] != local_run].iloc[0]
        hyb_run = rec["run_id"]
        hyb_resp = {}
        for pid in {p for p, _ in texts}:
            for r in st.responses(pid).itertuples():
                if r.run_id == hyb_run:
                    hyb_resp[(r.prompt_id, _vid(r.variant_id))] = r
        hyb_deltas = st.deltas(kept_only=False, run_ids=[hyb_run])
        tmpl = st.templates("chat_template")
    # both runs carry the label tiny-random: a read shows each under its own (labels are not keys)
    assert hyb_run != local_run and rec["backend"] == "hybrid" and rec["model"] == f"tiny-random [{hyb_run[:8]}]"
    dec = json.loads(rec["decoding"]) if isinstance(rec["decoding"], str) else rec["decoding"]
    srv = dec["hybrid"]["server"]
    assert (srv["base_url"], srv["model"], srv["endpoint"], srv["prompt_format"]) == (
        fake.url, "served-tiny", "completions", "token_ids")
    assert dec["hybrid"]["server_check"]["within_tol"] is True
    assert dec["hybrid"]["server_check"]["token_ids_source"] == "server"
    assert dec["chat_template"]["sha256"] == tiny_backend.template_record()["sha256"]  # local rendering recorded
    assert len(tmpl) == 1  # the same chat template text as the hf_local run's (same id)
    assert rec["model_source"].startswith(f"hybrid: server {fake.url} model served-tiny; local random (LlamaConfig")
    assert sorted(json.loads(rec["capabilities"])) == ["cos", "ent", "prob"]
    # replies: identical ids, texts, finish reasons; log-probs from the local pass
    assert set(hyb_resp) == set(local_resp)
    for k, a in local_resp.items():
        b = hyb_resp[k]
        assert [int(t) for t in b.token_ids] == [int(t) for t in a.token_ids], k
        assert (b.response, b.n_tokens, b.finish_reason) == (a.response, a.n_tokens, a.finish_reason), k
        assert b.request == a.request == tiny_backend.format_prompt(texts[k]), k  # the rendered prompt, as local
        assert b.seq_logprob == pytest.approx(a.seq_logprob, abs=1e-4)
        assert b.mean_entropy == pytest.approx(a.mean_entropy, abs=1e-4)
    # deltas: all six axes available in both and equal
    cols = ["prompt_id", "variant_id", "axis"]
    m = local_deltas.merge(hyb_deltas, on=cols, suffixes=("_l", "_h"))
    assert len(m) == len(local_deltas) == len(hyb_deltas) == 2 * 3 * 6
    assert m["available_l"].all() and m["available_h"].all()
    for axis, g in m.groupby("axis"):
        err = float(np.max(np.abs(g["delta_l"] - g["delta_h"])))
        assert err <= (WHITE_BOX_TOL if axis in ("cos", "prob", "ent") else TEXT_TOL), (axis, err)
    assert (m["detector_l"].fillna("") == m["detector_h"].fillna("")).all()
    # the option axes (user-text positions from the teacher-forced pass, bert@rescaled) agree too
    with open_store(tmp_path / "local.duckdb") as st:
        lo = st.deltas(kept_only=False, run_ids=[local_run], axes=OPTION_AXES)
        ho = st.deltas(kept_only=False, run_ids=[hyb_run], axes=OPTION_AXES)
    mo = lo.merge(ho, on=cols, suffixes=("_l", "_h"))
    assert len(mo) == len(lo) == len(ho) == 2 * 3 * len(OPTION_AXES)
    assert mo["available_l"].all() and mo["available_h"].all()
    for axis, g in mo.groupby("axis"):
        err = float(np.max(np.abs(g["delta_l"] - g["delta_h"])))
        assert err <= (WHITE_BOX_TOL if axis.startswith("cos@") else TEXT_TOL), (axis, err)
    assert (mo.loc[mo["axis"] == "cos@user_mean", "delta_l"] < 0).any()  # not trivially 0


def test_mismatch_counted_and_warned(tiny_backend, caplog):
    """A server whose log-probs are 0.2 nats off (other weights): every reply is beyond the 0.05
    tolerance, counted, its difference recorded per reply (0.2 ± 1e-4), and warned about — the
    probe's verdict in info() too; the deltas' inputs still come from the local pass."""
    from sago_engine.backends import get_backend

    fake = FakeVLLM({}, _generate_fallback(tiny_backend), tiny_backend.tokenizer, tiny_backend.eos_ids, shift=0.2)
    try:
        with caplog.at_level(logging.WARNING, logger="sago.hybrid"):
            be = get_backend({"name": "hybrid", "model": "tiny-random", "base_url": fake.url, "device": "cpu"})
            prompts = ["What is the capital of Peru?", "Name a prime number.", "What is the capital of Peru?"]
            res = be.generate(prompts, 6)
        info = be.info()
        chk = be.logprob_check()
        be.close()
    finally:
        fake.close()
    assert info["decoding"]["hybrid"]["server_check"]["within_tol"] is False
    assert info["decoding"]["hybrid"]["logprob_tol"] == 0.05
    assert (chk["replies"], chk["checked"], chk["beyond_tol"]) == (3, 3, 3)  # the probe is not counted
    for r in res:
        assert r.meta["logprob_mismatch"] is True and r.meta["logprob_max_abs_diff"] == pytest.approx(0.2, abs=1e-4)
        assert r.hidden_last.shape == (3, 64) and r.token_entropies.shape == (r.n_tokens,)
    (ref_lp, ref_ent), = tiny_backend.teacher_force([prompts[0]], [res[0].token_ids])
    np.testing.assert_allclose(res[0].token_logprobs, ref_lp, atol=1e-5)  # local values, not the server's
    np.testing.assert_allclose(res[0].token_entropies, ref_ent, atol=1e-5)
    assert res[0].token_ids == res[2].token_ids
    assert any("3 of 3 replies" in m for m in caplog.messages)
    assert any("on the probe" in m for m in caplog.messages)


@pytest.mark.parametrize("token_ids, drop_eos, source", [(False, False, "re-tokenized"), (True, True, "server")])
def test_server_ids_retokenized_or_eos_appended(tiny_backend, token_ids, drop_eos, source):
    """A server that returns token strings (no ``token_id:N``): the reply text is re-tokenized
    locally; a server that stops without returning the EOS token: EOS appended (as hf_local counts
    it). Either way the ids, text and finish reason are what the server meant, the source is
    recorded, and the server's log-probs are still checked (over the tokens it sent)."""
    from sago_engine.backends.hybrid.backend import HybridBackend

    tok = tiny_backend.tokenizer
    answer = tok("Lima is the capital.", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]

    def fb(prompt_ids, max_tokens):
        lp, _ = tiny_backend.teacher_batch([(prompt_ids, answer)])[0]
        return answer, list(lp)

    fake = FakeVLLM({}, fb, tok, tiny_backend.eos_ids, token_ids=token_ids, drop_eos=drop_eos)
    try:
        be = HybridBackend("tiny-random", base_url=fake.url, device="cpu", check_server=False,
                           server_extra_body=None if token_ids else {})
        (r,) = be.generate(["Capital of Peru?"], 16)
        chk = be.logprob_check()
        be.close()
    finally:
        fake.close()
    assert ("return_tokens_as_token_ids" in fake.requests[0]) is token_ids  # extra_body {} sends no vLLM field
    assert r.token_ids == answer and r.text == "Lima is the capital." and r.finish_reason == "stop"
    assert (r.meta["token_ids_source"], r.meta["eos_appended"]) == (source, True)  # text never holds the EOS
    assert r.meta["server_n_tokens"] == len(answer) - drop_eos and r.meta["logprob_max_abs_diff"] < 1e-4
    assert (chk["replies"], chk["checked"], chk["re_tokenized"], chk["beyond_tol"]) == (1, 1, int(not token_ids), 0)


def test_control_token_text_reaches_the_server_as_text(tiny_backend):
    """The T1 prompt (``<|im_end|>`` and ``<|im_start|>`` typed in it) is sent as hf_local's escaped
    ids, so the server continues the same conversation the local copy scores; with
    ``prompt_format="text"`` (the server would tokenize the string and read the control tokens) it is
    an error row and never sent."""
    from sago_engine.backends.hybrid.backend import HybridBackend
    from tests.integration.backends.test_prompt_render import T1_PROMPT

    fake = FakeVLLM({}, _generate_fallback(tiny_backend), tiny_backend.tokenizer, tiny_backend.eos_ids)
    try:
        be = HybridBackend("tiny-random", base_url=fake.url, device="cpu", check_server=False)
        (r,) = be.generate([T1_PROMPT], 6)
        be.close()
        as_text = HybridBackend("tiny-random", base_url=fake.url, device="cpu", check_server=False,
                                prompt_format="text")
        (e,) = as_text.generate([T1_PROMPT], 6)
        as_text.close()
    finally:
        fake.close()
    assert len(fake.requests) == 1 and fake.requests[0]["prompt"] == tiny_backend.encode_prompt(T1_PROMPT)
    assert fake.requests[0]["prompt"].count(1) == 3  # system, user, assistant turns: none forged
    assert r.error is None and r.meta["logprob_max_abs_diff"] < 1e-4
    assert e.error is not None and "control token" in e.error and e.n_tokens == 0


def test_parse_token_ids():
    from sago_engine.backends.hybrid.server import parse_token_ids

    assert parse_token_ids(["token_id:2", "token_id:13"]) == [2, 13]
    assert parse_token_ids([]) == []
    assert parse_token_ids(["token_id:2", "Paris"]) is None
    assert parse_token_ids(None) is None


@pytest.mark.parametrize("extra, message", [
    ('backend = "hybrid"', r"needs base_url"),
    ('backend = "hybrid"\nbase_url = "http://127.0.0.1:9/v1"\ntop_logprobs = 5', r"top_logprobs do not apply to the hybrid"),
    ('backend = "hybrid"\nbase_url = "http://127.0.0.1:9/v1"\nlogprob_tol = 0', r"logprob_tol must be a number > 0"),
    ('backend = "hybrid"\nbase_url = "http://10.0.0.9:8000/v1"\ndtype = "int3"', r"unknown dtype 'int3'"),
    ('server_model = "x"', r"server_model only apply to the hybrid backend"),
    ('backend = "hybrid"\nbase_url = "https://vllm.example.org/v1"', r"api_key_env = \"NAME\" is needed"),
])
def test_hybrid_config_errors(tmp_path, extra, message):
    from precompute.config import ConfigError, load_config

    p = tmp_path / "c.toml"
    p.write_text(TOML.format(store=tmp_path / "s.duckdb", data=ROOT / "data" / "datasets", extra=extra))
    with pytest.raises(ConfigError, match=message):
        load_config(p)


def test_hybrid_config_spec(tmp_path):
    """A hybrid [[models]] table becomes one get_backend spec with the local and the server settings."""
    from precompute.config import load_config
    from precompute.runner import backend_spec

    extra = ('backend = "hybrid"\nbase_url = "http://127.0.0.1:8000/v1"\nserver_model = "Qwen/Qwen2.5-7B-Instruct"\n'
             'dtype = "bfloat16"\ndevice = "cpu"\nmax_concurrency = 64\nlogprob_tol = 0.1\nserver_extra_body = {}')
    p = tmp_path / "c.toml"
    p.write_text(TOML.format(store=tmp_path / "s.duckdb", data=ROOT / "data" / "datasets", extra=extra))
    cfg = load_config(p)
    (m,) = cfg.models
    assert not m.is_api and m.repeats == 1
    assert backend_spec(cfg, m) == {
        "backend": "hybrid", "model": "tiny-random", "seed": 5, "dtype": "bfloat16", "device": "cpu", "batch_size": 8,
        "base_url": "http://127.0.0.1:8000/v1", "max_concurrency": 64, "timeout_s": 60.0, "max_retries": 5,
        "server_model": "Qwen/Qwen2.5-7B-Instruct", "logprob_tol": 0.1, "server_extra_body": {}}


def test_hybrid_run_id_ignores_the_server_address(tmp_path):
    """Shards of one hybrid study may use different servers: base_url is not in the run id, the
    served model and the request fields are (and plain hf_local run ids are unchanged)."""
    from types import SimpleNamespace

    from precompute.config import load_config
    from precompute.runner import run_id_for

    def rid(extra):
        p = tmp_path / "c.toml"
        p.write_text(TOML.format(store=tmp_path / "s.duckdb", data=ROOT / "data" / "datasets", extra=extra))
        cfg = load_config(p)
        return run_id_for(cfg, cfg.models[0], SimpleNamespace(signature="plan"))

    hyb = 'backend = "hybrid"\nbase_url = "http://{}:8000/v1"\n'
    a, b = rid(hyb.format("10.0.0.1")), rid(hyb.format("10.0.0.2"))
    assert a == b
    assert rid(hyb.format("10.0.0.1") + 'server_model = "other"') != a
    assert rid(hyb.format("10.0.0.1") + "server_extra_body = {}") != a
    assert rid("") != a  # hf_local is another run


def test_unreachable_server_stops_before_any_work():
    """No server at base_url: the start-up probe raises ApiFatalError naming the server (the
    runner's CLI exits 2 before a row is written)."""
    import socket

    from sago_engine.backends.api.errors import ApiFatalError
    from sago_engine.backends.hybrid.backend import HybridBackend

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ApiFatalError, match=rf"server at http://127.0.0.1:{port}/v1 .* did not answer the start-up probe"):
        HybridBackend("tiny-random", base_url=f"http://127.0.0.1:{port}/v1", device="cpu", max_retries=0, timeout_s=5)
