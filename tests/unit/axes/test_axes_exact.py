"""Exact values and boundaries of every axis function (SAGO §Axes), each computed by hand.

Pure arithmetic and rules, no model: BERTScore's F1 (``bertscore_f1``) and window count
(``n_windows``) are replaced by a table where a test checks only what the axis does with them
(tests/unit/axes/test_axes.py scores the real encoder).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sago_engine.axes import activation, generation, pairs
from sago_engine.axes.activation import (
    COS_OPTION_SPECS,
    cosine_per_layer,
    delta_cos_from_layers,
    delta_cos_layers,
    delta_cos_option,
)
from sago_engine.axes.confidence import base_reply_deltas, delta_ent, delta_prob
from sago_engine.axes.generation import (
    bert_windows_note,
    bleu,
    bleu_tokenizer,
    delta_bert,
    delta_bert_pairs,
    delta_bert_rescaled,
    delta_bleu,
)
from sago_engine.axes.mirroring import delta_mr, mirrors
from sago_engine.axes.noise import snap_noise
from sago_engine.types import GenerationResult, Variant, VariantSpec


def V(family: str, subtype: str, meta: dict | None = None, strength: float = 1.0) -> Variant:
    return Variant(variant_id=f"{family}-{subtype}", prompt_id="t:1", spec=VariantSpec(family, subtype, strength, "GLOBAL"),
                   text="variant text", seed=1, meta=meta)


# ------------------------------------------------------------------ float noise
def test_snap_noise_keeps_the_tolerance_itself_and_returns_float64():
    assert snap_noise([1e-6, -1e-6, 9.99e-7], "cos").tolist() == [1e-6, -1e-6, 0.0]  # |Δ| < tol only
    out = snap_noise(np.array([0.5, 1e-7], dtype=np.float32), "cos")
    assert out.dtype == np.float64 and out.tolist() == [0.5, 0.0]
    assert snap_noise(np.array([[2e-5, 5e-6]]), "ent").tolist() == [[2e-5, 0.0]]  # shape kept
    with pytest.raises(KeyError):
        snap_noise([1.0], "cos@user_mean")


# ------------------------------------------------------------------ Δ-Prob / Δ-Ent
def test_delta_prob_and_ent_compute_in_float64():
    # float32 inputs: 1 − 0.001 in float32 is 0.99900001; the Δ is taken in float64
    got = delta_prob(np.array([1.0], dtype=np.float32), 0.001)
    assert got.dtype == np.float64 and abs(got[0] - 0.999) < 1e-12
    got = delta_ent(np.array([1.0], dtype=np.float32), 0.001)
    assert got.dtype == np.float64 and abs(got[0] - 0.999) < 1e-12
    assert delta_prob([-2.0], -2.00005).tolist() == [0.0] and delta_prob([-2.0], -2.0002)[0] == pytest.approx(2e-4)
    assert delta_ent([1.0], 1.000005).tolist() == [0.0] and delta_ent([1.0], 1.00002)[0] == pytest.approx(-2e-5)


def test_base_reply_deltas_by_hand():
    # Σ log p after x^v = −3, after x = −0.75; mean entropy 1.0 vs 1.5
    prob, ent = base_reply_deltas(([-1.0, -2.0], [0.5, 1.5]), ([-0.5, -0.25], [1.0, 2.0]))
    assert (prob, ent) == (-2.25, -0.5)
    assert type(prob) is float and type(ent) is float
    assert base_reply_deltas(([-1.0], [0.5]), ([-1.00001], [0.500001])) == (0.0, 0.0)  # under the noise floors
    assert base_reply_deltas(([-4.0], [2.0]), ([-1.0], [0.5])) == (-3.0, 1.5)  # one token is enough
    # float16 passes (some models' dtype) are summed and averaged in float64 (a float16 sum of 100 tokens is ~1e-2 off)
    lp16, ent16, zero = np.full(100, -0.1, dtype=np.float16), np.full(100, 0.3, dtype=np.float16), np.zeros(100)
    want = (float(lp16.astype(np.float64).sum()), float(ent16.astype(np.float64).mean()))
    assert base_reply_deltas((lp16, ent16), (zero, zero)) == pytest.approx(want, abs=1e-9)
    assert base_reply_deltas((zero, zero), (lp16, ent16)) == pytest.approx((-want[0], -want[1]), abs=1e-9)
    good = [-1.0, -2.0]
    for fv, fb in (((good[:1], good), (good, good)), ((good, good[:1]), (good, good)),
                   ((good, good), (good[:1], good)), ((good, good), (good, good[:1]))):
        with pytest.raises(ValueError, match=r"teacher-forced spans differ or are empty: [12], [12], [12], [12]"):
            base_reply_deltas(fv, fb)
    with pytest.raises(ValueError, match=r"differ or are empty: 0, 0, 0, 0"):
        base_reply_deltas(([], []), ([], []))


# ------------------------------------------------------------------ Δ-Cos
def test_cosine_is_clipped_to_minus_one_one():
    v = np.array([[-0.7, -0.1, 0.8]])  # v·v / (|v|·|v|) = 1.0000000000000002 in float64
    assert float(v[0] @ v[0] / (np.linalg.norm(v[0]) ** 2)) > 1.0
    cos = cosine_per_layer(np.stack([v, -v]), v)
    assert cos.tolist() == [[1.0], [-1.0]]


def test_cosine_of_half_precision_states_is_computed_in_float64():
    # a float16 norm is 0.3743 where the float64 norm of the same values is 0.374172: ~3e-4 off
    h16, h = np.array([[0.1, 0.2, 0.3]], dtype=np.float16), np.array([[0.3, 0.1, 0.7]])
    x = h16.astype(np.float64)[0]
    want = float(x @ h[0] / (np.sqrt(x @ x) * np.sqrt(h[0] @ h[0])))  # 0.904716
    assert cosine_per_layer(h16, h)[0] == pytest.approx(want, abs=1e-9)
    assert cosine_per_layer(h, h16)[0] == pytest.approx(want, abs=1e-9)
    c16 = np.array([0.1, 0.3], dtype=np.float16)  # float16 0.1 − 1 is −0.8999: the mean is taken in float64
    assert delta_cos_from_layers(c16) == pytest.approx(float(np.mean(c16.astype(np.float64) - 1.0)), abs=1e-12)


def test_cosine_of_short_vectors_divides_by_the_norms():
    # norms 0.5 and 0.25: the product 0.125 < 1 is still the divisor
    assert cosine_per_layer(np.array([[0.5, 0.0]]), np.array([[0.25, 0.0]])).tolist() == [1.0]
    assert cosine_per_layer(np.array([[0.0, 0.5]]), np.array([[0.25, 0.0]])).tolist() == [0.0]


def test_cosine_shapes_dtype_and_the_error_message():
    hb = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]], dtype=np.float32)  # L+1 = 2 layers, H = 3
    hv = np.array([[[3.0, 0.0, 0.0], [0.0, 0.0, 5.0]]], dtype=np.float32)
    got = cosine_per_layer(hv, hb)
    assert got.dtype == np.float64 and got.shape == (1, 2) and got.tolist() == [[1.0, 0.0]]
    single = cosine_per_layer(hv[0], hb)
    assert single.shape == (2,) and single.tolist() == [1.0, 0.0]
    # (cos − 1) per layer = [0, −1]: the batch mean is over layers, not variants
    assert delta_cos_from_layers(np.array([[1.0, 0.0], [0.5, 0.5]])).tolist() == [-0.5, -0.5]
    assert delta_cos_from_layers(np.array([[1.0, 1.0], [0.0, 0.0], [1.0, 0.5]])).tolist() == [0.0, -1.0, -0.25]
    with pytest.raises(ValueError, match=r"^hidden-state shapes differ: \(3, 4\) vs \(2, 4\)$"):
        cosine_per_layer(np.ones((3, 4)), np.ones((2, 4)))


def test_delta_cos_layer_sets_by_hand():
    c = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.5]])  # 2 variants, L+1 = 3 outputs
    assert delta_cos_layers(c).tolist() == pytest.approx([-0.5, -0.5])
    assert delta_cos_layers(c, "all").tolist() == pytest.approx([-0.5, -0.5])
    assert delta_cos_layers(c, "blocks").tolist() == [-0.75, -0.25]  # layers 1..L
    assert delta_cos_layers(c, "last").tolist() == [-1.0, -0.5]  # layer L only
    assert delta_cos_layers(np.array([0.0, 1.0]), "blocks").tolist() == 0.0  # L = 1 is enough
    assert delta_cos_layers(np.array([0.0, 0.5]), "last").tolist() == -0.5
    with pytest.raises(ValueError, match=r"^layer set must be 'all', 'blocks' or 'last', got 'mean'$"):
        delta_cos_layers(c, "mean")
    with pytest.raises(ValueError, match=r"^'blocks' needs at least one layer after the embedding output$"):
        delta_cos_layers(np.array([1.0]), "blocks")
    with pytest.raises(ValueError, match="'last' needs"):
        delta_cos_layers(np.array([[0.5]]), "last")
    assert delta_cos_layers(np.array([0.5]), "all").tolist() == -0.5  # the embedding output alone


def test_delta_cos_option_by_hand():
    hb = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    hv = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # cosines 1, 0, 1/√2
    last = 1 / math.sqrt(2) - 1
    expect = {"all": (0 - 1 + last) / 3, "blocks": (-1 + last) / 2, "last": last}
    for option, (_, layers) in COS_OPTION_SPECS.items():
        got = delta_cos_option(option, hv, hb)
        assert type(got) is float and got == pytest.approx(expect[layers], abs=1e-12), option
    assert COS_OPTION_SPECS["last_layer"] == ("last", "last") and COS_OPTION_SPECS["user_mean"] == ("user_mean", "all")
    assert delta_cos_option("user_mean", hb, hb) == 0.0
    with pytest.raises(KeyError):
        delta_cos_option("mean", hv, hb)
    assert activation.delta_cos(hv, hb) == pytest.approx(expect["all"], abs=1e-12)


# ------------------------------------------------------------------ Δ-BLEU tokenizer, BLEU
@pytest.mark.parametrize("hyp, ref, tok", [
    ("猫", "", "zh"),            # one Han letter: not "no letters"
    ("가", "", "char"),          # one Hangul letter
    ("ab", "가나", "char"),      # Hangul exactly half of the letters
    ("abc", "가나", "13a"),      # Hangul 2 of 5: under half
    ("ab", "ねこ", "char"),      # kana exactly half
    ("abc", "ねこ", "13a"),      # kana 2 of 5 and no Han character
    ("abc", "猫ね", "zh"),       # Han + kana 2 of 5, a Han character → zh
    ("123 !!", "456", "13a"),    # no letters
])
def test_bleu_tokenizer_boundaries(hyp, ref, tok):
    assert bleu_tokenizer(hyp, ref) == tok


def test_bleu_takes_the_tokenizer_it_is_given():
    import sacrebleu

    hyp, ref = "the cat sat", "the cat sat on a mat"
    want = sacrebleu.sentence_bleu(hyp, [ref], tokenize="char", smooth_method="exp").score
    assert bleu(hyp, ref, tokenize="char") == pytest.approx(want, abs=1e-9)
    assert bleu(hyp, ref, tokenize="char") != pytest.approx(bleu(hyp, ref), abs=1e-3)
    assert type(bleu(hyp, ref)) is float and bleu(hyp, hyp, tokenize="char") == 100.0
    assert delta_bleu([hyp, ref], ref).tolist()[1] == 0.0 and delta_bleu([hyp], ref)[0] == pytest.approx(bleu(hyp, ref) - 100)


# ------------------------------------------------------------------ Δ-BERT arithmetic (F1 from a table)
@pytest.fixture
def f1_table(monkeypatch):
    """``bertscore_f1`` replaced by a table (candidate, reference) → F1; records each call's lists."""
    table = {("same", "same"): 1.0, ("a", "b"): 0.75, ("over", "b"): 1.00001, ("tiny", "b"): 1 - 5e-7,
             ("", "b"): 0.0}
    calls = []

    def f1(cands, refs):
        calls.append((cands, refs))
        assert type(cands) is list and type(refs) is list and len(cands) == len(refs)
        return np.array([table[c, r] for c, r in zip(cands, refs)], dtype=np.float64)

    monkeypatch.setattr(generation, "bertscore_f1", f1)
    return calls


