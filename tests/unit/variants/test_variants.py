"""Tests of sago_engine.variants: registry, grid, determinism, families, fixed vectors, filter."""

from __future__ import annotations

import collections
import functools
import json
import random
import re
import statistics
import sys
import unicodedata
from pathlib import Path

import pytest

from sago_engine.seeds import derive_seed, stable_hash
from sago_engine.types import VariantSpec
from sago_engine.variants import (
    FAMILIES,
    UnknownFamilyError,
    family_registry,
    full_grid,
    get_family,
    list_families,
    make_variant,
    make_variants,
    sample_grid,
    spec_applies,
    validate_spec,
)
from sago_engine.variants import semantic_filter as sf
from sago_engine.variants._text import detect_mood, protected_spans
from sago_engine.variants.social_phrases import REGISTERS, TONES
from sago_engine.variants.surface_noise import denoise, region_bounds

ROOT = Path(__file__).resolve().parents[3]
VECTORS = ROOT / "tests" / "vectors" / "variants"
BASE = "What is the capital of Australia?"


def _load():
    rows = []
    for f in sorted((ROOT / "data" / "datasets").glob("*.jsonl")):
        for k, line in enumerate(f.read_text().splitlines()):
            if line.strip():
                rows.append((f"{f.stem}:{json.loads(line)['id']}", json.loads(line)["prompt"], k))
    return rows


ALL = [(pid, text) for pid, text, _ in _load()]
FIRST16 = [(pid, text) for pid, text, k in _load() if k < 16]  # 6 datasets × 16 = 96 prompts


# ---------------------------------------------------------------- registry and grid
def test_registry_lists_families_in_order():
    assert list_families() == ["social_register", "surface_noise", "structural"]
    assert set(FAMILIES) == set(list_families()) and len(FAMILIES) == 3
    for name in list_families():
        assert get_family(name).name == name


def test_registry_miss_suggests_close_names():
    with pytest.raises(KeyError) as e:
        get_family("social_registr")
    msg = str(e.value)
    assert "did you mean 'social_register'" in msg and "surface_noise" in msg  # lists valid ones
    with pytest.raises(ValueError, match="did you mean 'surface_noise'"):
        get_family("surface-noise")
    assert isinstance(e.value, UnknownFamilyError)


def test_registry_refuses_duplicates_and_loads_lazily():
    calls = []

    class Fam:
        name, generator, subtypes = "toy", "rules-v1", {}

        def apply(self, text, subtype, strength, position, rng):
            return text, {}

    reg = family_registry()
    reg.register("toy", lambda: calls.append(1) or Fam())
    with pytest.raises(ValueError, match="already registered"):
        reg.register("toy", lambda: Fam())
    assert calls == []  # nothing built before first use
    assert reg["toy"] is reg["toy"] and calls == [1]


def test_full_grid_counts_order_and_validity():
    grid = full_grid()
    assert len(grid) == 78 + 27 + 5 and len(set(grid)) == len(grid)
    assert grid == full_grid()  # stable
    assert [s.family for s in grid] == sorted((s.family for s in grid), key=list_families().index)
    pol = sorted({s.strength for s in grid if s.subtype == "politeness"})
    assert pol == [float(k) for k in range(-5, 6)]
    assert {s.position for s in grid if s.family == "structural"} == {"GLOBAL"}
    assert {s.strength for s in grid if s.subtype == "length"} == {0.5, 0.75, 1.5, 2.0}
    for s in grid:
        validate_spec(s)
    # the grid is exactly the declared (u, s, p) product of every family
    for name in list_families():
        fam = get_family(name)
        declared = {(u, s, p) for u, i in fam.subtypes.items() for s in i.strengths for p in i.positions}
        assert declared == {(s.subtype, s.strength, s.position) for s in full_grid([name])}
    with pytest.raises(KeyError):
        full_grid(["nope"])


def test_validate_spec_names_the_invalid_field():
    with pytest.raises(ValueError, match=r"unknown subtype 'politness'.*did you mean 'politeness'"):
        validate_spec(VariantSpec("social_register", "politness", 1, "PREFIX"))
    with pytest.raises(ValueError, match=r"invalid strength 7.*valid strengths: \[-5, -4"):
        validate_spec(VariantSpec("social_register", "politeness", 7, "PREFIX"))
    with pytest.raises(ValueError, match=r"invalid position 'PREFIX'.*valid positions: \['GLOBAL'\]"):
        validate_spec(VariantSpec("structural", "length", 0.5, "PREFIX"))
    with pytest.raises(ValueError, match="valid strengths: \\[0.5, 0.75, 1.5, 2\\]"):
        validate_spec(VariantSpec("structural", "length", 0.6, "GLOBAL"))
    with pytest.raises(ValueError, match="did you mean 'structural'"):
        validate_spec(VariantSpec("structurall", "length", 0.5, "GLOBAL"))


# ---------------------------------------------------------------- make_variant
def test_every_spec_reachable_and_changes_the_prompt():
    for spec in full_grid():
        v = make_variant("p1", BASE, spec, run_seed=0)
        assert v.spec == spec and v.text != BASE and v.meta["changed"], spec.label()
        want = "rules-v3" if spec.family == "surface_noise" else "rules-v1"
        assert v.generator == get_family(spec.family).generator == want


