"""LLM mirroring judge: parser, template, batching, heuristic fallback, runner/store plumbing, run ids."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from precompute.config import ConfigError, load_config
from precompute.runner import make_plan, run, run_id_for
from sago_engine.axes.mirroring import mirrors
from sago_engine.measure.judge import (
    JUDGE_TEMPLATE,
    JUDGE_TEMPLATE_ID,
    Judge,
    JudgeItem,
    describe_register,
    judged_delta_mr,
    parse_verdict,
)
from sago_engine.measure.pipeline import Unit, compute_rows
from sago_engine.seeds import stable_hash
from sago_engine.store import open_store
from sago_engine.types import DEFAULT_NORMALIZERS, GenerationResult, VariantSpec
from sago_engine.variants import make_variant
from tests.support.factories import ScriptedBackend, register_scripted_backend, scripted_factory, tiny_toml

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "data" / "datasets"
#: make_plan + run_id_for of ``tiny_toml()``: a judge or rewriter never changes them; a new surface
#: noise generator (new variant ids) changes the plan signature and so the run id
BASELINE_RUN_ID = "3ce91cad13c737f9"
BASELINE_SIGNATURE = "66a8b2efadd045a4"
JUDGE_SECTION = '\n[judge]\nbackend = "scripted"\nmodel = "scripted-judge"\n'


def _cfg(tmp_path, extra: str = "", name: str = "c.toml"):
    p = tmp_path / name
    p.write_text(tiny_toml().format(store=tmp_path / "s.duckdb", data=DATA) + extra)
    return load_config(p)


def _variant(subtype="politeness", strength=-4.0, position="PREFIX", text="What is the capital of France?"):
    return make_variant("p1", text, VariantSpec("social_register", subtype, strength, position), run_seed=3)


def _reply(prompt: str) -> str:
    return re.search(r"\nChatbot reply: (.*?)\n\nDoes the chatbot reply", prompt, re.S).group(1)


# ---------------------------------------------------------------- parser and template
@pytest.mark.parametrize("raw, want", [
    (" yes.", 1), ("YES", 1), ("No", 0), ("no", 0), ("NO.\n", 0), ("Answer: YES", 1), ("**Yes**, it does", 1),
    ("No, yes", None), ("maybe", None), ("", None), (None, None), ("yesterday", None), ("nobody knows", None),
    ("I cannot tell", None),
    # a verdict word inside prose is not a verdict
    ("There is no", None), ("No rudeness here. YES", None), ("The reply is rude, so yes", None),
    ("It is polite.\nAnswer: YES", 1), ("Reasoning: curt.\n**Answer:** no", 0), ('"NO"', 0), ("Yes - polite", 1),
    ("Answer: YES\nAnswer: NO", 0), ("yes yes", None),
    ("Yes. Yes, it is polite.", 1), ("NO - no rudeness", 0),  # the same word again does not contradict it
])
def test_parse_verdict_edge_cases(raw, want):
    assert parse_verdict(raw) == want


def test_template_id_is_hash_of_text_and_render_has_everything():
    assert JUDGE_TEMPLATE_ID == stable_hash(JUDGE_TEMPLATE, length=12)
    assert "YES or NO" in JUDGE_TEMPLATE
    v = _variant()
    assert describe_register(v) == "rude, insulting or hostile"
    j = Judge(ScriptedBackend())
    p = j.render(JudgeItem(v, "What is the capital of France?", "Paris, obviously."))
    assert "What is the capital of France?" in p and v.text in p and "Paris, obviously." in p
    assert "subtype politeness, strength -4" in p and "rude, insulting or hostile" in p
    assert j.template_id == JUDGE_TEMPLATE_ID and j.label == "judge:scripted-judge"
    with pytest.raises(ValueError, match="max_new_tokens"):
        Judge(ScriptedBackend(), max_new_tokens=0)
    with pytest.raises(ValueError, match="placeholders"):
        Judge(ScriptedBackend(), template="{nope}")


def test_judge_batches_once_and_keeps_raw_text():
    answers = iter([" yes.", "No", "maybe", "", RuntimeError("rate limited")])
    be = ScriptedBackend(respond=lambda p: next(answers))
    j = Judge(be)
    v = _variant()
    out = j.judge([JudgeItem(v, "q", f"reply {k}") for k in range(5)])
    assert len(be.calls) == 1 and len(be.calls[0]) == 5
    assert [o.verdict for o in out] == [1, 0, None, None, None]
    assert [o.raw for o in out] == [" yes.", "No", "maybe", "", ""]
    assert out[4].error == "rate limited" and out[0].error is None
    assert {o.judge_model for o in out} == {"scripted-judge"} and {o.template_id for o in out} == {JUDGE_TEMPLATE_ID}
    assert j.judge([]) == [] and len(be.calls) == 1  # nothing to judge: no backend call


def test_judged_delta_mr_and_heuristic_fallback():
    v_rude, v_polite = _variant(), _variant("politeness", 3.0, "SUFFIX")
    base_resp = "Paris."
    replies = {"Ugh, whatever. Paris.": "YES", base_resp: "NO"}

    def respond(prompt):
        if "strength 3" in prompt:
            return "I am not sure"  # unusable → both terms from the heuristic
        return replies[_reply(prompt)]

    j = Judge(ScriptedBackend(respond=respond))
    out = judged_delta_mr(j, [v_rude, v_polite], ["q", "q"], ["Ugh, whatever. Paris.", "Thank you! Paris."],
                          [base_resp, base_resp])
    assert out[0].delta == 1.0 and out[0].detector == "judge:scripted-judge"
    assert (out[0].variant.verdict, out[0].base.verdict) == (1, 0)
    assert (out[0].heuristic_variant, out[0].heuristic_base) == (1, 0)  # "ugh", "whatever" are negative cues
    assert out[1].detector == "heuristic" and out[1].variant.verdict is None
    assert out[1].delta == mirrors("Thank you! Paris.", v_polite, base_resp) - mirrors(base_resp, v_polite, base_resp) == 1
    with pytest.raises(ValueError):
        judged_delta_mr(j, [v_rude], ["q", "q"], ["a"], ["b"])


def test_compute_rows_overrides_and_default_unchanged():
    v = _variant()
    base = GenerationResult("Paris.", n_tokens=2)
    res = [GenerationResult("Paris, obviously.", n_tokens=3)]
    unit = Unit("p1", "d", base, [v], res)
    _, plain = compute_rows("r", [unit], DEFAULT_NORMALIZERS, frozenset())
    _, same = compute_rows("r", [unit], DEFAULT_NORMALIZERS, frozenset(), mr_overrides=None)
    pd.testing.assert_frame_equal(plain, same)
    mr = plain.set_index("axis").loc["mr"]
    assert mr["detector"] == "heuristic"
    _, judged = compute_rows("r", [unit], DEFAULT_NORMALIZERS, frozenset(), mr_overrides={v.variant_id: (-1.0, "judge:x")})
    row = judged.set_index("axis").loc["mr"]
    assert row["detector"] == "judge:x" and row["delta"] == -1.0 and row["delta_norm"] == -1.0
    others = judged[judged.axis != "mr"].reset_index(drop=True)
    pd.testing.assert_frame_equal(others, plain[plain.axis != "mr"].reset_index(drop=True))


# ---------------------------------------------------------------- config and run ids
def test_config_errors(tmp_path):
    for extra, msg in [
        ("\n[judge]\nbackend = \"hf_local\"\n", "needs model"),
        ("\n[judge]\nbackend = \"hf_lcoal\"\nmodel = \"x\"\n", "Did you mean 'hf_local'"),
        ("\n[judge]\nmodel = \"tiny-random\"\nmax_new_tokens = 0\n", r"\[judge\] max_new_tokens"),
        ("\n[judge]\nmodel = \"tiny-random\"\ntemperature = 0.5\n", r"unknown \[judge\] key 'temperature'"),
        ("\n[judge]\nmodel = \"no-such-model\"\n", r"\[judge\] unknown model 'no-such-model'"),
        ("\n[judge]\nmodel = \"tiny-random\"\ndtype = \"int3\"\n", r"\[judge\] model 'tiny-random': unknown dtype 'int3'"),
    ]:
        with pytest.raises(ConfigError, match=msg):
            _cfg(tmp_path, extra)
    p = tmp_path / "top.toml"
    p.write_text("judge = 3\n" + tiny_toml().format(store=tmp_path / "s.duckdb", data=DATA))
    with pytest.raises(ConfigError, match=r"\[judge\] must be a table"):
        load_config(p)
    p.write_text(tiny_toml().format(store=tmp_path / "s.duckdb", data=DATA).replace(
        '"social_register", ', "").replace("social_register = 2, ", "") + '\n[judge]\nmodel = "tiny-random"\n')
    with pytest.raises(ConfigError, match="no 'social_register'"):
        load_config(p)


@pytest.fixture(scope="module")
def plan_and_cfg(tmp_path_factory):
    d = tmp_path_factory.mktemp("runid")
    cfg = _cfg(d)
    return cfg, make_plan(cfg), d


def test_run_without_judge_keeps_run_id(plan_and_cfg):
    cfg, plan, _ = plan_and_cfg
    assert cfg.judge is None and cfg.rewriter is None
    assert plan.signature == BASELINE_SIGNATURE and plan.skip == frozenset() and plan.templates == []
    assert run_id_for(cfg, cfg.models[0], plan) == BASELINE_RUN_ID


def test_judge_settings_change_the_run_id(plan_and_cfg):
    cfg, plan, d = plan_and_cfg
    ids = {}
    for name, extra in [("a", '\n[judge]\nmodel = "tiny-random"\n'),
                        ("b", '\n[judge]\nmodel = "tiny-random"\ndevice = "cpu"\nbatch_size = 2\n'),
                        ("c", '\n[judge]\nmodel = "smollm2-135m-instruct"\n'),
                        ("e", '\n[judge]\nmodel = "tiny-random"\nmax_new_tokens = 8\n')]:
        c = _cfg(d, extra, name=f"{name}.toml")
        assert c.judge["model"] in ("tiny-random", "smollm2-135m-instruct")
        ids[name] = run_id_for(c, c.models[0], plan)  # the judge does not change the plan
    assert ids["a"] == ids["b"]  # device / batch size do not change a verdict's meaning
    assert len({BASELINE_RUN_ID, ids["a"], ids["c"], ids["e"]}) == 4


# ---------------------------------------------------------------- runner end to end (tiny model + scripted judge)
def test_runner_stores_verdicts_templates_and_detector_labels(tmp_path, request):
    request.addfinalizer(register_scripted_backend())
    cfg = _cfg(tmp_path, JUDGE_SECTION)
    from sago_engine.datasets import load_dataset

    fallback_prompt = load_dataset(DATA / "truthfulqa.jsonl", n=1, dataset="truthfulqa")[0].text
    judges = []

    def respond(prompt):
        if f"Original request: {fallback_prompt}\nRephrased request:" in prompt:
            return "I cannot tell"
        return "YES" if len(_reply(prompt)) % 2 == 0 else " no."

    factory = scripted_factory(respond, judges)

    [summary] = run(cfg, progress=False, backend_factory=factory)
    assert summary["run_id"] != BASELINE_RUN_ID
    [jb] = judges
    assert jb.closed and len(jb.calls) == 2  # one batched judge call per chunk (2 chunks of 2 prompts)
    assert [len(c) for c in jb.calls] == [8, 8]  # 2 prompts × 2 social variants × (variant + base reply)
    with open_store(cfg.store) as st:
        t = st.templates()
        assert t.set_index("kind").loc["judge", "text"] == JUDGE_TEMPLATE
        assert t.set_index("kind").loc["judge", "template_id"] == JUDGE_TEMPLATE_ID
        mv = st.mirroring_verdicts()
        d = st.deltas(kept_only=False)
        prompts = st.prompts().set_index("prompt_id")["text"]
        rec = json.loads(st.runs().loc[0, "config"])
    assert rec["llm"]["judge"]["template_id"] == JUDGE_TEMPLATE_ID and rec["judge"]["model"] == "scripted-judge"
    mr = d[d.axis == "mr"].set_index("variant_id")
    social = mr[mr.family == "social_register"]
    assert len(mv) == 2 * len(social) == 16
    assert set(mv["response_of"]) == {"variant", "base"} and set(mv["heuristic_verdict"]) <= {0, 1}
    fb_pid = prompts[prompts == fallback_prompt].index[0]
    fb = mv[mv.prompt_id == fb_pid]
    assert fb["verdict"].isna().all() and (fb["raw"] == "I cannot tell").all() and (fb["detector"] == "heuristic").all()
    judged = mv[mv.prompt_id != fb_pid]
    assert judged["verdict"].notna().all() and (judged["detector"] == "judge:scripted-judge").all()
    assert set(judged["raw"]) <= {"YES", " no."}
    # the stored Δ-MR is the judge's difference where it answered, the heuristic's elsewhere
    wide = mv.pivot(index="variant_id", columns="response_of", values=["verdict", "heuristic_verdict", "detector"])
    for vid, row in wide.iterrows():
        det = row[("detector", "variant")]
        assert social.loc[vid, "detector"] == det
        src = "verdict" if det.startswith("judge:") else "heuristic_verdict"
        assert social.loc[vid, "delta"] == row[(src, "variant")] - row[(src, "base")]
    assert set(mr[mr.family != "social_register"]["detector"]) == {"rules"}
    # a merge carries the new tables along
    from sago_engine.store import merge_stores

    out = tmp_path / "m.duckdb"
    counts = merge_stores(out, [cfg.store])
    with open_store(cfg.store) as st:
        n_deltas = st.counts()["deltas"]  # every row, option axes included (st.deltas() shows the six)
    with open_store(out) as st:
        pd.testing.assert_frame_equal(st.mirroring_verdicts(), mv)
        kinds = st.templates()["kind"].tolist()  # the judge's template and the model's chat template
        assert sorted(kinds) == ["chat_template", "judge"] and counts["deltas"] == n_deltas


def test_schema_v1_store_reads_empty_and_migrates_on_a_writable_open(tmp_path):
    """A version-1 store (written before mirroring_verdicts/templates/run_usage/api_responses):
    read-only reads are empty and leave the file untouched; a writable open migrates it to v3."""
    from sago_engine.store import EXTRA_TABLES, SCHEMA_VERSION

    path = tmp_path / "old.duckdb"
    with open_store(path, read_only=False, create=True) as st:
        st.con.execute("; ".join(f"DROP TABLE {t}" for t in EXTRA_TABLES))
        st.con.execute("ALTER TABLE responses DROP COLUMN token_ids")
        st.con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    before = path.read_bytes()
    with open_store(path) as st:
        assert int(st.meta()["schema_version"]) == 1
        assert st.mirroring_verdicts().empty and st.templates().empty and st.run_usage().empty
        assert list(st.templates().columns) == ["template_id", "kind", "text"]
    assert path.read_bytes() == before
    with open_store(path, read_only=False) as st:
        assert int(st.meta()["schema_version"]) == SCHEMA_VERSION == 5
        st.insert_df("templates", pd.DataFrame([{"template_id": JUDGE_TEMPLATE_ID, "kind": "judge",
                                                 "text": JUDGE_TEMPLATE}]))
        assert st.templates("judge")["text"].tolist() == [JUDGE_TEMPLATE]
        assert st.api_responses().empty


# ---------------------------------------------------------------- real local models through get_backend
def _real_backend(key):
    from sago_engine.backends import get_backend
    from sago_engine.models import ModelUnavailableError

    try:
        return get_backend({"name": "hf_local", "model": key, "device": "cpu"})
    except ModelUnavailableError as e:
        pytest.skip(str(e))


REAL_ITEMS = [
    ("Ugh, it's Paris. Obviously. Stop wasting my time, idiot.", "politeness", -4.0, "PREFIX"),
    ("The capital of France is Paris.", "politeness", -4.0, "PREFIX"),
    ("Thank you so much for asking! Paris. Thanks!", "gratitude", 2.0, "SUFFIX"),
    ("Paris.", "gratitude", 2.0, "SUFFIX"),
]


@pytest.mark.slow
def test_real_judge_gives_real_verdicts_under_the_default_template():
    """qwen2.5-coder-0.5b-instruct with the default template and 4 tokens answers every item with one
    word, YES or NO: each verdict is a real 1/0 (a judge that never answers fails here), greedy
    decoding repeats them, and the reply full of thanks is judged to show gratitude."""
    be = _real_backend("qwen2.5-coder-0.5b-instruct")
    try:
        j = Judge(be)
        items = [JudgeItem(_variant(sub, st, pos), "What is the capital of France?", reply)
                 for reply, sub, st, pos in REAL_ITEMS]
        a, b = j.judge(items), j.judge(items)
        assert [x.raw for x in a] == [x.raw for x in b]
        assert all(x.raw.strip() in ("YES", "NO") for x in a), [x.raw for x in a]
        assert [x.verdict for x in a] == [parse_verdict(x.raw) for x in a] and None not in [x.verdict for x in a]
        assert a[2].verdict == 1  # "Thank you so much for asking! ... Thanks!" expresses gratitude
        assert {x.judge_model for x in a} == {"qwen2.5-coder-0.5b-instruct"} and {x.error for x in a} == {None}
        # judged Δ-MR then comes from the judge, not from the heuristic fallback
        out = judged_delta_mr(j, [items[2].variant], ["What is the capital of France?"], [REAL_ITEMS[2][0]],
                              ["Paris."])
        assert out[0].detector == "judge:qwen2.5-coder-0.5b-instruct"
        assert out[0].delta == out[0].variant.verdict - out[0].base.verdict
    finally:
        be.close()


@pytest.mark.slow
def test_smollm_judge_gives_no_verdict_and_falls_back_to_the_heuristic():
    """SmolLM2-135M under the same template opens with "The chatbot reply" (no YES/NO in 4 tokens):
    the parser must call that no verdict, and Δ-MR must fall back to the offline heuristic."""
    be = _real_backend("smollm2-135m-instruct")
    try:
        j = Judge(be)
        items = [JudgeItem(_variant(sub, st, pos), "What is the capital of France?", reply)
                 for reply, sub, st, pos in REAL_ITEMS]
        out = j.judge(items)
        assert [x.raw for x in out] == [x.raw for x in j.judge(items)]  # greedy: the same text every time
        assert all(x.raw.startswith("The chatbot repl") for x in out), [x.raw for x in out]
        assert [x.verdict for x in out] == [None] * 4
        mr = judged_delta_mr(j, [items[0].variant], ["What is the capital of France?"], [REAL_ITEMS[0][0]],
                             [REAL_ITEMS[1][0]])
        assert mr[0].detector == "heuristic" and mr[0].delta == mr[0].heuristic_variant - mr[0].heuristic_base
    finally:
        be.close()
