"""API backends against a loopback fake of each provider's wire format (official SDKs, no internet)."""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import logging
import math
from pathlib import Path

import numpy as np
import pytest

from sago_engine.backends import get_backend
from sago_engine.backends.api.errors import ApiFatalError, classify_error
from sago_engine.backends.api.keys import is_local_url, missing_key_vars, redact
from sago_engine.backends.api.logprobs import topk_entropy
from sago_engine.backends.api.reply import normalise_finish_reason
from sago_engine.backends.api.retry import parse_retry_after
from tests.support.fake_api import TOKEN_ENTROPY, FakeAPI, reply_text

ROOT = Path(__file__).resolve().parents[3]
SECRET = "sk-test-SECRET123"
KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


@pytest.fixture
def env(monkeypatch, tmp_path):
    """Fake keys for every provider and a private ``SAGO_CACHE_DIR`` (its ``models/`` links to the
    real model cache, so the tiny model's tokenizer is not rebuilt)."""
    from sago_engine.models import cache_root

    for v in KEY_VARS:
        monkeypatch.delenv(v, raising=False)
    for v in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(v, SECRET)
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "models").symlink_to(cache_root(), target_is_directory=True)
    monkeypatch.setenv("SAGO_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


@pytest.fixture
def fake():
    with FakeAPI(default="logprobs") as f:
        yield f


PROVIDERS = ("openai", "anthropic", "gemini")


def make(provider: str, fake: FakeAPI, **kw):
    """A backend of ``provider`` pointed at the fake, recording its sleeps instead of sleeping."""
    base = {"openai": fake.url + "/v1", "anthropic": fake.url, "gemini": fake.url,
            "openai_compatible": fake.url + "/v1"}[provider]
    kw.setdefault("backoff_base_s", 0.01)
    kw.setdefault("timeout_s", 5.0)
    if provider == "gemini":
        kw.setdefault("top_logprobs", 3)
    return get_backend({"name": provider, "model": f"{provider}-model", "base_url": base, "sleep": lambda s: None, **kw})


# ---------------------------------------------------------------------- pure helpers


def test_topk_entropy_known_distributions():
    # top-3 = 0.5, 0.25, 0.125; leftover 0.125 as one bucket (hand-checked: 1.2130 nats)
    h = topk_entropy([[math.log(0.5), math.log(0.25), math.log(0.125)]])
    assert h.shape == (1,) and h[0] == pytest.approx(TOKEN_ENTROPY, abs=1e-12)
    assert TOKEN_ENTROPY == pytest.approx(1.2130076, abs=1e-6)
    # top-k covering all the mass: exact (uniform over 4 → log 4); certain token → 0
    assert topk_entropy([[math.log(0.25)] * 4])[0] == pytest.approx(math.log(4), abs=1e-12)
    assert topk_entropy([[0.0, -9999.0]])[0] == pytest.approx(0.0, abs=1e-12)
    # a lower bound of the true entropy of a 1000-token distribution, tightening with k
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.full(1000, 0.05))
    true = float(-(p[p > 0] * np.log(p[p > 0])).sum())
    lp = np.sort(np.log(np.maximum(p, 1e-300)))[::-1]
    approx = [topk_entropy([lp[:k]])[0] for k in (1, 5, 20, 1000)]
    assert all(a <= true + 1e-9 for a in approx)
    assert approx == sorted(approx) and approx[-1] == pytest.approx(true, abs=1e-6)
    with pytest.raises(ValueError):
        topk_entropy([[]])


def test_parse_retry_after_seconds_ms_and_http_date():
    assert parse_retry_after({"retry-after": "7"}) == 7.0
    assert parse_retry_after({"Retry-After": "0.5"}) == 0.5
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    now = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
    date = email.utils.format_datetime(now + dt.timedelta(seconds=30), usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=now) == pytest.approx(30.0)
    assert parse_retry_after({"retry-after": email.utils.format_datetime(now, usegmt=True)},
                             now=now + dt.timedelta(seconds=5)) is None  # a past date is no hint (never "now")
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None and parse_retry_after(None) is None


