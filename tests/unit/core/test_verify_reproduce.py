"""Row comparison of a re-run (``sago_engine.verify.reproduce``): keys, exact cells, float tolerances."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sago_engine.axes.noise import NOISE_TOL, replay_tol
from sago_engine.verify.reproduce import cell_difference, float_tolerance, store_differences, table_differences

R = {"prob": 250.0, "cos": 2.0}


def test_float_tolerances_follow_the_axis_and_the_normalizer():
    assert float_tolerance("deltas", "delta", {"axis": "prob"}, R) == NOISE_TOL["prob"]
    assert float_tolerance("deltas", "delta", {"axis": "cos@user_last"}, R) == NOISE_TOL["cos"]
    assert float_tolerance("deltas", "delta_norm", {"axis": "prob"}, R) == NOISE_TOL["prob"] / 250.0
    assert float_tolerance("delta_stats", "sum_norm", {"axis": "prob", "n_rows": 3}, R) == 3 * NOISE_TOL["prob"] / 250.0
    t = NOISE_TOL["prob"] / 250.0
    assert float_tolerance("delta_stats", "sum_sq", {"axis": "prob", "n_rows": 3, "sum_abs": 2.0}, R) == t * (4.0 + 3 * t)
    assert float_tolerance("responses", "seq_logprob", {}, R) == NOISE_TOL["prob"]
    assert float_tolerance("responses", "cos_per_layer", {}, R) == NOISE_TOL["cos"]
    assert float_tolerance("correctness", "score", {}, R) == 0.0


def test_token_logprob_statistics_allow_the_cross_batch_noise_of_their_tokens():
    # a re-run in another batch shape sums the same float32 products in another order: a 48-token
    # reply's seq_logprob moved by 1.1e-4 between the bundled run (batch 112) and a 2-prompt slice (batch 28)
    assert float_tolerance("responses", "seq_logprob", {"n_tokens": 48}, R) == replay_tol("prob", 48) == 48 * 1e-4
    assert float_tolerance("responses", "seq_logprob", {"n_tokens": 1}, R) == NOISE_TOL["prob"]
    assert float_tolerance("responses", "mean_entropy", {"n_tokens": 48}, R) == replay_tol("ent", 48)
    assert float_tolerance("responses", "cos_per_layer", {"n_tokens": 48}, R) == NOISE_TOL["cos"]  # no token sum
    # a Δ-Prob is a difference of two such sums: twice the tolerance at the reply cap
    assert float_tolerance("deltas", "delta", {"axis": "prob"}, R, cap=48) == 2 * replay_tol("prob", 48)
    assert float_tolerance("deltas", "delta_norm", {"axis": "prob"}, R, cap=48) == 2 * replay_tol("prob", 48) / 250.0
    assert float_tolerance("deltas", "delta", {"axis": "cos"}, R, cap=48) == NOISE_TOL["cos"]
    want = pd.DataFrame({"prompt_id": ["p"], "variant_id": ["v"], "response": ["x"], "n_tokens": [48],
                         "seq_logprob": [-20.0]})
    assert table_differences("responses", want, want.assign(seq_logprob=[-20.0 + 1.1e-4]), R) == []
    assert table_differences("responses", want, want.assign(seq_logprob=[-20.0 + 0.01]), R)


def test_cells_compare_text_and_ids_exactly_floats_within_tolerance():
    assert cell_difference("a b", "a b", 1.0) is None
    assert cell_difference("a b", "a c", 1.0) == "'a b' vs 'a c'"
    assert cell_difference(np.array([1, 2, 3]), [1, 2, 3], 0.0) is None
    assert cell_difference(np.array([1, 2, 3]), [1, 2, 4], 10.0) is not None  # token ids: never a tolerance
    assert cell_difference(-3.0, -3.0 + 5e-5, 1e-4) is None
    assert cell_difference(-3.0, -3.0 + 2e-4, 1e-4) == "differs by 0.0002 (> tolerance 0.0001)"
    assert cell_difference(float("nan"), None, 0.0) is None
    assert cell_difference(1.0, None, 1.0) is not None
    assert cell_difference(np.array([0.5, 0.25]), [0.5, 0.25 + 1e-9], 1e-6) is None
    assert cell_difference(np.array([0.5, 0.25]), [0.5], 1e-6) == "2 values vs 1"


def test_rows_are_matched_by_what_they_are_about_not_by_run_or_response_id():
    want = pd.DataFrame({"run_id": ["r1", "r1"], "response_id": ["a", "b"], "prompt_id": ["p", "p"],
                         "variant_id": [None, "v"], "response": ["x", "y"], "latency_s": [1.0, 2.0]})
    got = want.assign(run_id="r2", response_id=["c", "d"], latency_s=[9.0, 9.0]).iloc[::-1]
    assert store_differences({"responses": want}, {"responses": got}, R) == []
    lines = table_differences("responses", want, got.assign(response=["y", "z"]), R)
    assert lines == ["responses ('p', None) response: 'x' vs 'z'"]
    lines = table_differences("responses", want, got.iloc[:1], R)
    assert lines == ["responses ('p', None): only in the expected store"]
