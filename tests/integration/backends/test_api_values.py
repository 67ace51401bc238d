"""Values and timing that come from an API server are input: log-probs are checked before any sum
(sentinels, end-of-text entries, positive or non-finite values), and a server's "retry in N s" is
read in each provider's form but never turns the retries into a hot loop."""

from __future__ import annotations

import datetime as dt
import email.utils
import math
import random

import numpy as np
import pytest

from sago_engine.axes.confidence import delta_prob
from sago_engine.backends.api.errors import classify_error
from sago_engine.backends.api.openai_api import OpenAICompatibleBackend
from sago_engine.backends.api.reply import ApiReply
from sago_engine.backends.api.retry import RetryPolicy, parse_retry_after
from sago_engine.measure.pipeline import _unavailable_reason
from sago_engine.scoring.scores import normalize
from sago_engine.types import GenerationResult
from tests.integration.backends.test_api_backends import E2E_TOML, ROOT, env, make  # noqa: F401 (env is a fixture)
from tests.support.fake_api import TOKEN_ENTROPY, FakeAPI, reply_text

# ---------------------------------------------------------------------------- S6: log-probs

TOPS_A = [[-0.05, -3.1], [-0.01, -4.8], [-0.002, -6.5]]


def _compatible(**kw) -> OpenAICompatibleBackend:
    """An ``openai_compatible`` backend at a local URL (no key, no request sent by ``_result``)."""
    return OpenAICompatibleBackend("m", base_url="http://127.0.0.1:9/v1", **kw)


def _h(tops) -> float:
    """Top-k lower bound of one position, by hand: −Σ p log p − r log r."""
    p = np.exp(np.asarray(tops, dtype=np.float64))
    r = 1.0 - p.sum()
    return float(-(p * np.log(p)).sum() - (r * math.log(r) if r > 0 else 0.0))


def test_s6_case_values_sentinel_dropped_positive_flagged():
    """S6 inputs A, B, C (openai_compatible, top_logprobs=2) through ``ApiBackend._result``."""
    be = _compatible(top_logprobs=2)
    a = be._result(ApiReply("x y z", "stop", "m", token_logprobs=[-0.05, -0.01, -0.002], top_logprobs=TOPS_A),
                   0.0, False, 1)
    b = be._result(ApiReply("x y z", "stop", "m", token_logprobs=[-0.05, -0.01, -0.002, -9999.0],
                            top_logprobs=[*TOPS_A, []]), 0.0, False, 1)
    c = be._result(ApiReply("x y z w", "stop", "m", token_logprobs=[0.69970703, -0.039855957, -8.34465e-07, -0.009651184]),
                   0.0, False, 1)
    assert a.seq_logprob == pytest.approx(-0.062, abs=1e-12)
    assert a.mean_entropy == pytest.approx(np.mean([_h(t) for t in TOPS_A]), abs=1e-12)
    assert a.mean_entropy == pytest.approx(0.0946, abs=1e-4)
    # B: the trailing end-of-text sentinel (no alternatives) is dropped, not summed: B measures as A
    assert b.seq_logprob == pytest.approx(-0.062, abs=1e-12) and b.mean_entropy == pytest.approx(a.mean_entropy)
    assert b.meta["logprobs_dropped"] == 1 and b.logprob_issue is None
    d = float(delta_prob([b.seq_logprob], a.seq_logprob)[0])
    assert d == 0.0 and float(normalize(d, 250.0)) == 0.0  # main gave Δ-Prob −9999.0, Δ̃ −1.0
    # C: a positive log-prob: neither Δ-Prob nor Δ-Ent, with the reason
    assert c.seq_logprob is None and c.mean_entropy is None and c.token_logprobs is None
    assert c.logprob_issue == ("invalid log-probs from server: +0.6997 at token 0 (a log-prob is at most 0)")
    for axis in ("prob", "ent"):
        why = _unavailable_reason(axis, be.capabilities, a, c)
        assert why.startswith("invalid log-probs from server: +0.6997") and why.endswith("(variant reply)")
        assert _unavailable_reason(axis, be.capabilities, c, a).endswith("(base reply)")
        assert _unavailable_reason(axis, be.capabilities, a, b) is None


