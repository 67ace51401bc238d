"""surface_noise edit by edit (SAGO §Variants, family 2), every expected text written out by hand.

The variant's rng is replaced by ``ScriptedRng`` (``sample`` keeps the first k sites, ``choice``
takes the last option, ``randint`` the upper bound, ``random`` reads a given list), so each
site, mark and run of whitespace the subtype picks is known in advance; tests/unit/variants/test_variants.py
checks the real generator over the bundled prompts.
"""

from __future__ import annotations

import random

import pytest

from sago_engine.variants.surface_noise import (
    SurfaceNoise,
    _at_line_edge,
    _case_char,
    _grow,
    _pick,
    _plain,
    _trailing_punct,
    denoise,
    region_bounds,
)

SN = SurfaceNoise()
TABS = "\t" * 6  # strength-3 spacing: randint(2, 6) = 6 characters, each choice(" \t") = "\t"


class ScriptedRng(random.Random):
    def __init__(self, randoms=()):
        super().__init__(0)
        self.randoms = list(randoms)

    def sample(self, population, k, **_):
        return list(population)[:k]

    def choice(self, seq):
        return seq[-1]

    def randint(self, a, b):
        return b

    def random(self):
        return self.randoms.pop(0)


def apply(text, subtype, strength, position="GLOBAL", randoms=()):
    rng = ScriptedRng(randoms)
    out = SN.apply(text, subtype, strength, position, rng)
    assert rng.randoms == [], "every scripted random() was used"
    return out


# ------------------------------------------------------------------ helpers
def test_region_bounds_by_hand():
    t = "aa bb cc dd ee fff"  # 18 characters: a third is 6
    assert region_bounds(t, "PREFIX") == (0, 8)  # cut at 6 (inside "cc"), extended to its end
    assert region_bounds(t, "SUFFIX") == (12, 18)  # cut at 12 ("ee" starts there)
    assert region_bounds(t, "GLOBAL") == (0, 18)
    assert region_bounds("aa bb ccc dd", "SUFFIX") == (6, 12)  # cut at 8 (inside "ccc"), back to its start
    assert region_bounds("abcdefgh", "PREFIX") == (0, 8) and region_bounds("abcdefgh", "SUFFIX") == (0, 8)
    assert region_bounds("      abc def", "PREFIX") == (0, 9)  # only whitespace before the cut: the first word
    assert region_bounds("abc def      ", "SUFFIX") == (4, 13)  # only whitespace after the cut: the last word
    assert region_bounds("", "PREFIX") == (0, 0) and region_bounds("", "SUFFIX") == (0, 0)
    assert region_bounds("", "MIDDLE") == (0, 0)
    with pytest.raises(ValueError, match=r"^invalid position 'MIDDLE'; valid positions: \['PREFIX', 'SUFFIX', 'GLOBAL'\]$"):
        region_bounds("a b", "MIDDLE")


def test_grow_by_one_word():
    t = "aa bb  cc"
    assert _grow(t, 7, 9, "SUFFIX") == (3, 9)  # back over the gap and "bb"
    assert _grow(t, 3, 9, "SUFFIX") == (0, 9)
    assert _grow(t, 0, 9, "SUFFIX") == (0, 9)
    assert _grow(t, 0, 2, "PREFIX") == (0, 5)
    assert _grow(t, 0, 5, "PREFIX") == (0, 9)  # over a gap of two spaces
    assert _grow(t, 0, 9, "PREFIX") == (0, 9)
    assert _grow(t, 3, 5, "GLOBAL") == (0, 9)
    assert _grow("ab ", 0, 3, "SUFFIX") == (0, 3) and _grow(" ab", 1, 3, "SUFFIX") == (0, 3)  # stops at the text start
    assert _grow("x a   cc", 6, 8, "SUFFIX") == (2, 8)  # one character at a time: an odd gap, a one-letter word
    assert _grow("aa   b cc", 0, 2, "PREFIX") == (0, 6)


def test_pick_counts_by_strength():
    rng = random.Random(3)
    ten = list(range(0, 100, 10))
    for strength, k in ((1, 1), (2, 4), (3, 7)):  # 1; max(2, round(3.5)); max(3, round(7.0))
        got = _pick(rng, ten, strength)
        assert len(got) == len(set(got)) == k and got == sorted(got) and set(got) <= set(ten)
    four = [5, 6, 7, 8]
    assert len(_pick(rng, four, 2)) == 2 and len(_pick(rng, four, 3)) == 3  # max(2, 1), max(3, 3)
    assert _pick(rng, [9, 4], 3) == [4, 9]  # never more than there are
    assert _pick(rng, [], 3) == []
    assert _pick(ScriptedRng(), [7, 3, 5], 2) == [3, 7]  # sorted


