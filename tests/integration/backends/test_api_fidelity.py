"""API runs never pass off an error, an empty reply or noise as stability.

Every check runs the official SDKs against the loopback fake (tests/support/fake_api.py)."""

from __future__ import annotations

import numpy as np
import pytest

from sago_engine.backends.api.errors import ApiConfigError, ApiFatalError
from sago_engine.pricing import cost_usd
from tests.integration.backends.test_api_backends import PROVIDERS, env, make  # noqa: F401 (fixture)
from tests.support.fake_api import FakeAPI, reply_text

# ---------------------------------------------------------------------- item 1: parameter-level 400


@pytest.mark.parametrize("provider, param, kw", [
    ("openai", "temperature", {}),
    ("anthropic", "temperature", {"api_version": "2023-06-01"}),  # the only anthropic mode that sends it
    ("gemini", "logprobs", {}),
    ("gemini", "temperature", {}),
])
def test_parameter_400_stops_with_the_param_and_the_fix(provider, param, kw, env):
    with FakeAPI(default="logprobs", reject={param}) as fake:
        be = make(provider, fake, max_retries=3, max_concurrency=1, **kw)
        with pytest.raises(ApiConfigError) as ei:
            be.generate(["What is the capital of Peru?", "Name a prime."], 8)
        e = ei.value
        assert isinstance(e, ApiFatalError) and e.param == param
        assert f"rejects the request parameter '{param}'" in str(e)
        assert f'omit_params = ["{param}"]' in str(e)
        n = fake.count
        # one request: not retried (max_retries = 3 would make it 4), and the second prompt never sent
        assert n == 1 and [r["prompt"] for r in fake.requests] == ["What is the capital of Peru?"]
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


def test_a_blank_reply_is_no_output_only_with_hidden_reasoning_tokens(env):
    # a reply of tabs and newlines cut by the budget is what the model wrote; the same blank text
    # after billed reasoning tokens, or no text at all, is a budget spent on hidden tokens
    from sago_engine.backends.api.reply import ApiReply
    from sago_engine.measure.pipeline import budget_spent

    with FakeAPI(default="normal") as fake:
        be = make("openai", fake)

        def result(text, reasoning):
            return be._result(ApiReply(text=text, finish_raw="length", model="m", completion_tokens=8,
                                       reasoning_tokens=reasoning), 0.1, cached=False, attempts=1)

        blank, thought, empty = result("\t \n  \t", 0), result("\n", 5), result("", None)
        assert "no_output" not in blank.meta and budget_spent(blank) is None
        assert thought.meta["no_output"].startswith("token budget spent with no visible text (5 hidden reasoning")
        assert budget_spent(thought) == thought.meta["no_output"]
        assert budget_spent(empty) == empty.meta["no_output"]
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
    from sago_engine import pricing

    assert cost_usd is pricing.cost_usd  # one formula, below the store and the backends
    assert pricing.cost_usd(10, 5, 1.0, 2.0, cached_tokens=50, price_cached_in_per_mtok=0.5) == pytest.approx(10 * 0.5 / 1e6 + 10 / 1e6)


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


# ---------------------------------------------------------------------- through the runner and the store

RUN_TOML = """
[run]
store = "{store}"
seed = 5
max_new_tokens = 6
chunk_prompts = 4

[data]
dir = "{data}"
datasets = ["truthfulqa"]
n_prompts = {n}

[variants]
families = ["surface_noise"]
per_family = {{ surface_noise = 2 }}

[[models]]
key = "{key}"
backend = "{backend}"
base_url = "{url}"
{extra}
"""


def _toml(env, fake_url, backend="openai", key="m-test", n=2, extra=""):
    from tests.integration.backends.test_api_backends import ROOT

    url = fake_url + ("/v1" if backend.startswith("openai") else "")
    p = env / f"{key}.toml"
    p.write_text(RUN_TOML.format(store=env / f"{key}.duckdb", data=ROOT / "data" / "datasets", n=n, key=key,
                                 backend=backend, url=url, extra=extra))
    return p