def test_delta_bert_pairs_clamps_at_zero_and_snaps(f1_table):
    got = delta_bert_pairs(("same", "a", "over", "tiny", ""), ("same", "b", "b", "b", "b"))
    assert got.tolist() == [0.0, -0.25, 0.0, 0.0, -1.0] and got.dtype == np.float64
    assert f1_table == [(["same", "a", "over", "tiny", ""], ["same", "b", "b", "b", "b"])]  # one batched call
    assert delta_bert(["a", ""], "b").tolist() == [-0.25, -1.0]
    assert f1_table[-1] == (["a", ""], ["b", "b"])


def test_bert_windows_note_by_hand(monkeypatch):
    monkeypatch.setattr(generation, "n_windows", {"one": 1, "two": 2, "three": 3}.__getitem__)
    assert bert_windows_note("one", "one") is None
    assert bert_windows_note("one", "two") == "windows of 510 word pieces: reply 1, base 2"
    assert bert_windows_note("three", "one") == "windows of 510 word pieces: reply 3, base 1"


def test_delta_bert_rescaled_by_hand():
    assert delta_bert_rescaled(np.array([-0.4, 0.0]), 0.2).tolist() == [-0.5, 0.0]  # Δ / (1 − b)
    assert delta_bert_rescaled([-0.25], 0.0).tolist() == [-0.25]  # b = 0 allowed: the plain scale
    assert delta_bert_rescaled([-1.0], 0.5).dtype == np.float64
    assert delta_bert_rescaled(np.array([-0.5], dtype=np.float32), 0.5).dtype == np.float64  # not float32
    for bad in (1.0, -0.1, 1.5):
        with pytest.raises(ValueError, match=rf"^baseline must be in \[0, 1\), got {bad}$"):
            delta_bert_rescaled([-0.5], bad)