def test_determinism_bytes_seed_and_id():
    specs = full_grid()
    for pid, text in FIRST16[::12]:
        a = make_variants(pid, text, specs, 7)
        b = make_variants(pid, text, specs, 7)
        assert [(v.text.encode(), v.seed, v.variant_id, v.meta) for v in a] == [
            (v.text.encode(), v.seed, v.variant_id, v.meta) for v in b]
    v = make_variant("p1", BASE, specs[0], 7)
    seed = derive_seed(7, "p1", specs[0].as_dict(), "rules-v1")
    assert v.seed == seed and v.variant_id == stable_hash("p1", specs[0].as_dict(), seed, "rules-v1")
    # strength given as int or float is the same spec
    s_int = VariantSpec("social_register", "politeness", 3, "SUFFIX")
    assert make_variant("p1", BASE, s_int, 7).variant_id == make_variant(
        "p1", BASE, VariantSpec("social_register", "politeness", 3.0, "SUFFIX"), 7).variant_id


def test_different_run_seed_changes_some_texts():
    specs = full_grid()
    for pid, text in FIRST16[:3]:
        a = [v.text for v in make_variants(pid, text, specs, 0)]
        b = [v.text for v in make_variants(pid, text, specs, 1)]
        assert sum(x != y for x, y in zip(a, b)) >= 20
        assert len({v.variant_id for v in make_variants(pid, text, specs, 0)}) == len(specs)


def test_phrasing_index_and_errors():
    spec = VariantSpec("social_register", "politeness", 2, "PREFIX")
    v0, v1 = (make_variant("p1", BASE, spec, 0, phrasing_index=k) for k in (0, 1))
    assert v0.seed != v1.seed and v0.variant_id != v1.variant_id
    assert (v0.meta["phrasing_index"], v1.meta["phrasing_index"]) == (0, 1)
    for bad in ("", "   \n\t"):
        with pytest.raises(ValueError, match="empty"):
            make_variant("p1", bad, spec, 0)
    with pytest.raises(ValueError):
        make_variant("p1", BASE, VariantSpec("social_register", "politeness", 9, "PREFIX"), 0)


# ---------------------------------------------------------------- surface_noise
SURFACE = full_grid(["surface_noise"])


@pytest.fixture(scope="module")
def surface_variants():
    return [(text, make_variant(pid, text, s, 0)) for pid, text in ALL for s in SURFACE]


def test_denoise_recovers_every_surface_variant_of_every_real_prompt(surface_variants):
    bad = [(t, v.text) for t, v in surface_variants if denoise(v.text) != denoise(t)]
    assert not bad, bad[:3]
    assert len(surface_variants) == len(ALL) * 27 and len(ALL) == 1100


def test_surface_edits_confined_to_region(surface_variants):
    grown = 0
    for text, v in surface_variants:
        a, b = region_bounds(text, v.spec.position)
        if v.meta["region"] != [a, b]:  # the region was all protected: grown word by word
            grown += 1
            ga, gb = v.meta["region"]
            assert protected_spans(text) and v.spec.position != "GLOBAL"
            assert (gb == b and ga < a and (ga == 0 or text[ga - 1].isspace())) if v.spec.position == "SUFFIX" \
                else (ga == a and gb > b and (gb == len(text) or text[gb].isspace())), (text, v.meta)
            a, b = ga, gb
        assert v.text.startswith(text[:a]), (text, v.text)
        assert v.text[len(v.text) - (len(text) - b):] == text[b:], (text, v.text)
        if v.spec.position == "PREFIX":
            assert a == 0 and b >= len(text) // 3 and (b == len(text) or text[b].isspace())
        elif v.spec.position == "SUFFIX":
            assert b == len(text) and a <= len(text) - len(text) // 3 and (a == 0 or text[a - 1].isspace())
    assert grown < 0.005 * len(surface_variants)  # 102 of 29,700 (0.3%)


def test_surface_meta_targets_and_dose(surface_variants):
    targets = collections.defaultdict(collections.Counter)
    edits = collections.defaultdict(list)
    changed = 0
    for _, v in surface_variants:
        targets[(v.spec.subtype, v.spec.strength)][v.meta["target"]] += 1
        edits[(v.spec.subtype, v.spec.strength)].append(v.meta["n_edits"])
        changed += v.meta["changed"]
    assert changed / len(surface_variants) > 0.99
    assert set(targets[("case", 3.0)]) == {"upper"} and set(targets[("case", 1.0)]) == {"random_case"}
    assert set(targets[("case", 2.0)]) <= {"lower", "random_case"} and targets[("case", 2.0)]["lower"] > 0
    for u in ("spacing", "punctuation"):
        assert set(targets[(u, 1.0)]) == set(targets[(u, 3.0)]) == {u}
        means = [statistics.mean(edits[(u, float(s))]) for s in (1, 2, 3)]
        assert means[0] < means[1] < means[2], (u, means)  # more noise as strength grows
    v = make_variant("p", BASE, VariantSpec("surface_noise", "case", 3, "GLOBAL"), 0)
    assert v.text == BASE.upper()


# ---------------------------------------------------------------- surface_noise: protected spans
ISSUE_PROMPT = "Solve for n and show the steps.\n2n+3=11"