def test_line_edges():
    t = "ab cd\nef gh"
    assert [p for p in range(len(t) + 1) if _at_line_edge(t, p)] == [0, 5, 6, 11]
    assert not _at_line_edge(t, 7)  # one character into the line
    assert _at_line_edge("ab  \ncd", 4) and not _at_line_edge("ab  \ncd", 3)  # a newline follows


def test_case_char_keeps_the_casefold():
    assert (_case_char("a", True), _case_char("A", False), _case_char("a", False)) == ("A", "a", "a")
    assert _case_char("ß", True) == "ß"  # upper is "SS": two characters
    assert _case_char("ı", True) == "ı"  # dotless i: "I" casefolds to "i"
    assert _case_char("ﬁ", True) == "ﬁ"
    assert _case_char("é", True) == "É" and _case_char("3", True) == "3"


def test_trailing_punct_plain_and_denoise():
    assert _trailing_punct("word?!") == "?!" and _trailing_punct("!!!") == "!!!" and _trailing_punct("x»") == "»"
    assert _trailing_punct("a") == "" and _trailing_punct("") == "" and _trailing_punct("(x)") == ")"
    assert _plain("  Wh-at's  IS\tit?! ") == "whats is it"
    assert denoise("Add 3 and 4, then 5!") == "add ⟦3⟧ and ⟦4⟧ then ⟦5!⟧"
    assert denoise("3.5 kg") == "⟦3.5⟧ kg" and denoise("kg 3.5") == "kg ⟦3.5⟧"
    assert denoise("!! ?") == "" and denoise("What  IS it?!") == "what is it"


# ------------------------------------------------------------------ spacing
def test_spacing_by_strength():
    t = "ab cd, ef"
    assert apply(t, "spacing", 1) == ("ab  cd, ef", {"target": "spacing", "region": [0, 9], "n_edits": 1})
    assert apply(t, "spacing", 2.0)[0] == "ab \tcd, \tef"  # both gaps, choice of (" ", "  ", "   ", "\t")
    assert apply(t, "spacing", 3) == ("ab " + TABS + "cd" + TABS + ", " + TABS + "ef",
                                      {"target": "spacing", "region": [0, 9], "n_edits": 3})  # and before ","


def test_spacing_at_the_region_border_and_without_gaps():
    t = "aa bb cc dd ee fff"
    assert apply(t, "spacing", 3, "PREFIX")[0] == "aa " + TABS + "bb " + TABS + "cc" + TABS + " dd ee fff"
    assert apply(t, "spacing", 2, "SUFFIX")[0] == "aa bb cc dd \tee \tfff"
    assert apply("word!", "spacing", 1)[0] == "word !"  # no gap: before the trailing mark
    assert apply("so x + y = 2 ok", "spacing", 2)[0] == "so \tx + y = 2 \tok"  # not inside the span
    assert apply("the 5 cm", "spacing", 1)[0] == "the  5 cm"  # next to a span's edge
    assert apply("ab x5? cd", "spacing", 3)[0] == "ab " + TABS + "x5" + TABS + "? " + TABS + "cd"  # at its end too
    assert apply("ab\ncd ef", "spacing", 1)[0] == "ab\ncd  ef"  # never at a line start
    assert apply("- item one", "spacing", 1)[0] == "- item  one"  # never next to a list marker
    for t in ("word-", "!!!", "a/", "x*"):
        assert not SN.editable(t, "spacing", 1, "GLOBAL") and apply(t, "spacing", 1)[0] == t
    assert SN.editable("word!", "spacing", 1, "GLOBAL") and SN.editable("a b", "spacing", 2.0, "GLOBAL")