# ------------------------------------------------------------------ Δ-MR rules at their boundaries
def test_mr_case_boundaries():
    up, low, rnd = (V("surface_noise", "case", {"target": t}) for t in ("upper", "lower", "random_case"))
    assert mirrors("ABC", up) == 1 and mirrors("AB1", up) == 0  # 3 letters is enough, 2 is not
    assert mirrors("ABCde", up) == 1 and mirrors("ABcde", up) == 0  # 60 % upper counts, 40 % does not
    assert mirrors("THE ANSWER", V("surface_noise", "case")) == 1  # no target: upper
    assert mirrors("THE ANSWER", V("surface_noise", "case", {})) == 1
    assert mirrors("猫猫猫ab", low) == 0  # letters without case do not count: only 2 letters
    assert mirrors("aBc", rnd) == 1  # a 3-letter word with case flipped inside
    assert mirrors("xY's", rnd) == 0  # not all letters: not a word the rule reads
    normal = " ".join(["word"] * 19)
    assert mirrors("aBc dEf " + normal, rnd) == 1  # 2 odd words of 21 (under 10 %) are enough
    assert mirrors("aBc " + " ".join(["word"] * 9), rnd) == 1  # 1 of 10: exactly 10 %
    assert mirrors("aBc " + " ".join(["word"] * 10), rnd) == 0  # 1 of 11