def _apply(text, subtype, strength, position, seed):
    return get_family("surface_noise").apply(text, subtype, strength, position, random.Random(seed))[0]


def _plain(t):
    """The old denoise: casefold, no punctuation, one space (for prose between spans)."""
    t = "".join(c for c in t.casefold() if not unicodedata.category(c).startswith("P"))
    return " ".join(t.split())


def _span_violation(base: str, variant: str) -> str | None:
    """Why ``variant`` does not keep every protected span of ``base`` byte-identical, in order,
    with only surface noise between them and nothing glued to a span; None when it does."""
    spans = protected_spans(base)
    if not spans:
        return None
    m = re.fullmatch("".join("(.*?)" + re.escape(base[a:b]) for a, b in spans) + "(.*)", variant, re.S)
    if m is None:
        return "a protected span is not byte-identical"
    edges = [0] + [x for ab in spans for x in ab] + [len(base)]
    for k, got in enumerate(m.groups()):
        prose = base[edges[2 * k]:edges[2 * k + 1]]
        if _plain(got) != _plain(prose):
            return f"words between spans changed: {prose!r} -> {got!r}"
        if k > 0 and got[:1].casefold() != prose[:1].casefold() and not (prose and got[:1] in " \t"):  # after span k-1
            return f"{got[:1]!r} glued after {base[slice(*spans[k - 1])]!r}"
        if k < len(spans) and got[-1:].casefold() != prose[-1:].casefold() and not (prose and got[-1:] in " \t"):
            return f"{got[-1:]!r} glued before {base[slice(*spans[k])]!r}"
    return None


@pytest.mark.parametrize("text, expected", [
    (ISSUE_PROMPT, ["2n+3=11"]),
    ("Render a 3D model of a house", ["3D"]),
    ("Cost: $10.50, -3.5 degrees, 5cm, 10,000 people, 1/4 or 25% (2019).", ["$10.50", "-3.5", "5cm", "10,000", "1/4", "25%", "(2019)"]),
    ("What is 5! and 11!!?", ["5!", "11!!"]),
    ("Simplify x^2 + 2x + 1 and f(x), then solve 4x + 2y = 10.", ["x^2 + 2x + 1", "f(x)", "4x + 2y = 10"]),
    ("Find the area of a circle given its radius.\nRadius = 4", ["Radius = 4"]),
    ("Run `pip install x` then ```py\nprint(1)\n``` ok", ["`pip install x`", "```py\nprint(1)\n```"]),
    ("Fix this code\ndef f(n):\n  if n < 2:\n    return 1\nThanks", ["def f(n):\n  if n < 2:\n    return 1\n"]),
    ("See https://example.com/a_(b). Or www.test.org, mail john.doe+x@mail.example.com.",
     ["https://example.com/a_(b)", "www.test.org", "john.doe+x@mail.example.com"]),
    ('Which came first, "Hey Pa! There\'s a Goat on the Roof" or “Poleconomy”?',
     ['"Hey Pa! There\'s a Goat on the Roof"', "“Poleconomy”"]),
    ("Who sang 'Endless Love' at Papa Gino's, and the players' 'Don't Stop'?", ["'Endless Love'", "'Don't Stop'"]),
    ('"In what city did James Joyce\'s ""Ulysses"" take place?"', ['""Ulysses""']),  # CSV-wrapped prompt
    ("Which singer/songwriter won Star Wars - The Musical?", []),  # words, not math
    ("Let me know (briefly):\nClass action (law) or Def Leppard (band)?\nPrint (in bold) it {", ["Print (in bold) it {"]),
    # Markdown block structure: markers with the space before the first word, table rows, rules, indentation
    ("## Steps\n1. mix\n2) bake\n  * nested\n> quoted - and #not a heading\n+ plus",
     ["## ", "1. ", "2) ", "  * ", "> ", "+ "]),
    ("Intro\n\n| a | b |\n|:--|--:|\n| x | y |\n\n---\nTitle\n=====", ["| a | b |", "|:--|--:|", "| x | y |", "---", "====="]),
    ("Keep\n    indented code\n\t\ttabbed\n#hashtag -dash *em* 3.5 kg", ["    ", "\t\t", "3.5"]),
    ("Code:\n````md\n```\ninner\n```\n````\nDone", ["````md\n```\ninner\n```\n````"]),
])
def test_protected_spans_of_each_kind(text, expected):
    assert [text[a:b] for a, b in protected_spans(text)] == expected


def test_issue_equation_untouched_by_punctuation_noise():
    """Punctuation 1 SUFFIX with Random(23) gave "…2n+3=11!!" (a double
    factorial); over seeds 0–999 the equation line changed in 497 of 1000."""
    assert _apply(ISSUE_PROMPT, "punctuation", 1, "SUFFIX", 23) == "Solve for n and show the steps.!!\n2n+3=11"
    lines = collections.Counter(_apply(ISSUE_PROMPT, "punctuation", 1, "SUFFIX", s).split("\n")[1] for s in range(1000))
    assert lines == {"2n+3=11": 1000}
    # and under every subtype, strength and position (case too: "2N+3=11" renames a variable)
    for spec in SURFACE:
        for seed in range(40):
            out = _apply(ISSUE_PROMPT, spec.subtype, spec.strength, spec.position, seed)
            assert out.endswith("\n2n+3=11") and _span_violation(ISSUE_PROMPT, out) is None, (spec, seed, out)