def test_s6_short_and_empty_top_lists_and_inner_sentinels():
    be = _compatible(top_logprobs=3)
    # a list shorter than k is used as it is; one empty list skips that position, not the reply
    r = be._result(ApiReply("x y z", "stop", "m", token_logprobs=[-0.05, -0.01, -0.3],
                            top_logprobs=[[-0.05, -3.1], [-0.01], []]), 0.0, False, 1)
    assert r.seq_logprob == pytest.approx(-0.36, abs=1e-12)
    assert np.isnan(r.token_entropies[2])
    assert r.mean_entropy == pytest.approx((_h([-0.05, -3.1]) + _h([-0.01])) / 2, abs=1e-12)
    # a sentinel inside the reply is the unknown log-prob of a produced token: flagged, never dropped
    r = be._result(ApiReply("x y z", "stop", "m", token_logprobs=[-0.05, -9999.0, -0.3],
                            top_logprobs=[[-0.05], [], [-0.3]]), 0.0, False, 1)
    assert r.seq_logprob is None and r.mean_entropy is None
    assert r.meta["invalid_logprobs"].startswith("invalid log-probs from server: -9999 at token 1 (a placeholder")
    # a trailing entry whose token has text is a produced token: its sentinel is flagged too
    r = be._result(ApiReply("x y", "stop", "m", token_logprobs=[-0.05, -9999.0], top_logprobs=[[-0.05], []],
                            textless=[]), 0.0, False, 1)
    assert r.seq_logprob is None and "-9999 at token 1" in r.logprob_issue
    # rounding of 0 (≤ 1e-6) is 0, not an error; an alternative at −9999 is probability 0
    r = be._result(ApiReply("x y", "stop", "m", token_logprobs=[1e-7, -0.5], top_logprobs=[[1e-7, -9999.0], [-0.5]]),
                   0.0, False, 1)
    assert r.seq_logprob == pytest.approx(-0.5, abs=1e-12) and r.logprob_issue is None
    assert r.token_entropies[0] == pytest.approx(0.0, abs=1e-6)


def test_s6_nan_and_inf_never_reach_a_sum():
    """Own input: NaN / ±inf among the produced tokens or NaN / +inf among the alternatives set the
    reply's log-probs aside; a result that reached the store without the check (a reply cached
    before it) is caught by ``GenerationResult`` itself."""
    be = _compatible(top_logprobs=2)
    cases = {
        "nan": ([-0.1, float("nan"), -0.2], None, "NaN at token 1 (not a number)"),
        "+inf": ([-0.1, -0.2, float("inf")], None, "+inf at token 2"),
        "-inf": ([float("-inf"), -0.2, -0.3], None, "-inf at token 0"),
        "two": ([float("nan"), 0.5, -0.3], None, "; 2 invalid values in all"),
        "alt-nan": ([-0.1, -0.2], [[-0.1, float("nan")], [-0.2]], "NaN among the alternatives of token 0"),
        "alt-inf": ([-0.1, -0.2], [[-0.1], [-0.2, float("inf")]], "+inf among the alternatives of token 1"),
    }
    for name, (lps, tops, want) in cases.items():
        r = be._result(ApiReply("x y z", "stop", "m", token_logprobs=lps, top_logprobs=tops), 0.0, False, 1)
        assert r.seq_logprob is None and r.mean_entropy is None, name
        assert r.logprob_issue.startswith("invalid log-probs from server: ") and want in r.logprob_issue, name
    # −inf as an alternative is probability 0: a valid statement, the reply is kept
    r = be._result(ApiReply("x", "stop", "m", token_logprobs=[-0.1], top_logprobs=[[-0.1, float("-inf")]]), 0.0, False, 1)
    assert r.seq_logprob == pytest.approx(-0.1) and r.mean_entropy is not None
    stale = GenerationResult(text="x y z", n_tokens=3, token_logprobs=np.array([-0.1, -0.2, -9999.0]),
                             token_entropies=np.array([0.1, 0.2, np.inf]))
    assert stale.seq_logprob is None and stale.mean_entropy is None
    assert stale.logprob_issue == "invalid log-probs: -9999 at token 2 (a placeholder, not a log-prob)"
    ok = GenerationResult(text="x", n_tokens=1, token_logprobs=np.array([-0.1]), token_entropies=np.array([0.3]))
    assert ok.seq_logprob == pytest.approx(-0.1) and ok.mean_entropy == pytest.approx(0.3) and ok.logprob_issue is None


@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_s6_fake_server_sentinels_through_each_sdk(provider, env):
    """The real SDKs' parsing: vLLM's end-of-text entry is dropped; a NaN (``NaN`` in the JSON) or
    a positive value at the first token sets the reply's log-probs aside."""
    with FakeAPI(default="logprobs-eot") as fake:
        be = make(provider, fake)
        fake.script("p-nan", [("logprobs-value", float("nan"))])
        fake.script("p-pos", [("logprobs-value", 0.69970703)])
        prompts = ["What is the capital of France?", "p-nan", "p-pos"]
        ok, nan, pos = be.generate(prompts, 16)
        n = len(reply_text(prompts[0]).split())
        assert ok.seq_logprob == pytest.approx(n * math.log(0.5)) and ok.meta["logprobs_dropped"] == 1
        np.testing.assert_allclose(ok.token_entropies, TOKEN_ENTROPY)
        assert nan.seq_logprob is None and "NaN at token 0" in nan.meta["invalid_logprobs"]
        assert pos.seq_logprob is None and "+0.6997 at token 0" in pos.meta["invalid_logprobs"]
        be.close()