def test_mr_question_and_imperative_windows():
    q, imp = V("structural", "mood", {"target": "question"}), V("structural", "mood", {"target": "imperative"})
    assert mirrors("?" + "a" * 199, q) == 1 and mirrors("?" + "a" * 200, q) == 0  # "?" in the last 200 characters
    assert mirrors("?" + "a" * 198 + "  \n", q) == 1  # after stripping
    assert mirrors("-" * 56 + "list them", imp) == 1  # the first word within the first 60 characters
    assert mirrors("-" * 57 + "list them", imp) == 0  # cut to "lis"
    assert mirrors(" " * 58 + "List them", imp) == 1  # leading whitespace stripped first
    assert mirrors("Paris.", V("structural", "mood")) == 0 and mirrors("Is it?", V("structural", "mood", {})) == 0
    assert mirrors("Is it?", V("structural", "other", {"target": "question"})) == 0


def test_mr_spacing_and_length_rules():
    s = V("surface_noise", "spacing")
    assert mirrors("yes , sure", s) == 1  # a space before a mark
    assert mirrors("pi is 3 .14", s) == 0  # … unless a number follows
    ln = V("structural", "length", None, strength=2.0)  # no meta: the target is the strength
    assert mirrors("x x", ln, "a") == 1 and mirrors("x", ln, "a") == 0  # base of one word
    assert mirrors("x x", ln, None) == 0  # no base reply: no ratio
    assert mirrors("x x x", ln, "a b c") == 0 and mirrors("x x x x x", ln, "a b") == 1  # ratios 1 and 2.5