def test_denoise_says_a_changed_protected_span_is_not_meaning_preserving():
    assert denoise(ISSUE_PROMPT) == "solve for n and show the steps ⟦2n+3=11⟧"
    assert denoise("Solve  FOR n,, and show the steps!!\n2n+3=11") == denoise(ISSUE_PROMPT)
    for changed in (ISSUE_PROMPT + "!!", ISSUE_PROMPT.replace("2n", "2N"), ISSUE_PROMPT.replace("+3", " +3")):
        assert denoise(changed) != denoise(ISSUE_PROMPT), changed
    pairs = [  # (base, variant that edits a protected span)
        ("Who sang 'Endless Love'?", "who sang 'ENDLESS LOVE'?"),
        ("Open https://example.com/Page now", "open https://example.com/page now"),
        ("Mail Ann@Example.com today", "mail ann@example.com today"),
        ("Run `ls -la` here", "Run `ls  -la` here"),
        ("Fix this code\ndef f(n):\n  return n", "Fix this code\n  def f(n):\n  return n"),
    ]
    for base, variant in pairs:
        assert _plain(base) == _plain(variant) and denoise(base) != denoise(variant), variant
    assert denoise("What  IS it?!") == "what is it"  # no protected span: the plain form


def test_every_protected_span_byte_identical_in_every_bundled_variant(surface_variants):
    """All 1,100 bundled prompts x the 27-cell surface grid: each protected span of the base
    (321 prompts have one) appears byte-identical, in order, with nothing glued to it."""
    bad = [(t, v.spec.label(), v.text, why) for t, v in surface_variants if (why := _span_violation(t, v.text))]
    assert not bad, bad[:3]
    assert sum(bool(protected_spans(t)) for _, t in ALL) == 322  # one more: a prompt's leading space (indentation)


# ---------------------------------------------------------------- surface_noise: Markdown structure
MD_PROMPT = ("# Task\nSummarize the notes below in one line.\n\n- first note about rain\n- second note about wind\n\n"
             "| day | rain |\n|-----|------|\n| Mon | yes |")
MD_OWN = ("### Instruction\nFix the bug in the function below.\n\n1. Read the code\n2. Explain the bug\n"
          "   - keep it short\n   - name the line\n\n> Note: answer in English.\n\n```python\ndef add(a, b):\n"
          "    return a - b\n```\n\nThanks!")


@functools.lru_cache(maxsize=1)
def _markdown():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table")


def _blocks(text: str) -> list[tuple]:
    """The CommonMark (+ GFM tables) block structure: block token types, tags, nesting levels, markers."""
    return [(t.type, t.tag, t.level, t.markup) for t in _markdown().parse(text) if t.type != "inline"]


def _indented(text: str) -> list[str]:
    return [ln for ln in text.split("\n") if ln.startswith(("\t", "    "))]


@pytest.mark.parametrize("subtype", ["punctuation", "spacing"])
def test_surface_noise_keeps_markdown_block_structure(subtype):
    """A heading, a list and a table; seeds 0–299 × strengths 1–3, GLOBAL: 900 variants per subtype, each with
    the base's CommonMark block structure (no mark glued to a marker, no line indented into a code block)."""
    base = _blocks(MD_PROMPT)
    assert [t[:2] for t in base if t[0].endswith("_open")][:3] == [("heading_open", "h1"), ("paragraph_open", "p"),
                                                                   ("bullet_list_open", "ul")]
    assert "table_open" in [t[0] for t in base]
    n = 0
    for seed in range(300):
        for strength in (1, 2, 3):
            out = _apply(MD_PROMPT, subtype, strength, "GLOBAL", seed)
            assert out != MD_PROMPT and _blocks(out) == base, (strength, seed, out)
            assert not _indented(out) and out.split("\n")[0].startswith("# "), (strength, seed, out)
            assert _span_violation(MD_PROMPT, out) is None and denoise(out) == denoise(MD_PROMPT), (strength, seed, out)
            n += 1
    assert n == 900


def test_markdown_protected_spans_and_denoise_of_broken_structure():
    spans = [MD_PROMPT[a:b] for a, b in protected_spans(MD_PROMPT)]
    assert spans == ["# ", "- ", "- ", "| day | rain |", "|-----|------|", "| Mon | yes |"]
    broken = [MD_PROMPT.replace("# Task", "#!? Task"), MD_PROMPT.replace("- first", "-!? first"),
              MD_PROMPT.replace("|------|\n", "|------|,\n"), MD_PROMPT.replace("\nSummarize", "\n\tSummarize"),
              MD_PROMPT.replace("- first", "-      first"), MD_PROMPT.replace("| Mon", "|  Mon")]
    for variant in broken:  # each keeps the words (the old denoise said "meaning kept") but not the structure
        assert _plain(variant) == _plain(MD_PROMPT) and denoise(variant) != denoise(MD_PROMPT), variant
    assert denoise(MD_PROMPT.replace("Task", "TASK!!").replace("rain\n", "rain,,\n")) == denoise(MD_PROMPT)


