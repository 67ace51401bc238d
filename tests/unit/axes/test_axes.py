"""The six axes (SAGO §Axes): raw signed Δ per variant, with hand-computed expected values."""

from __future__ import annotations

import functools
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
    # a reply of whitespace alone mirrors spacing when it holds the noise (a tab or a run of spaces)
    assert mirrors("\t \n  \t", s) == 1 and mirrors("  ", s) == 1 and mirrors("\t", s) == 1
    assert mirrors(" ", s) == 0 and mirrors("\n\n", s) == 0 and mirrors("", s) == 0


# ------------------------------------------------------------------ Δ-MR: structural
def test_mr_length_relative_tolerance():
    v = V("structural", "length", {"target_ratio": 0.5}, 0.5)
    base = " ".join(f"w{i}" for i in range(10))  # 10 words → target 5 words, tolerance ±0.125 of ratio

    def words(n: int) -> str:
        return " ".join(["x"] * n)

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

    def words(n: int) -> str:
        return " ".join(["x"] * n)

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


# ------------------------------------------------------------------ float noise
def test_noise_tolerance_per_axis_snaps_only_below_tol():
    from sago_engine.axes import NOISE_TOL, snap_noise
    from sago_engine.types import AXES

    assert set(NOISE_TOL) == set(AXES)
    assert NOISE_TOL == {"cos": 1e-6, "bleu": 1e-9, "bert": 1e-6, "prob": 1e-4, "ent": 1e-5, "mr": 0.0}
    assert snap_noise([5e-7, -5e-7, 2e-6, -0.5, float("nan")], "cos")[:4].tolist() == [0.0, 0.0, 2e-6, -0.5]
    assert math.isnan(snap_noise([float("nan")], "bert")[0])
    assert snap_noise([1e-12, -1.0], "mr").tolist() == [1e-12, -1.0]  # exact axis: nothing snapped
    # the tolerance is applied where each Δ is computed
    assert delta_prob([-3.00005, -3.001], -3.0).tolist() == pytest.approx([0.0, -0.001], abs=1e-12)
    assert delta_prob([-3.00005], -3.0)[0] == 0.0
    assert delta_ent([1.000005, 1.5], 1.0).tolist() == [0.0, 0.5]
    h = np.array([[1.0, 0.0], [1.0, 1e-4]])  # cos of layer 1 = 1 − 5e-9 → Δ ≈ −2.5e-9 → 0
    assert float(delta_cos(h, np.array([[1.0, 0.0], [1.0, 0.0]]))) == 0.0


def test_bert_case_and_spacing_only_change_is_exactly_zero():
    # MiniLM is uncased: identical word pieces → F1 exactly 1 on any CPU, so Δ-BERT is exactly 0
    base = "The answer is Paris."
    d = delta_bert(["THE ANSWER IS PARIS.", "  the answer   is paris.\n", "The answer is London."], base)
    assert d[:2].tolist() == [0.0, 0.0]
    assert d[2] < -NOISE_TOL_BERT


NOISE_TOL_BERT = 1e-6


@functools.lru_cache(maxsize=1)
def _hf_encoder():
    from transformers import AutoModel, AutoTokenizer

    from sago_engine.models.bertscore import encoder_dir

    return AutoTokenizer.from_pretrained(str(encoder_dir())), AutoModel.from_pretrained(str(encoder_dir())).eval()


def _reference_f1(cand: str, ref: str) -> float:
    """Independent BERTScore-F1 (idf off) with transformers + numpy: unpadded, 510-piece windows."""
    import torch

    tok, model = _hf_encoder()

    def emb(text):
        ids = tok(text.strip(), add_special_tokens=False)["input_ids"]
        rows, weights = [], []
        for s in range(0, len(ids), 510):
            x = torch.tensor([[tok.cls_token_id, *ids[s:s + 510], tok.sep_token_id]])
            with torch.no_grad():
                rows.append(model(x).last_hidden_state[0].double().numpy())
            weights += [0.0] + [1.0] * (x.shape[1] - 2) + [0.0]
        e = np.concatenate(rows)
        return e / np.linalg.norm(e, axis=1, keepdims=True), np.array(weights)

    (ec, wc), (er, wr) = emb(cand), emb(ref)
    sim = ec @ er.T
    p = (sim.max(axis=1) * wc).sum() / wc.sum()
    r = (sim.max(axis=0) * wr).sum() / wr.sum()
    return 2 * p * r / (p + r)


def test_bert_pair_does_not_depend_on_its_batch():
    from sago_engine.models.bertscore import bertscore_f1

    c, r = "Sorry, but I can't assist with that.", "Great British Bake Off 2017 has 10 episodes."
    long = ("The Great British Bake Off is a British television baking competition in which a group of "
            "amateur bakers compete against each other in a series of rounds, attempting to impress a group "
            "of judges with their baking skills, and one contestant is eliminated each week.")
    alone = bertscore_f1([c], [r])[0]
    mixed = bertscore_f1([long, c, "Yes.", r], [c, r, long, "No."])
    assert abs(mixed[1] - alone) <= 1e-6
    # the right value is the pair scored without padding (bert-score's padded batch gave 0.083489)
    assert alone == pytest.approx(_reference_f1(c, r), abs=1e-5)
    assert alone == pytest.approx(0.083231, abs=1e-5)
    assert delta_bert([c], r)[0] == pytest.approx(alone - 1.0, abs=1e-12)