# ------------------------------------------------------------------ punctuation
def test_punctuation_by_strength():
    assert apply("is it ok", "punctuation", 1) == ("is,, it ok", {"target": "punctuation", "region": [0, 8], "n_edits": 1})
    assert apply("is it ok", "punctuation", 2)[0] == "is.. it.. ok"
    assert apply("yes! no", "punctuation", 2, randoms=[0.3]) == ("yes!!!! no..", {"target": "punctuation",
                                                                                 "region": [0, 7], "n_edits": 2})
    assert apply("yes! no", "punctuation", 2, randoms=[0.5])[0] == "yes!.. no.."  # 0.5: not repeated
    assert apply("yes?! no", "punctuation", 2, randoms=[0.3])[0] == "yes?!!!! no.."  # the last mark repeated
    assert apply("(yes!) no", "punctuation", 2, randoms=[0.3])[0] == "(yes!)!!! no.."  # … not a bracket after it
    assert apply("yes! no", "punctuation", 1)[0] == "yes!,, no"  # strength 1 never repeats
    assert apply("yes! no", "punctuation", 3, randoms=[0.9, 0.1])[0] == "yes no.."  # "!" dropped
    assert apply("yes! no", "punctuation", 3, randoms=[0.9, 0.2])[0] == "yes!.. no.."  # 0.2: kept
    assert apply("yes! no", "punctuation", 3, randoms=[0.4, 0.5])[0] == "yes!!!! no.."


def test_punctuation_never_repeats_or_drops_brackets_and_spans():
    assert apply("see (this) ok", "punctuation", 3, randoms=[0.1])[0] == "see.. (this).. ok.."
    assert apply("wow 5!. yes", "punctuation", 3, randoms=[0.9, 0.1])[0] == "wow.. 5!... yes.."  # "!." is part of "5!": kept
    assert apply("say 'hi' ok", "punctuation", 2)[0] == "say.. 'hi' ok.."  # the quotation ends in a span
    assert apply("5 yes! no", "punctuation", 3, randoms=[0.9, 0.1])[0] == "5 yes no.."  # a span elsewhere: dropped
    assert apply("wow x5, yes", "punctuation", 3, randoms=[0.9, 0.1])[0] == "wow.. x5 yes.."  # a span just before it
    assert not SN.editable("3.5 7", "punctuation", 1, "GLOBAL") and apply("3.5 7", "punctuation", 1)[0] == "3.5 7"


# ------------------------------------------------------------------ case
def test_case_by_strength():
    assert apply("Hi there 3d ok", "case", 3) == ("HI THERE 3d OK", {"target": "upper", "region": [0, 14], "n_edits": 8})
    assert apply("Hello World x2Y", "case", 2) == ("hello world x2Y", {"target": "lower", "region": [0, 15], "n_edits": 2})
    assert apply("abc de", "case", 2, randoms=[0.1, 0.9, 0.9, 0.9, 0.9]) == (
        "Abc de", {"target": "random_case", "region": [0, 6], "n_edits": 1})  # already lower: random case
    assert apply("abc de", "case", 2, randoms=[0.5] * 5)[0] == "ABC DE"  # nothing flipped: upper instead
    assert apply("abc de", "case", 2, randoms=[0.5, 0.9, 0.9, 0.9, 0.9])[0] == "ABC DE"  # 0.5 is not below 0.5
    assert apply("one two three", "case", 1) == ("One two three", {"target": "random_case", "region": [0, 13], "n_edits": 1})
    assert apply("Hello there", "case", 1)[0] == "hello there"
    assert apply("a b c d e", "case", 1)[0] == "A B c d e"  # more than 4 word starts: max(2, round(1.75))
    assert apply("a b c d", "case", 1)[0] == "A b c d"
    assert apply("3a 'Quote' x", "case", 1)[0] == "3a 'Quote' X"  # no word start in a span


def test_case_sites_by_hand():
    assert SN._case_sites("Ab 3c dE", 3, [(3, 5)]) == [1, 6]
    assert SN._case_sites("Ab 3c dE", 2, [(3, 5)]) == [0, 7]
    assert SN._case_sites("ab 3c de", 2, [(3, 5)]) == [0, 1, 6, 7]  # nothing to lower: the upper sites
    assert SN._case_sites("Ab 3c dE", 1, [(3, 5)]) == [0, 6]
    assert SN._case_sites("Ab 3c dE", 1, [(0, 2)]) == [6]
    assert SN._case_sites("abcd", 3, [(1, 3)]) == [0, 3]  # a span is [x, y)
    assert SN._case_sites("ab_c d9 ß", 1, []) == [0, 5]  # "_c", "9" and "ß" are no flippable word start


