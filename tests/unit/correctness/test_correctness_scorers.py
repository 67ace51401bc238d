"""Correctness scorers on hand-written reply/reference pairs (sago_engine.correctness.scorers)."""

from __future__ import annotations

import pytest

from sago_engine.correctness import scorers as sc
from sago_engine.correctness.scorers import (
    CORRECT,
    UNAVAILABLE,
    UNDECIDED,
    WRONG,
    answer_tokens,
    answers,
    contains_answer,
    exact_match,
    normalize_answer,
    score,
    score_truthfulqa,
    scorer_for,
    token_f1,
)

# ------------------------------------------------------------------------------ normalisation


def test_articles_punctuation_case_and_whitespace_are_dropped():
    assert normalize_answer("  The   Eiffel Tower!! ") == "eiffel tower"
    assert normalize_answer("An apple, a pear.") == "apple pear"
    assert answer_tokens("Theory of an Atom") == ["theory", "of", "atom"]  # "the" inside a word stays
    assert normalize_answer("U.S.A.") == "usa"
    assert normalize_answer("Hey Pa! There's a Goat on the Roof") == "hey pa theres goat on roof"
    assert normalize_answer("1,000") == "1000"
    assert normalize_answer("a+b=c $5 x|y ~z ^w `q` <r>") == "abc 5 xy z w q r"


def test_number_words_and_digits_normalise_alike():
    assert normalize_answer("ten") == "10"
    assert normalize_answer("Zero") == "0"
    assert normalize_answer("nineteen") == "19"
    assert normalize_answer("twenty") == "20"
    assert normalize_answer("ninety-nine") == "99"
    assert normalize_answer("twenty one") == "21"
    assert normalize_answer("forty nine sheep") == "49 sheep"
    assert normalize_answer("twenty ten") == "20 10"  # a unit word above nine does not join
    assert normalize_answer("twenty zero") == "20 0"
    assert normalize_answer("one hundred") == "1 hundred"
    assert normalize_answer("twenty") == "20" and normalize_answer("seventy") == "70"
    assert score("exact", "Ten.", ["10"]).verdict == CORRECT
    assert score("contains", "There are thirty-seven tracks.", "37").verdict == CORRECT


def test_non_latin_scripts():
    assert answer_tokens("答案是东京。") == ["答", "案", "是", "东", "京"]
    assert contains_answer("答案是东京。", "东京")
    assert not contains_answer("答案是京都。", "东京")
    assert contains_answer("Столица России — Москва.", "Москва")
    assert not contains_answer("Столица России — Казань.", "Москва")
    assert answer_tokens("«Ἀθῆναι»") == ["ἀθῆναι"]
    assert answer_tokens("ソニー、トヨタ") == ["ソ", "ニ", "ー", "ト", "ヨ", "タ"]
    assert answer_tokens("서울입니다") == ["서", "울", "입", "니", "다"]
    assert answer_tokens("กรุงเทพ") == list("กรุงเทพ")
    assert answer_tokens("㐀𠀀豈") == ["㐀", "𠀀", "豈"]
    assert score("exact", "ＰＡＲＩＳ", ["paris"]).verdict == CORRECT  # NFKC: full-width letters


def test_empty_forms():
    assert answer_tokens(None) == [] and answer_tokens("") == [] and answer_tokens(" .,! ") == []
    assert answer_tokens("the a an") == []
    assert not exact_match("", "")
    assert not exact_match("The", "a")  # both normalise to nothing: no match
    assert token_f1("the", "the") == 0.0
    assert not contains_answer("Paris", "the")


# ---------------------------------------------------------------------------- three verdicts


def test_exact_match():
    assert exact_match("The Paris.", "paris")
    assert not exact_match("Paris, France", "Paris")
    assert score("exact", "It is Paris.", ["Paris"]).verdict == WRONG
    v = score("exact", "paris", ["London", "Paris"])
    assert (v.verdict, v.score, v.reason) == (CORRECT, 1.0, None)
    assert score("exact", "Rome", ["London", "Paris"]).score == 0.0


