"""LLM rewriter for structural variants: cleaning, degenerate checks, ids, filter, runner, Variants page."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from precompute.config import ConfigError, load_config
from precompute.runner import make_plan, run
from sago_engine.datasets import load_dataset
from sago_engine.seeds import stable_hash
from sago_engine.store import open_store
from sago_engine.types import VariantSpec
from sago_engine.variants import make_variant, variant_identity
from sago_engine.variants.rewriting.llm_rewriter import (
    REWRITER_TEMPLATE_ID,
    REWRITER_TEMPLATE_TEXT,
    LLMRewriter,
    clean_output,
    generator_id,
    rewrite_issue,
)
from sago_engine.variants.semantic_filter import FilterConfig, apply_filter
from sago_engine.variants.structural import Structural
from tests.support.factories import ScriptedBackend, register_scripted_backend, scripted_factory, tiny_toml

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "data" / "datasets"
Q = "What is the capital city of France and when did it become the capital?"
REWRITER = '\n[rewriter]\nbackend = "scripted"\nmodel = "scripted-rw"\nmax_new_tokens = 64\n'
UNRELATED = "bananas grow in warm tropical climates and ripen yellow while monkeys eat them eagerly".split()


def _base_text(prompt: str) -> str:
    return re.search(r"\nPrompt:\n(.*)\n\nRewritten prompt:$", prompt, re.S).group(1)


def good_rewrite(prompt: str) -> str:
    """A faithful scripted rewrite of whatever the rewriter prompt asks for."""
    text = _base_text(prompt)
    words = text.split()
    if "Make it shorter" in prompt:
        target = int(re.search(r"about (\d+) words", prompt).group(1))
        return " ".join(words[:max(1, target)])
    if "Make it longer" in prompt:
        return f"I have a question for you. {text} I would like a clear answer to this, please."
    if "into a question" in prompt:
        return f"Can you tell me this: {text.rstrip('.?!')}?"
    return f"Tell me the following: {text.rstrip('?')}."


# ---------------------------------------------------------------- pure helpers
@pytest.mark.parametrize("raw, want", [
    ("Sure! Here is the rewritten prompt:\n\n\"Name the capital of France.\"", "Name the capital of France."),
    ("Rewritten prompt: Name the capital.\n\nNote: I removed the filler words.", "Name the capital."),
    ("Here's a shorter version: 'Capital of France?'", "Capital of France?"),
    ("```\nTell me X.\n```", "Tell me X."),
    ("“Quoted text”", "Quoted text"),
    ('"a" and "b"', '"a" and "b"'),  # inner quotes: not a wrapper
    ("Name the capital of France.\n\nIt became the capital in 987.", "Name the capital of France.\n\nIt became the capital in 987."),
    ("   ", ""),
    ("", ""),
])
def test_clean_output(raw, want):
    assert clean_output(raw) == want


def test_clean_output_uses_the_base_to_tell_wrappers():
    base = 'What does "carpe diem" mean?'
    assert clean_output('"Explain what "carpe diem" means."', base) == 'Explain what "carpe diem" means.'
    assert clean_output('"a" and "b"', "Compare a and b.") == 'a" and "b'  # a wrapper by the base's rule
    quoted = '"To be or not to be"'
    assert clean_output('"To be or not to be"', quoted) == quoted  # the base itself is quoted: kept


def test_rewrite_issue():
    assert rewrite_issue(Q, "", "length", 0.5) == "empty output"
    assert rewrite_issue(Q, Q.upper(), "length", 0.5).startswith("unchanged")
    assert rewrite_issue(Q, "the the the the the the the capital", "length", 0.5).startswith("repetitive output")
    assert rewrite_issue(Q, Q + " Please answer.", "length", 0.5).startswith("length moved the wrong way")
    assert rewrite_issue(Q, "Capital of France?", "length", 2.0).startswith("length moved the wrong way")
    assert rewrite_issue(Q, "x", "mood", "imperative", error="timeout") == "backend error: timeout"
    assert rewrite_issue(Q, "Capital of France, and since when?", "length", 0.5) is None
    assert rewrite_issue(Q, "Name the capital of France and when it became so.", "mood", "imperative") is None


def test_template_and_generator_ids():
    assert REWRITER_TEMPLATE_ID == stable_hash(REWRITER_TEMPLATE_TEXT, length=12)
    g = generator_id("m", {"backend": "x", "max_new_tokens": 64})
    assert g.startswith(f"llm:m:{REWRITER_TEMPLATE_ID}:") and len(g.split(":")[-1]) == 8
    assert g != generator_id("m2", {"backend": "x", "max_new_tokens": 64})
    assert g != generator_id("m", {"backend": "x", "max_new_tokens": 65})
    p = LLMRewriter.render("length", Q, 0.5)
    assert "about 7 words instead of 14" in p and Q in p and p.endswith("Rewritten prompt:")
    assert "imperative" in LLMRewriter.render("mood", Q, "imperative")
    for bad in (("length", Q, 0.0), ("mood", Q, "passive"), ("tense", Q, 1)):
        with pytest.raises(ValueError):
            LLMRewriter.render(*bad)


def test_structural_with_llm_rewriter_is_deterministic_and_batched():
    be = ScriptedBackend("scripted-rw", respond=lambda p: "Okay. Here is the rewrite: \"" + good_rewrite(p) + "\"")
    rw = LLMRewriter(be, settings={"backend": "scripted"})
    specs = [VariantSpec("structural", "length", r, "GLOBAL") for r in (0.5, 0.75, 1.5, 2.0)]
    specs.append(VariantSpec("structural", "mood", 1.0, "GLOBAL"))
    assert rw.prefetch(LLMRewriter.request(s.subtype, Q, s.strength) for s in specs) == 5
    fam = {"structural": Structural(rw)}
    vs = [make_variant("p1", Q, s, 5, families=fam) for s in specs]
    assert len(be.calls) == 1 and len(be.calls[0]) == 5  # one batched call, nothing regenerated
    again = [make_variant("p1", Q, s, 5, families={"structural": Structural(LLMRewriter(
        ScriptedBackend("scripted-rw", respond=lambda p: good_rewrite(p)), settings={"backend": "scripted"}))})
        for s in specs]
    assert [v.variant_id for v in vs] == [v.variant_id for v in again]  # ids do not depend on the text
    assert [v.text for v in vs] == [v.text for v in again]  # cleaning removed the preamble and quotes
    for v, s in zip(vs, specs):
        assert v.generator == rw.name and v.variant_id == variant_identity("p1", s, 5, rw.name)[1]
        assert v.meta["template_id"] == REWRITER_TEMPLATE_ID and v.meta["rewrite_issue"] is None
        assert v.meta["raw_output"].startswith("Okay. Here is the rewrite:")
    assert vs[0].meta["achieved_ratio"] == pytest.approx(7 / 14, abs=1e-4) and vs[0].meta["target_ratio"] == 0.5
    assert vs[4].meta["target"] == "imperative" and vs[4].text.startswith("Tell me")
    rules = make_variant("p1", Q, specs[0], 5)
    assert rules.generator == "rules-v1" and rules.variant_id != vs[0].variant_id


def test_filter_rejects_degenerate_rewrites_unscored():
    answers = {0.5: "", 2.0: None}  # None → a good rewrite

    def respond(p):
        r = 0.5 if "shorter" in p else 2.0
        return answers[r] if answers[r] is not None else good_rewrite(p)

    fam = {"structural": Structural(LLMRewriter(ScriptedBackend("m", respond=respond)))}
    vs = [make_variant("p1", Q, VariantSpec("structural", "length", r, "GLOBAL"), 1, families=fam) for r in (0.5, 2.0)]
    assert vs[0].meta["rewrite_issue"] == "empty output" and vs[0].text == ""
    v_prompt = apply_filter(vs, {"p1": Q}, FilterConfig(level="prompt"))
    assert v_prompt[0].semantic_score is None and not v_prompt[0].passes and not v_prompt[0].kept
    assert v_prompt[1].passes and not v_prompt[1].kept  # SAGO: the prompt's family fails as a whole
    v_var = apply_filter(vs, {"p1": Q}, FilterConfig(level="variant"))
    assert not v_var[0].kept and v_var[1].kept


def test_config_errors(tmp_path):
    text = tiny_toml().format(store=tmp_path / "s.duckdb", data=DATA)
    p = tmp_path / "c.toml"
    p.write_text(text + '\n[rewriter]\nmodel = "tiny-random"\nmax_new_tokens = -1\n')
    with pytest.raises(ConfigError, match=r"\[rewriter\] max_new_tokens"):
        load_config(p)
    p.write_text(text.replace(', "structural"', "").replace(", structural = 1", "") + '\n[rewriter]\nmodel = "tiny-random"\n')
    with pytest.raises(ConfigError, match="no 'structural'"):
        load_config(p)


# ---------------------------------------------------------------- runner + store + Variants page
@pytest.fixture(scope="module")
def llm_store(tmp_path_factory):
    """tiny_toml + [rewriter] (scripted): prompt 0 and 3 rewritten well (with a preamble), prompt 1
    empty, prompt 2 unrelated text of the right length. Returns (cfg, built backends, expectations)."""
    undo = register_scripted_backend()
    d = tmp_path_factory.mktemp("llm_rw")
    p = d / "c.toml"
    p.write_text(tiny_toml().format(store=d / "s.duckdb", data=DATA) + REWRITER)
    cfg = load_config(p)
    texts = [q.text for ds in cfg.datasets for q in load_dataset(DATA / f"{ds}.jsonl", n=cfg.n_prompts, dataset=ds)]
    empty, unrelated = texts[1], texts[2]

    def respond(prompt):
        base = _base_text(prompt)
        if base == empty:
            return "   "
        if base == unrelated:
            good = good_rewrite(prompt).split()
            return " ".join(UNRELATED[i % len(UNRELATED)] for i in range(len(good))) + "."
        return "Sure! Here is the rewritten prompt:\n\n\"" + good_rewrite(prompt) + "\""

    built = []

    factory = scripted_factory(respond, built)

    [summary] = run(cfg, progress=False, backend_factory=factory)
    yield cfg, built, factory, summary, texts
    undo()


def test_runner_llm_structural_variants(llm_store):
    cfg, built, factory, summary, texts = llm_store
    [rw_backend] = built
    assert rw_backend.closed and len(rw_backend.calls) == 1 and len(rw_backend.calls[0]) == 4  # one batched call
    with open_store(cfg.store) as st:
        v = st.variants()
        prompts = st.prompts().set_index("prompt_id")["text"]
        rej = st.rejected_variants()
        resp = st.con.execute("SELECT variant_id FROM responses").df()
        dl = st.deltas(kept_only=False)
        units = st.con.execute("SELECT prompt_id, n_variants FROM units").df().set_index("prompt_id")["n_variants"]
        tmpl = st.templates("rewriter")
        rec = json.loads(st.runs().loc[0, "config"])
    s = v[v.family == "structural"].copy()
    s["base"] = s["prompt_id"].map(prompts)
    assert s["generator"].str.match(rf"llm:scripted-rw:{REWRITER_TEMPLATE_ID}:[0-9a-f]{{8}}$").all()
    assert set(v[v.family == "social_register"]["generator"]) <= {"rules-v1"}
    assert set(v[v.family == "surface_noise"]["generator"]) <= {"rules-v3"}
    assert tmpl["text"].tolist() == [REWRITER_TEMPLATE_TEXT] and tmpl["template_id"].tolist() == [REWRITER_TEMPLATE_ID]
    assert rec["llm"]["rewriter"]["template_ids"] == [REWRITER_TEMPLATE_ID]
    good = s[~s["base"].isin(texts[1:3])]
    assert len(good) == 2 and good["kept"].all()
    for _, row in good.iterrows():  # preamble and wrapping quotes cleaned away
        assert row["text"] == good_rewrite(LLMRewriter.render(*LLMRewriter.request(row["subtype"], row["base"],
                                                                                   row["strength"])))
        meta = json.loads(row["meta"])
        assert meta["raw_output"].startswith("Sure!") and meta["rewrite_issue"] is None
    bad = s[s["base"].isin(texts[1:3])].set_index("base")
    assert not bad["kept"].any()
    assert bad.loc[texts[1], "text"] == "" and bad.loc[texts[1], "semantic_score"] != bad.loc[texts[1], "semantic_score"]
    assert bad.loc[texts[2], "semantic_score"] < 0.219 and not bad.loc[texts[2], "passes_filter"]
    reasons = rej.set_index("prompt_id")["reason"]
    pid_empty, pid_unrel = (prompts[prompts == t].index[0] for t in texts[1:3])
    assert reasons[pid_empty] == "degenerate rewrite: empty output"
    assert reasons[pid_unrel].startswith("semantic score 0.") and reasons[pid_unrel].endswith("≤ filter threshold")
    # rejected LLM rewrites are never sent to the model and have no deltas
    rejected_ids = set(bad["variant_id"])
    assert not rejected_ids & set(resp["variant_id"].dropna()) and not rejected_ids & set(dl["variant_id"])
    assert summary["generated"] == 4 * 6 - 2
    assert units[pid_empty] == units[pid_unrel] == 4 and units.sum() == 18


def test_resume_reuses_stored_rewrites(llm_store):
    cfg, built, factory, summary, _ = llm_store
    with open_store(cfg.store) as st:
        before = st.variants()
    plan = make_plan(cfg, open_store(cfg.store), backend_factory=factory)
    assert len(built) == 1  # every rewrite came from the store: no rewriter backend built
    assert plan.variant_rows.empty and len(plan.skip) == 2
    llm = {x.variant_id: x.text for vs in plan.variants.values() for x in vs if x.generator.startswith("llm:")}
    assert llm == before.set_index("variant_id").loc[list(llm), "text"].to_dict()
    [again] = run(cfg, progress=False, backend_factory=factory)
    assert again["run_id"] == summary["run_id"] and again["pending"] == 0 and len(built) == 1


def test_variants_page_shows_rejected_llm_rewrite_and_reason(llm_store):
    cfg, *_ = llm_store
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.session_state["app_store_custom"] = str(cfg.store)
    at.run()
    at.switch_page("pages/variants.py")
    at.run()
    assert not at.exception, at.exception
    [table] = [df.value for df in at.dataframe if "reason" in df.value.columns]
    llm = table[table["generator"].str.startswith("llm:")]
    assert "degenerate rewrite: empty output" in set(llm["reason"])
    assert llm["reason"].str.startswith("semantic score").any()
    assert any(e.label.startswith("Rejected variants and why") for e in at.expander)


# ---------------------------------------------------------------- a real local model through get_backend
def test_llm_rewriter_with_tiny_random_is_deterministic():
    from sago_engine.backends import get_backend

    spec = VariantSpec("structural", "length", 0.5, "GLOBAL")
    out = []
    for _ in range(2):
        be = get_backend({"name": "hf_local", "model": "tiny-random", "device": "cpu"})
        try:
            rw = LLMRewriter(be, max_new_tokens=8)
            out.append(make_variant("p1", Q, spec, 3, families={"structural": Structural(rw)}))
        finally:
            be.close()
    a, b = out
    assert a.generator.startswith(f"llm:tiny-random:{REWRITER_TEMPLATE_ID}:")
    assert (a.variant_id, a.text, a.meta) == (b.variant_id, b.text, b.meta)
    assert "rewrite_issue" in a.meta and a.meta["template_id"] == REWRITER_TEMPLATE_ID


def test_a_transient_rewriter_outage_is_never_stored_as_a_rejection():
    """Retries ran out on a 5xx/timeout: prefetch raises (nothing recorded), so a rerun asks again;
    a permanent error is recorded as the rewrite's issue."""
    from sago_engine.types import GenerationResult
    from sago_engine.variants.rewriting.llm_rewriter import LLMRewriter, RewriterUnavailableError

    class Down:
        name, model_id, capabilities = "down", "down-model", frozenset()

        def __init__(self, retryable: bool) -> None:
            self.retryable = retryable

        def info(self):
            return {"backend": self.name, "model_id": self.model_id}

        def generate(self, prompts, max_new_tokens):
            return [GenerationResult(text="", error="HTTP 500: internal error", finish_reason="error",
                                     meta={"retryable": self.retryable}) for _ in prompts]

        def close(self):
            pass

    req = LLMRewriter.request("length", "What is the capital of Australia and why was it chosen?", 0.5)
    rw = LLMRewriter(Down(retryable=True), model="down-model")
    with pytest.raises(RewriterUnavailableError, match="transiently for 1 of 1 rewrites"):
        rw.prefetch([req])
    assert req not in rw._done
    rw = LLMRewriter(Down(retryable=False), model="down-model")
    rw.prefetch([req])
    assert rw._done[req].issue.startswith("backend error")
