"""Text from a model is text: lone surrogates, invalid UTF-8, NUL bytes and huge replies are
normalised and flagged where a reply enters sago, for every backend, and no reply aborts a run
(``sago_engine.replytext``; handed case U11)."""

from __future__ import annotations

import pytest

from sago_engine.backends.caching import CachingBackend
from sago_engine.replytext import MAX_REPLY_CHARS, clean_reply
from sago_engine.store.sidecar.reply_cache import ResponseCache
from sago_engine.types import GenerationResult
from tests.integration.backends.test_api_backends import E2E_TOML, ROOT, env, make  # noqa: F401 (env is a fixture)
from tests.support.fake_api import FakeAPI

HALF_EMOJI = "Sure, here it is \ud83d"  # what json.loads makes of "... \ud83d" (no low surrogate)


def test_clean_reply_each_kind_is_replaced_and_flagged():
    assert clean_reply("plain café 😀") == ("plain café 😀", [])
    assert clean_reply(HALF_EMOJI) == ("Sure, here it is \ufffd", ["surrogates_replaced"])
    assert clean_reply("\ud83d\ude00")[0] == "😀"  # a pair kept as two halves is its character
    assert clean_reply(b"ok \xff\xfe end") == ("ok \ufffd\ufffd end", ["invalid_utf8"])
    assert clean_reply("a\x00b") == ("ab", ["nul_removed"])
    text, flags = clean_reply("x" * (MAX_REPLY_CHARS + 5))
    assert len(text) == MAX_REPLY_CHARS and flags == ["cut_huge"]
    for t in (HALF_EMOJI, "a\x00\udfffb"):
        clean_reply(t)[0].encode("utf-8")  # never raises


def test_every_generation_result_is_clean_whatever_built_it():
    """``GenerationResult`` is the one boundary: a local model (meta None), an API reply, an error text."""
    r = GenerationResult(text="hi\x00 \ud800", n_tokens=2)
    assert r.text == "hi \ufffd" and r.flags == ["surrogates_replaced", "nul_removed"]
    e = GenerationResult(text="", error="server said \udc80\x00", meta={"model": "m\ud83d", "flags": ["x"]})
    assert e.error == "server said \ufffd" and e.meta["model"] == "m\ufffd" and e.flags == ["x"]
    assert GenerationResult(text="fine").flags == [] and GenerationResult(text="fine").meta is None


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini", "openai_compatible"])
def test_each_api_reply_is_normalised_cached_and_flagged(provider, env, tmp_path):
    """Through each provider's own SDK; the reply cache on disk (where U11 crashed) stores it and
    a rerun reads the same text and flags back."""
    with FakeAPI(default="normal") as fake:
        fake.script("surrogate", [("text", HALF_EMOJI)])
        fake.script("nul", [("text", "a\x00b")])
        fake.script("bytes", [("bytes", b"\xff\xfe")])
        fake.script("huge", [("text", "y" * (MAX_REPLY_CHARS + 10))])
        prompts = ["surrogate", "nul", "bytes", "huge"]
        be = CachingBackend(make(provider, fake, cache=False), ResponseCache(tmp_path / "c.sqlite3"))
        got = be.generate(prompts, 8)
        assert got[0].error is None and got[0].text == "Sure, here it is \ufffd"
        assert got[0].flags == ["surrogates_replaced"]
        assert got[1].text == "ab" and got[1].flags == ["nul_removed"]
        assert got[3].flags == ["cut_huge"] and len(got[3].text) == MAX_REPLY_CHARS
        # invalid UTF-8 in the HTTP body (the SDKs decode strictly): repaired before parsing, flagged
        assert got[2].error is None and got[2].text == "\ufffd\ufffd"
        assert got[2].flags == ["invalid_utf8"]
        n = fake.count
        again = be.generate(prompts, 8)
        assert fake.count == n and all(r.meta["cached"] for r in again)
        assert [(r.text, r.flags) for r in again] == [(r.text, r.flags) for r in got]
        be.close()


def test_u11_a_half_emoji_reply_never_aborts_a_run_and_is_flagged_in_the_store(env):
    """U11: an OpenAI-compatible server whose every reply ends with ``\\ud83d``; the runner with the
    default on-disk reply cache finishes, and every stored reply says what was replaced."""
    from precompute.config import load_config
    from precompute.runner import run
    from sago_engine.store import open_store

    toml = E2E_TOML.split("[[models]]")[0] + ('[[models]]\nkey = "served-model"\nbackend = "openai_compatible"\n'
                                              'base_url = "{plain}/v1"\n')
    with FakeAPI(default=("text", HALF_EMOJI)) as srv:
        cfg_path = env / "u11.toml"
        cfg_path.write_text(toml.format(store=env / "u11.duckdb", data=ROOT / "data" / "datasets", plain=srv.url))
        [s] = run(load_config(cfg_path), progress=False)
    assert s is not None
    with open_store(env / "u11.duckdb") as st:
        resp = st.con.execute("SELECT response, flags FROM responses").fetchall()
        reps = st.con.execute("SELECT response, flags FROM base_repeats").fetchall()
    assert resp and all(t == "Sure, here it is \ufffd" and f == ["surrogates_replaced"] for t, f in resp)
    assert reps and all(f == ["surrogates_replaced"] for _, f in reps)


def test_reply_cache_stores_any_string_it_is_given(tmp_path):
    """The cache itself never raises on a value with a lone surrogate (an older entry, a meta field)."""
    c = ResponseCache(tmp_path / "c.sqlite3")
    c.put("k", {"result": {"text": "x\ud83d"}})
    assert c.get("k")["result"]["text"] == "x\ud83d"  # read back as given; GenerationResult cleans it
    assert GenerationResult(**{"text": c.get("k")["result"]["text"]}).text == "x\ufffd"
    c.close()



def test_the_judge_and_the_rewriter_get_clean_flagged_text():
    """The judge's and the LLM rewriter's replies cross the same boundary: a verdict is still read,
    a rewrite still used, and each says what was replaced (``mirroring_verdicts.flags``,
    ``variants.meta["reply_flags"]``)."""
    from sago_engine.measure.judge import Judge, JudgeItem
    from sago_engine.types import VariantSpec
    from sago_engine.variants import make_variant
    from sago_engine.variants.rewriting.llm_rewriter import LLMRewriter
    from tests.support.factories import ScriptedBackend

    v = make_variant("p1", "What is the capital of France?", VariantSpec("social_register", "politeness", -4.0,
                                                                          "PREFIX"), run_seed=3)
    [verdict] = Judge(ScriptedBackend(respond=lambda p: "YES.\x00 \ud83d")).judge([JudgeItem(v, "q", "reply")])
    assert verdict.verdict == 1 and verdict.raw == "YES. \ufffd"
    assert verdict.flags == ("surrogates_replaced", "nul_removed")
    text = "What is the capital of Australia and why was it chosen as the capital?"
    rw = LLMRewriter(ScriptedBackend(respond=lambda p: "Why was Canberra chosen as Australia's capital?\ud83d"),
                     model="scripted")
    meta = rw.rewrite_meta("length", text, 0.5)
    assert "\ud83d" not in rw.rewrite_length(text, 0.5) and meta["reply_flags"] == ["surrogates_replaced"]