def test_mr_register_edges():
    direct = V("social_register", "directness", {"register": "direct"})
    assert mirrors(" ".join(["w"] * 15), direct) == 1 and mirrors(" ".join(["w"] * 16), direct) == 0
    assert mirrors("Please help", V("social_register", "politeness", {})) == 0  # no register: neutral
    for reg in ("impatient", "dismissive", "negative", "negative_framing"):
        assert mirrors("Whatever, it is Paris.", V("social_register", "x", {"register": reg})) == 1


def test_delta_mr_length_error_and_dtype():
    near = V("structural", "length", {"target_ratio": 1.2}, 1.2)  # within ±25 %: the base reply itself mirrors it
    assert delta_mr(["x", "x y"], [near, near], "a b").tolist() == [-1.0, 0.0]
    v = V("surface_noise", "punctuation")
    got = delta_mr(["Yes!!", "No."], [v, v], "Ok!!")
    assert got.dtype == np.float64 and got.tolist() == [0.0, -1.0]
    with pytest.raises(ValueError, match=r"^1 responses vs 2 variants$"):
        delta_mr(["a"], [v, v], "b")


# ------------------------------------------------------------------ the pair functions of AxisSpec.delta
def R(text: str, logprobs=None, entropies=None, hidden=None) -> GenerationResult:
    return GenerationResult(text=text, n_tokens=1,
                            token_logprobs=None if logprobs is None else np.array(logprobs, dtype=np.float64),
                            token_entropies=None if entropies is None else np.array(entropies, dtype=np.float64),
                            hidden_last=None if hidden is None else np.array(hidden, dtype=np.float32))


def _isnan(x):
    return [math.isnan(v) for v in x]


def test_pair_functions_by_hand(monkeypatch):
    h1, h2 = [[1.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]]
    base = R("the cat sat on a mat", [-1.0, -0.5], [1.0, 2.0], h1)
    reps = [R("the cat sat on the mat", [-2.0], [0.5], h2), R("x", None, None, None), R("the cat sat on a mat", [-1.5], [1.5], h1)]
    bases = [base, base, R("b", None, None, None)]
    cos = pairs.cos_pairs(reps, bases)
    assert cos.dtype == np.float64 and cos[0] == -0.5 and _isnan(cos) == [False, True, True]
    prob, ent = pairs.prob_pairs(reps, bases), pairs.ent_pairs(reps, bases)
    assert prob.dtype == ent.dtype == np.float64
    assert prob[0] == -0.5 and _isnan(prob) == [False, True, True]  # −2 − (−1.5)
    assert ent[0] == -1.0 and _isnan(ent) == [False, True, True]  # 0.5 − 1.5
    bl = pairs.bleu_pairs(reps[:1] + reps[2:], [base, base])
    assert bl.tolist() == pytest.approx([100 * (1 / 12) ** 0.25 - 100, 0.0]) and bl[1] == 0.0
    assert pairs.bleu_pairs([R("a b c")], [R("a b c ")]).tolist() == [0.0]  # snapped to exactly 0
    calls = []
    monkeypatch.setattr(pairs, "delta_bert_pairs", lambda r, b: calls.append((r, b)) or np.array([-0.5, -0.25]))
    assert pairs.bert_pairs(reps[:2], bases[:2]).tolist() == [-0.5, -0.25]
    assert calls == [(["the cat sat on the mat", "x"], ["the cat sat on a mat", "the cat sat on a mat"])]
    empty = pairs.bert_pairs([], [])
    assert empty.shape == (0,) and empty.dtype == np.float64 and len(calls) == 1
    for fn in (pairs.cos_pairs, pairs.bleu_pairs, pairs.bert_pairs, pairs.prob_pairs, pairs.ent_pairs, pairs.mr_pairs):
        with pytest.raises(ValueError, match=r"^3 replies vs 2 base replies$"):
            fn(reps, bases[:2])


