"""Property-based tests (hypothesis) of the invariants sago sells: protected spans survive surface
noise byte for byte, a seed fixes the variants, s_X is a permutation-invariant RMS, Δ̃ is in
[−1, 1], and a store merged from any split of its units equals the single store.

Every test runs a bounded number of examples, derandomized (the same examples every run, so
CI is reproducible) and without hypothesis' per-example deadline (the machine is shared)."""

from __future__ import annotations

import math
import shutil

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sago_engine.scoring.scores import normalize, prompt_scores, rms
from sago_engine.store import merge_stores, open_store, table_fingerprints
from sago_engine.variants import full_grid, make_variant, make_variants
from sago_engine.variants._text import protected_spans
from tests.unit.variants.test_variants import _span_violation

FAST = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=5, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

SURFACE = full_grid(["surface_noise"])
SOCIAL = full_grid(["social_register"])

# ---------------------------------------------------------------- prompts with meaning-bearing spans
WORDS = st.sampled_from(["what", "is", "the", "area", "of", "a", "circle", "Please", "explain", "why", "and",
                         "solve", "for", "Name", "film", "quickly", "then", "answer", "briefly", "show", "steps"])
PROTECTED = st.sampled_from([
    "3.5", "-2", "$10.50", "1/4", "25%", "5cm", "3D", "10,000", "(2019)", "5!",
    "2n+3=11", "x^2 + 2x + 1", "4x + 2y = 10", "f(x)", "snake_case",
    "`pip install x`", "https://example.com/a?b=1", "jane.doe@example.org",
    '"Hey Pa! There\'s a Goat"', "'Endless Love'", "“Poleconomy”",
])


@st.composite
def prompts_with_spans(draw) -> str:
    """A prose prompt with 1–3 protected items (numbers, math, code, URLs, e-mail, quotes) among words."""
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        parts += draw(st.lists(WORDS, min_size=1, max_size=5))
        parts.append(draw(PROTECTED))
    parts += draw(st.lists(WORDS, min_size=1, max_size=4))
    text = " ".join(parts)
    return text[0].upper() + text[1:] + draw(st.sampled_from(["?", ".", "", " please."]))


@FAST
@given(text=prompts_with_spans(), seed=st.integers(0, 2**31 - 1))
def test_protected_spans_byte_identical_in_every_surface_variant(text, seed):
    assert protected_spans(text), text  # the strategy always puts one in
    for spec in SURFACE:
        v = make_variant("p", text, spec, seed)
        assert _span_violation(text, v.text) is None, (spec.label(), v.text)


@FAST
@given(text=prompts_with_spans(), seed=st.integers(0, 2**31 - 1))
def test_protected_spans_byte_identical_in_every_social_variant(text, seed):
    spans = [text[a:b] for a, b in protected_spans(text)]
    for spec in SOCIAL:
        out = make_variant("p", text, spec, seed).text
        pos = 0
        for s in spans:  # each span, in order, byte for byte
            pos = out.index(s, pos) + len(s)


# ---------------------------------------------------------------- seeds
@settings(max_examples=25, deadline=None, derandomize=True)
@given(text=prompts_with_spans(), seed=st.integers(0, 2**63 - 1), pid=st.text(min_size=1, max_size=12))
def test_same_seed_same_variants_in_any_order(text, seed, pid):
    grid = full_grid()
    a = make_variants(pid, text, grid, seed)
    b = make_variants(pid, text, grid[::-1], seed)[::-1]  # no hidden RNG state between variants
    key = [(v.variant_id, v.seed, v.text.encode(), v.generator, v.meta) for v in a]
    assert key == [(v.variant_id, v.seed, v.text.encode(), v.generator, v.meta) for v in b]
    assert len({v.variant_id for v in a}) == len(grid)
    other = make_variants(pid, text, grid, seed + 1)
    assert {v.variant_id for v in other}.isdisjoint({v.variant_id for v in a})  # the seed enters every id


# ---------------------------------------------------------------- s_X and Δ̃
DN = st.floats(-1.0, 1.0, allow_nan=False)