def _long_reply(last: str) -> str:
    words = ("river stone garden window music letter bridge candle forest harbor lantern meadow "
             "pencil silver thunder valley").split()
    rng = np.random.default_rng(7)
    body = " ".join(" ".join(rng.choice(words, 12)) + "." for _ in range(50))  # 600 words
    return body + " " + last


def test_bert_long_replies_are_windowed_not_truncated():
    from sago_engine.axes import bert_windows_note
    from sago_engine.models.bertscore import WINDOW, bertscore_f1, word_pieces

    a = _long_reply("The final answer is that the museum opens at nine in the morning.")
    b = _long_reply("Nobody knows why the volcano erupted during the winter festival.")
    assert len(word_pieces(a)) > 512 and len(word_pieces(a)[:WINDOW]) == WINDOW
    assert word_pieces(a)[:WINDOW] == word_pieces(b)[:WINDOW]  # truncation at 512 would hide the change
    d = delta_bert([b, a], a)
    assert d[1] == 0.0
    assert d[0] < -1e-3  # the different last sentence is seen: never "perfectly stable"
    assert 1.0 + d[0] == pytest.approx(_reference_f1(b, a), abs=1e-5)
    assert bertscore_f1([b, "short"], [a, "text"])[0] == pytest.approx(1.0 + d[0], abs=1e-6)
    assert bert_windows_note(b, a) == "windows of 510 word pieces: reply 2, base 2"
    assert bert_windows_note("short", a) == "windows of 510 word pieces: reply 1, base 2"
    assert bert_windows_note("short", "text") is None


# ------------------------------------------------------------------ Δ-BLEU tokenizer by script
@pytest.mark.parametrize("hyp, ref, tok", [
    ("the cat sat", "the cat sat on a mat", "13a"),
    ("Кошка сидит на ковре", "Кошка сидела на ковре", "13a"),
    ("我喜欢狗", "我喜欢猫", "zh"),
    ("The word 猫 means cat.", "The word 狗 means dog.", "zh"),  # few Han chars in Latin text
    ("私は猫が好きです", "私は犬が好きです", "char"),            # Japanese (kana)
    ("나는 고양이를 좋아해", "나는 개를 좋아해", "char"),           # Korean
    ("สวัสดีครับ", "สวัสดีค่ะ", "char"),                          # Thai
    ("", "", "13a"),
])
def test_bleu_tokenizer_by_script(hyp, ref, tok):
    from sago_engine.axes import bleu_tokenizer

    assert bleu_tokenizer(hyp, ref) == tok


def test_bleu_chinese_one_character_change():
    from sago_engine.axes import bleu_signature, delta_bleu_signatures

    # zh: characters 我 喜 欢 狗 vs 我 喜 欢 猫: p1 3/4, p2 2/3, p3 1/2, p4 smoothed 1/(2·1)
    hand = 100 * (3 / 4 * 2 / 3 * 1 / 2 * 1 / 2) ** 0.25
    assert hand == pytest.approx(59.46, abs=0.01)
    assert bleu("我喜欢狗", "我喜欢猫") == pytest.approx(59.46, abs=0.01)
    assert sacrebleu.sentence_bleu("我喜欢狗", ["我喜欢猫"]).score == 0.0  # 13a: one token each
    assert delta_bleu(["我喜欢狗"], "我喜欢猫")[0] == pytest.approx(hand - 100, abs=1e-9)
    assert delta_bleu_signatures(["我喜欢狗", "I like dogs"], "我喜欢猫") == [bleu_signature("zh")] * 2
    assert bleu_signature("zh") == "nrefs:1|case:mixed|eff:yes|tok:zh|smooth:exp|version:" + sacrebleu.__version__
    assert delta_bleu_signatures(["a b"], "a c") == [bleu_signature("13a")]
    # Thai with the char tokenizer is not 0 any more
    assert bleu("สวัสดีครับ", "สวัสดีค่ะ") == pytest.approx(
        sacrebleu.sentence_bleu("สวัสดีครับ", ["สวัสดีค่ะ"], tokenize="char").score, abs=1e-9)
    assert bleu("สวัสดีครับ", "สวัสดีค่ะ") > 50


def test_bleu_whitespace_is_not_a_change():
    # same tokens: 100 up to float rounding (exp of a mean of logs, ~1e-13), Δ snapped to exactly 0
    assert bleu("  The answer is Paris.\n", "The answer is Paris.") == pytest.approx(100.0, abs=1e-9)
    assert delta_bleu(["  The answer is Paris.\n"], "The answer is Paris.").tolist() == [0.0]
    assert delta_bleu(["The  answer is   Paris."], "The answer is Paris.").tolist() == [0.0]
