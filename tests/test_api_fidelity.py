"""Issue #13: API runs never pass off an error, an empty reply or noise as stability.

Every check runs the official SDKs against the loopback fake (tests/fake_api.py)."""

from __future__ import annotations

import pytest

from sago_engine.backends.api_common import ApiConfigError, ApiFatalError, cost_usd
from tests.fake_api import FakeAPI, reply_text
from tests.test_api_backends import PROVIDERS, env, make  # noqa: F401 (fixture)

# ---------------------------------------------------------------------- item 1: parameter-level 400


@pytest.mark.parametrize("provider, param, kw", [
    ("openai", "temperature", {}),
    ("anthropic", "temperature", {"api_version": "2023-06-01"}),  # the only anthropic mode that sends it
    ("gemini", "logprobs", {}),
    ("gemini", "temperature", {}),
])
def test_parameter_400_stops_with_the_param_and_the_fix(provider, param, kw, env):
    with FakeAPI(default="logprobs", reject={param}) as fake:
        be = make(provider, fake, max_retries=3, **kw)
        with pytest.raises(ApiConfigError) as ei:
            be.generate(["What is the capital of Peru?", "Name a prime."], 8)
        e = ei.value
        assert isinstance(e, ApiFatalError) and e.param == param
        assert f"rejects the request parameter '{param}'" in str(e)
        assert f'omit_params = ["{param}"]' in str(e)
        n = fake.count
        assert n <= 2  # not retried
        with pytest.raises(ApiConfigError):  # nothing more is sent
            be.generate(["other"], 8)
        assert fake.count == n
        be.close()
        # the fix the message names makes the same model work
        fixed = make(provider, fake, omit_params=[param], **kw)
        [r] = fixed.generate(["What is the capital of Peru?"], 8)
        assert r.error is None and r.text == reply_text("What is the capital of Peru?")
        body = fake.requests[-1]["body"]
        sent = body.get("generationConfig", body)
        key = {"logprobs": "responseLogprobs" if provider == "gemini" else "logprobs"}.get(param, param)
        assert key not in sent
        if param == "temperature":
            assert fixed.info()["decoding"]["greedy"] is False and fixed.info()["decoding"]["temperature"] is None
        else:
            assert fixed.capabilities == frozenset()
        fixed.close()


def test_other_400s_stay_per_prompt_errors(env):
    with FakeAPI(default="normal") as fake:
        be = make("openai", fake)
        fake.script("bad", ["400"])  # no parameter named: one error row, the run goes on
        res = be.generate(["bad", "good"], 8)
        assert res[0].error and res[1].error is None
        be.close()


# ---------------------------------------------------------------------- items 2 and 3: thinking, usage


@pytest.mark.parametrize("provider", PROVIDERS)
def test_budget_spent_on_thinking_is_flagged_and_billed(provider, env):
    with FakeAPI(default="normal", prompt_tokens={"openai": 9, "anthropic": 9, "gemini": 9}) as fake:
        be = make(provider, fake, price_in_per_mtok=0.30, price_out_per_mtok=2.50)
        prompts = ["What is the capital of Peru?", "WHAT IS THE CAPITAL OF PERU?"]
        for p in prompts:
            fake.script(p, [("thinking", 47)])
        res = be.generate(prompts, 47)
        for r in res:
            assert r.text == "" and r.error is None and r.finish_reason == "length"
            assert r.n_tokens == (47 if provider == "anthropic" else 0)  # visible tokens (Anthropic: not split)
            assert r.meta["no_output"].startswith("token budget spent with no visible text")
            assert r.meta["reasoning_tokens"] == (None if provider == "anthropic" else 47)
        u = be.take_usage()
        assert (u["prompt_tokens"], u["completion_tokens"]) == (18, 94)
        # the bill: 18 input tokens at 0.30 and 94 output (thought) tokens at 2.50 USD per million
        assert u["cost_usd"] == pytest.approx(2.404e-04, rel=1e-12)
        assert u["reasoning_tokens"] == (0 if provider == "anthropic" else 94)
        be.close()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cached_input_tokens_recorded_and_priced(provider, env):
    with FakeAPI(default="normal", cached_tokens=6, prompt_tokens={p: 10 for p in PROVIDERS}) as fake:
        be = make(provider, fake, price_in_per_mtok=1.0, price_out_per_mtok=4.0, price_cached_in_per_mtok=0.1)
        [r] = be.generate(["a b c"], 8)
        assert r.meta["cached_tokens"] == 6 and r.meta["prompt_tokens"] == 10
        u = be.take_usage()
        assert u["cached_tokens"] == 6 and u["prompt_tokens"] == 10
        out = u["completion_tokens"]
        assert u["cost_usd"] == pytest.approx((4 * 1.0 + 6 * 0.1 + out * 4.0) / 1e6, rel=1e-12)
        be.close()


def test_cost_formula():
    assert cost_usd(18, 94, 0.30, 2.50) == pytest.approx(2.404e-04, rel=1e-12)
    assert cost_usd(10, 0, 1.0, 1.0, cached_tokens=10) == pytest.approx(10 / 1e6)  # no cached price: input price
    assert cost_usd(10, 5, None, 1.0) is None


@pytest.mark.parametrize("provider", PROVIDERS)
def test_refusal_is_not_a_stop(provider, env):
    with FakeAPI(default="normal") as fake:
        be = make(provider, fake)
        fake.script("x?", ["refusal"])
        [r] = be.generate(["x?"], 8)
        assert r.text == "" and r.error is None and r.finish_reason == "error"
        assert r.meta["finish_raw"].lower() in ("refusal", "safety")
        be.close()


@pytest.mark.parametrize("provider, kw, sent", [
    ("gemini", {"thinking_budget": 0}, lambda b: list(b["generationConfig"]["thinkingConfig"].values()) == [0]),
    ("anthropic", {"thinking_budget": 1024}, lambda b: b["thinking"] == {"type": "enabled", "budget_tokens": 1024}
     and b["max_tokens"] == 1024 + 8),
    ("openai", {"reasoning_effort": "none"}, lambda b: b["reasoning_effort"] == "none"),
])
def test_thinking_settings_are_sent_and_recorded(provider, kw, sent, env):
    with FakeAPI(default="normal") as fake:
        be = make(provider, fake, **kw)
        be.generate(["hello there"], 8)
        assert sent(fake.requests[-1]["body"])
        (k, v), = kw.items()
        assert be.info()["decoding"][k] == v
        # a different thinking setting is a different cache key (a different answer)
        assert be.cache_key("hello there", 8) != make(provider, fake).cache_key("hello there", 8)
        be.close()
