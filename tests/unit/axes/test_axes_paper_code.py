"""The SAGO authors' code as option axes, each on values worked out by hand.

cos@last_layer (a two-layer case and the tiny random model), prob@base_reply / ent@base_reply
(a fixed 3-token reply on the tiny random model against an explicit forward pass), the authors'
Δ-MR rules (hand cases), the unclipped Δ̃ choice (a synthetic store), and that none of them
changes a plain axis.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from sago_engine.axes.mirroring_code import (
    abnormal_case_pct,
    code_delta_mr,
    extra_punctuation,
    extra_spaces,
    measured_strength,
    noise_mirrors_pair,
)
from sago_engine.axis_spec import OPTION_AXIS_SPECS
from sago_engine.backends import Backend
from sago_engine.measure.pipeline import Unit, compute_rows, option_axes_for
from sago_engine.measure.step import Answered, Pending, Scoring, force_base_replies, score
from sago_engine.store import open_store
from sago_engine.types import (
    ALL_OPTION_AXES,
    AXES,
    DEFAULT_NORMALIZERS,
    OPTION_AXES,
    GenerationResult,
    Variant,
    VariantSpec,
    is_option_axis,
)
from sago_engine.views import method_choices
from tests.support.factories import make_store

CAPS = frozenset({"cos", "prob", "ent"})
#: The authors' code's options (docs/METHOD.md "The SAGO authors' code as options").
BASE_REPLY_AXES = ("prob@base_reply", "ent@base_reply")
MR_CODE_AXES = ("mr@pairwise", "mr@length_fail", "mr@paper_code")
BASE = "What is the capital of France?"
VARIANT = "what is the capital of france, please?"


def _v(k: int, family: str, subtype: str, strength: float, text: str, **meta) -> Variant:
    return Variant(f"p/v{k}", "p", VariantSpec(family, subtype, strength, "GLOBAL"), text, seed=k, meta=meta)


# ------------------------------------------------------------------ names and defaults


def test_option_names_and_defaults():
    assert "cos@last_layer" in OPTION_AXES  # free: from the stored per-layer cosines
    assert not set(BASE_REPLY_AXES) & set(OPTION_AXES) and not set(MR_CODE_AXES) & set(OPTION_AXES)  # opt-in
    assert all(OPTION_AXIS_SPECS[a].opt_in for a in (*BASE_REPLY_AXES, *MR_CODE_AXES))
    assert ALL_OPTION_AXES == (*OPTION_AXES, *BASE_REPLY_AXES, *MR_CODE_AXES)
    assert option_axes_for(["mr@paper_code", "prob@base_reply", "cos@last_layer"], CAPS) == (
        "cos@last_layer", "prob@base_reply", "mr@paper_code")
    assert option_axes_for(ALL_OPTION_AXES, frozenset()) == ("bert@rescaled", *BASE_REPLY_AXES, *MR_CODE_AXES)


# ------------------------------------------------------------------ cos@last_layer


def test_cos_last_layer_two_layer_case():
    """L = 2 blocks (3 hidden-state outputs) with cosines 1, 0 and 1/√2 to the base's states."""
    hb = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]], dtype=np.float32)
    hv = np.array([[2.0, 0.0], [0.0, 3.0], [1.0, 1.0]], dtype=np.float32)
    base, var = GenerationResult("a", 1, hidden_last=hb), GenerationResult("b", 1, hidden_last=hv)
    _, d = compute_rows("r", [Unit("p", "ds", base, [_v(0, "surface_noise", "case", 1, "x")], [var])],
                        DEFAULT_NORMALIZERS, CAPS, options=("cos@last_layer",))
    by = d.set_index("axis")
    last = 1 / math.sqrt(2) - 1  # −0.292893
    plain = (0 + (0 - 1) + last) / 3  # −0.430964
    assert by.loc["cos@last_layer", "delta"] == pytest.approx(last, abs=1e-7)
    assert by.loc["cos@last_layer", "delta_norm"] == pytest.approx(last / 2, abs=1e-7)
    assert by.loc["cos", "delta"] == pytest.approx(plain, abs=1e-7)


