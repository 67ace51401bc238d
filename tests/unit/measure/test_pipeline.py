"""pipeline.compute_rows with hand-made GenerationResults (no model): shapes, availability, values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from sago_engine.measure.pipeline import Unit, compute_rows, response_id
from sago_engine.scoring.scores import resolve_normalizers
from sago_engine.store import open_store
from sago_engine.types import AXES, GenerationResult, Variant, VariantSpec

NORM = resolve_normalizers()
ALL = frozenset({"cos", "prob", "ent"})
DELTA_COLS = ["run_id", "dataset", "prompt_id", "variant_id", "axis", "delta", "delta_norm", "available", "reason",
              "detector"]
RESP_COLS = ["response_id", "run_id", "prompt_id", "variant_id", "response", "n_tokens", "token_ids", "seq_logprob",
             "mean_entropy", "cos_per_layer", "finish_reason", "latency_s", "error", "request", "flags"]


def V(vid, family="surface_noise", subtype="case", meta=None, strength=1.0):
    return Variant(vid, "d1:1", VariantSpec(family, subtype, strength, "GLOBAL"), f"text {vid}", 3,
                   meta=meta if meta is not None else {"target": "upper"})


def R(text, lp=(-1.0, -2.0), ent=(0.5, 1.5), hidden=None, error=None):
    return GenerationResult(
        text=text, n_tokens=len(lp) if lp is not None else 0,
        token_logprobs=None if lp is None else np.array(lp, dtype=np.float64),
        token_entropies=None if ent is None else np.array(ent, dtype=np.float64),
        hidden_last=None if hidden is None else np.asarray(hidden, dtype=np.float32),
        error=error,
    )


H_BASE = [[1.0, 0.0], [1.0, 0.0]]


def _by_axis(deltas, vid):
    return deltas[deltas["variant_id"] == vid].set_index("axis")


def test_shapes_and_hand_values():
    base = R("The answer is Paris.", lp=(-1.0, -2.0), ent=(0.5, 1.5), hidden=H_BASE)  # logp -3, H̄ 1.0
    v1, v2 = V("v1"), V("v2", "social_register", "politeness", {"register": "polite"})
    r1 = R("THE ANSWER IS PARIS.", lp=(-4.0, -6.0, -15.0), ent=(2.0, 3.0, 4.0), hidden=[[2.0, 0.0], [0.0, 1.0]])
    r2 = R("The answer is Paris.", lp=(-1.0, -2.0), ent=(0.5, 1.5), hidden=H_BASE)
    unit = Unit("d1:1", "d1", base, [v1, v2], [r1, r2])
    resp, deltas = compute_rows("run1", [unit], NORM, ALL)

    assert list(deltas.columns) == DELTA_COLS
    assert len(deltas) == 2 * len(AXES) == 12
    assert deltas.groupby("variant_id")["axis"].apply(list).to_dict() == {"v1": list(AXES), "v2": list(AXES)}
    assert deltas["available"].all() and deltas["reason"].isna().all()
    assert set(deltas["run_id"]) == {"run1"} and set(deltas["dataset"]) == {"d1"}

    a = _by_axis(deltas, "v1")
    assert a.loc["cos", "delta"] == pytest.approx(-0.5)        # layers: cos 1 and 0 → mean(0, −1)
    assert a.loc["cos", "delta_norm"] == pytest.approx(-0.25)  # / R=2
    assert a.loc["prob", "delta"] == pytest.approx(-25.0 - -3.0)
    assert a.loc["prob", "delta_norm"] == pytest.approx(-22.0 / 250)
    assert a.loc["ent", "delta"] == pytest.approx(3.0 - 1.0)
    assert a.loc["ent", "delta_norm"] == pytest.approx(0.2)
    assert a.loc["mr", "delta"] == 1.0 and a.loc["mr", "detector"] == "rules"
    # case-only change: 13a is case-sensitive, only "." matches: p1 = 1/5, and exp smoothing gives
    # p2 = 1/(2·4), p3 = 1/(4·3), p4 = 1/(8·2) → BLEU = (1/7680)^(1/4) ≈ 10.682, Δ ≈ −89.318
    hand = 100 * (1 / 7680) ** 0.25 - 100
    assert a.loc["bleu", "delta"] == pytest.approx(hand) and hand == pytest.approx(-89.3178, abs=1e-4)
    assert a.loc["bleu", "delta_norm"] == pytest.approx(hand / 100)
    # MiniLM is uncased: "THE ANSWER IS PARIS." has the same word pieces as the base → exactly 0
    assert a.loc["bert", "delta"] == 0.0 and pd.isna(a.loc["bert", "detector"])
    assert a.loc["bleu", "detector"] == "nrefs:1|case:mixed|eff:yes|tok:13a|smooth:exp|version:2.6.0"
    assert pd.isna(a.loc["cos", "detector"])

    b = _by_axis(deltas, "v2")
    assert (b["delta"] == 0.0).all() and (b["delta_norm"] == 0.0).all()
    assert b.loc["mr", "detector"] == "heuristic"

    assert list(resp.columns) == RESP_COLS
    assert len(resp) == 3
    assert pd.isna(resp.loc[0, "variant_id"]) and resp["variant_id"].tolist()[1:] == ["v1", "v2"]
    assert resp.loc[0, "response"] == "The answer is Paris."
    assert resp.loc[0, "seq_logprob"] == pytest.approx(-3.0) and resp.loc[0, "mean_entropy"] == pytest.approx(1.0)
    assert resp.loc[0, "cos_per_layer"] is None or np.all(pd.isna(resp.loc[0, "cos_per_layer"]))
    assert resp.loc[1, "cos_per_layer"] == pytest.approx([1.0, 0.0])
    assert resp.loc[2, "cos_per_layer"] == pytest.approx([1.0, 1.0])
    assert resp["response_id"].is_unique
    assert resp.loc[0, "response_id"] == response_id("run1", "d1:1", None)
    assert resp.loc[1, "response_id"] == response_id("run1", "d1:1", "v1")


def test_clipping_in_delta_norm():
    base = R("a", lp=(-1.0,), ent=(0.0,))
    r = R("a", lp=(-1000.0,), ent=(50.0,))
    _, d = compute_rows("r", [Unit("d1:1", "d1", base, [V("v")], [r])], NORM, frozenset({"prob", "ent"}))
    a = d.set_index("axis")
    assert a.loc["prob", "delta"] == pytest.approx(-999.0) and a.loc["prob", "delta_norm"] == -1.0
    assert a.loc["ent", "delta"] == pytest.approx(50.0) and a.loc["ent", "delta_norm"] == 1.0


def test_custom_normalizers_used():
    base = R("a", lp=(-1.0,), ent=(0.0,))
    r = R("a", lp=(-11.0,), ent=(1.0,))
    norm = resolve_normalizers({"prob": 20.0, "ent": 4.0})
    _, d = compute_rows("r", [Unit("d1:1", "d1", base, [V("v")], [r])], norm, frozenset({"prob", "ent"}))
    a = d.set_index("axis")
    assert a.loc["prob", "delta_norm"] == pytest.approx(-0.5)
    assert a.loc["ent", "delta_norm"] == pytest.approx(0.25)


def test_no_capabilities_marks_white_box_axes_unavailable():
    base = R("Paris.", hidden=H_BASE)
    r = R("PARIS!!", lp=(-9.0,), ent=(3.0,), hidden=[[0.0, 1.0], [0.0, 1.0]])
    resp, d = compute_rows("r", [Unit("d1:1", "d1", base, [V("v")], [r])], NORM, frozenset())
    a = d.set_index("axis")
    for ax in ("cos", "prob", "ent"):
        assert not a.loc[ax, "available"]
        assert a.loc[ax, "delta"] is None or math.isnan(a.loc[ax, "delta"])
        assert a.loc[ax, "delta_norm"] is None or math.isnan(a.loc[ax, "delta_norm"])
        assert isinstance(a.loc[ax, "reason"], str) and a.loc[ax, "reason"]
    assert "activations" in a.loc["cos", "reason"]
    for ax in ("bleu", "bert", "mr"):
        assert a.loc[ax, "available"] and pd.isna(a.loc[ax, "reason"])
        assert np.isfinite(a.loc[ax, "delta"])
    assert a.loc["mr", "delta"] == 1.0


def test_capabilities_but_missing_arrays():
    base = R("x", lp=None, ent=None, hidden=None)
    r = R("x", lp=None, ent=None, hidden=None)
    _, d = compute_rows("r", [Unit("d1:1", "d1", base, [V("v")], [r])], NORM, ALL)
    a = d.set_index("axis")
    assert not a.loc[["cos", "prob", "ent"], "available"].any()
    assert a.loc["cos", "reason"] == "no hidden states returned"
    assert a.loc["prob", "reason"] == "no log-probs returned"
    assert a.loc["ent", "reason"] == "no entropies returned"
    assert a.loc[["bleu", "bert", "mr"], "available"].all()


def test_generation_error_marks_rows_unavailable():
    base = R("Paris.", hidden=H_BASE)
    bad = R("", lp=None, ent=None, hidden=None, error="CUDA out of memory")
    _, d = compute_rows("r", [Unit("d1:1", "d1", base, [V("v")], [bad])], NORM, ALL)
    assert len(d) == 6
    assert not d["available"].any()
    assert d["delta"].isna().all() and d["delta_norm"].isna().all()
    assert d["reason"].str.contains("generation error: CUDA out of memory").all()


def test_base_error_marks_every_variant_unavailable():
    base = R("", lp=None, ent=None, error="timeout")
    _, d = compute_rows("r", [Unit("d1:1", "d1", base, [V("a"), V("b")], [R("x"), R("y")])], NORM, ALL)
    assert len(d) == 12 and not d["available"].any()
    assert d["reason"].str.contains("timeout").all()


def test_one_failed_variant_does_not_spoil_siblings():
    base = R("Paris.", hidden=H_BASE)
    good = R("Paris.", hidden=H_BASE)
    bad = R("", lp=None, ent=None, hidden=None, error="boom")
    _, d = compute_rows("r", [Unit("d1:1", "d1", base, [V("good"), V("bad")], [good, bad])], NORM, ALL)
    g = _by_axis(d, "good")
    assert g["available"].all()
    assert (g["delta"] == 0.0).all()


def test_identical_results_all_zero():
    h = np.random.default_rng(3).normal(size=(4, 8))
    base = R("Same reply.", lp=(-0.1, -0.2, -0.3), ent=(0.4, 0.5, 0.6), hidden=h)
    variants = [V("a"), V("b", "structural", "length", {"target_ratio": 0.5}, 0.5),
                V("c", "social_register", "politeness", {"register": "rude"}, -3)]
    results = [R("Same reply.", lp=(-0.1, -0.2, -0.3), ent=(0.4, 0.5, 0.6), hidden=h.copy()) for _ in variants]
    _, d = compute_rows("r", [Unit("d1:1", "d1", base, variants, results)], NORM, ALL)
    assert len(d) == 18 and d["available"].all()
    np.testing.assert_allclose(d["delta"].to_numpy(dtype=float), 0.0, atol=1e-6)  # cos from float32 states
    assert (d[d.axis != "cos"]["delta"] == 0.0).all()


def test_empty_responses_are_defined():
    base = R("", lp=(), ent=(), hidden=H_BASE)
    variants = [V("a"), V("b"), V("c", "structural", "length", {"target_ratio": 2.0}, 2.0)]
    results = [R("", lp=(), ent=(), hidden=H_BASE), R("Hello there", lp=(-2.0,), ent=(1.0,), hidden=H_BASE),
               R("", lp=(), ent=(), hidden=H_BASE)]
    resp, d = compute_rows("r", [Unit("d1:1", "d1", base, variants, results)], NORM, ALL)
    assert d["available"].all()
    assert np.isfinite(d["delta"].to_numpy(dtype=float)).all()
    assert np.isfinite(d["delta_norm"].to_numpy(dtype=float)).all()
    a, b = _by_axis(d, "a"), _by_axis(d, "b")
    assert (a["delta"] == 0.0).all()
    assert b.loc["bleu", "delta"] == -100.0 and b.loc["bert", "delta"] == -1.0
    assert b.loc["prob", "delta"] == -2.0 and b.loc["ent", "delta"] == 1.0  # empty seq: logp 0, H̄ 0
    assert resp.loc[0, "response"] == "" and resp.loc[0, "seq_logprob"] == 0.0 and resp.loc[0, "mean_entropy"] == 0.0


def test_multiple_units_batched_bert_alignment():
    # BERTScore is computed in one batch across units: each variant must get its own pair's score.
    u1 = Unit("d1:1", "d1", R("Paris is the capital of France."),
              [V("u1a"), V("u1b")], [R("Paris is the capital of France."), R("")])
    u2 = Unit("d2:1", "d2", R("Water boils at 100 degrees."), [V("u2a")], [R("Water boils at 100 degrees.")])
    u3 = Unit("d2:2", "d2", R("no variants"), [], [])
    resp, d = compute_rows("r", [u1, u2, u3], NORM, frozenset())
    bert = d[d.axis == "bert"].set_index("variant_id")["delta"]
    assert bert.to_dict() == {"u1a": 0.0, "u1b": -1.0, "u2a": 0.0}
    assert len(resp) == 3 + 2 + 1  # one base row per unit, even without variants
    assert resp[resp.variant_id.isna()]["prompt_id"].tolist() == ["d1:1", "d2:1", "d2:2"]
    assert d.groupby("prompt_id").size().to_dict() == {"d1:1": 12, "d2:1": 6}


def test_empty_units():
    resp, d = compute_rows("r", [], NORM, ALL)
    assert len(resp) == 0 and len(d) == 0
    assert list(d.columns) == DELTA_COLS


def test_variant_result_count_mismatch():
    with pytest.raises(ValueError):
        compute_rows("r", [Unit("d1:1", "d1", R("a"), [V("a"), V("b")], [R("a")])], NORM, ALL)


def test_rows_insert_into_store(tmp_path):
    base = R("Paris.", hidden=H_BASE)
    v = V("v1")
    resp, d = compute_rows("run1", [Unit("d1:1", "d1", base, [v], [R("PARIS.", hidden=H_BASE)])], NORM, frozenset())
    with open_store(tmp_path / "s.duckdb", read_only=False, create=True) as st:
        st.insert_df("runs", pd.DataFrame([{"run_id": "run1", "model": "m", "backend": "fake"}]))
        st.insert_df("prompts", pd.DataFrame([{"prompt_id": "d1:1", "dataset": "d1", "text": "q"}]))
        st.insert_df("variants", pd.DataFrame([{**v.spec.as_dict(), "variant_id": v.variant_id, "prompt_id": "d1:1",
                                                "text": v.text, "seed": v.seed, "kept": True}]))
        st.insert_df("responses", resp)
        st.insert_df("deltas", d)
        got = st.deltas().set_index("axis")
        assert not got.loc["cos", "available"] and math.isnan(got.loc["cos", "delta"])
        assert got.loc["mr", "delta"] == 1.0
        ps = st.view("prompt_scores")
        assert set(ps["axis"]) == {"bleu", "bert", "mr"}  # unavailable axes have no score, not 0
        # the base row's variant_id is a real SQL NULL (not the string 'nan' or 'None')
        assert st.con.execute("SELECT count(*) FROM responses WHERE variant_id IS NULL").fetchall() == [(1,)]
        assert st.con.execute("SELECT count(*) FROM deltas WHERE NOT available AND delta IS NULL "
                              "AND delta_norm IS NULL AND reason IS NOT NULL").fetchall() == [(3,)]
        assert st.con.execute("SELECT count(*) FROM deltas WHERE available AND reason IS NULL").fetchall() == [(3,)]
        back = st.responses("d1:1")
        assert back["response"].tolist() == ["Paris.", "PARIS."]


def test_bert_delta_of_a_pair_does_not_depend_on_its_chunk():
    # the same pair scored alone and in a chunk with much longer replies (padding)
    base = R("Great British Bake Off 2017 has 10 episodes.")
    reply = R("Sorry, but I can't assist with that.")
    u = Unit("d1:1", "d1", base, [V("v")], [reply])
    long = ("The Great British Bake Off is a British television baking competition in which a group of amateur "
            "bakers compete against each other in a series of rounds, attempting to impress the judges.")
    other = Unit("d1:2", "d1", R(long), [V("w"), V("x")], [R("Yes."), R(long + " Each week one baker leaves.")])
    _, alone = compute_rows("r", [u], NORM, frozenset())
    _, mixed = compute_rows("r", [other, u], NORM, frozenset())
    a = alone.set_index(["variant_id", "axis"])["delta"]
    m = mixed.set_index(["variant_id", "axis"])["delta"]
    assert abs(m[("v", "bert")] - a[("v", "bert")]) <= 1e-6
    assert a[("v", "bert")] == pytest.approx(0.083231 - 1.0, abs=1e-5)


def test_bleu_signature_and_script_tokenizer_stored_per_delta():
    # one-character change in Chinese is BLEU 59.46 with sacrebleu's zh tokenizer, not 0
    u = Unit("d1:1", "d1", R("我喜欢猫"), [V("zh"), V("en")], [R("我喜欢狗"), R("I like cats")])
    _, d = compute_rows("r", [u], NORM, frozenset())
    bleu = d[d.axis == "bleu"].set_index("variant_id")
    assert bleu.loc["zh", "delta"] == pytest.approx(59.46 - 100, abs=0.01)
    assert bleu.loc["zh", "delta_norm"] == pytest.approx((59.46 - 100) / 100, abs=1e-4)
    assert bleu.loc["zh", "detector"] == "nrefs:1|case:mixed|eff:yes|tok:zh|smooth:exp|version:2.6.0"
    assert bleu.loc["en", "detector"].split("|")[3] == "tok:zh"  # the pair holds Han characters
    assert d[d.axis == "bert"]["detector"].isna().all()  # short replies: no window note


def test_long_replies_windowed_and_noted():
    # ~600-word replies identical except their last sentence are not "perfectly stable"
    words = "river stone garden window music letter bridge candle forest harbor lantern meadow".split()
    body = " ".join(words[(i * 7) % len(words)] for i in range(600))
    base = R(body + ". The museum opens at nine in the morning.")
    u = Unit("d1:1", "d1", base, [V("v")], [R(body + ". Nobody knows why the volcano erupted.")])
    _, d = compute_rows("r", [u], NORM, frozenset())
    bert = d[d.axis == "bert"].iloc[0]
    assert bert["available"] and bert["delta"] < -1e-3
    assert bert["detector"] == "windows of 510 word pieces: reply 2, base 2"


def _spent(text, meta=None):
    """A reply cut by the token budget (finish "length"), as a local model or an API returns it."""
    from dataclasses import replace

    return replace(R(text, lp=(-1.0,) * max(1, len(text)), ent=(0.5,) * max(1, len(text)), hidden=H_BASE),
                   finish_reason="length", meta=meta)


def test_a_whitespace_reply_is_a_reply_scored_on_every_text_axis():
    # a model that copied the spacing noise and emitted only tabs, spaces and newlines until the budget ran out
    b = 0.120565
    base = R("The capital of France is Paris.", hidden=H_BASE)
    ws, empty, hidden = V("ws", "surface_noise", "spacing", {}), V("empty", "surface_noise", "spacing", {}), \
        V("hidden", "surface_noise", "spacing", {})
    why = "token budget spent with no visible text (40 hidden reasoning tokens): raise max_new_tokens"
    results = [_spent("\t \n  \t"), _spent(""), _spent("\n", meta={"no_output": why, "reasoning_tokens": 40})]
    _, d = compute_rows("r", [Unit("d1:1", "d1", base, [ws, empty, hidden], results)], NORM, ALL,
                        options=("bert@rescaled",), bert_baseline=b)
    text = ["bleu", "bert", "bert@rescaled", "mr"]
    w = _by_axis(d, "ws")
    assert w.loc[text, "available"].all() and w.loc[text, "reason"].isna().all()
    assert w.loc["bleu", "delta"] == -100.0 and w.loc["bleu", "delta_norm"] == -1.0  # sacrebleu: no n-gram matches
    assert w.loc["bert", "delta"] == -1.0  # bert-score: an empty candidate scores F1 = 0
    assert w.loc["bert@rescaled", "delta"] == pytest.approx(-1.0 / (1.0 - b)) and w.loc["bert@rescaled", "delta_norm"] == -1.0
    assert w.loc["mr", "delta"] == 1.0  # the reply is the spacing noise itself (a tab, a run of spaces); the base has none
    assert np.isfinite(w.loc[text, "delta"].to_numpy(dtype=float)).all()
    # no characters at all, or hidden reasoning that used the budget: nothing to measure
    e, h = _by_axis(d, "empty"), _by_axis(d, "hidden")
    assert not e.loc[text, "available"].any() and not h.loc[text, "available"].any()
    assert (e.loc[text, "reason"] == "no visible reply (variant): token budget spent with no visible text").all()
    assert (h.loc[text, "reason"] == f"no visible reply (variant): {why}").all()
    assert e.loc[["prob", "ent", "cos"], "available"].all()  # the white-box axes measure the tokens


def test_a_whitespace_base_reply_is_scored_and_not_counted_as_no_output():
    from precompute.summary import Health
    from sago_engine.measure.pipeline import budget_spent

    base = _spent("  \n\n  ")
    _, d = compute_rows("r", [Unit("d1:1", "d1", base, [V("v")], [R("Paris.")])], NORM, frozenset())
    assert d[d.axis.isin(["bleu", "bert", "mr"])]["available"].all()
    assert budget_spent(base) is None and budget_spent(_spent("")) is not None
    h = Health()
    h.add([base, _spent(""), _spent("\t", meta={"no_output": "token budget spent", "reasoning_tokens": 3})])
    assert h.no_output == 2