def test_classify_error_statuses_and_transport():
    class Resp:
        headers = {"retry-after": "3"}

    class StatusErr(Exception):
        def __init__(self, code):
            super().__init__(f"HTTP {code}")
            self.status_code, self.response = code, Resp()

    class GoogleErr(Exception):  # google-genai puts the status in `code`
        def __init__(self, code):
            super().__init__("x")
            self.code, self.response = code, Resp()

    class APITimeoutError(Exception):
        pass

    assert classify_error(StatusErr(429)).retryable and classify_error(StatusErr(429)).retry_after == 3.0
    for code in (408, 409, 500, 503):
        assert classify_error(StatusErr(code)).retryable
    for code in (400, 413, 422):
        c = classify_error(StatusErr(code))
        assert not c.retryable and not c.fatal and c.retry_after is None
    for code in (401, 403, 404):
        assert classify_error(StatusErr(code)).fatal
    assert classify_error(GoogleErr(429)).retryable and not classify_error(GoogleErr(400)).retryable
    assert classify_error(APITimeoutError()).retryable and classify_error(ConnectionResetError()).retryable
    import json

    assert not classify_error(json.JSONDecodeError("x", "{", 0)).retryable
    assert not classify_error(ValueError("bad shape")).retryable


def test_redact_scrubs_known_and_key_like_values():
    text = f"Incorrect API key provided: {SECRET}; url https://x/v1?key=AIzaSyA1234567890abcdefghijkl&x=1 token=abcdef123"
    out = redact(text, [SECRET])
    assert "SECRET123" not in out and "AIzaSy" not in out and "abcdef123" not in out
    assert out.count("[REDACTED]") >= 3
    assert redact("sk-proj-abcdefghijkl leaked") == "[REDACTED] leaked"  # unknown value, key-like shape
    assert redact("nothing secret here: max_tokens: 100") == "nothing secret here: max_tokens: 100"


def test_key_rules(monkeypatch):
    for v in KEY_VARS:
        monkeypatch.delenv(v, raising=False)
    assert missing_key_vars("openai") == ["OPENAI_API_KEY"]
    assert missing_key_vars("gemini") == ["GEMINI_API_KEY (or GOOGLE_API_KEY)"]
    monkeypatch.setenv("GOOGLE_API_KEY", "g")
    assert missing_key_vars("gemini") == []
    assert missing_key_vars("openai_compatible", base_url="http://127.0.0.1:8000/v1") == []
    assert missing_key_vars("openai_compatible", base_url="http://localhost:8000/v1") == []
    [remote] = missing_key_vars("openai_compatible", base_url="https://api.example.com/v1")
    assert remote.startswith("api_key_env") and "never sent" in remote
    assert missing_key_vars("openai_compatible", "MY_KEY", "http://localhost:1/v1") == ["MY_KEY"]
    assert missing_key_vars("hf_local") == []
    assert is_local_url("http://10.0.0.5:8000") and not is_local_url("https://api.openai.com/v1")


def test_finish_reasons_normalised():
    for raw, want in (("stop", "stop"), ("end_turn", "stop"), ("STOP", "stop"), ("length", "length"),
                      ("max_tokens", "length"), ("MAX_TOKENS", "length"), ("content_filter", "error"),
                      ("SAFETY", "error"), (None, "error")):
        assert normalise_finish_reason(raw) == want


# ---------------------------------------------------------------------- each provider, real SDK