def test_cos_last_layer_tiny_model(tiny_backend):
    """The option equals cos − 1 of hidden_states[-1] at the last input token of an explicit pass."""
    base, var = tiny_backend.generate([BASE, VARIANT], max_new_tokens=2)
    _, d = compute_rows("r", [Unit("p", "ds", base, [_v(0, "surface_noise", "case", 2, VARIANT)], [var])],
                        DEFAULT_NORMALIZERS, CAPS, options=("cos@last_layer",))
    by = d.set_index("axis")

    def last_state(p):
        ids = torch.tensor([tiny_backend.encode_prompt(p)])
        with torch.inference_mode():
            out = tiny_backend.model(input_ids=ids, output_hidden_states=True)
        return out.hidden_states[-1][0, -1].double().numpy()

    hb, hv = last_state(BASE), last_state(VARIANT)
    want = float(hv @ hb / (np.linalg.norm(hv) * np.linalg.norm(hb))) - 1
    assert want < -1e-3  # a real difference, far above float noise
    assert by.loc["cos@last_layer", "delta"] == pytest.approx(want, abs=1e-5)
    assert by.loc["cos@last_layer", "delta"] != pytest.approx(by.loc["cos", "delta"], abs=1e-4)


# ------------------------------------------------------------------ prob@base_reply / ent@base_reply


