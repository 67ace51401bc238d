"""The one measurement step (sago_engine.measure.step): screening, the chunk's generate call, the rows of its replies."""

from __future__ import annotations

from dataclasses import replace

from sago_engine.backends import Backend
from sago_engine.measure.pipeline import response_id
from sago_engine.measure.step import Pending, Scoring, generate, prepare, score, screen
from sago_engine.types import AXES, DEFAULT_NORMALIZERS, GenerationResult, Variant, VariantSpec
from sago_engine.variants import make_variant
from sago_engine.variants.noop import MODEL_INPUT_NOOP

PROMPT = "What is the capital of Australia?"


class EchoBackend(Backend):
    """Replies "<n> words" to each text; records every call (texts, keyword arguments)."""

    capabilities = frozenset()
    model_id = "echo"

    def __init__(self, retryable: str | None = None, same_input: str | None = None):
        self.calls: list[tuple[list[str], dict]] = []
        self.retryable = retryable
        self.same_input = same_input

    def generate(self, texts, max_new_tokens, **kw):
        self.calls.append((list(texts), kw))
        return [GenerationResult(text=f"{len(t.split())} words", finish_reason="stop",
                                 meta={"retryable": True} if t == self.retryable else {}) for t in texts]

    def encode_prompt(self, text):  # a template that maps ``same_input`` onto the base prompt's ids
        return [len(PROMPT)] if text in (PROMPT, self.same_input) else [len(text), 1]


def _variants(pid="p1", text=PROMPT):
    specs = [VariantSpec("surface_noise", "punctuation", 1.0, "SUFFIX"),
             VariantSpec("social_register", "politeness", 2.0, "PREFIX")]
    return [make_variant(pid, text, s, 0) for s in specs]


def _pending(pid: str, text: str) -> Pending:
    return Pending(pid, "d", text, tuple(_variants(pid, text)))


def test_generate_lays_out_base_variants_and_keyed_repeats():
    be = EchoBackend()
    a, b = _pending("p1", PROMPT), _pending("p2", "Name a prime.")
    out = generate(be, [a, b], 8, repeats=3, keyed_repeats=True)
    [(texts, kw)] = be.calls
    assert texts == [PROMPT, *(v.text for v in a.variants), PROMPT, PROMPT,
                     "Name a prime.", *(v.text for v in b.variants), "Name a prime.", "Name a prime."]
    assert kw == {"repeats": [0, 0, 0, 1, 2] * 2}  # each repeat its own reply-cache key
    assert [len(x.results) for x in out] == [2, 2] and [len(x.repeats) for x in out] == [2, 2]
    known = generate(be, [replace(a, base=out[0].base)], 8, repeats=3)  # a later batch: base known, no repeat
    assert be.calls[-1] == ([v.text for v in a.variants], {}) and known[0].base is out[0].base


def test_score_builds_every_row_once_and_leaves_transient_failures_pending():
    be = EchoBackend(retryable="Name a prime.")
    a, b = _pending("p1", PROMPT), _pending("p2", "Name a prime.")
    sc = Scoring("run", DEFAULT_NORMALIZERS, frozenset())
    rows = score(generate(be, [a, b], 8, repeats=2), sc)
    assert rows.retry == ["p2"] and rows.measured == [("p1", 2)]
    assert set(rows.responses["prompt_id"]) == {"p1"} and rows.responses["variant_id"].isna().sum() == 1
    assert len(rows.deltas) == 2 * len(AXES) and len(rows.repeats) == 1 and len(rows.floor) == len(AXES)
    assert [rid for rid, _ in rows.replies][:3] == [response_id("run", "p1", None),
                                                   *(response_id("run", "p1", v.variant_id) for v in a.variants)]
    third = make_variant("p1", PROMPT, VariantSpec("surface_noise", "spacing", 1.0, "GLOBAL"), 0)
    later = score(generate(be, [replace(a, variants=(third,), base=rows.replies[0][1])], 8), sc)
    assert later.responses["variant_id"].notna().all()  # no second base row
    both = rows + later
    assert len(both.responses) == len(rows.responses) + len(later.responses)
    keyed = both.for_run("other")
    assert set(keyed.responses["run_id"]) == {"other"} == set(keyed.deltas["run_id"])
    assert keyed.responses["response_id"].tolist() == [
        response_id("other", p, v if isinstance(v, str) else None)
        for p, v in zip(both.responses["prompt_id"], both.responses["variant_id"])]
    assert list(both.of_variants([a.variants[0].variant_id]).responses["variant_id"].fillna("base")) == [
        "base", a.variants[0].variant_id]


def test_prepare_sets_aside_model_input_noops_with_unavailable_rows():
    vs = _variants()
    be = EchoBackend(same_input=vs[0].text)
    item = prepare(be, "p1", "d", PROMPT, vs)
    assert item.variants == (vs[1],) and item.same_input == {vs[0].variant_id: MODEL_INPUT_NOOP}
    assert prepare(be, "p1", "d", PROMPT, vs, check_input=False).variants == tuple(vs)  # API backends: not visible
    rows = score(generate(be, [item], 8), Scoring("run", DEFAULT_NORMALIZERS, frozenset(), options=("bert@rescaled",),
                                                  bert_baseline=0.12))
    aside = rows.deltas[rows.deltas["variant_id"] == vs[0].variant_id]
    assert list(aside["axis"]) == [*AXES, "bert@rescaled"] and not aside["available"].any()
    assert set(aside["reason"]) == {MODEL_INPUT_NOOP} and len(be.calls[0][0]) == 2  # base + one variant


def test_screen_skips_text_noops_and_rejected_llm_rewrites_only():
    from sago_engine.variants.semantic_filter import FilterConfig

    rules = make_variant("p1", PROMPT, VariantSpec("structural", "length", 0.5, "GLOBAL"), 0)
    bad_rules = replace(rules, variant_id="bad-rules", text="Bananas ripen yellow in warm tropical climates.")
    llm = replace(rules, variant_id="bad-llm", text="Monkeys eat bananas eagerly in the trees.", generator="llm:x:t:h",
                  spec=VariantSpec("structural", "length", 1.5, "GLOBAL"))
    noop = Variant("noop", "p1", VariantSpec("surface_noise", "case", 1.0, "GLOBAL"), PROMPT, 1, "rules-v1", {})
    sc = screen([bad_rules, llm, noop], {"p1": PROMPT}, FilterConfig(level="variant", encoder_baseline=0.1206))
    assert sc.noops.keys() == {"noop"} and sc.skip == {"noop", "bad-llm"}  # a rejected rules variant is generated
    assert not sc.kept("bad-rules") and not sc.kept("bad-llm") and not sc.kept("noop")
    assert sc.info["level"] == "variant" and 0 < sc.info["threshold"] < 1
    again = screen([bad_rules, llm, noop], {"p1": PROMPT}, FilterConfig(encoder_baseline=0.1206),
                   stored=["bad-rules", "bad-llm", "noop"], stored_kept=lambda ids: {i: True for i in ids})
    assert again.verdicts == {} and again.skip == {"noop"}  # judged by an earlier run: its stored verdicts
    rows = sc.variant_rows().set_index("variant_id")
    assert not rows.loc["noop", "kept"] and rows.loc["noop", "skip_reason"].startswith("no-op: ")
    assert screen([noop], {"p1": PROMPT}).info == {}  # no filter: every variant kept