@FAST
@given(values=st.lists(DN, min_size=1, max_size=40), perm_seed=st.integers(0, 2**32 - 1))
def test_s_is_permutation_invariant_and_at_least_abs_mean(values, perm_seed):
    df = pd.DataFrame({"run_id": "r", "dataset": "d", "prompt_id": "p", "axis": "bleu", "delta_norm": values})
    shuffled = df.sample(frac=1.0, random_state=np.random.RandomState(perm_seed % 2**32))
    [s] = prompt_scores(df)["s"].tolist()
    [s_perm] = prompt_scores(shuffled)["s"].tolist()
    x = np.asarray(values)
    assert s_perm == pytest.approx(s, rel=1e-12, abs=1e-15)
    assert s >= abs(x.mean()) - 1e-12  # RMS ≥ |mean| (Cauchy–Schwarz)
    assert s >= np.abs(x).max() / math.sqrt(len(x)) - 1e-12 and s <= np.abs(x).max() + 1e-12
    assert 0.0 <= s <= 1.0
    assert s == pytest.approx(math.sqrt(sum(v * v for v in values) / len(values)), rel=1e-9, abs=1e-15)


@FAST
@given(delta=st.floats(allow_nan=True, allow_infinity=True), r=st.floats(1e-6, 1e6))
def test_normalized_delta_within_minus_one_one(delta, r):
    out = float(normalize(delta, r))
    if math.isnan(delta):
        assert math.isnan(out)
    else:
        assert -1.0 <= out <= 1.0
        assert out == pytest.approx(max(-1.0, min(1.0, delta / r)), rel=1e-12, abs=1e-300)
        assert math.copysign(1, out) == math.copysign(1, delta) or out == 0


@FAST
@given(n=st.integers(1, 10_000), frac=st.floats(0.0, 1.0))
def test_rms_of_valid_sums_in_unit_interval(n, frac):
    assert 0.0 <= float(rms(n, frac * n)) <= 1.0  # ΣΔ̃² ≤ n for Δ̃ in [−1, 1]


# ---------------------------------------------------------------- merge of any split of units
def _shard(src, dst, keep: set[str]) -> None:
    """``dst``: a copy of store ``src`` holding only the units (and rows) of the prompts in ``keep``."""
    shutil.copyfile(src, dst)
    con = duckdb.connect(str(dst))
    try:
        ids = list(keep)
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        assert con.execute("SELECT count(*) FROM run_usage").fetchone()[0] == 0  # a local run: nothing to add up
        if "api_responses" in tables:
            con.execute("DELETE FROM api_responses WHERE response_id NOT IN "
                        "(SELECT response_id FROM responses WHERE list_contains(?, prompt_id))", [ids])
        for t in ("prompts", "variants", "responses", "deltas", "units", "mirroring_verdicts", "base_repeats",
                  "noise_floor"):
            if t in tables:
                con.execute(f"DELETE FROM {t} WHERE NOT list_contains(?, prompt_id)", [ids])
    finally:
        con.close()


@pytest.fixture(scope="module")
def unit_ids(tiny_store):
    with open_store(tiny_store) as s:
        return sorted({pid for _, pid in s.unit_keys()})


@SLOW
@given(data=st.data())
def test_merge_of_any_split_of_units_equals_the_single_store(tiny_store, unit_ids, tmp_path_factory, data):
    k = data.draw(st.integers(1, 4), label="shards")
    owner = data.draw(st.lists(st.integers(0, k - 1), min_size=len(unit_ids), max_size=len(unit_ids)), label="owner")
    d = tmp_path_factory.mktemp("split")
    parts = []
    for j in range(k):
        p = d / f"shard{j}.duckdb"
        _shard(tiny_store, p, {u for u, o in zip(unit_ids, owner) if o == j})
        parts.append(p)
    order = data.draw(st.permutations(range(k)), label="merge order")
    merged = d / "merged.duckdb"
    merge_stores(merged, [parts[i] for i in order])
    assert table_fingerprints(merged) == table_fingerprints(tiny_store)
    with open_store(merged) as a, open_store(tiny_store) as b:
        pd.testing.assert_frame_equal(a.prompt_scores(), b.prompt_scores())  # the statistics tables too
        assert set(a.runs()["status"]) == {"complete"}