def test_nested_list_quote_and_fenced_code_survive_every_surface_cell():
    base = _blocks(MD_OWN)
    assert {"ordered_list_open", "bullet_list_open", "blockquote_open", "fence", "heading_open"} <= {t[0] for t in base}
    for spec in SURFACE:
        for seed in range(30):
            out = _apply(MD_OWN, spec.subtype, spec.strength, spec.position, seed)
            assert out != MD_OWN and _blocks(out) == base, (spec, seed, out)
            assert _span_violation(MD_OWN, out) is None and denoise(out) == denoise(MD_OWN), (spec, seed, out)
            assert _indented(out) == _indented(MD_OWN) and "```python\ndef add(a, b):\n    return a - b\n```" in out


def test_every_bundled_surface_variant_keeps_block_structure_and_line_starts(surface_variants):
    """All 1,100 bundled prompts × 27 cells: the same CommonMark blocks, and no line gains leading whitespace."""
    def starts(t):
        return [ln[: len(ln) - len(ln.lstrip(" \t"))] for ln in t.split("\n")]

    base_blocks: dict[str, object] = {}  # each of the 1,100 bases parsed once, not once per cell
    bad = [(t, v.spec.label(), v.text) for t, v in surface_variants
           if starts(v.text) != starts(t)
           or _blocks(v.text) != (base_blocks[t] if t in base_blocks else base_blocks.setdefault(t, _blocks(t)))]
    assert not bad, bad[:3]


@pytest.mark.parametrize("text", [
    "Compute 3.75 * 12 and round -0.5 to 2 places, then add 10% of 1,250.",
    "Simplify x^2 + 2x + 1 and check f(x) = 0 for x = -1 please",
    "Explain this code and make it faster\nfor i in range(10):\n    total += i\nplease answer briefly",
    "Explain what `sorted(xs, key=len)` does and why it is stable in Python today",
    "Summarise the page at https://example.com/docs/Intro?lang=en for a beginner reader now",
    "Write a polite reply to Jane.Doe@Example.org about the delayed shipment of my order",
    "What does the phrase 'Carpe Diem' mean and who said “Veni, Vidi, Vici” in history?",
])
def test_each_kind_of_span_left_alone_by_every_subtype(text):
    for spec in SURFACE:
        for seed in range(25):
            out = _apply(text, spec.subtype, spec.strength, spec.position, seed)
            assert out != text and _span_violation(text, out) is None, (spec, seed, out)
            assert denoise(out) == denoise(text), (spec, seed, out)


def test_region_of_only_protected_text_grows_to_the_nearest_word():
    text = "Name the film with the line “Are you crying? There’s no crying in baseball!”"
    quote = text[text.index("“"):]
    assert region_bounds(text, "SUFFIX")[0] > text.index("“")  # the whole suffix is quoted
    for spec in [s for s in SURFACE if s.position == "SUFFIX"]:
        v = make_variant("q", text, spec, 0)
        assert v.meta["changed"] and v.text.endswith(quote) and _span_violation(text, v.text) is None
        if spec.subtype == "spacing":  # grown back to the quotation's start: the gap before it widens
            head = v.text[:-len(quote)]
            assert v.meta["region"] == [text.index("“"), len(text)] and head.startswith(text[:-len(quote)])
            assert len(head) > len(text) - len(quote) and not head[len(text) - len(quote):].strip()  # only whitespace added
        else:  # case / punctuation: nothing editable in the quotation, so "line" joins the region
            assert v.meta["region"] == [text.index("line"), len(text)], (spec, v.meta)


# ---------------------------------------------------------------- structural
def test_length_ratios_near_target_on_real_prompts():
    """Tolerance: per prompt |achieved − target| ≤ max(0.15, 1.5/n) (n = base words, whole
    words make small prompts coarse); mean |achieved − target| ≤ 0.05 per ratio."""
    errs = collections.defaultdict(list)
    for pid, text in ALL:
        n = len(text.split())
        for r in (0.5, 0.75, 1.5, 2.0):
            v = make_variant(pid, text, VariantSpec("structural", "length", r, "GLOBAL"), 0)
            achieved = len(v.text.split()) / n
            assert v.meta["target_ratio"] == r and abs(v.meta["achieved_ratio"] - achieved) < 1e-4
            assert v.meta["direction"] == ("compress" if r < 1 else "expand")
            assert abs(achieved - r) <= max(0.15, 1.5 / n), (r, text, v.text)
            errs[r].append(abs(achieved - r))
    for r, e in errs.items():
        assert statistics.mean(e) <= 0.05, (r, statistics.mean(e))


def test_compression_keeps_content_words():
    v = make_variant("p", BASE, VariantSpec("structural", "length", 0.5, "GLOBAL"), 0)
    assert v.text == "What capital Australia?"
    t = "Who did not sign the 1787 Constitution (the US one) in Philadelphia?"
    v = make_variant("p", t, VariantSpec("structural", "length", 0.5, "GLOBAL"), 0)
    for w in ("not", "1787", "Who"):
        assert w in v.text.split()


def test_expansion_embeds_the_prompt_verbatim():
    for pid, text in FIRST16:
        for r in (1.5, 2.0):
            v = make_variant(pid, text, VariantSpec("structural", "length", r, "GLOBAL"), 0)
            assert text.strip() in v.text