@pytest.mark.parametrize("provider", PROVIDERS)
def test_answers_logprobs_and_usage(provider, env, fake):
    be = make(provider, fake, price_in_per_mtok=1.0, price_out_per_mtok=2.0)
    prompts = ["What is the capital of France?", "Name a prime number.", "Who wrote Hamlet?"]
    res = be.generate(prompts, 16)
    assert [r.text for r in res] == [reply_text(p) for p in prompts]  # input order
    for r in res:
        assert r.error is None and r.finish_reason == "stop" and r.hidden_last is None
        assert r.meta["model"] == f"{provider}-model-2026-01-01" if provider != "gemini" else r.meta["model"].startswith("gemini-fake")
        n = len(r.text.split())
        assert r.n_tokens == n
        if provider == "anthropic":
            assert r.token_logprobs is None and r.token_entropies is None
        else:
            assert r.seq_logprob == pytest.approx(n * math.log(0.5))
            np.testing.assert_allclose(r.token_entropies, TOKEN_ENTROPY)
    assert "cos" not in be.capabilities
    assert be.capabilities == (frozenset() if provider == "anthropic" else frozenset({"prob", "ent"}))
    u = be.take_usage()
    assert (u["requests"], u["cache_hits"], u["retries"], u["errors"]) == (3, 0, 0, 0)
    assert u["completion_tokens"] == sum(r.n_tokens for r in res) and u["prompt_tokens"] > 0
    assert u["cost_usd"] == pytest.approx((u["prompt_tokens"] * 1.0 + u["completion_tokens"] * 2.0) / 1e6)
    assert len(u["models"]) == 1
    assert be.take_usage()["requests"] == 0  # take_usage resets
    # what reached the server: temperature 0 / seed where the API takes them, the SDK's own path
    body = fake.requests[-1]["body"]
    if provider == "openai":
        assert body["temperature"] == 0 and body["seed"] == 0 and body["logprobs"] is True
        assert body["top_logprobs"] == 20 and body["max_completion_tokens"] == 16
    elif provider == "gemini":
        gc = body["generationConfig"]
        assert fake.requests[-1]["path"] == "/v1beta/models/gemini-model:generateContent"
        assert gc["temperature"] == 0 and gc["responseLogprobs"] is True and gc["logprobs"] == 3
    else:
        assert "temperature" not in body and body["max_tokens"] == 16  # API 2026-10-21 rejects it
        assert be.info()["decoding"]["greedy"] is False
    be.close()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_retries_honour_retry_after_and_errors_stay_per_item(provider, env, fake):
    be = make(provider, fake, max_retries=2)
    fake.script("p-429", [("429", 3), "500", "logprobs"])
    fake.script("p-malformed", ["malformed"])
    fake.script("p-500", ["500", "500", "500"])
    fake.script("p-400", ["400"])
    fake.script("p-empty", ["empty"])
    prompts = ["p-ok", "p-429", "p-malformed", "p-500", "p-400", "p-empty", "p-ok2"]
    res = dict(zip(prompts, be.generate(prompts, 16)))
    assert res["p-ok"].error is None and res["p-ok2"].text == reply_text("p-ok2")
    assert res["p-429"].error is None and res["p-429"].meta["attempts"] == 3
    assert res["p-429"].text == reply_text("p-429")
    assert 3.0 in be.sleeps  # Retry-After: 3 honoured (recorded, not slept)
    assert all(s <= 0.01 * 2 for s in be.sleeps if s != 3.0)  # the others: full jitter under the tiny cap
    assert "JSONDecodeError" in res["p-malformed"].error and res["p-malformed"].meta["attempts"] == 1
    assert res["p-500"].error.startswith("retries exhausted after 3 attempts")
    assert res["p-400"].error and res["p-400"].meta["attempts"] == 1  # 400 is permanent: no retry
    for p in ("p-malformed", "p-500", "p-400"):
        assert res[p].text == "" and res[p].finish_reason == "error" and res[p].token_logprobs is None
    assert res["p-empty"].text == "" and res["p-empty"].error is None and res["p-empty"].finish_reason == "stop"
    assert res["p-empty"].token_logprobs is None  # nothing produced: no sequence log-prob to claim
    n = {p: sum(r["prompt"] == p for r in fake.requests) for p in prompts}
    assert n == {"p-ok": 1, "p-429": 3, "p-malformed": 1, "p-500": 3, "p-400": 1, "p-empty": 1, "p-ok2": 1}
    u = be.take_usage()
    assert (u["requests"], u["retries"], u["errors"]) == (11, 4, 3)
    be.close()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_timeout_is_retried(provider, env, fake):
    be = make(provider, fake, timeout_s=0.3, max_retries=1)
    fake.script("slow", [("timeout", 1.0), "logprobs"])
    [r] = be.generate(["slow"], 8)
    assert r.error is None and r.meta["attempts"] == 2 and len(be.sleeps) == 1
    fake.script("slower", [("timeout", 1.0), ("timeout", 1.0)])
    [r] = be.generate(["slower"], 8)
    assert r.error.startswith("retries exhausted after 2 attempts") and "Timeout" in r.error
    be.close()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cache_rerun_costs_zero_requests(provider, env, fake):
    prompts = ["alpha?", "beta?", "gamma?"]
    fake.script("beta?", ["400"])  # a failure is not cached: it is asked again next time
    be = make(provider, fake)
    first = be.generate(prompts, 16)
    be.close()
    before = fake.count
    be2 = make(provider, fake)
    again = be2.generate(prompts, 16)
    assert fake.count == before + 1  # only the failed prompt went out again
    for a, b in zip(first, again):
        if a.error is None:
            assert b.text == a.text and b.meta["cached"] and b.latency_s == pytest.approx(a.latency_s)
            if a.token_logprobs is not None:
                np.testing.assert_array_equal(a.token_logprobs, b.token_logprobs)
    u = be2.take_usage()
    assert u["cache_hits"] == 2 and u["requests"] == 1 and len(u["models"]) == 1
    be2.close()
    # a different generation parameter is a different key
    be3 = make(provider, fake)
    be3.generate(["alpha?"], 17)
    assert fake.count == before + 2
    be3.close()


