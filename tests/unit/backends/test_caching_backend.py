"""CachingBackend: a reply cache any backend can use, over any ``ReplyCache`` (the store's sqlite table by default)."""

from __future__ import annotations

import numpy as np
import pytest

from sago_engine.backends import Backend
from sago_engine.backends.caching import CachingBackend, ReplyCache
from sago_engine.store.sidecar.reply_cache import ResponseCache
from sago_engine.types import GenerationResult
from tests.integration.backends.test_api_backends import env  # noqa: F401 (fixture)


class Counting(Backend):
    """A local-style backend (no cache_key, no usage counters) that records what it is asked."""

    name, model_id, capabilities = "stub", "stub-1", frozenset({"cos", "prob", "ent"})

    def __init__(self):
        self.asked: list[list[str]] = []
        self.closed = False

    def info(self):
        return {"backend": self.name, "model_id": self.model_id}

    def generate(self, prompts, max_new_tokens):
        self.asked.append(list(prompts))
        return [GenerationResult(text=p.upper(), n_tokens=2, token_logprobs=np.array([-0.5, -1.25]),
                                 token_entropies=np.array([0.1, 0.2]), hidden_last=np.ones((3, 4), np.float32) * i,
                                 token_ids=[7, 8], latency_s=0.5, error="boom" if p == "bad" else None)
                for i, p in enumerate(prompts)]

    def close(self):
        self.closed = True


class DictCache:
    """A ``ReplyCache`` in memory: what the wrapper needs of a cache, nothing more."""

    def __init__(self):
        self.d, self.closed = {}, False

    def get(self, key):
        return self.d.get(key)

    def put(self, key, value):
        self.d.setdefault(key, value)

    def close(self):
        self.closed = True


@pytest.mark.parametrize("kind", ["sqlite", "dict"])
def test_wraps_any_backend_and_rerun_reads_the_cache(tmp_path, kind):
    inner = Counting()
    cache = ResponseCache(tmp_path / "responses.sqlite3") if kind == "sqlite" else DictCache()
    assert isinstance(cache, ReplyCache)
    be = CachingBackend(inner, cache)
    first = be.generate(["a", "bad", "c"], 8)
    assert inner.asked == [["a", "bad", "c"]] and be.capabilities == inner.capabilities and be.model_id == "stub-1"
    again = be.generate(["c", "bad", "a", "d"], 8)
    assert inner.asked[-1] == ["bad", "d"]  # hits are not asked; a failure was never stored
    by = {r.text: r for r in again}
    for r0 in (first[0], first[2]):
        r1 = by[r0.text]
        assert r1.meta["cached"] is True and r1.latency_s == r0.latency_s and r1.token_ids == [7, 8]
        np.testing.assert_array_equal(r1.token_logprobs, r0.token_logprobs)
        np.testing.assert_array_equal(r1.hidden_last, r0.hidden_last)
        assert r1.hidden_last.dtype == np.float32
    assert [r.text for r in again] == ["C", "BAD", "A", "D"]  # input order kept
    assert be.take_usage()["cache_hits"] == 2 and be.take_usage()["cache_hits"] == 0
    be.generate(["a"], 9)  # another max_new_tokens: another key
    assert inner.asked[-1] == ["a"]
    be.close()
    assert inner.closed
    if kind == "dict":
        assert cache.closed and len(cache.d) == 4  # a, c, d at cap 8 and a at cap 9; the failure never
    with pytest.raises(RuntimeError):
        be.generate(["a"], 8)


def test_get_backend_puts_api_replies_in_the_cache_it_is_given(env):
    from sago_engine.backends import get_backend
    from tests.support.fake_api import FakeAPI

    cache = DictCache()
    with FakeAPI(default="logprobs") as fake:
        be = get_backend({"name": "openai", "model": "m", "base_url": fake.url + "/v1", "sleep": lambda s: None},
                         reply_cache=cache)
        assert be.cache is cache
        [r] = be.generate(["hello?"], 8)
        assert r.error is None and fake.count == 1 and len(cache.d) == 1
        [again] = be.generate(["hello?"], 8)
        assert fake.count == 1 and again.meta["cached"] and again.text == r.text
        be.close()
    assert cache.closed


def test_api_replies_cached_by_an_older_sago_still_read(env):
    from sago_engine.backends.caching import CachingBackend as CB
    from tests.integration.backends.test_api_backends import make
    from tests.support.fake_api import FakeAPI

    with FakeAPI(default="logprobs") as fake:
        be = make("openai", fake)
        assert isinstance(be, CB)
        key = be.cache_key("old?", 8)
        be.cache.put(key, {"reply": {"text": "from the old cache", "finish_raw": "stop", "model": "gpt-old",
                                     "prompt_tokens": 3, "completion_tokens": 4, "token_logprobs": [-1.0, -2.0]},
                           "latency_s": 0.25})
        [r] = be.generate(["old?"], 8)
        assert fake.count == 0 and r.text == "from the old cache" and r.seq_logprob == pytest.approx(-3.0)
        assert r.meta["cached"] and r.latency_s == 0.25
        u = be.take_usage()
        assert (u["requests"], u["cache_hits"], u["models"]) == (0, 1, ["gpt-old"])
        be.close()


def test_an_entry_is_used_only_for_its_own_key(tmp_path, caplog):
    """Identity before reuse: an entry copied under another key, a damaged one and one of an unknown
    format are each asked again (and replaced), never returned as that prompt's reply."""
    import sqlite3

    path = tmp_path / "responses.sqlite3"
    inner = Counting()
    be = CachingBackend(inner, ResponseCache(path))
    be.generate(["a", "c", "d"], 8)
    ka, kc, kd = (be.cache_key(p, 8) for p in ("a", "c", "d"))
    con = sqlite3.connect(path)
    a_value = con.execute("SELECT value FROM replies WHERE key = ?", (ka,)).fetchone()[0]
    con.execute("UPDATE replies SET value = ? WHERE key = ?", (a_value, kc))  # c's entry now holds a's reply
    con.execute("UPDATE replies SET value = '{\"result\": ' WHERE key = ?", (kd,))  # damaged JSON
    con.commit()
    con.close()
    got = be.generate(["a", "c", "d"], 8)
    assert inner.asked[-1] == ["c", "d"] and [r.text for r in got] == ["A", "C", "D"]
    assert "belongs to another request" in caplog.text
    again = be.generate(["c", "d"], 8)
    assert all(r.meta["cached"] for r in again) and [r.text for r in again] == ["C", "D"]
    be.close()


def test_a_file_that_is_not_the_reply_cache_is_refused_naming_it(tmp_path):
    from sago_engine.store import StoreError

    bad = tmp_path / "responses.sqlite3"
    bad.write_bytes(b"not a database at all " * 100)
    with pytest.raises(StoreError, match=r"responses\.sqlite3 is not sago's reply cache .*delete it"):
        ResponseCache(bad)
    assert bad.read_bytes().startswith(b"not a database")
