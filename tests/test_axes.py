"""The six axes (SAGO §Axes): raw signed Δ per variant, with hand-computed expected values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sacrebleu

from sago_engine.axes import (
    bleu,
    cosine_per_layer,
    delta_bert,
    delta_bleu,
    delta_cos,
    delta_ent,
    delta_mr,
    delta_prob,
    detector_kind,
    mirrors,
)
from sago_engine.types import Variant, VariantSpec


def V(family: str, subtype: str, meta: dict | None = None, strength: float = 1.0, position: str = "GLOBAL") -> Variant:
    return Variant(
        variant_id=f"{family}-{subtype}-{strength}",
        prompt_id="t:1",
        spec=VariantSpec(family, subtype, strength, position),
        text="variant text",
        seed=1,
        meta=meta or {},
    )


# ------------------------------------------------------------------ identical → Δ = 0
def test_identical_everything_gives_zero_on_all_axes():
    rng = np.random.default_rng(0)
    h = rng.normal(size=(5, 16)).astype(np.float32)
    assert delta_cos(h, h) == pytest.approx(0.0, abs=1e-12)
    assert delta_cos(np.stack([h, h]), h) == pytest.approx([0.0, 0.0], abs=1e-12)
    y = "The capital of France is Paris."
    assert delta_bleu([y], y).tolist() == [0.0]
    assert delta_bert([y], y).tolist() == [0.0]
    assert delta_prob([-12.5], -12.5).tolist() == [0.0]
    assert delta_ent([1.75], 1.75).tolist() == [0.0]
    variants = [
        V("surface_noise", "case", {"target": "upper"}),
        V("surface_noise", "punctuation"),
        V("surface_noise", "spacing"),
        V("structural", "length", {"target_ratio": 0.5}, 0.5),
        V("structural", "mood", {"target": "question"}),
        V("social_register", "politeness", {"register": "polite"}),
    ]
    assert delta_mr([y] * len(variants), variants, y).tolist() == [0.0] * len(variants)


# ------------------------------------------------------------------ Δ-Cos
def test_cosine_orthogonal_layer_is_zero_and_two_layer_average_by_hand():
    base = np.array([[1.0, 0.0], [1.0, 0.0]])
    var = np.array([[2.0, 0.0], [0.0, 3.0]])  # layer 0: same direction, layer 1: orthogonal
    assert cosine_per_layer(var, base).tolist() == pytest.approx([1.0, 0.0])
    # (cos-1) per layer = [0, -1]; mean = -0.5
    assert float(delta_cos(var, base)) == pytest.approx(-0.5)


def test_cosine_opposite_and_45_degrees():
    base = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    var = np.array([[-1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    # cos = [-1, 1/sqrt2, 1] → (cos-1) = [-2, 1/sqrt2 - 1, 0]; mean by hand
    expected = (-2.0 + (1 / math.sqrt(2) - 1.0) + 0.0) / 3
    assert float(delta_cos(var, base)) == pytest.approx(expected)  # ≈ -0.764297
    assert float(delta_cos(var, base)) == pytest.approx(-0.7642977, abs=1e-6)


def test_cosine_batch_shape_and_zero_vector_conventions():
    base = np.array([[0.0, 0.0], [1.0, 0.0]])
    var = np.array([
        [[0.0, 0.0], [1.0, 0.0]],   # zero vs zero → 1, same → 1
        [[1.0, 0.0], [0.0, 0.0]],   # nonzero vs zero → 0, zero vs nonzero → 0
    ])
    cos = cosine_per_layer(var, base)
    assert cos.shape == (2, 2)
    assert cos.tolist() == [[1.0, 1.0], [0.0, 0.0]]
    assert delta_cos(var, base).tolist() == [0.0, -1.0]


def test_cosine_shape_mismatch_raises():
    with pytest.raises(ValueError):
        delta_cos(np.ones((3, 4)), np.ones((2, 4)))


def test_cosine_range():
    rng = np.random.default_rng(1)
    d = delta_cos(rng.normal(size=(20, 4, 8)), rng.normal(size=(4, 8)))
    assert d.shape == (20,)
    assert np.all(d <= 0) and np.all(d >= -2)


# ------------------------------------------------------------------ Δ-BLEU
def test_bleu_known_value_by_hand():
    hyp, ref = "the cat sat on the mat", "the cat sat on a mat"
    # Hand count (13a tokens, no brevity penalty: both 6 tokens):
    # 1-gram 5/6, 2-gram 3/5, 3-gram 2/4, 4-gram 1/3 → BLEU = (5/6·3/5·1/2·1/3)^(1/4) = (1/12)^(1/4)
    hand = 100 * (1 / 12) ** 0.25
    assert hand == pytest.approx(53.7285, abs=1e-4)
    assert bleu(hyp, ref) == pytest.approx(hand, abs=1e-9)
    assert bleu(hyp, ref) == pytest.approx(sacrebleu.sentence_bleu(hyp, [ref]).score, abs=1e-12)
    assert delta_bleu([hyp], ref)[0] == pytest.approx(hand - 100.0)  # ≈ -46.2715


def test_bleu_brevity_penalty_by_hand():
    # hyp is a 4-token prefix of a 6-token ref: all precisions 1, BP = exp(1 - 6/4)
    hyp, ref = "one two three four", "one two three four five six"
    assert bleu(hyp, ref) == pytest.approx(100 * math.exp(1 - 6 / 4), abs=1e-9)  # ≈ 60.653


def test_bleu_conventions():
    assert bleu("", "") == 100.0
    assert bleu("", "something") == 0.0
    assert bleu("something", "") == 0.0
    assert bleu("   ", "something") == 0.0
    assert bleu("same", "same") == 100.0
    assert delta_bleu(["", "x y z"], "").tolist() == [0.0, -100.0]


def test_delta_bleu_range():
    d = delta_bleu(["a b c d", "totally different words here", "a b c d e"], "a b c d")
    assert d[0] == 0.0
    assert d[1] == -100.0  # no unigram overlap → 0 BLEU (smoothing only affects higher orders)
    assert -100.0 < d[2] < 0.0


# ------------------------------------------------------------------ Δ-BERT
def test_bert_conventions_and_paraphrase_between():
    base = "Paris is the capital of France."
    d = delta_bert([base, "", "The capital of France is Paris.", "Bananas are yellow fruit grown in the tropics."], base)
    assert d.shape == (4,)
    assert d[0] == 0.0
    assert d[1] == -1.0
    assert -0.2 < d[2] < 0.0  # paraphrase: close to 0, strictly below
    assert d[3] < d[2]         # unrelated is further away than a paraphrase
    assert np.all(d <= 0.0) and np.all(d >= -1.0)


def test_bert_empty_base():
    assert delta_bert(["", "hello"], "").tolist() == [0.0, -1.0]


# ------------------------------------------------------------------ Δ-Prob / Δ-Ent
def test_delta_prob_and_ent_arithmetic():
    assert delta_prob([-10.0, -30.5, -4.25], -20.0).tolist() == [10.0, -10.5, 15.75]
    assert delta_ent([0.5, 2.0], 1.25).tolist() == [-0.75, 0.75]
    out = delta_prob(np.array([-1.0]), -1.0)
    assert out.dtype == np.float64


# ------------------------------------------------------------------ Δ-MR: surface noise
def test_mr_case_upper():
    v = V("surface_noise", "case", {"target": "upper"})
    base = "The answer is Paris."
    assert mirrors("THE ANSWER IS PARIS.", v) == 1
    assert mirrors(base, v) == 0
    assert delta_mr(["THE ANSWER IS PARIS."], [v], base).tolist() == [1.0]
    # base already shouting and the variant reply is not → −1
    assert delta_mr(["The answer is Paris."], [v], "THE ANSWER IS PARIS.").tolist() == [-1.0]
    # both shouting → 0
    assert delta_mr(["PARIS, OF COURSE."], [v], "THE ANSWER IS PARIS.").tolist() == [0.0]


def test_mr_case_lower_and_random():
    low = V("surface_noise", "case", {"target": "lower"})
    assert mirrors("the answer is paris.", low) == 1
    assert mirrors("The answer is paris.", low) == 0
    rnd = V("surface_noise", "case", {"target": "random_case"})
    assert mirrors("tHe AnSwEr iS pArIs", rnd) == 1
    assert mirrors("The Answer Is Paris", rnd) == 0


def test_mr_case_random_short_words_is_defined():
    rnd = V("surface_noise", "case", {"target": "random_case"})
    assert mirrors("ab cd ef", rnd) == 0


def test_mr_punctuation_and_spacing():
    p = V("surface_noise", "punctuation")
    assert mirrors("Yes!! Sure??", p) == 1
    assert mirrors("Yes. Sure, of course.", p) == 0
    assert delta_mr(["Yes!! Sure??"], [p], "Yes. Sure.").tolist() == [1.0]
    s = V("surface_noise", "spacing")
    assert mirrors("a  b", s) == 1
    assert mirrors("a b", s) == 0
    assert delta_mr(["a  b", "a b"], [s, s], "a b").tolist() == [1.0, 0.0]


# ------------------------------------------------------------------ Δ-MR: structural
def test_mr_length_relative_tolerance():
    v = V("structural", "length", {"target_ratio": 0.5}, 0.5)
    base = " ".join(f"w{i}" for i in range(10))  # 10 words → target 5 words, tolerance ±0.125 of ratio
    words = lambda n: " ".join(["x"] * n)
    assert mirrors(words(5), v, base) == 1   # ratio 0.5
    assert mirrors(words(6), v, base) == 1   # 0.6: |0.1| ≤ 0.125
    assert mirrors(words(4), v, base) == 1   # 0.4
    assert mirrors(words(7), v, base) == 0   # 0.7: |0.2| > 0.125
    assert mirrors(words(3), v, base) == 0   # 0.3
    assert mirrors(base, v, base) == 0       # base itself does not mirror a compression
    assert delta_mr([words(5), words(9)], [v, v], base).tolist() == [1.0, 0.0]


def test_mr_length_expansion_boundary_and_meta_overrides_strength():
    v = V("structural", "length", {"target_ratio": 2.0}, strength=0.5)  # meta wins over strength
    base = "a b c d"  # 4 words → target 8, tolerance ±0.5 on the ratio → 6..10 words
    words = lambda n: " ".join(["x"] * n)
    assert mirrors(words(8), v, base) == 1
    assert mirrors(words(10), v, base) == 1  # ratio 2.5, exactly on the boundary (inclusive)
    assert mirrors(words(11), v, base) == 0
    assert mirrors(words(6), v, base) == 1
    assert mirrors(words(5), v, base) == 0
    # no base words → undefined ratio → 0
    assert mirrors(words(8), v, "") == 0


def test_mr_mood():
    q = V("structural", "mood", {"target": "question"})
    assert mirrors("Would you like more details?", q) == 1
    assert mirrors("Paris.", q) == 0
    imp = V("structural", "mood", {"target": "imperative"})
    assert mirrors("Consider the following: Paris is the capital.", imp) == 1
    assert mirrors("Paris is the capital.", imp) == 0
    assert mirrors("Consider this?", imp) == 0  # a question is not imperative
    assert delta_mr(["Is it Paris?"], [q], "It is Paris.").tolist() == [1.0]


# ------------------------------------------------------------------ Δ-MR: social register
def test_mr_social_register_heuristic():
    pol = V("social_register", "politeness", {"register": "polite"}, 3)
    assert mirrors("Certainly! The answer is Paris.", pol) == 1
    assert mirrors("Thank you for asking: Paris.", pol) == 1
    assert mirrors("Paris.", pol) == 0
    assert mirrors("Pleased to meet you", pol) == 0  # 'please' must be a whole cue, not a prefix
    rude = V("social_register", "politeness", {"register": "rude"}, -3)
    assert mirrors("Ugh, obviously it's Paris.", rude) == 1
    assert mirrors("It's Paris.", rude) == 0
    greet = V("social_register", "greeting", {"register": "greeting"})
    assert mirrors("Hello! It's Paris.", greet) == 1
    assert mirrors("  Good morning, Paris it is.", greet) == 1
    assert mirrors("It's Paris. Hello", greet) == 0  # greeting must open the reply
    assert mirrors("Hierarchy matters.", greet) == 0  # 'hi' as a prefix of a word is no greeting
    grat = V("social_register", "gratitude", {"register": "gratitude"})
    assert mirrors("Thanks for the question!", grat) == 1
    hedge = V("social_register", "hedging", {"register": "hedging"})
    assert mirrors("It might be Paris.", hedge) == 1
    assert mirrors("It is Paris.", hedge) == 0
    direct = V("social_register", "directness", {"register": "direct"})
    assert mirrors("Paris.", direct) == 1
    assert mirrors(" ".join(["word"] * 16), direct) == 0
    assert mirrors("", direct) == 0
    assert delta_mr(["Hello! Paris."], [greet], "Paris.").tolist() == [1.0]


def test_mr_neutral_and_unknown_are_zero():
    neutral = V("social_register", "politeness", {"register": "neutral"}, 0)
    for reply in ("Hello, please, thank you!", "UGH OBVIOUSLY", "Paris."):
        assert mirrors(reply, neutral) == 0
    assert delta_mr(["Hello, please!"], [neutral], "Paris.").tolist() == [0.0]
    assert mirrors("ANYTHING!!  at  all", V("other_family", "x")) == 0
    assert mirrors("ANYTHING!!", V("surface_noise", "unknown_subtype")) == 0


def test_mr_values_in_set_and_length_check():
    vs = [V("surface_noise", "case", {"target": "upper"}), V("surface_noise", "punctuation")]
    d = delta_mr(["HELLO THERE", "fine."], vs, "Hi!! there")
    assert set(d.tolist()) <= {-1.0, 0.0, 1.0}
    assert d.tolist() == [1.0, -1.0]
    with pytest.raises(ValueError):
        delta_mr(["a"], vs, "b")


def test_detector_kind():
    assert detector_kind(V("social_register", "politeness", {"register": "polite"})) == "heuristic"
    assert detector_kind(V("surface_noise", "case")) == "rules"
    assert detector_kind(V("structural", "length")) == "rules"