def test_concurrency_bounded_and_in_order(env, fake):
    be = make("openai", fake, max_concurrency=3)
    prompts = [f"q{i}" for i in range(9)]
    for p in prompts[::2]:
        fake.script(p, [("timeout", 0.15)])  # slow ones finish last; order must not change
    res = be.generate(prompts, 8)
    assert [r.text for r in res] == [reply_text(p) for p in prompts]
    assert 2 <= fake.max_inflight <= 3
    be.close()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_key_never_leaks(provider, env, fake, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    be = make(provider, fake, max_retries=1)
    fake.script("leak", ["400"])  # the server echoes the key it received
    fake.script("retry", ["500", "logprobs"])
    res = be.generate(["leak", "retry"], 8)
    assert res[0].error and "[REDACTED]" in res[0].error
    fake.script("auth", ["401"])
    with pytest.raises(ApiFatalError) as ei:
        be.generate(["auth"], 8)
    n = fake.count
    with pytest.raises(ApiFatalError):  # after a fatal answer nothing more is sent
        be.generate(["other"], 8)
    assert fake.count == n
    seen = [r.error or "" for r in res] + [str(ei.value), repr(ei.value), repr(be), str(be.info()), str(be.totals()),
                                           caplog.text, *capsys.readouterr()]
    assert fake.requests[0]["headers"]  # the key was really sent…
    assert all(SECRET not in s and "SECRET123" not in s for s in seen)  # …and is nowhere else
    assert be.info()["api_key_env"] == {"gemini": "GEMINI_API_KEY"}.get(provider, f"{provider.upper()}_API_KEY")
    be.close()


def test_openai_compatible_local_without_key(env, monkeypatch, fake):
    be = make("openai_compatible", fake)  # OPENAI_API_KEY is set (env fixture) but never sent here
    [r] = be.generate(["hi there"], 8)
    assert r.error is None and fake.requests[-1]["body"]["max_tokens"] == 8
    assert SECRET not in json.dumps(fake.requests[-1]["headers"])
    assert be.info()["api_key_env"] is None
    be.close()
    with pytest.raises(ValueError, match="base_url is required"):
        get_backend({"name": "openai_compatible", "model": "m"})
    with pytest.raises(ValueError, match="no API key: set api_key_env"):
        get_backend({"name": "openai_compatible", "model": "m", "base_url": "https://api.example.com/v1"})
    with pytest.raises(ValueError, match="top_logprobs must be in 0..20"):
        make("openai", fake, top_logprobs=21)


def test_top_logprobs_zero_gives_prob_only_and_gemini_default_none(env, fake):
    be = make("openai", fake, top_logprobs=0)
    assert be.capabilities == frozenset({"prob"})
    [r] = be.generate(["a b"], 8)
    assert r.token_logprobs is not None and r.token_entropies is None
    assert "top_logprobs" not in fake.requests[-1]["body"]
    be.close()
    g = get_backend({"name": "gemini", "model": "g", "base_url": fake.url, "sleep": lambda s: None})
    assert g.capabilities == frozenset()
    [r] = g.generate(["a b"], 8)
    assert r.token_logprobs is None and "responseLogprobs" not in fake.requests[-1]["body"]["generationConfig"]
    g.close()


def test_anthropic_legacy_version_sends_temperature(env, fake):
    be = make("anthropic", fake, api_version="2023-06-01")
    be.generate(["x y"], 8)
    req = fake.requests[-1]
    assert req["headers"]["anthropic-version"] == "2023-06-01" and req["body"]["temperature"] == 0
    assert be.info()["decoding"]["greedy"] is True
    be.close()


# ---------------------------------------------------------------------- config, runner, store, report

E2E_TOML = """
[run]
store = "{store}"
seed = 5
max_new_tokens = 6
chunk_prompts = 2

[data]
dir = "{data}"
datasets = ["truthfulqa"]
n_prompts = 2

[variants]
# surface noise only: meaning kept by construction, so no semantic-filter pass (keeps this test fast)
families = ["surface_noise"]
per_family = {{ surface_noise = 2 }}

[[models]]
key = "tiny-random"
batch_size = 8

[[models]]
key = "served-model"
backend = "openai_compatible"
base_url = "{plain}/v1"

[[models]]
key = "gpt-test"
backend = "openai"
base_url = "{lp}/v1"
price_in_per_mtok = 1.5
price_out_per_mtok = 6.0

[[models]]
key = "claude-test"
backend = "anthropic"
base_url = "{lp}"
"""


def test_end_to_end_local_and_api_models_in_one_store(env, monkeypatch, capsys):
    """python -m precompute with tiny-random + openai_compatible (no log-probs) + openai (log-probs)
    + anthropic, all into one store; then availability, usage, report cells, no key in the file.

    (That a rerun costs zero requests is checked per provider in test_cache_rerun_costs_zero_requests;
    a second full run here would double this test's BERTScore time.)"""
    from precompute.__main__ import main as cli_main
    from sago_engine.store import open_store
    from sago_engine.views import report

    monkeypatch.delenv("OPENAI_API_KEY")  # the local openai_compatible server needs none…
    monkeypatch.setenv("MY_OPENAI_KEY", SECRET)  # …the openai model reads its key from another variable
    with FakeAPI(default="normal") as plain, FakeAPI(default="logprobs") as lp:
        store = env / "e2e.duckdb"
        cfg = env / "e2e.toml"
        cfg.write_text(E2E_TOML.format(store=store, data=ROOT / "data" / "datasets", plain=plain.url, lp=lp.url)
                       .replace('key = "gpt-test"\nbackend = "openai"', 'key = "gpt-test"\nbackend = "openai"\n'
                                'api_key_env = "MY_OPENAI_KEY"'))
        assert cli_main(["--config", str(cfg), "--no-progress"]) == 0
        n_calls = (plain.count, lp.count)
        with open_store(store) as st:
            runs = st.runs().set_index("model")
            assert set(runs.index) == {"tiny-random", "served-model", "gpt-test", "claude-test"}
            assert runs.loc["gpt-test", "backend"] == "openai" and runs.loc["gpt-test", "device"] == "api"
            n_resp = st.con.execute("SELECT count(*) FROM responses WHERE run_id = ?",
                                    [runs.loc["gpt-test", "run_id"]]).fetchone()[0]
            n_req = n_resp + 2  # + one base repeat per prompt (noise floor, default k = 2 for API models)
            assert n_calls == (n_req, 2 * n_req)
            assert len(st.base_repeats(runs.loc["gpt-test", "run_id"])) == 2
            d = st.deltas(kept_only=False)
            d = d if "model" in d else d.merge(st.runs()[["run_id", "model"]], on="run_id")
            avail = d.groupby(["model", "axis"])["available"].all().unstack()
            reasons = d[~d["available"]].groupby(["model", "axis"])["reason"].first()
            assert avail.loc["tiny-random"].all()
            assert not avail.loc["gpt-test", "cos"] and avail.loc["gpt-test", ["bleu", "bert", "prob", "ent", "mr"]].all()
            assert not avail.loc["claude-test", ["cos", "prob", "ent"]].any()
            assert avail.loc["claude-test", ["bleu", "bert", "mr"]].all()
            assert reasons[("claude-test", "cos")] == "backend exposes no activations"
            assert reasons[("claude-test", "prob")] == "backend exposes no sequence log-prob"
            assert reasons[("claude-test", "ent")] == "backend exposes no token distribution"
            assert reasons[("served-model", "prob")] == "no log-probs returned"  # asked, but the server gave none
            usage = st.run_usage().set_index("model")
            assert set(usage.index) == {"served-model", "gpt-test", "claude-test"}
            g = usage.loc["gpt-test"]
            assert (g["requests"], g["cache_hits"], g["errors"]) == (n_req, 0, 0)
            assert g["cost_usd"] == pytest.approx((g["prompt_tokens"] * 1.5 + g["completion_tokens"] * 6.0) / 1e6)
            assert np.isnan(usage.loc["claude-test", "cost_usd"])  # no prices → unknown, never a guess
            assert "gpt-test-2026-01-01" in usage.loc["gpt-test", "models_returned"]
            api = st.api_responses(runs.loc["claude-test", "run_id"])
            assert len(api) == n_req and set(api["model_returned"]) == {"claude-test-2026-01-01"}
            wide = report.wide_cells(report.score_tables(st.prompt_scores())["total"], ["model"]).set_index("model")
        assert (wide.loc["served-model", ["Δ-Cos", "Δ-Prob", "Δ-Ent"]] == "n/a").all()
        assert (wide.loc["gpt-test", "Δ-Cos"] == "n/a") and (wide.loc["gpt-test", ["Δ-Prob", "Δ-Ent"]] != "n/a").all()
        assert (wide.loc["claude-test", ["Δ-Cos", "Δ-Prob", "Δ-Ent"]] == "n/a").all()
        assert (wide.loc[:, ["Δ-BLEU", "Δ-BERT", "Δ-MR"]] != "n/a").all().all()
        assert (wide.loc["tiny-random"] != "n/a").all()
        assert b"SECRET123" not in store.read_bytes()
        assert "SECRET123" not in "".join(capsys.readouterr())
    # the dashboard (Profiles, headless) shows all four models and n/a where an axis is missing
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.session_state["app_store_custom"] = str(store)
    at.run()
    assert not at.exception, at.exception
    avail = next(df.value for df in at.dataframe if "Δ-Cos" in df.value.columns and
                 df.value.astype(str).apply(lambda c: c.str.contains("available")).any().any()).set_index("model")
    assert set(avail.index) == {"tiny-random", "served-model", "gpt-test", "claude-test"}
    assert (avail.loc["tiny-random"] == "available").all()
    assert all(avail.loc["claude-test", a].startswith("n/a") for a in ("Δ-Cos", "Δ-Prob", "Δ-Ent"))
    assert avail.loc["gpt-test", "Δ-Cos"].startswith("n/a") and avail.loc["gpt-test", "Δ-Prob"] == "available"
    assert "SECRET123" not in json.dumps([str(e) for e in at.main]) + json.dumps([str(e) for e in at.sidebar])


def test_paper_toml_validates_with_keys_and_fails_before_work_without(monkeypatch, tmp_path, capsys):
    from precompute.__main__ import main as cli_main
    from precompute.config import ConfigError, load_config

    for v in KEY_VARS:
        monkeypatch.delenv(v, raising=False)
    paper = ROOT / "precompute" / "configs" / "paper.toml"
    with pytest.raises(ConfigError) as ei:
        load_config(paper)
    msg = str(ei.value)
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY (or GOOGLE_API_KEY)"):
        assert var in msg
    store = tmp_path / "paper.duckdb"
    monkeypatch.chdir(ROOT)
    assert cli_main(["--config", str(paper), "--store", str(store), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "missing API keys" in err and "OPENAI_API_KEY" in err and "GEMINI_API_KEY" in err
    assert not store.exists() and not list(tmp_path.iterdir())  # nothing was done
    # --model limits the check to the models that will run
    assert cli_main(["--config", str(paper), "--store", str(store), "--model", "gpt-5.4", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "OPENAI_API_KEY" in err and "ANTHROPIC_API_KEY" not in err
    for v in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.setenv(v, "fake-value")
    cfg = load_config(paper)
    assert len(cfg.models) == 11 and cfg.n_prompts == 16 and len(cfg.datasets) == 6 and cfg.per_family is None
    assert set(cfg.families) == {"social_register", "surface_noise", "structural"}
    backends = [m.backend for m in cfg.models]
    assert backends.count("hf_local") == 8 and {"openai", "anthropic", "gemini"} <= set(backends)
    assert "fake-value" not in paper.read_text()
    # what the three API models need
    api = {m.key: m for m in cfg.models if m.is_api}
    assert api["gpt-5.4"].omit_params == ("temperature",) and api["gpt-5.4"].reasoning_effort == "none"
    assert api["gemini-2.5-flash"].thinking_budget == 0
    assert api["claude-sonnet-4-6"].thinking_budget is None and all(m.repeats == 2 for m in api.values())


def test_hub_id_without_weights_fails_clearly(monkeypatch):
    from sago_engine.models import ModelUnavailableError, resolve_model

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", "/nonexistent-sago-test")
    with pytest.raises(ModelUnavailableError, match=r"Hugging Face Hub id.*not in the local Hugging Face cache.*HF_HUB_OFFLINE=0"):
        resolve_model("Qwen/Qwen2.5-7B-Instruct")


@pytest.mark.parametrize("model, match", [
    ('key = "m"\nbackend = "opneai"', r"unknown backend 'opneai'.*Did you mean 'openai'.*anthropic.*gemini.*hf_local"),
    ('key = "m"\nbackend = "openai_compatible"', r"needs base_url"),
    ('key = "m"\nbackend = "anthropic"\ntop_logprobs = 5', r"returns no log-probs"),
    ('key = "m"\nbackend = "openai"\ntop_logprobs = 50', r"top_logprobs must be an integer in 0..20"),
    ('key = "m"\nbackend = "openai"\ndtype = "bfloat16"', r"dtype only apply to hf_local"),
    ('key = "tiny-random"\nbase_url = "http://x"', r"base_url only apply to API backends"),
    ('key = "m"\nbackend = "openai"\nprice_in_per_mtok = 1.0', r"give both price_in_per_mtok and price_out_per_mtok"),
    ('key = "m"\nbackend = "openai"\napi_key_env = "sk-abc123"', r"NAME of an environment variable"),
    ('key = "m"\nbackend = "openai"\nbase_url = "localhost:8000"', r"http\(s\) URL"),
    ('key = "m"\nbackend = "openai"\nmax_concurrency = 0', r"max_concurrency must be an integer ≥ 1"),
    ('key = "m"\nbackend = "openai"\napi_version = "v1"', r"api_version applies to anthropic and gemini"),
    ('key = "gpt-4o"', r"unknown model 'gpt-4o'.*backend = \"openai\""),
])
def test_model_config_errors(model, match, env, tmp_path):
    from precompute.config import ConfigError, load_config

    text = (f'[run]\nstore = "s.duckdb"\n[data]\ndir = "{ROOT / "data" / "datasets"}"\ndatasets = ["truthfulqa"]\n'
            f"[[models]]\n{model}\n")
    (tmp_path / "c.toml").write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_config(tmp_path / "c.toml", base_dir=tmp_path)


def test_run_id_unchanged_for_hf_local_and_api_settings_join_it(env, tmp_path):
    from dataclasses import replace

    from precompute.config import load_config
    from precompute.runner import Plan, run_id_for
    from sago_engine.seeds import stable_hash
    from tests.support.factories import tiny_toml

    (tmp_path / "t.toml").write_text(tiny_toml().format(store=tmp_path / "s.duckdb", data=ROOT / "data" / "datasets"))
    cfg = load_config(tmp_path / "t.toml")
    plan = Plan([], {}, None, {})
    m = cfg.models[0]
    old = stable_hash(m.key, m.backend, m.dtype, {"greedy": True, "max_new_tokens": cfg.max_new_tokens},
                      cfg.seed, cfg.normalizers, cfg.filter, plan.signature, length=16)
    assert run_id_for(cfg, m, plan) == old  # the formula before API backends existed
    api = replace(m, key="gpt-x", backend="openai")
    base = run_id_for(cfg, api, plan)
    assert run_id_for(cfg, replace(api, max_concurrency=16, timeout_s=5.0), plan) == base  # no answer change
    assert run_id_for(cfg, replace(api, top_logprobs=5), plan) != base
    assert run_id_for(cfg, replace(api, base_url="http://localhost:1/v1"), plan) != base


def test_transient_failures_leave_units_pending_and_a_rerun_retries_them(env):
    """A server that is down (500s until retries run out) must not mark prompts finished: the run
    ends "incomplete", stores no rows for them, and the same command later completes them."""
    from precompute.config import load_config
    from precompute.runner import run
    from sago_engine.store import open_store

    toml = E2E_TOML.split("[[models]]")[0] + ('[[models]]\nkey = "served-model"\nbackend = "openai_compatible"\n'
                                              'base_url = "{plain}/v1"\nmax_retries = 1\n')
    with FakeAPI(default="500") as srv:
        cfg_path = env / "t.toml"
        cfg_path.write_text(toml.format(store=env / "t.duckdb", data=ROOT / "data" / "datasets", plain=srv.url))
        cfg = load_config(cfg_path)
        [s] = run(cfg, progress=False)
        assert s["retry_pending"] == 2 and srv.count > 0
        with open_store(cfg.store) as st:
            assert st.counts()["units"] == 0 and st.counts()["responses"] == 0
            assert st.meta()["status"] == "incomplete"
            assert st.runs()["status"].iloc[0].startswith("incomplete")
        from precompute.__main__ import main as cli_main

        assert cli_main(["--config", str(cfg_path), "--no-progress"]) == 3  # still down: exit 3 = incomplete
        srv.default = "normal"  # the server recovers
        [s2] = run(cfg, progress=False)
        assert s2["pending"] == 2 and s2["retry_pending"] == 0
        with open_store(cfg.store) as st:
            assert st.counts()["units"] == 2 and st.meta()["status"] == "complete"
            assert st.con.execute("SELECT count(*) FROM responses WHERE error IS NOT NULL").fetchone()[0] == 0
        n = srv.count
        [s3] = run(cfg, progress=False)  # finished: nothing to do, no request
        assert s3["pending"] == 0 and srv.count == n


def test_plan_sends_no_rewrite_request_and_api_llm_sections_are_validated(env, capsys):
    """--plan with an API [rewriter] requests nothing; API [judge]/[rewriter] keys are checked at load."""
    from precompute.__main__ import main as cli_main
    from precompute.config import ConfigError, load_config

    base = E2E_TOML.split("[[models]]")[0].replace('families = ["surface_noise"]', 'families = ["structural"]') \
        .replace("per_family = {{ surface_noise = 2 }}", "per_family = {{ structural = 2 }}")
    with FakeAPI(default="normal") as srv:
        toml = base + ('[[models]]\nkey = "tiny-random"\n\n[rewriter]\nbackend = "openai_compatible"\n'
                       'model = "rw"\nbase_url = "{plain}/v1"\n')
        cfg = env / "p.toml"
        cfg.write_text(toml.format(store=env / "p.duckdb", data=ROOT / "data" / "datasets", plain=srv.url))
        assert cli_main(["--config", str(cfg), "--plan"]) == 0
        assert srv.count == 0 and "LLM rewrites" in capsys.readouterr().out
    for extra, msg in (('temprature = 0.0', "unknown \\[rewriter\\] key 'temprature'"),
                       ('top_logprobs = 3', "returns no log-probs")):
        bad = env / "bad.toml"
        backend = "anthropic" if "top_logprobs" in extra else "openai"
        bad.write_text((base + f'[[models]]\nkey = "tiny-random"\n\n[rewriter]\nbackend = "{backend}"\n'
                        f'model = "rw"\n{extra}\n').format(store=env / "b.duckdb", data=ROOT / "data" / "datasets"))
        with pytest.raises(ConfigError, match=msg):
            load_config(bad)


# ---------------------------------------------------------------------- the request as sent
@pytest.mark.parametrize("provider", PROVIDERS)
def test_each_reply_records_the_request_as_sent_and_no_key(provider, env, fake):
    be = make(provider, fake, seed=11, **({} if provider == "anthropic" else {"top_logprobs": 3}))
    prompt = "Name a prime number, please."
    r = be.generate([prompt], 9)[0]
    assert r.error is None
    sent = json.loads(r.meta["request"])
    wire = fake.requests[-1]["body"]
    assert SECRET not in r.meta["request"]
    if provider == "openai":
        assert sent["messages"] == wire["messages"] == [{"role": "user", "content": prompt}]
        assert {k: sent[k] for k in ("model", "temperature", "seed", "logprobs", "top_logprobs")} == {
            "model": "openai-model", "temperature": 0.0, "seed": 11, "logprobs": True, "top_logprobs": 3}
        assert {k: wire[k] for k in ("model", "temperature", "seed", "logprobs", "top_logprobs")} == {
            k: sent[k] for k in ("model", "temperature", "seed", "logprobs", "top_logprobs")}
        cap = [k for k in ("max_tokens", "max_completion_tokens") if k in sent]
        assert len(cap) == 1 and sent[cap[0]] == wire[cap[0]] == 9
    elif provider == "anthropic":
        # the SDK's default API version takes no temperature: none is sent, and the record says so
        assert sent == {"model": "anthropic-model", "max_tokens": 9, "extra_body": None,
                        "messages": [{"role": "user", "content": prompt}]}
        assert (wire["model"], wire["max_tokens"], wire["messages"], "temperature" in wire) == (
            "anthropic-model", 9, sent["messages"], False)
    else:
        assert sent["model"] == "gemini-model" and sent["contents"] == prompt
        assert sent["config"] == {"max_output_tokens": 9, "candidate_count": 1, "temperature": 0.0,
                                  "seed": be.seed31, "response_logprobs": True, "logprobs": 3}
        gc = wire["generationConfig"]
        assert (gc["maxOutputTokens"], gc["candidateCount"], gc["temperature"], gc["seed"], gc["responseLogprobs"],
                gc["logprobs"]) == (9, 1, 0.0, be.seed31, True, 3)
        assert "".join(p["text"] for c in wire["contents"] for p in c["parts"]) == prompt
    be.close()
