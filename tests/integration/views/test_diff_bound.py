"""A page's cost is bounded (T16): the variant diff compares at most MAX_PAIRS token pairs, and is cached.

The bound is checked structurally — every comparison the diff makes is counted (len(a) · len(b)
of each LCS pass, and of any ``difflib.SequenceMatcher``, whose cost on a small vocabulary is
far above that) — never by timing.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from sago_engine.views import textdiff
from sago_engine.views.textdiff import MAX_PAIRS, bounded_diff, diff_segments
from tests.support.factories import make_store
from tests.support.hostile_stores import long_prompt_pair

ROOT = Path(__file__).resolve().parents[3]
_TALLY = {"pairs": 0, "calls": 0, "limit": MAX_PAIRS}


def _count(a, b) -> None:
    """Add one comparison of len(a) × len(b) pairs; fail (before any work) past the limit."""
    _TALLY["pairs"] += len(a) * len(b)
    _TALLY["calls"] += 1
    if _TALLY["pairs"] > _TALLY["limit"]:
        raise AssertionError(f"diff work above the bound: {_TALLY['pairs']:,} token pairs > {_TALLY['limit']:,}")


class _CountedMatcher(difflib.SequenceMatcher):
    def __init__(self, isjunk=None, a="", b="", autojunk=True):
        _count(a, b)
        super().__init__(isjunk, a, b, autojunk)


@pytest.fixture
def counted(monkeypatch):
    """Count every comparison the diff code makes (its only cost that grows with the texts)."""
    _TALLY.update(pairs=0, calls=0, limit=MAX_PAIRS)
    monkeypatch.setattr(difflib, "SequenceMatcher", _CountedMatcher)
    real = getattr(textdiff, "lcs_ops", None)
    if real is not None:
        def lcs_ops(a, b):
            _count(a, b)
            return real(a, b)

        monkeypatch.setattr(textdiff, "lcs_ops", lcs_ops)
    return _TALLY


def _rebuilds(seg, base, variant):
    assert "".join(t for op, t in seg if op != "insert") == base
    assert "".join(t for op, t in seg if op != "delete") == variant
    assert all(op in textdiff.OPS and t for op, t in seg)


def test_t16_ten_thousand_word_prompt_diff_is_bounded(counted):
    """Case T16's input shape: 10,000 words from a 10-word vocabulary plus ".", and a punctuation variant."""
    base, variant = long_prompt_pair(10_000)
    d = bounded_diff(base, variant)
    assert counted["pairs"] <= MAX_PAIRS and d.pairs <= MAX_PAIRS
    assert d.level == "line" and d.words >= 9_000
    _rebuilds(d.segments, base, variant)
    assert sum(op != "equal" for op, _ in d.segments) > 100  # still a highlight of the edits, not one block


def test_a_text_without_lines_or_sentences_is_not_diffed(counted):
    base = " ".join(f"w{i % 10}" for i in range(50_000))
    variant = base.replace("w3 w4", "w3, w4")
    d = bounded_diff(base, variant)
    assert d.level == "none" and d.segments == () and d.words == 50_000
    assert counted["calls"] == 0
    seg = diff_segments(base, variant)  # the plain API is bounded too: one delete and one insert
    assert seg == [("delete", base), ("insert", variant)]


def test_common_ends_are_matched_without_a_quadratic_pass(counted):
    """A one-word edit in the middle of a 1 MB text: the shared prefix and suffix cost nothing."""
    base = " ".join(f"w{i % 10}" for i in range(200_000))
    cut = base.index(" ", 500_000) + 1
    variant = base[:cut] + "CHANGED " + base[cut:]
    d = bounded_diff(base, variant)
    assert d.level == "word" and counted["pairs"] <= 4
    _rebuilds(d.segments, base, variant)
    assert [s for s in d.segments if s[0] != "equal"] == [("insert", "CHANGED ")]


def test_short_texts_are_diffed_word_by_word():
    base, variant = "What is the capital of Australia?", "Hurry up: what is the capital of AUSTRALIA?"
    d = bounded_diff(base, variant)
    assert d.level == "word" and list(d.segments) == diff_segments(base, variant)
    assert d.segments == (("delete", "What"), ("insert", "Hurry up: what"), ("equal", " is the capital of "),
                          ("delete", "Australia"), ("insert", "AUSTRALIA"), ("equal", "?"))
    # a replaced phrase is one struck and one added piece, not word by word around shared spaces
    assert diff_segments("the cat sat on the mat", "a dog sat on a rug") == [
        ("delete", "the cat"), ("insert", "a dog"), ("equal", " sat on "), ("delete", "the mat"), ("insert", "a rug")]