def _explicit(be, prompt: str, reply: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Log-probs and entropies of ``reply`` after ``prompt``: one unpadded forward pass, float64 softmax."""
    p = be.encode_prompt(prompt)
    with torch.inference_mode():
        logits = be.model(input_ids=torch.tensor([p + reply])).logits[0].double()
    lg = logits[len(p) - 1: len(p) - 1 + len(reply)]
    logp = torch.log_softmax(lg, -1)
    return (logp[torch.arange(len(reply)), torch.tensor(reply)].numpy(), (-(logp.exp() * logp).sum(-1)).numpy())


def test_base_reply_prob_ent_against_an_explicit_pass(tiny_backend):
    be = tiny_backend
    reply = be.tokenizer(" Paris, France", add_special_tokens=False)["input_ids"][:3]
    assert len(reply) == 3
    lp_b, ent_b = _explicit(be, BASE, reply)
    lp_v, ent_v = _explicit(be, VARIANT, reply)
    want_prob = float(lp_v.sum() - lp_b.sum())
    want_ent = float(ent_v.mean() - ent_b.mean())
    assert abs(want_prob) > 1e-2 and abs(want_ent) > 1e-4  # real differences, above float noise
    base = GenerationResult(be.tokenizer.decode(reply), 3, token_logprobs=lp_b, token_entropies=ent_b,
                            token_ids=list(reply))
    [var] = be.generate([VARIANT], max_new_tokens=3)  # the variant's own reply: the plain axes
    v = _v(0, "surface_noise", "case", 2, VARIANT)
    answered = [Answered(Pending("p", "ds", BASE, (v,)), base, [var])]
    forced = force_base_replies(be, answered)
    scoring = Scoring("r", DEFAULT_NORMALIZERS, CAPS, options=BASE_REPLY_AXES)
    assert scoring.forces_base and not Scoring("r", DEFAULT_NORMALIZERS, CAPS, options=OPTION_AXES).forces_base
    d = score(forced, scoring).deltas.set_index("axis")
    assert d.loc["prob@base_reply", "delta"] == pytest.approx(want_prob, abs=1e-3)
    assert d.loc["ent@base_reply", "delta"] == pytest.approx(want_ent, abs=1e-4)
    assert d.loc["prob@base_reply", "delta_norm"] == pytest.approx(want_prob / 250, abs=1e-5)
    assert d.loc["ent@base_reply", "delta_norm"] == pytest.approx(want_ent / 10, abs=1e-5)
    # the plain Δ-Prob is the variant's own reply against the base's: untouched by the option
    assert d.loc["prob", "delta"] == pytest.approx(var.seq_logprob - lp_b.sum(), abs=1e-6)
    plain = score(answered, Scoring("r", DEFAULT_NORMALIZERS, CAPS)).deltas
    pd.testing.assert_frame_equal(d.reset_index()[lambda x: ~x["axis"].map(is_option_axis)][plain.columns]
                                  .reset_index(drop=True), plain)


def test_base_reply_unavailable_with_reasons(tiny_backend):
    v = _v(0, "surface_noise", "case", 2, VARIANT)
    var = GenerationResult("x", 1, token_ids=[5])
    no_ids = GenerationResult("Paris.", 2)  # an API reply: no token ids
    api_like = type("ApiLike", (Backend,), {"name": "api_like", "model_id": "m", "capabilities": frozenset()})()
    assert api_like.teacher_force(["q"], [[5]]) is None  # the protocol's default: cannot teacher-force
    with_ids = GenerationResult("Paris.", 2, token_ids=[5, 6])
    cases = [
        (force_base_replies(tiny_backend, [Answered(Pending("p", "ds", BASE, (v,)), no_ids, [var])]), "no token ids"),
        (force_base_replies(api_like, [Answered(Pending("p", "ds", BASE, (v,)), with_ids, [var])]), "cannot teacher-force"),
    ]
    for answered, why in cases:
        d = score(answered, Scoring("r", DEFAULT_NORMALIZERS, CAPS, options=BASE_REPLY_AXES)).deltas.set_index("axis")
        for ax in BASE_REPLY_AXES:
            assert not d.loc[ax, "available"] and pd.isna(d.loc[ax, "delta"]) and why in d.loc[ax, "reason"]


# ------------------------------------------------------------------ the authors' Δ-MR rules


def test_noise_counts_by_hand():
    assert extra_spaces("a   b  c d\t\te") == 3  # runs of 3 and 2 spaces: 2 + 1; tabs are not counted
    assert extra_punctuation("Yes!!! No?? Wait..... ok... a,, b;") == 2 + 1 + 2 + 0 + 1
    # PARIS (5 letters, all caps) and CaPital (mixed) are abnormal; NASA (acronym), Is, the are not
    assert abnormal_case_pct("PARIS Is the CaPital of NASA") == pytest.approx(100 * 12 / 23)
    assert measured_strength("spacing", "a b c", "a  b \t c") == 3
    assert measured_strength("punctuation", "Is it?", "Is!! it?..") == 4
    assert measured_strength("case", "what is it", "WHAT is iT") == pytest.approx(100 * 5 / 8)


def test_pairwise_thresholds_by_hand():
    y, y_v = "Paris is the capital.", "Paris   is   the   capital."  # 6 extra spaces, 27 chars: 22 %
    assert noise_mirrors_pair("spacing", y, y_v, 12) == 1  # band ≤ 20: increase ≥ 3, rate ≥ 5 %
    assert noise_mirrors_pair("spacing", y, y_v, 60) == 0  # band > 50: increase ≥ 10 needed
    assert noise_mirrors_pair("spacing", y_v, y_v, 12) == 0  # no increase over the base reply
    assert noise_mirrors_pair("punctuation", "Paris. Yes.", "Paris!!! Yes!!", 3) == 1  # 3 extra, 21 %
    assert noise_mirrors_pair("punctuation", "Paris. Yes.", "Paris!!! Yes!!", 12) == 0  # band > 10: ≥ 6
    # 12 of 17 letters abnormal (PARIS, CAPITAL): 70.6 % ≥ 25 % at 100 % upper-cased
    assert noise_mirrors_pair("case", y, "PARIS IS THE CAPITAL.", 100) == 1
    assert noise_mirrors_pair("case", "PARIS IS THE CAPITAL.", "PARIS IS THE CAPITAL.", 100) == 0


def test_code_mr_options_by_hand():
    base_prompt = "What is the capital of France?"
    y = "Paris is the capital of France and its largest city."  # 10 words
    vs = [
        _v(0, "surface_noise", "spacing", 1, "What   is the   capital   of France?", target="spacing"),  # 6 added
        _v(1, "social_register", "politeness", -3, "Ugh. " + base_prompt, register="rude"),
        _v(2, "social_register", "politeness", 3, "Please: " + base_prompt, register="polite"),
        _v(3, "structural", "length", 0.5, "Capital of France?", target_ratio=0.5),
        _v(4, "structural", "length", 0.5, "Capital of France?", target_ratio=0.5),
        _v(5, "structural", "mood", 1, "Tell me the capital of France.", target="imperative"),
    ]
    replies = [
        "Paris   is   the   capital   of France.",  # 8 extra spaces, 39 chars: 20.5 %
        "Paris.",
        "Certainly! Paris is the capital, happy to help.",
        y,  # does not shrink: ratio 1 vs target 0.5
        "Paris is the capital.",  # 4 words of 10: ratio 0.4 within ±25 % of 0.5
        "Paris.",
    ]
    plain = np.array([1.0, -1.0, 1.0, 0.0, 1.0, 0.0])  # the paper text's ΔMR as a run stored it
    pair = code_delta_mr("pairwise", replies, vs, y, plain, base_prompt)
    fail = code_delta_mr("length_fail", replies, vs, y, plain, base_prompt)
    code = code_delta_mr("paper_code", replies, vs, y, plain, base_prompt)
    np.testing.assert_array_equal(pair[:5], [1, 0, 1, 0, 1])
    np.testing.assert_array_equal(fail, [1, -1, 1, -1, 0, 0])
    np.testing.assert_array_equal(code[:5], [1, 0, 1, -1, 0])
    assert np.isnan(pair[5]) and np.isnan(code[5])  # no Δ-MR for form in the authors' code
    # without the base prompt text the surface-noise strength cannot be measured
    assert np.isnan(code_delta_mr("pairwise", replies, vs, y, plain, None)[0])


def test_code_mr_rows_and_plain_axes_unchanged():
    base = GenerationResult("Paris is the capital of France and its largest city.", 12)
    vs = [_v(0, "surface_noise", "spacing", 1, "What   is the   capital   of France?", target="spacing"),
          _v(1, "structural", "mood", 1, "Tell me the capital of France.", target="imperative"),
          _v(2, "structural", "length", 0.5, "Capital of France?", target_ratio=0.5)]
    res = [GenerationResult("Paris   is   the   capital   of France.", 9), GenerationResult("Paris.", 2),
           GenerationResult(base.text, 12)]
    unit = Unit("p", "ds", base, vs, res, prompt_text=BASE)
    _, d = compute_rows("r", [unit], DEFAULT_NORMALIZERS, frozenset(), options=MR_CODE_AXES)
    by = d.set_index(["variant_id", "axis"])
    assert by.loc[("p/v0", "mr@pairwise"), "delta"] == 1.0
    assert "measured strength 6" in by.loc[("p/v0", "mr@pairwise"), "detector"]
    assert not by.loc[("p/v1", "mr@paper_code"), "available"]
    assert "no Δ-MR for form" in by.loc[("p/v1", "mr@paper_code"), "reason"]
    assert by.loc[("p/v2", "mr@length_fail"), "delta"] == -1.0 and by.loc[("p/v2", "mr"), "delta"] == 0.0
    _, plain = compute_rows("r", [unit], DEFAULT_NORMALIZERS, frozenset())
    pd.testing.assert_frame_equal(d[~d["axis"].map(is_option_axis)].reset_index(drop=True), plain)


# ------------------------------------------------------------------ unclipped Δ̃


def test_unclipped_choice_from_raw_deltas(tmp_path):
    path = make_store(tmp_path / "s.duckdb", n_prompts=3)
    with open_store(path, read_only=False) as st:  # one Δ-Prob beyond R = 250: −312.5 nats, Δ/R = −1.25
        st.con.execute("UPDATE deltas SET delta = -312.5, delta_norm = -1.0 "
                       "WHERE axis = 'prob' AND variant_id = 'truthfulqa:0/v0' AND run_id = 'run-model-a'")
    with open_store(path) as st:
        [ch] = [c for c in method_choices.collect_choices(st) if c.key == "clip"]
        d = st.deltas(kept_only=False)
    assert ch.available and ch.reference == method_choices.CLIPPED
    sc = ch.scores.set_index(["option", "model", "prompt_id", "axis"])["s"]
    g = d[(d["run_id"] == "run-model-a") & (d["prompt_id"] == "truthfulqa:0") & (d["axis"] == "prob")]
    x = g["delta"].to_numpy(float) / 250
    want_un = math.sqrt(np.mean(x ** 2))
    want_cl = math.sqrt(np.mean(np.clip(x, -1, 1) ** 2))
    assert want_un > want_cl + 0.05
    assert sc[(method_choices.UNCLIPPED, "model-a", "truthfulqa:0", "prob")] == pytest.approx(want_un, rel=1e-9)
    assert sc[(method_choices.CLIPPED, "model-a", "truthfulqa:0", "prob")] == pytest.approx(want_cl, rel=1e-9)
    # an axis no value of which reaches R: both options agree
    assert sc[(method_choices.UNCLIPPED, "model-b", "nq_open:1", "bleu")] == pytest.approx(
        sc[(method_choices.CLIPPED, "model-b", "nq_open:1", "bleu")], rel=1e-12)
    assert set(ch.scores["axis"]) == set(AXES)