def test_s6_sentinels_end_to_end_into_the_store(env):
    """The runner over a fake server whose replies end with vLLM's end-of-text entry: Δ-Prob is
    the difference of the visible tokens' log-probs; a base reply with a sentinel at its first
    token leaves its prompt's Δ-Prob/Δ-Ent unavailable with the reason, counted once in run_usage."""
    from pathlib import Path

    from precompute.config import load_config
    from precompute.runner import run
    from sago_engine.datasets import load_dataset
    from sago_engine.store import open_store

    toml = E2E_TOML.split("[[models]]")[0] + ('[[models]]\nkey = "served-model"\nbackend = "openai_compatible"\n'
                                              'base_url = "{plain}/v1"\ntop_logprobs = 3\n')
    with FakeAPI(default="logprobs-eot") as srv:
        cfg_path = env / "s6.toml"
        cfg_path.write_text(toml.format(store=env / "s6.duckdb", data=ROOT / "data" / "datasets", plain=srv.url))
        cfg = load_config(cfg_path)
        p_ok, p_bad = load_dataset(Path(cfg.data_dir) / "truthfulqa.jsonl", n=2, dataset="truthfulqa")
        srv.script(p_ok.text, ["logprobs"])  # this base reply has no end-of-text entry, its variants do
        srv.script(p_bad.text, [("logprobs-value", -9999.0)])  # the first token of this base reply: a sentinel
        [s] = run(cfg, progress=False)
    assert s["invalid_logprobs"] == 1
    with open_store(cfg.store) as st:
        d = st.deltas(kept_only=False)
        resp = st.con.execute("SELECT prompt_id, variant_id, response, seq_logprob, mean_entropy FROM responses").df()
        usage = st.run_usage().iloc[0]
    assert int(usage["invalid_logprobs"]) == 1
    n_words = {(r.prompt_id, r.variant_id if isinstance(r.variant_id, str) else None): len(r.response.split())
               for r in resp.itertuples()}
    ok = d[(d["prompt_id"] == p_ok.prompt_id) & d["axis"].isin(["prob", "ent"])]
    assert len(ok) and ok["available"].all()
    for r in ok[ok["axis"] == "prob"].itertuples():
        want = (n_words[(r.prompt_id, r.variant_id)] - n_words[(r.prompt_id, None)]) * math.log(0.5)
        assert r.delta == pytest.approx(want, abs=1e-9) and abs(r.delta_norm) < 0.5
    assert ok[ok["axis"] == "ent"]["delta"].abs().max() < 1e-9  # every position: the same top-3
    bad = d[(d["prompt_id"] == p_bad.prompt_id) & d["axis"].isin(["prob", "ent"])]
    assert len(bad) and not bad["available"].any() and bad["delta"].isna().all()
    assert all(r.startswith("invalid log-probs from server: -9999 at token 0") and r.endswith("(base reply)")
               for r in bad["reason"])
    base_bad = resp[(resp["prompt_id"] == p_bad.prompt_id) & resp["variant_id"].isna()].iloc[0]
    assert np.isnan(base_bad["seq_logprob"]) and np.isnan(base_bad["mean_entropy"])
    assert (resp["seq_logprob"].dropna() > -100).all()  # no sentinel summed into any stored reply


# ---------------------------------------------------------------------------- T11: retry timing


def test_t11_zero_retry_after_still_backs_off():
    """T11's input: every answer is 429 with ``Retry-After: 0``; six requests, five real waits."""
    sleeps: list[float] = []
    with FakeAPI(default=("429", 0)) as fake:
        be = OpenAICompatibleBackend("m", base_url=fake.url + "/v1", max_retries=5, top_logprobs=None,
                                     sleep=sleeps.append)
        [r] = be.generate(["one prompt"], 8)
        assert fake.count == 6
    assert r.error.startswith("retries exhausted after 6 attempts: RateLimitError") and r.meta["retryable"]
    base = be.policy.base_s
    assert len(sleeps) == 5 and all(s >= base / 2 for s in sleeps)  # main: [0.0, 0.0, 0.0, 0.0, 0.0]
    assert sum(sleeps) >= 5 * base / 2
    assert all(s <= min(be.policy.cap_s, base * 2 ** a) for a, s in enumerate(sleeps))