def test_a_small_vocabulary_costs_what_its_size_says(counted):
    """Two 2,000-word texts over a two-word vocabulary: difflib needs minutes here (cubic); the LCS
    pass compares each token pair once."""
    import random

    base = " ".join(random.Random(0).choice("ab") for _ in range(2_000))
    variant = " ".join(random.Random(1).choice("ab") for _ in range(2_000))
    d = bounded_diff(base, variant)
    assert d.level == "word" and counted["calls"] == 1 and counted["pairs"] == d.pairs <= MAX_PAIRS
    _rebuilds(d.segments, base, variant)


def test_lcs_ops_is_a_longest_common_subsequence():
    import random

    def lcs_len(a, b):  # textbook dynamic programme
        row = [0] * (len(b) + 1)
        for x in a:
            prev, row = row, [0]
            for j, y in enumerate(b):
                row.append(prev[j] + 1 if x == y else max(prev[j + 1], row[j]))
        return row[-1]

    rng = random.Random(0)
    for _ in range(200):
        a = [rng.choice("abc") for _ in range(rng.randint(0, 15))]
        b = [rng.choice("abc") for _ in range(rng.randint(0, 15))]
        ops = textdiff.lcs_ops(a, b)
        assert sum(op == "equal" for op, _ in ops) == lcs_len(a, b)
        assert [a[k] for op, k in ops if op != "insert"] == a
        assert [a[k] if op == "equal" else b[k] for op, k in ops if op != "delete"] == b


@pytest.mark.parametrize("budget", [10, 1_000, 50_000])
def test_any_budget_is_respected(counted, budget):
    base, variant = long_prompt_pair(2_000, seed=3)
    counted["limit"] = budget
    d = bounded_diff(base, variant, max_pairs=budget)
    assert counted["pairs"] <= budget and d.pairs <= budget
    if d.level != "none":
        _rebuilds(d.segments, base, variant)


@pytest.fixture(scope="module")
def long_store(tmp_path_factory):
    """One prompt of 10,000 words whose every variant is the punctuation-noise variant (case T16)."""
    import duckdb

    p = make_store(tmp_path_factory.mktemp("t16") / "long.duckdb", models=("model-a",), datasets=("truthfulqa",),
                   n_prompts=1, n_variants=2)
    base, variant = long_prompt_pair(10_000)
    con = duckdb.connect(str(p))
    con.execute("UPDATE prompts SET text = ?", [base])
    con.execute("UPDATE variants SET text = ?", [variant])
    con.close()
    return p


def test_t16_prompts_page_diffs_within_the_bound_and_caches_the_diff(long_store, counted):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["app_store_custom"] = str(long_store)
    at.run()
    at.switch_page("pages/prompts.py")
    at.run()
    assert not at.exception, at.exception
    assert counted["pairs"] <= MAX_PAIRS and counted["calls"] > 0
    assert any("A long text (" in c.value and "compared line by line" in c.value for c in at.caption)
    assert any("<del" in h.proto.body for h in at.get("html"))
    calls = counted["calls"]
    at.toggle(key="app_presentation").set_value(True).run()  # any other widget change reruns the page
    assert not at.exception, at.exception
    assert counted["calls"] == calls  # the diff came from the cache


def test_prompts_page_shows_texts_too_long_to_compare_side_by_side(tmp_path, counted):
    import duckdb

    p = make_store(tmp_path / "flat.duckdb", models=("model-a",), datasets=("truthfulqa",), n_prompts=1, n_variants=1)
    base = " ".join(f"w{i % 10}" for i in range(30_000))
    variant = base.replace("w3 w4", "w3, w4")
    con = duckdb.connect(str(p))
    con.execute("UPDATE prompts SET text = ?", [base])
    con.execute("UPDATE variants SET text = ?", [variant])
    con.close()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["app_store_custom"] = str(p)
    at.run()
    at.switch_page("pages/prompts.py")
    at.run()
    assert not at.exception, at.exception
    assert any(c.value.startswith("Too long to highlight (30,000 words)") for c in at.caption)
    codes = [c.value for c in at.get("code")]
    assert base in codes and variant in codes
    assert counted["calls"] == 0