def test_runner_stops_on_a_parameter_400_before_any_row(env, capsys):
    from precompute.__main__ import main as cli_main

    with FakeAPI(default="logprobs", reject={"temperature"}) as fake:
        cfg = _toml(env, fake.url, key="gpt-reasoner")
        assert cli_main(["--config", str(cfg), "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert "rejects the request parameter 'temperature'" in err and 'omit_params = ["temperature"]' in err
        assert fake.count <= 4  # the first chunk's requests at most (max_concurrency 4), none retried
        assert not (env / "gpt-reasoner.duckdb").exists()  # no store of error rows
        assert not list(env.glob(".gpt-reasoner.duckdb.work*"))
        # the fix named in the message: the same config with omit_params runs to completion
        cfg.write_text(cfg.read_text() + 'omit_params = ["temperature"]\n')
        assert cli_main(["--config", str(cfg), "--no-progress"]) == 0
        assert all("temperature" not in r["body"] for r in fake.requests[-4:])


def test_mostly_errors_never_reads_complete(env, capsys):
    from precompute.__main__ import main as cli_main
    from sago_engine.store import open_store

    with FakeAPI(default="400") as fake:  # a 400 that names no parameter: one error row per prompt
        cfg = _toml(env, fake.url, key="broken")
        assert cli_main(["--config", str(cfg), "--no-progress"]) == 4
        assert "failed: most replies of broken are errors" in capsys.readouterr().err
        with open_store(env / "broken.duckdb") as st:
            assert st.runs()["status"].iloc[0].startswith("failed: 8 of 8 replies are errors")
            assert st.meta()["status"] == "failed"
            h = st.reply_health().iloc[0]
            assert (h["replies"], h["errors"], h["empty"]) == (8, 8, 0)


def test_thinking_replies_are_unavailable_warned_counted_and_billed(env, caplog):
    from precompute.config import load_config
    from precompute.runner import run
    from sago_engine.store import open_store

    with FakeAPI(default=("thinking", 47), prompt_tokens={"gemini": 9}) as fake:
        cfg = load_config(_toml(env, fake.url, backend="gemini", key="gemini-think",
                                extra="price_in_per_mtok = 0.30\nprice_out_per_mtok = 2.50"))
        [s] = run(cfg, progress=False)
        assert s["no_output"] == s["replies"] == 8 and s["status"] == "complete"
        assert "have no visible text" in caplog.text and "thinking_budget" in caplog.text
        with open_store(cfg.store) as st:
            d = st.deltas(kept_only=False)
            text = d[d["axis"].isin(["bleu", "bert", "mr"])]
            assert len(text) == 12 and not text["available"].any()  # never "perfectly stable" (0)
            assert text["reason"].str.startswith("no visible reply (base): token budget spent with no visible "
                                                 "text (47 hidden reasoning tokens)").all()
            h = st.reply_health().iloc[0]
            assert (h["replies"], h["empty"], h["budget_spent"], h["errors"], h["refused"]) == (8, 8, 8, 0, 0)
            u = st.run_usage().iloc[0]
            # 8 replies of 9 prompt + 47 thought tokens at 0.30 / 2.50 USD per million
            assert (u["prompt_tokens"], u["completion_tokens"], u["reasoning_tokens"]) == (72, 376, 376)
            assert u["cost_usd"] == pytest.approx(4 * 2.404e-04, rel=1e-12)
            api = st.api_responses()
            assert len(api) == 8 and set(api["reasoning_tokens"]) == {47}


def test_noise_floor_of_a_sampling_provider(env):
    """A fake that answers every request with a fresh random paraphrase: the floor (Δ between two
    askings of the same base prompt) is > 0, and the SGS is not significantly above it."""
    from precompute.config import load_config
    from precompute.runner import run
    from sago_engine.measure.noise_floor import floor_table
    from sago_engine.store import open_store

    with FakeAPI(default="paraphrase", seed=13) as fake:
        # one request at a time: the fake's random stream meets the requests in a fixed order
        cfg = load_config(_toml(env, fake.url, backend="openai_compatible", key="sampler", n=12,
                                extra="max_concurrency = 1"))
        assert cfg.models[0].repeats == 2
        [s] = run(cfg, progress=False)
        assert s["replies"] == 12 * 4 and fake.count == 48
        with open_store(cfg.store) as st:
            rep = st.base_repeats()
            assert len(rep) == 12 and set(rep["repeat"]) == {1}
            base_ids = set(st.con.execute("SELECT response_id FROM responses").df()["response_id"])
            assert not base_ids & set(rep["response_id"])  # repeats never collide with base rows
            floor = st.noise_floor()
            assert set(floor[floor["available"]]["axis"]) == {"bleu", "bert"}  # no log-probs, no activations, no MR
            assert (floor[floor["axis"] == "mr"]["reason"].str.contains("nothing|no register")).all()
            tab = floor_table(st.prompt_scores(), floor).set_index("axis")
        for axis in ("bleu", "bert"):
            row = tab.loc[axis]
            assert row["floor"] > 0.05 and row["n_paired"] == 12
            assert not row["above_floor"] and row["p"] > 0.05  # same process as the variants: not above the floor
        assert np.isnan(tab.loc["mr", "floor"]) and tab.loc["mr", "n_paired"] == 0
    # the dashboard: Profiles shows reply health and the floor, Significance the test against the floor
    from tests.integration.pages.test_pages_summary import _app
    from tests.support.rendered import all_tables

    at = _app(cfg.store)
    dfs = all_tables(at)
    health = next(v for v in dfs if "budget_spent" in v.columns).set_index("model")
    assert (health.loc["sampler", "replies"], health.loc["sampler", "errors"]) == (48, 0)
    shown = next(v for v in dfs if "floor" in v.columns).set_index("axis")
    assert shown.loc["bleu", "floor"] == pytest.approx(tab.loc["bleu", "floor"])
    at = _app(cfg.store, "significance")
    sig = next(el.value for el in at.dataframe if "floor" in el.value.columns).set_index("axis")
    assert sig.loc["bert", "p"] == pytest.approx(tab.loc["bert", "p"])


def test_reply_health_counts_each_kind_and_unparsed_judge_answers(tmp_path):
    import pandas as pd

    from sago_engine.measure.judge import parse_verdict
    from sago_engine.measure.noise_floor import reply_health_table
    from sago_engine.store import open_store

    with open_store(tmp_path / "h.duckdb", read_only=False, create=True) as st:
        st.insert_df("runs", pd.DataFrame([{"run_id": "r1", "model": "m", "backend": "gemini"}]))
        rows = [("ok", "stop", None), ("", "length", None), ("", "error", None), ("", "error", "HTTP 400"),
                ("  ", "stop", None)]
        st.insert_df("responses", pd.DataFrame([{"response_id": f"x{i}", "run_id": "r1", "prompt_id": "p",
                                                 "variant_id": f"v{i}", "response": t, "finish_reason": fr, "error": e}
                                                for i, (t, fr, e) in enumerate(rows)]))
        raws = ["YES", "There is no", "No rudeness here. YES", "NO.", ""]
        st.insert_df("mirroring_verdicts", pd.DataFrame([
            {"run_id": "r1", "variant_id": f"v{i}", "prompt_id": "p", "response_of": "variant", "judge_model": "j",
             "template_id": "t", "verdict": parse_verdict(r), "raw": r, "error": "HTTP 500" if i == 4 else None,
             "heuristic_verdict": 0, "detector": "heuristic"} for i, r in enumerate(raws)]).astype({"verdict": "Int64"}))
        h = st.reply_health().iloc[0]
        assert (h["replies"], h["errors"], h["empty"], h["budget_spent"], h["refused"]) == (5, 1, 2, 1, 1)
        assert (h["judge_verdicts"], h["judge_unparsed"]) == (5, 2)  # the two prose answers; a backend error is not "unparsed"
        assert h["invalid_logprobs"] == 0  # no usage row: nothing set aside
        st.insert_df("run_usage", pd.DataFrame([{"run_id": "r1", "requests": 5, "cache_hits": 0, "retries": 0, "errors": 1,
                                                 "prompt_tokens": 10, "completion_tokens": 10,
                                                 "invalid_logprobs": 2}]))
        t = reply_health_table(st.reply_health()).iloc[0]
        assert t["not_answers_pct"] == pytest.approx(80.0)
        assert t["invalid_logprobs"] == 2 and st.reply_health().iloc[0]["invalid_logprobs"] == 2


@pytest.mark.parametrize("model, match", [
    ('key = "m"\nbackend = "openai"\nomit_params = ["top_p"]', r"omit_params must be a list of temperature, seed, logprobs"),
    ('key = "m"\nbackend = "openai"\nthinking_budget = 0', r"thinking_budget applies to gemini and anthropic"),
    ('key = "m"\nbackend = "gemini"\nreasoning_effort = "low"', r"reasoning_effort is a string for openai"),
    ('key = "m"\nbackend = "gemini"\nthinking_budget = -1', r"thinking_budget must be an integer ≥ 0"),
    ('key = "m"\nbackend = "openai"\nbase_repeats = 0', r"base_repeats must be an integer ≥ 1"),
])
def test_fidelity_config_errors(model, match, env, tmp_path):
    from precompute.config import ConfigError, load_config
    from tests.integration.backends.test_api_backends import ROOT

    text = (f'[run]\nstore = "s.duckdb"\n[data]\ndir = "{ROOT / "data" / "datasets"}"\ndatasets = ["truthfulqa"]\n'
            f"[[models]]\n{model}\n")
    (tmp_path / "c.toml").write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_config(tmp_path / "c.toml", base_dir=tmp_path)


def test_answer_changing_settings_change_the_run_id_and_defaults_do_not():
    from dataclasses import replace
    from types import SimpleNamespace

    from precompute.config import ModelConfig, RunConfig
    from precompute.runner import Plan, run_id_for

    cfg = SimpleNamespace(max_new_tokens=8, seed=1, normalizers={}, filter={}, judge=None)
    cfg.max_new_tokens_for = lambda m: RunConfig.max_new_tokens_for(cfg, m)  # the real rule: own cap, else [run]'s
    plan = Plan([], {}, None, {})
    m = ModelConfig(key="g", backend="gemini")
    base = run_id_for(cfg, m, plan)
    assert run_id_for(cfg, replace(m, base_repeats=3), plan) == base  # more repeats: same answers, same run
    ids = {run_id_for(cfg, replace(m, **kw), plan) for kw in ({"thinking_budget": 0}, {"thinking_budget": 512},
                                                               {"omit_params": ("temperature",)})}
    assert len(ids) == 3 and base not in ids
    assert ModelConfig(key="x").repeats == 1 and m.repeats == 2
