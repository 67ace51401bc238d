"""The protected spans of a prompt (``sago_engine.variants._text.protected_spans``), piece by piece,
each expected range counted by hand (tests/unit/variants/test_variants.py checks them on the bundled prompts)."""

from __future__ import annotations

import pytest

from sago_engine.variants._text import _code_blocks, _core, _mask, _math_and_numbers, _merge, protected_spans


def spans(text):
    return [text[a:b] for a, b in protected_spans(text)]


@pytest.mark.parametrize("tok, core", [
    ('"hello"', "hello"), ("(2019).", "(2019)"), ("2019).", "2019"), ("(2019", "2019"), ("((x)", "(x)"),
    ("[a]]", "[a]"), ("{x", "x"), ("<x", "x"), ("x>", "x"), ("x}", "x"), ("«x»", "x"), ("'a'", "a"),
    ("x;", "x"), ("x:", "x"), ("x,", "x"), ("x?", "x"), ("¿qué?", "qué"), ("¡hola!", "hola"),
    ("5!", "5!"), ("11!!", "11!!"), ("5!.", "5!"), ("a5!", "a5!"), ("wow!", "wow"), ("", ""),
    ("X1", "X1"), ("1X", "1X"), ('«"x"»', "x"), ("¡¿x?!", "x"), ("5X!", "5X"), ("(a)b)", "(a)b"),
])
def test_core_of_a_token(tok, core):
    i, j = _core(tok)
    assert tok[i:j] == core and 0 <= i <= j <= len(tok)


def test_core_indices():
    assert _core("(2019") == (1, 5) and _core("2019).") == (0, 4) and _core("") == (0, 0)


def test_mask_and_merge():
    assert _mask("abcdef", [(1, 3), (4, 5)]) == "a  d f" and _mask("abc", []) == "abc"
    assert _merge([(5, 7), (0, 2), (2, 3), (6, 9), (4, 4)]) == [(0, 3), (5, 9)]  # touching spans merge, empty go
    assert _merge([(0, 10), (2, 3)]) == [(0, 10)] and _merge([]) == []


def test_code_blocks_by_hand():
    t = "Fix:\ndef f(n):\n  return n\n\nok"  # lines start at 0, 5, 15, 26, 27
    assert _code_blocks(t) == [(5, 26)]  # through the last indented line's newline, not the blank line
    assert _code_blocks("x = 1") == [(0, 5)]  # no newline at the end
    assert _code_blocks("x = 1\ntext\ny = 2") == [(0, 6), (11, 16)]
    assert _code_blocks("x = 1\ny = 2") == [(0, 6), (6, 11)]
    assert _code_blocks("if x == 1:\n\tpass") == [(0, 16)]  # a tab indents too
    assert _code_blocks("def f():\n\n  return 1\n\n") == [(0, 21)]  # a blank line inside the block
    assert _code_blocks("Hello\nthere") == []
    assert _code_blocks("x = 1\nXyz") == [(0, 6)]  # a line that starts with a letter ends the block


@pytest.mark.parametrize("text, expected", [
    ("x = 1", [(0, 5), (4, 5)]),
    ("= 5", [(2, 3)]), ("5 =", [(0, 1)]),  # an operator at a line's edge joins nothing
    ("a - b", [(0, 5)]), ("x + .", []), ("Wars - The", []),
    ("a\nx = 1", [(2, 7), (6, 7)]),  # offsets are the text's, line by line
    ("f(x) and 2n+3", [(0, 4), (9, 13)]), ("Radius = 4", [(0, 10), (9, 10)]),
    ("a_b c::d", [(0, 3), (4, 8)]), ("x/y and/or", [(0, 3)]),
    ("x (5", [(3, 4)]),  # the core of "(5" starts after the bracket
    ("( 5", [(2, 3)]),  # a token with an empty core is skipped, the line goes on
])
def test_math_and_numbers_by_hand(text, expected):
    assert _math_and_numbers(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("Use `a@b.com` now", ["`a@b.com`"]),  # what code holds is not searched again
    ("Visit www.x.org, or a@b.com.", ["www.x.org", "a@b.com"]),  # URL and address without the sentence mark
    ("see https://a.b/c?d=1) and (www.e.org).", ["https://a.b/c?d=1", "www.e.org"]),
    ("mail: (x.y@z.co).", ["x.y@z.co"]),
    ("## Title\nx = 1\nSee 3 items", ["## ", "x = 1\n", "3"]),
    ('Say ""hi"" and “yo” and «oui» and ‘it’s’ and \'ok\' now', ['""hi""', "“yo”", "«oui»", "‘it’s’", "'ok'"]),
    ('"What is ""x""?"', ['""x""']),  # a CSV-wrapped prompt: the wrapper is no quotation
    ('"He said "hi" ok"', ['"He said "', '" ok"']),  # a lone quote inside: the outer marks are quotes
    ('"plain wrapped" ?', []),
    ("a `x` b ``y`z`` c", ["`x`", "``y`z``"]),
    ("```\ncode\n", ["```\ncode\n"]),  # an unclosed fence runs to the end
    ("```\nprint(x).", ["```\nprint(x)."]),  # … its last mark included (code is not trimmed like a URL)
    ("```\nhello.", ["```\nhello."]),
    ('Use `say "hi` and "bye" now', ['`say "hi`', '"bye"']),  # a quote inside code opens no quotation
    ("The 5 and the 6th", ["5", "6th"]),
    ("word   ", []), ("", []),
])
def test_protected_spans_combined(text, expected):
    assert spans(text) == expected
    got = protected_spans(text)
    assert type(got) is list and all(type(s) is tuple for s in got)