def test_mood_flips_on_every_real_prompt():
    spec = VariantSpec("structural", "mood", 1, "GLOBAL")
    seen = collections.Counter()
    for pid, text in ALL:
        v = make_variant(pid, text, spec, 0)
        src = detect_mood(text)
        assert v.meta["source"] == src and v.meta["target"] == {"question": "imperative",
                                                               "imperative": "question"}[src]
        assert v.meta["changed"] and detect_mood(v.text) == v.meta["target"], (text, v.text)
        if v.meta["target"] == "question":
            assert "?" in v.text
        else:
            assert not v.text.rstrip().endswith("?")
        seen[v.meta["target"]] += 1
    assert seen["question"] > 50 and seen["imperative"] > 500
    assert make_variant("p", BASE, spec, 0).text.endswith("the capital of Australia.")
    v = make_variant("p", "Render a 3D model of a house", spec, 0)
    assert v.text.endswith("render a 3D model of a house?")


def test_rewriter_protocol_names_the_generator():
    from sago_engine.variants.rewriting.rewriter import Rewriter, RulesRewriter
    from sago_engine.variants.structural import Structural

    class Fake:
        name = "llm-test"

        def rewrite_length(self, text, ratio, rng):
            return text + " extra"

        def rewrite_mood(self, text, target, rng):
            return text

    assert isinstance(RulesRewriter(), Rewriter) and isinstance(Fake(), Rewriter)
    fam = Structural(Fake())
    assert fam.generator == "llm-test"
    out, meta = fam.apply("a b", "length", 1.5, "GLOBAL", __import__("random").Random(0))
    assert out == "a b extra" and meta["achieved_ratio"] == 1.5


# ---------------------------------------------------------------- social_register
SOCIAL = full_grid(["social_register"])


@pytest.fixture(scope="module")
def social_variants():
    return [(text, make_variant(pid, text, s, 0)) for pid, text in FIRST16 for s in SOCIAL]


def test_social_preserves_prompt_content(social_variants):
    for text, v in social_variants:
        body = text if v.spec.position == "PREFIX" else text.rstrip()
        assert body in v.text, (text, v.text)
        assert v.text.replace(v.meta["added_prefix"], "", 1).replace(v.meta["added_suffix"], "", 1) \
            .strip() == (body + v.meta["terminal_added"]).strip()


def test_social_meta_register_and_tone(social_variants):
    for _, v in social_variants:
        assert v.meta["register"] in REGISTERS and v.meta["tone"] in TONES
        if v.spec.subtype == "politeness":
            s = v.spec.strength
            assert v.meta["tone"] == ("negative" if s < 0 else "neutral" if s == 0 else "polite")
            if s <= -4:
                assert v.meta["register"] == "rude"
        if v.spec.position == "PREFIX":
            assert v.meta["added_prefix"] and not v.meta["added_suffix"]
        elif v.spec.position == "SUFFIX":
            assert v.meta["added_suffix"] and not v.meta["added_prefix"]
        else:
            assert v.meta["added_prefix"] and v.meta["added_suffix"]


def test_social_phrasings_vary_across_prompts(social_variants):
    phrases = collections.defaultdict(set)
    for _, v in social_variants:
        phrases[(v.spec.subtype, v.spec.strength, v.spec.position)].add(
            (v.meta["added_prefix"], v.meta["added_suffix"]))
    assert len(phrases) == 78
    for key, p in phrases.items():
        assert len(p) >= 3, key


def test_social_suffix_adds_missing_terminal_punctuation():
    spec = VariantSpec("social_register", "gratitude", 1, "SUFFIX")
    v = make_variant("p", "who is the first president to be impeached", spec, 0)
    assert v.text.startswith("who is the first president to be impeached? ")
    v = make_variant("p", "Render a 3D model of a house", spec, 0)
    assert v.text.startswith("Render a 3D model of a house. ")


# ---------------------------------------------------------------- sample_grid
def test_sample_grid_deterministic_and_sized():
    per = {"social_register": 6, "surface_noise": 3, "structural": 2}
    a = sample_grid("p1", per, 0)
    assert a == sample_grid("p1", per, 0)
    counts = collections.Counter(s.family for s in a)
    assert counts == per
    assert sample_grid("p1", {"structural": 99}, 0) == full_grid(["structural"])
    assert sample_grid("p1", per, 0, families=["surface_noise"]) == [s for s in a if s.family == "surface_noise"]
    assert len({s.subtype for s in a if s.family == "social_register"}) >= 3  # spread over subtypes
    assert sample_grid("p1", per, 0) != sample_grid("p1", per, 1) or sample_grid("p2", per, 0) != a
    with pytest.raises(ValueError, match="did you mean"):
        sample_grid("p1", {"socal_register": 2}, 0)
    with pytest.raises(ValueError, match=">= 0"):
        sample_grid("p1", {"structural": -1}, 0)


def test_sample_grid_covers_every_cell_over_96_prompts():
    per = {"social_register": 8, "surface_noise": 4, "structural": 2}
    seen = set()
    for pid, _ in FIRST16:
        seen.update(sample_grid(pid, per, 0))
    assert seen == set(full_grid())


