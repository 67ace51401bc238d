"""The dice against rephrasing (measure.separation) on hand-built arrays whose answers are known.

Exact p-values are counts of label splits or sign assignments, so they are asserted exactly."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from sago_engine.measure import separation as sep


def test_exact_p_is_the_share_of_splits_at_least_as_extreme():
    # pooled {0, 0, 1, 1, 1}: only 1 of the C(5, 2) = 10 splits puts both zeros on the floor side
    assert sep.rephrasing_test([0.0, 0.0], [1.0, 1.0, 1.0]) == (0.1, "exact (all 10 splits)")
    # the floor holds the largest values: every split is at least as extreme
    assert sep.rephrasing_test([5.0, 6.0, 7.0], [1.0, 2.0]) == (1.0, "exact (all 10 splits)")
    # no movement anywhere: no evidence (every split ties the observed statistic)
    assert sep.rephrasing_test([0.0] * 3, [0.0] * 10)[0] == 1.0


def test_exact_p_equals_scipy_permutation_test_with_ties():
    rng = np.random.default_rng(3)
    f = rng.integers(0, 4, 3) / 10.0  # ties between and within the sets
    m = rng.integers(0, 6, 12) / 10.0
    ref = sps.permutation_test((m, f), lambda x, y, axis=-1: x.mean(axis) - y.mean(axis),
                               permutation_type="independent", alternative="greater", vectorized=True,
                               n_resamples=10**6).pvalue
    p, method = sep.rephrasing_test(f, m)
    assert method == f"exact (all {math.comb(15, 3):,} splits)"
    assert p == pytest.approx(ref, rel=1e-12)


def test_large_sets_use_a_seeded_monte_carlo_null():
    f, m = np.linspace(0, 1, 8), np.linspace(0.5, 2, 60)
    assert math.comb(68, 8) > sep.EXACT_MAX_SPLITS
    with pytest.raises(ValueError, match="seeded generator"):
        sep.rephrasing_test(f, m)
    a = sep.rephrasing_test(f, m, np.random.default_rng(1))
    assert a == sep.rephrasing_test(f, m, np.random.default_rng(1))  # seeded: the same p twice
    assert a[1] == "Monte Carlo (9,999 relabellings)" and 1 / 10_000 <= a[0] < 0.05


def test_empty_sets_give_no_test():
    assert sep.rephrasing_test([], [1.0])[1] == "no floor"
    assert sep.rephrasing_test([1.0], [])[1] == "no variant samples"


def _rows(floor: dict[str, list[float]], move: dict[str, list[float]], model="m", axis="bleu") -> pd.DataFrame:
    rows = [(model, axis, p, None, x, True) for p, xs in floor.items() for x in xs]
    rows += [(model, axis, p, f"{p}/v{j % 2}", x, True) for p, xs in move.items() for j, x in enumerate(xs)]
    return pd.DataFrame(rows, columns=["model", "axis", "prompt_id", "variant_id", "delta_norm", "available"])


def test_prompt_movement_floor_move_share():
    rows = _rows({"a": [0.1, -0.1, 0.1]}, {"a": [0.2, -0.2, 0.2, 0.2]})
    rows.loc[len(rows)] = ("m", "bleu", "a", "a/v0", 9.0, False)  # unavailable: left out
    got = sep.prompt_movement(rows).iloc[0]
    assert (got["n_floor"], got["n_move"]) == (3, 4)
    assert got["floor"] == pytest.approx(0.1) and got["move"] == pytest.approx(0.2)
    assert got["excess"] == pytest.approx(0.04 - 0.01) and got["share"] == pytest.approx(0.75)
    assert got["p"] == pytest.approx(1 / 35)  # the 3 smallest of 7 values are the floor: 1 of C(7, 3) splits
    assert got["method"] == "exact (all 35 splits)"


def test_model_movement_pooled_share_and_sign_flip_test():
    rows = _rows({"a": [0.1] * 3, "b": [0.2] * 3, "c": [0.0] * 3},
                 {"a": [0.2] * 4, "b": [0.4] * 4, "c": [0.3] * 4})
    per = sep.prompt_movement(rows)
    got = sep.model_movement(per, n_resamples=200).iloc[0]
    # 1 − Σ f² / Σ m² = 1 − (0.01 + 0.04 + 0) / (0.04 + 0.16 + 0.09)
    assert got["share"] == pytest.approx(1 - 0.05 / 0.29)
    assert got["floor"] == pytest.approx(0.1) and got["move"] == pytest.approx(0.3)
    assert (got["p"], got["method"]) == (0.125, "exact (all 2^3 sign flips)")  # 3 positive differences: 1 of 8
    assert got["n_prompts"] == 3 and got["n_exceeds"] == 3  # each prompt: p = 1/35 < 0.05
    assert got["share_lo"] <= got["share"] <= got["share_hi"]


def test_model_movement_counts_only_prompts_below_alpha():
    rows = _rows({"a": [0.1] * 3, "b": [0.3] * 3}, {"a": [0.2] * 4, "b": [0.1] * 4})
    got = sep.model_movement(sep.prompt_movement(rows), n_resamples=200).iloc[0]
    assert got["n_exceeds"] == 1 and got["share"] == pytest.approx(1 - (0.01 + 0.09) / (0.04 + 0.01))


def _labels(base: list, variants: dict[str, list]) -> pd.DataFrame:
    rows = [("m", "p", None, s, x) for s, x in enumerate(base)]
    rows += [("m", "p", v, s, x) for v, xs in variants.items() for s, x in enumerate(xs)]
    return pd.DataFrame(rows, columns=["model", "prompt_id", "variant_id", "sample", "label"])


def test_pass_k_against_the_base_majority():
    one = sep.pass_k(_labels(["paris"] * 4, {"v1": ["paris"] * 4, "v2": ["paris", "paris", "lyon", "paris"]}))
    assert one.iloc[0][["k", "majority", "base_pass", "variants", "variants_pass"]].tolist() == [4, "paris", True, 2, 1]
    split = sep.pass_k(_labels(["a", "a", "b", "b"], {"v1": ["a"] * 4}))  # a tie: no majority, nothing passes
    assert split.iloc[0]["majority"] is None and not split.iloc[0]["base_pass"] and split.iloc[0]["variants_pass"] == 0
    err = sep.pass_k(_labels(["a", "a", "a", None], {}))  # majority a (3 of 4), but one sample errored
    assert err.iloc[0]["majority"] == "a" and not err.iloc[0]["base_pass"]
    summary = sep.pass_k_summary(pd.concat([one, split.assign(prompt_id="q")]))
    assert summary.iloc[0][["prompts", "with_majority", "pass_k_dice", "pass_k_rephrased"]].tolist() == [2, 1, 0.5,
                                                                                                       1 / 3]