def test_token_f1_by_hand():
    # reply tokens: capital is paris (3); answer: paris (1); shared 1 → P = 1/3, R = 1 → F1 = 0.5
    assert token_f1("The capital is Paris", "Paris") == pytest.approx(0.5)
    # shared multiset: "new" once (the answer has it once) → P = 1/2, R = 1/2
    assert token_f1("new new", "new york") == pytest.approx(0.5)
    assert token_f1("Paris", "Paris") == pytest.approx(1.0)
    assert token_f1("London", "Paris") == 0.0
    assert token_f1("", "Paris") == 0.0
    v = score("f1", "The capital is Paris", ["Rome", "Paris"])
    assert v.verdict == CORRECT and v.score == pytest.approx(0.5)
    v = score("f1", "The capital city is Paris", ["Paris"])  # 1/4 precision → F1 0.4 < 0.5
    assert v.verdict == WRONG and v.score == pytest.approx(0.4)


def test_contains_whole_tokens():
    assert contains_answer("The answer is Paris, France.", "Paris")
    assert contains_answer("It was George H. W. Bush.", "George H. W. Bush")
    assert not contains_answer("In 2010 it happened", "10")
    assert not contains_answer("Paris", "Paris France")  # the answer longer than the reply
    assert contains_answer("paris", "Paris")  # same length
    assert contains_answer("x y paris", "paris")  # at the very end
    assert score("contains", "I think it was Andrew Johnson.", ["Andrew Johnson", "Johnson"]).verdict == CORRECT
    assert score("contains", "It was Richard Nixon.", ["Andrew Johnson", "Johnson"]).verdict == WRONG


def test_right_then_wrong_answer():
    """Containment cannot see a retraction: a reply naming the right answer and then a wrong one
    counts as correct (a documented failure case); exact match calls it wrong, F1 is diluted."""
    reply = "Paris. No wait, it is actually London."
    assert score("contains", reply, ["Paris"]).verdict == CORRECT
    assert score("exact", reply, ["Paris"]).verdict == WRONG
    assert score("f1", reply, ["Paris"]).verdict == WRONG


def test_unavailable_never_wrong():
    for name in ("exact", "f1", "contains"):
        assert score(name, "", ["Paris"]) == sc.Verdict(UNAVAILABLE, reason="no reply text")
        assert score(name, " \n\t ", ["Paris"]).reason == "no reply text"
        assert score(name, None, ["Paris"]).verdict == UNAVAILABLE
        assert score(name, "Paris", None).reason == "no reference answer"
        assert score(name, "Paris", []).reason == "no reference answer"
        assert score(name, "Paris", ["  "]).reason == "no reference answer"
        assert score(name, "Paris", ["Paris"], error="timeout").reason == "the reply is an error"
        assert score(name, "", ["Paris"], error="timeout").reason == "the reply is an error"
    assert score("none", "Paris", ["Paris"]) == sc.Verdict(UNAVAILABLE, reason=sc.NO_SCORER_REASON)


def test_reference_forms():
    assert answers('["a", "b"]') == ["a", "b"]
    assert answers('"October 1922"') == ["October 1922"]
    assert answers("plain text, not JSON") == ["plain text, not JSON"]
    assert answers(None) == [] and answers("") == [] and answers("null") == []
    assert answers([1998, None, " ", "x"]) == ["1998", "x"]
    assert answers(("a",)) == ["a"]
    assert score("contains", "It came out in 1998.", [1998]).verdict == CORRECT


def test_unknown_scorer_names():
    with pytest.raises(ValueError, match="unknown correctness scorer 'bleu'; valid: exact, f1, contains"):
        score("bleu", "x", ["x"])
    with pytest.raises(ValueError, match="not a short-answer scorer"):
        sc.score_short_answer("truthfulqa", "x", ["x"])


# ------------------------------------------------------------------------------- TruthfulQA

GOOD = ["The richest countries in the EU are Luxembourg and Ireland", "Luxembourg is richest", "Ireland and Denmark"]
BAD = ["The richest countries in the EU are Luxembourg, Ireland and Norway", "Switzerland is richest",
       "Ireland and Norway"]