def test_mr_pairs_by_hand():
    up = V("surface_noise", "case", {"target": "upper"})
    got = pairs.mr_pairs([R("PARIS IS IT"), R("paris"), R("PARIS IS IT")], [R("paris"), R("PARIS IS IT"), R("PARIS!!")], [up] * 3)
    assert got.dtype == np.float64 and got.tolist() == [1.0, -1.0, 0.0]
    half = V("structural", "length", {"target_ratio": 0.5}, 0.5)
    near = V("structural", "length", {"target_ratio": 1.2}, 1.2)  # the base reply itself is within ±25 %
    assert pairs.mr_pairs([R("x"), R("x y")], [R("a b"), R("a b")], [half, near]).tolist() == [1.0, 0.0]
    for bad in (None, [up]):
        with pytest.raises(ValueError, match=r"^Δ-MR needs the variant of every reply$"):
            pairs.mr_pairs([R("a"), R("b")], [R("a"), R("a")], bad)


def test_delta_fn_names_each_pair_function():
    assert pairs.delta_fn("cos") is pairs.cos_pairs and pairs.delta_fn("mr") is pairs.mr_pairs
    assert pairs.delta_fn("bleu") is pairs.bleu_pairs


# ------------------------------------------------------------------ the authors' Δ-MR rules at their boundaries
def test_authors_counts_edges():
    from sago_engine.axes.mirroring_code import abnormal_case_pct, extra_punctuation, extra_spaces, measured_strength

    assert abnormal_case_pct("aB") == 100.0 and abnormal_case_pct("A b") == 0.0  # two letters can be mixed case
    assert abnormal_case_pct("") == 0.0 and abnormal_case_pct("123 !!") == 0.0  # no letters
    assert abnormal_case_pct("ǅa") == 0.0  # a titlecase letter (Lt) is neither upper nor lower case: no mix
    assert abnormal_case_pct("aBcD " + "x" * 36) == 10.0 and abnormal_case_pct("NASA PARIS") == pytest.approx(500 / 9)
    assert extra_spaces("a  \t  b") == 2 and extra_punctuation("a...., b") == 1
    assert measured_strength("spacing", "a  b", "a b") == 0.0 and measured_strength("punctuation", "a!!", "a") == 0.0
    assert measured_strength("case", "123", "456") == 0.0 and measured_strength("case", "ab", "AB") == 100.0
    assert measured_strength("case", "aB c", "AB C") == pytest.approx(200 / 3)  # B was already upper
    with pytest.raises(ValueError, match=r"^no measured strength for surface-noise subtype 'tone'$"):
        measured_strength("tone", "a", "b")