def test_t11_past_date_and_unusable_hints_fall_back_to_the_backoff():
    now = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
    past = email.utils.format_datetime(now - dt.timedelta(seconds=30), usegmt=True)
    for h in ({"retry-after": past}, {"retry-after": "0"}, {"retry-after-ms": "0"}, {"retry-after": "-3"},
              {"retry-after": "nan"}, {"retry-after": "inf"}, {"retry-after": "soon"}, {"retry-after-ms": "x"},
              {"x-ratelimit-reset-tokens": "0s"}, {"anthropic-ratelimit-tokens-reset": "2025-12-31T23:59:00Z"}):
        assert parse_retry_after(h, now=now) is None, h
    pol, rng = RetryPolicy(max_retries=5, base_s=0.5, cap_s=30.0), random.Random(0)
    for hint in (None, 0.0, -2.0, float("nan"), float("inf")):
        waits = [pol.delay(a, hint, rng) for a in range(5)]
        assert all(0.25 <= w <= min(30.0, 0.5 * 2 ** a) for a, w in enumerate(waits)), (hint, waits)
    assert pol.delay(0, 7.0, rng) == 7.0  # a hint longer than the backoff is honoured
    assert 0.25 <= pol.delay(4, 0.1, rng) <= 8.0  # a shorter one: the backoff
    assert pol.delay(0, 120.0, rng) == 120.0 and pol.delay(0, 121.0, rng) is None  # the cap: 2 minutes


class _Resp:
    def __init__(self, headers):
        self.headers = headers


class _Status(Exception):
    def __init__(self, code, headers=None, details=None):
        super().__init__("rate limited")
        self.status_code, self.response, self.details = code, _Resp(headers or {}), details


def test_t11_each_providers_hint_format():
    """Header and body forms, as ``classify_error`` reads them off an SDK exception."""
    now = dt.datetime.now(dt.UTC)
    in30 = (now + dt.timedelta(seconds=30)).isoformat().replace("+00:00", "Z")
    cases = [
        ({"retry-after-ms": "1500", "retry-after": "9"}, None, 1.5),  # OpenAI / Anthropic: ms first
        ({"retry-after": email.utils.format_datetime(now + dt.timedelta(seconds=40), usegmt=True)}, None, 40.0),
        ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1m30s",
          "x-ratelimit-remaining-tokens": "9000", "x-ratelimit-reset-tokens": "20ms"}, None, 90.0),
        ({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "250ms"}, None, 0.25),
        ({"x-ratelimit-reset-tokens": "6"}, None, 6.0),  # Azure: bare seconds, no remaining header
        ({"anthropic-ratelimit-tokens-remaining": "0", "anthropic-ratelimit-tokens-reset": in30,
          "anthropic-ratelimit-requests-remaining": "40", "anthropic-ratelimit-requests-reset": in30}, None, 30.0),
        ({}, {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure"},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"}]}}, 12.0),
        ({"retry-after": "0"}, [{"error": {"details": [
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.5s"}]}}], 0.5),
    ]
    for headers, details, want in cases:
        got = classify_error(_Status(429, headers, details)).retry_after
        assert got == pytest.approx(want, abs=1.0 if want in (30.0, 40.0) else 1e-9), (headers, details)


@pytest.mark.parametrize("provider,hint,want", [
    ("openai", {"headers": {"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "1m0.5s"}}, 60.5),
    ("anthropic", {"headers": {"retry-after": "7"}}, 7.0),
    ("gemini", {"retry_delay": "12s"}, 12.0),
])
def test_t11_hints_through_each_sdk(provider, hint, want, env):
    """Where each SDK's error object carries the hint (headers on openai/anthropic
    ``APIStatusError.response``, google-genai ``APIError.details``), against the fake."""
    with FakeAPI(default="logprobs") as fake:
        be = make(provider, fake, max_retries=2)
        fake.script("p", [("429", hint)])
        [r] = be.generate(["p"], 8)
        assert r.error is None and r.meta["attempts"] == 2
        assert be.sleeps == [want]
        be.close()


@pytest.mark.parametrize("provider,hint", [("openai", 3600), ("gemini", {"retry_delay": "52758s"})])
def test_t11_a_hint_beyond_the_cap_is_not_waited_out(provider, hint, env):
    """Own input: an hour's Retry-After, Gemini's per-day quota delay: no wait of hours per prompt,
    no retry now; the prompt is a transient failure (its unit stays pending for a rerun)."""
    with FakeAPI(default=("429", hint)) as fake:
        be = make(provider, fake, max_retries=5)
        [r] = be.generate(["p"], 8)
        assert fake.count == 1 and be.sleeps == []
        assert r.error.startswith("not retried: the server asks to wait ") and "more than the 120 s" in r.error
        assert r.meta["retryable"] is True
        be.close()