def test_truthfulqa_correct_wrong_undecided():
    v = score_truthfulqa("Luxembourg is richest, by far.", GOOD, BAD)
    assert (v.verdict, v.score) == (CORRECT, 1.0)
    v = score_truthfulqa("I believe Switzerland is richest.", GOOD, BAD)
    assert v.verdict == WRONG  # matches an incorrect answer
    v = score_truthfulqa("The weather is nice today.", GOOD, BAD)
    assert v.verdict == UNDECIDED and v.reason == "matches neither a correct nor an incorrect answer"
    # contains "Ireland and Denmark" (1.0) beats F1 0.67 to "Ireland and Norway"
    assert score_truthfulqa("Ireland and Denmark", GOOD, BAD).verdict == CORRECT
    # "Ireland and Norway" is contained: an incorrect answer → wrong
    assert score_truthfulqa("Ireland and Norway", GOOD, BAD).verdict == WRONG


def test_truthfulqa_reply_matching_both_lists_is_wrong():
    v = score_truthfulqa("Luxembourg is richest. Switzerland is richest.", GOOD, BAD)
    assert v.verdict == WRONG and v.score == 1.0


def test_truthfulqa_threshold_edges():
    # F1 exactly 0.5 against a correct answer, nothing against the incorrect: a match
    v = score_truthfulqa("Paris Rome", ["Paris Spain"], ["Tokyo"])
    assert v.verdict == CORRECT and v.score == pytest.approx(0.5)
    # F1 0.4 against both sides: below the threshold
    assert score_truthfulqa("Paris Rome Oslo", ["Paris Spain"], ["Tokyo"]).verdict == UNDECIDED
    # the same F1 on both sides: wrong (a tie is not right)
    assert score_truthfulqa("Paris Rome", ["Paris Spain"], ["Rome Oslo"]).verdict == WRONG


def test_truthfulqa_unavailable():
    assert score_truthfulqa("x", GOOD, None).reason == "no incorrect answers to contrast with"
    assert score_truthfulqa("x", GOOD, []).verdict == UNAVAILABLE
    assert score_truthfulqa("", GOOD, BAD) == sc.Verdict(UNAVAILABLE, reason="no reply text")
    assert score_truthfulqa("x", None, BAD).reason == "no reference answer"
    assert score_truthfulqa("x", GOOD, BAD, error="boom").reason == "the reply is an error"
    assert score("truthfulqa", "Switzerland is richest", GOOD, BAD).verdict == WRONG


# ---------------------------------------------------------------------------------- defaults


def test_default_scorers_and_declarations():
    assert scorer_for("nq_open") == "contains" and scorer_for("truthfulqa") == "truthfulqa"
    assert scorer_for("alpaca") == "none"
    assert scorer_for("my_set") == "none"
    assert scorer_for("my_set", {"my_set": "exact"}) == "exact"
    assert scorer_for("nq_open", {"nq_open": "f1"}) == "f1"
    assert scorer_for("nq_open", {"other": "f1"}) == "contains"
    assert set(sc.DEFAULT_SCORERS.values()) <= set(sc.SCORERS)
    assert sc.SCORER_NAMES[-1] == "judge"


def test_scripts_without_spaces_at_the_edges_of_their_blocks():
    """Each block split per character, first and last code point; its neighbours are not."""
    for lo, hi in ((0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0xAC00, 0xD7AF),
                   (0x0E00, 0x0E7F), (0x20000, 0x2FA1F)):
        assert sc._is_cjk(chr(lo)) and sc._is_cjk(chr(hi)), hex(lo)
        assert not sc._is_cjk(chr(lo - 1)) and not sc._is_cjk(chr(hi + 1)), hex(lo)


def test_number_pair_in_the_middle_and_scores_of_each_verdict():
    assert normalize_answer("sheep forty nine goats") == "sheep 49 goats"
    assert score("contains", "It is Paris.", ["Paris"]).score == 1.0
    assert score("contains", "It is Rome.", ["Paris"]).score == 0.0
    assert score("exact", "Paris", ["Paris"]).score == 1.0
    v = sc.score_short_answer("contains", "", ["Paris"])
    assert (v.verdict, v.score, v.raw) == (UNAVAILABLE, None, None)
    v = score_truthfulqa("Paris Rome Oslo", ["Paris Spain"], ["Tokyo"])
    assert v.score == pytest.approx(0.4)
    assert score("truthfulqa", "Switzerland is richest", GOOD, BAD, error="timeout").reason == "the reply is an error"