def test_authors_pairwise_band_edges():
    from sago_engine.axes.mirroring_code import noise_mirrors_pair

    spaced = "a" + " " * 4 + "b" * 55  # 3 extra spaces in 60 characters: increase 3, rate exactly 5 %
    assert noise_mirrors_pair("spacing", "", spaced, 20) == 1  # band ≤ 20 (inclusive): (3, 5)
    assert noise_mirrors_pair("spacing", "", spaced, 21) == 0  # next band: increase ≥ 5
    assert noise_mirrors_pair("spacing", "", spaced + "b", 20) == 0  # rate 4.9 %
    assert noise_mirrors_pair("spacing", "a  b", spaced, 20) == 0  # increase 2
    marks = "!!!!" + "a" * 96  # 3 extra marks in 100 characters
    assert noise_mirrors_pair("punctuation", "", marks, 5) == 1 and noise_mirrors_pair("punctuation", "", marks, 6) == 0
    assert noise_mirrors_pair("punctuation", "", marks + "a", 5) == 0
    assert noise_mirrors_pair("spacing", "", "", 1) == 0 and noise_mirrors_pair("punctuation", "", "", 100) == 0
    y, y_v = "aB " + "x" * 38, "aBcD " + "x" * 36  # 5 % and 10 % abnormal: an increase of exactly 5 points
    assert noise_mirrors_pair("case", y, y_v, 25) == 1 and noise_mirrors_pair("case", y, y_v, 26) == 0  # 10 < 15
    low = "aB " + "c" * 23  # exactly 8 %
    assert noise_mirrors_pair("case", "", low, 25) == 1 and noise_mirrors_pair("case", "", low, 26) == 0
    twenty = "aB " + "c" * 8  # 20 %: enough up to 50 % upper-cased (15), not above (25)
    assert noise_mirrors_pair("case", "", twenty, 50) == 1 and noise_mirrors_pair("case", "", twenty, 51) == 0
    with pytest.raises(ValueError, match=r"^no pairwise rule for surface-noise subtype 'tone'$"):
        noise_mirrors_pair("tone", "a", "b", 1)


def test_authors_unavailable_reasons_and_errors():
    from sago_engine.axes.mirroring_code import code_delta_mr, unavailable_reason

    mood, noise = V("structural", "mood", {"target": "question"}), V("surface_noise", "spacing")
    length = V("structural", "length", {"target_ratio": 0.5}, 0.5)
    form = "the authors' code has no Δ-MR for form (interrogative ↔ imperative)"
    assert unavailable_reason("pairwise", mood, "x") == form and unavailable_reason("paper_code", mood, None) == form
    assert unavailable_reason("length_fail", mood, "x") is None
    no_base = "base prompt text not given (the pairwise rule's strength is measured from it)"
    assert unavailable_reason("paper_code", noise, None) == no_base and unavailable_reason("pairwise", noise, None) == no_base
    assert unavailable_reason("pairwise", noise, "x") is None and unavailable_reason("length_fail", noise, None) is None
    assert unavailable_reason("pairwise", length, None) is None
    with pytest.raises(ValueError, match=r"^unknown Δ-MR option 'paper'; valid: pairwise, length_fail, paper_code$"):
        code_delta_mr("paper", [], [], "y", [], None)
    with pytest.raises(ValueError, match=r"^1 responses, 2 variants, 2 plain values$"):
        code_delta_mr("pairwise", ["a"], [noise, noise], "y", [0.0, 0.0], "x")
    with pytest.raises(ValueError, match=r"^2 responses, 2 variants, 1 plain values$"):
        code_delta_mr("pairwise", ["a", "b"], [noise, noise], "y", [0.0], "x")
    got = code_delta_mr("length_fail", ["x"], [length], "a b", [1.0], None)  # 1 word of 2: the target hit
    assert got.dtype == np.float64 and got.tolist() == [0.0]
    spaced = Variant(variant_id="s", prompt_id="t:1", spec=VariantSpec("surface_noise", "spacing", 1.0, "GLOBAL"),
                     text="What   is the   capital   of France?", seed=1)  # 6 spaces added
    reply = "Paris   is   the   capital   of France."  # 8 extra spaces in 39 characters: 20.5 %
    got = code_delta_mr("pairwise", [reply], [spaced], "Paris is the capital of France.", [0.0], "What is the capital of France?")
    assert got.tolist() == [1.0]  # the pairwise rule's verdict, not the plain value
    reg = V("social_register", "politeness", {"register": "polite"})
    assert code_delta_mr("paper_code", ["a", "b"], [reg, reg], "y", [-1.0, 1.0], None).tolist() == [0.0, 1.0]
    assert code_delta_mr("length_fail", ["a"], [reg], "y", [-1.0], None).tolist() == [-1.0]  # the plain value
    assert code_delta_mr("pairwise", ["Is it?"], [length], "a b c d", [1.0], None).tolist() == [1.0]  # plain rule