# ---------------------------------------------------------------- cells that cannot change a prompt
NO_CASE_PROMPTS = ["ما هي عاصمة فرنسا؟", "法国的首都是哪里？", "מהי בירת צרפת?", "ราชธานีของฝรั่งเศสคืออะไร",
                   "फ्रांस की राजधानी क्या है?"]
ALL_PROTECTED = ["https://example.com/a", "`ls -la`", "3.5 + 2 = 5.5", '"Veni, vidi, vici"', "İstanbul"]


def test_editable_says_exactly_when_surface_noise_changes_the_text(surface_variants):
    fam = get_family("surface_noise")
    for text, v in surface_variants:  # 1,100 bundled prompts × 27 cells: every one can change
        assert fam.editable(text, v.spec.subtype, v.spec.strength, v.spec.position) and v.meta["changed"]
    for text in NO_CASE_PROMPTS + ALL_PROTECTED + ["ⓐⓑ 中文 straße", "x", "# Title\n- item"]:
        for spec in SURFACE:
            can = fam.editable(text, spec.subtype, spec.strength, spec.position)
            for seed in range(5):
                v = make_variant(f"p{seed}", text, spec, seed)
                assert v.meta["changed"] == can == (v.text != text), (text, spec.label(), v.meta)
    for text in NO_CASE_PROMPTS:
        assert not any(spec_applies(text, s) for s in SURFACE if s.subtype == "case")
        assert spec_applies(text, VariantSpec("surface_noise", "punctuation", 1, "PREFIX"))
    assert not any(spec_applies("https://example.com/a", s) for s in SURFACE)  # all protected: nothing applies
    assert all(spec_applies("ما هي عاصمة فرنسا؟", s) for s in full_grid(["social_register", "structural"]))


def test_sample_grid_with_the_prompt_draws_cells_that_change_it():
    per = {"social_register": 4, "surface_noise": 5, "structural": 2}
    for k, text in enumerate(NO_CASE_PROMPTS):
        picks = sample_grid(f"s{k}", per, 0, text=text)
        assert collections.Counter(s.family for s in picks) == per  # another cell drawn for each case cell
        assert all(spec_applies(text, s) for s in picks) and "case" not in {s.subtype for s in picks}
        same = [s for s in picks if make_variant(f"s{k}", text, s, 0).text == text]
        # surface cells always change the prompt; a rewrite the family cannot predict may not (one word, Chinese
        # or Thai, cannot be compressed): the runner and Live store that one as a no-op
        assert {(s.family, s.subtype) for s in same} <= {("structural", "length")} and (k in (1, 3) or not same)
    for pid, text in FIRST16:  # prompts every cell applies to: the same picks as without the prompt
        assert sample_grid(pid, per, 0, text=text) == sample_grid(pid, per, 0)
    assert sample_grid("u", {"surface_noise": 5}, 0, text="https://example.com/a") == []  # nothing can change