def test_case_with_spans_and_growth():
    assert apply("Say 'Hi There' now", "case", 3)[0] == "SAY 'Hi There' NOW"
    assert apply("Say 'Hi There' now", "case", 2)[0] == "say 'Hi There' now"
    text = 'Explain "the whole quoted thing"'
    assert apply(text, "case", 3, "SUFFIX") == ('EXPLAIN "the whole quoted thing"',
                                                {"target": "upper", "region": [0, 32], "n_edits": 6})
    assert SN.editable(text, "case", 3, "SUFFIX") and not SN.editable("'all of it'", "case", 3, "SUFFIX")
    assert apply("'all of it'", "case", 1, "PREFIX") == ("'all of it'", {"target": "random_case", "region": [0, 11],
                                                                           "n_edits": 0})  # grown to the whole text
    assert apply('"all of it"', "case", 3, "SUFFIX")[0] == '"all of IT"'  # a wrapped prompt: no quotation
    assert not SN.editable("数字 123", "case", 2, "GLOBAL")


def test_editable_reads_the_subtype_and_strength_of_the_region_it_grows():
    assert SN.editable("_abc", "case", 3, "GLOBAL") and not SN.editable("_abc", "case", 1, "GLOBAL")  # no word start
    # SUFFIX "ef" starts a line (no gap to widen): spacing grows to "cd\nef", case would not need to
    assert SN.editable("ab cd\nef", "spacing", 1, "SUFFIX") and apply("ab cd\nef", "spacing", 1, "SUFFIX") == (
        "ab  cd\nef", {"target": "spacing", "region": [3, 8], "n_edits": 1})
    # SUFFIX "ABC" has nothing to upper-case: strength 3 grows to "go ABC" (strength 1 could flip the "A")
    assert SN.editable("go ABC", "case", 3, "SUFFIX") and apply("go ABC", "case", 3, "SUFFIX") == (
        "GO ABC", {"target": "upper", "region": [0, 6], "n_edits": 2})


def test_spacing_region_borders_and_markdown_in_a_suffix():
    # the PREFIX region "a bb c" ends inside the text: its end may widen (one-letter words at both ends)
    assert apply("a bb c dd ee ffff", "spacing", 3, "PREFIX")[0] == "a " + TABS + "bb " + TABS + "c" + TABS + " dd ee ffff"
    assert apply("xx yy a bc", "spacing", 2, "SUFFIX")[0] == "xx yy \ta \tbc"  # the SUFFIX region "a bc": its start too
    # the list marker "- " ends where the SUFFIX region starts: no space after it
    t = "intro words here\n- item one two"
    assert apply(t, "spacing", 3, "SUFFIX")[0] == "intro words here\n- item " + TABS + "one " + TABS + "two"
    assert apply("- abcdef", "spacing", 1, "SUFFIX")[0] == "- abcdef" and not SN.editable("- abcdef", "spacing", 1, "SUFFIX")
    assert _at_line_edge("a\nb\ncd", 4)  # the start of the third line


def test_case_spans_are_half_open():
    assert apply("x2y ab", "case", 3)[0] == "x2y AB"  # a span's first character is protected
    assert apply("`a`b c", "case", 3)[0] == "`a`B C"  # the character after its end is not


def test_editable_asks_the_named_subtype_for_its_sites():
    """Texts with sites for one subtype only: digits and marks have no letter case, so a subtype name that
    fell through to the case sites would answer "not editable"."""
    assert SN.editable("!! ??", "punctuation", 1, "GLOBAL") and not SN.editable("!! ??", "case", 1, "GLOBAL")
    assert SN.editable("12 34 56", "spacing", 1, "GLOBAL") and not SN.editable("12 34 56", "case", 1, "GLOBAL")
    assert SN.editable("abc", "case", 1, "GLOBAL") and not SN.editable("abc", "spacing", 1, "GLOBAL")


def test_editable_passes_its_strength_to_the_spacing_sites():
    """The only gap ends at a line start (never a site); strength 3 may also split a trailing mark off a word."""
    assert SN.editable("ab:\n  cd", "spacing", 3, "GLOBAL") and not SN.editable("ab:\n  cd", "spacing", 1, "GLOBAL")


def test_region_bounds_when_the_cut_third_is_only_whitespace():
    """PREFIX / SUFFIX whose third holds no word take the nearest whole word, up to the text's end / start."""
    assert region_bounds("      word", "PREFIX") == (0, 10)
    assert region_bounds("word      ", "SUFFIX") == (0, 10)
    assert region_bounds("x word      ", "SUFFIX") == (2, 12)