# ---------------------------------------------------------------- fixed vectors
def _vector_cases(family: str):
    grid = full_grid([family])
    prompts = [("v1", BASE), ("v2", "Render a 3D model of a house"),
               ("v3", "when did the first marvel vs capcom come out"),
               ("v4", 'Which came to market first, "Hey Pa! There\'s a Goat on the Roof" or "Poleconomy"')]
    step = max(1, len(grid) // 12)
    cases = []
    for k, spec in enumerate(grid[::step]):
        pid, text = prompts[k % len(prompts)]
        for seed in (0, 12345):
            cases.append((pid, text, spec, seed))
    return cases


def _write_vectors() -> None:  # run once: python tests/unit/variants/test_variants.py --write-vectors
    VECTORS.mkdir(parents=True, exist_ok=True)
    for family in list_families():
        out = []
        for pid, text, spec, seed in _vector_cases(family):
            v = make_variant(pid, text, spec, seed)
            out.append({"prompt_id": pid, "text": text, "spec": spec.as_dict(), "run_seed": seed,
                        "expected": {"text": v.text, "seed": v.seed, "variant_id": v.variant_id,
                                     "generator": v.generator, "meta": v.meta}})
        (VECTORS / f"{family}.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")


@pytest.mark.parametrize("family", list_families())
def test_fixed_vectors(family):
    path = VECTORS / f"{family}.json"
    assert path.exists(), f"family {family!r} has no fixed vectors file {path}"
    cases = json.loads(path.read_text())
    assert len(cases) >= 4
    for c in cases:
        v = make_variant(c["prompt_id"], c["text"], VariantSpec(**c["spec"]), c["run_seed"])
        got = {"text": v.text, "seed": v.seed, "variant_id": v.variant_id,
               "generator": v.generator, "meta": json.loads(json.dumps(v.meta))}
        assert got == c["expected"], (c["spec"], c["run_seed"])


# ---------------------------------------------------------------- semantic filter
def test_map_threshold_formula_against_direct_computation():
    b_ref = sf.reference_baseline()
    assert b_ref == pytest.approx(0.83122575)
    for t, b_enc in ((0.85, 0.12), (0.85, 0.5), (0.9, 0.3)):
        direct = b_enc + (t - b_ref) / (1 - b_ref) * (1 - b_enc)
        assert sf.map_threshold(t, b_ref, b_enc) == pytest.approx(direct, abs=1e-12)
        # same rescaled value on both scales
        assert (sf.map_threshold(t, b_ref, b_enc) - b_enc) / (1 - b_enc) == pytest.approx((t - b_ref) / (1 - b_ref))
    assert sf.map_threshold(b_ref, b_ref, 0.2) == pytest.approx(0.2)
    eff = sf.effective_threshold(sf.FilterConfig(encoder_baseline=0.2))
    assert eff["threshold"] == pytest.approx(0.2 + (0.85 - b_ref) / (1 - b_ref) * 0.8)
    assert eff["ref_layer"] == 17 and eff["b_enc"] == 0.2 and "encoder" in eff["encoder"]
    raw = sf.effective_threshold(sf.FilterConfig(threshold=0.9, scale="raw"))
    assert raw["threshold"] == 0.9 and raw["b_enc"] is None
    with pytest.raises(ValueError):
        sf.FilterConfig(scale="deberta")
    with pytest.raises(ValueError):
        sf.FilterConfig(level="dataset")
    with pytest.raises(ValueError):
        sf.map_threshold(0.85, 1.0, 0.1)


def test_baseline_pairs_are_seeded_and_unrelated():
    p = sf.baseline_pairs(40)
    assert p == sf.baseline_pairs(40) and p != sf.baseline_pairs(40, seed=1)
    ds_of = {}
    for name, prompts in sf.load_prompts().items():
        for t in prompts:
            ds_of.setdefault(t, set()).add(name)
    assert all(any(x != y for x in ds_of[a] for y in ds_of[b]) for a, b in p)


def _filter_fixture():
    specs = [VariantSpec("social_register", "politeness", 1, "PREFIX"),
             VariantSpec("social_register", "politeness", -5, "GLOBAL"),
             VariantSpec("structural", "length", 0.5, "GLOBAL"),
             VariantSpec("surface_noise", "case", 3, "GLOBAL")]
    base = {"a": BASE, "b": "Render a 3D model of a house"}
    variants = [make_variant(p, t, s, 0) for p, t in base.items() for s in specs]
    return base, variants


def test_filter_levels_with_fake_scores(monkeypatch):
    import sago_engine.models.bertscore as bs

    base, variants = _filter_fixture()
    calls = []
    fake = {"social_register": 0.9, "structural": 0.95}

    def fake_f1(cands, refs, batch_size=64):
        calls.append(len(cands))
        import numpy as np

        out = []
        for c in cands:
            v = next(v for v in variants if v.text == c)
            out.append(0.5 if v.spec.strength == -5 and v.prompt_id == "a" else fake[v.spec.family])
        return np.array(out)

    monkeypatch.setattr(bs, "bertscore_f1", fake_f1)
    cfg = sf.FilterConfig(threshold=0.8, scale="raw", level="prompt")
    ver = sf.apply_filter(variants, base, cfg)
    assert calls == [6]  # one batched call, surface variants not scored
    by = {(v.prompt_id, v.spec.family, v.spec.strength): x for v, x in zip(variants, ver)}
    assert by[("a", "surface_noise", 3.0)] == sf.FilterVerdict(by[("a", "surface_noise", 3.0)].variant_id, None, True, True)
    assert by[("a", "social_register", 1.0)].passes and not by[("a", "social_register", 1.0)].kept
    assert not by[("a", "social_register", -5.0)].passes and not by[("a", "social_register", -5.0)].kept
    assert by[("a", "structural", 0.5)].kept  # its own family group passes
    assert all(x.kept for (p, _, _), x in by.items() if p == "b")
    ver_v = sf.apply_filter(variants, base, sf.FilterConfig(threshold=0.8, scale="raw", level="variant"))
    assert [x.kept for x in ver_v] == [x.passes for x in ver_v]
    assert by[("a", "social_register", 1.0)].variant_id == variants[0].variant_id
    with pytest.raises(KeyError, match="lacks prompt ids"):
        sf.apply_filter(variants, {"a": BASE}, cfg)


def test_filter_with_real_encoder():
    from sago_engine.models.bertscore import bertscore_f1

    pairs = sf.baseline_pairs(12)
    direct = float(bertscore_f1([a for a, _ in pairs], [b for _, b in pairs]).mean())
    assert sf.encoder_baseline(12) == pytest.approx(direct, abs=5e-7)  # rounded to 1e-6 for reproducibility
    assert 0.0 < direct < 0.6
    base, variants = _filter_fixture()
    ver = sf.apply_filter(variants, base, sf.FilterConfig(encoder_baseline=direct))
    scored = [x for v, x in zip(variants, ver) if v.spec.family != "surface_noise"]
    assert all(0.0 < x.semantic_score < 1.0 for x in scored)
    assert all(x.passes for x in scored)  # meaning-preserving variants clear the mapped threshold
    off = make_variant("a", "Describe the water cycle in detail.", variants[0].spec, 0)
    (x,) = sf.apply_filter([off], {"a": "Who won the 1998 World Cup?"}, sf.FilterConfig(threshold=0.85, scale="raw"))
    assert not x.passes and not x.kept


if __name__ == "__main__" and "--write-vectors" in sys.argv:
    _write_vectors()
