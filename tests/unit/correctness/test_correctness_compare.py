"""Accuracy, flips, McNemar, PDR, consistency rate, AUROC and quadrants (sago_engine.correctness.compare),
checked against numbers worked out by hand from tests/support/correctness_store.py's replies."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sago_engine.correctness import compare as C
from sago_engine.correctness.rescore import rescore_correctness
from sago_engine.store import open_store
from tests.support import correctness_store as cs


@pytest.fixture(scope="module")
def frame(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cmp")
    cs.write_dataset_files(tmp / "data")
    path = cs.build(tmp / "c.duckdb")
    rescore_correctness(path, data_dir=tmp / "data", all_short=True)
    with open_store(path) as st:
        return C.one_scorer(st.correctness_frame(repeats=True)), st.prompt_scores()


def _row(table, **key):
    m = np.ones(len(table), bool)
    for k, v in key.items():
        m &= (table[k] == v).to_numpy()
    assert m.sum() == 1, key
    return table[m].iloc[0]


def test_one_scorer_prefers_the_default_or_the_choice(frame):
    fr, _ = frame
    assert dict(fr.groupby("dataset")["scorer"].unique().map(list)) == {
        "alpaca": ["none"], "nq_open": ["contains"], "truthfulqa": ["truthfulqa"]}


def test_accuracy_flips_mcnemar_pdr_consistency_by_hand(frame):
    fr, _ = frame
    t = C.accuracy_table(fr, by=("model", "dataset"))
    a = _row(t, model="model-a", dataset="nq_open")
    assert (a.n_prompts, a.n_pairs, a.right_to_wrong, a.wrong_to_right) == (4, 12, 2, 1)
    assert a.base_acc == pytest.approx(3 / 4) and a.var_acc == pytest.approx(8 / 12)
    assert a.change == pytest.approx(-1 / 12)
    assert a.flip_rw == pytest.approx(2 / 9) and a.flip_wr == pytest.approx(1 / 3)
    assert a.mcnemar_p == pytest.approx(1.0)
    assert a.pdr == pytest.approx(1 / 9)
    assert a.consistency == pytest.approx(17 / 24)
    b = _row(t, model="model-b", dataset="nq_open")
    assert (b.n_pairs, b.right_to_wrong, b.wrong_to_right) == (11, 0, 6)  # the error reply is no pair
    assert b.mcnemar_p == pytest.approx(2 / 64) and b.flip_rw == 0.0
    assert b.pdr == pytest.approx(1 - (11 / 11) / (5 / 11))
    tq = _row(t, model="model-a", dataset="truthfulqa")
    assert (tq.n_prompts, tq.n_pairs, tq.right_to_wrong, tq.n_undecided) == (2, 6, 1, 3)
    assert not (t["dataset"] == "alpaca").any()  # no decided verdicts: no row


def test_breakdown_by_family(frame):
    fr, _ = frame
    t = C.accuracy_table(fr, by=("model", "dataset", "family"))
    # model-a nq_open: v0 social_register, v1 surface_noise, v2 structural (tests/factories.make_store)
    s = _row(t, model="model-a", dataset="nq_open", family="social_register")
    assert (s.n_pairs, s.right_to_wrong, s.wrong_to_right) == (4, 1, 0)
    st = _row(t, model="model-a", dataset="nq_open", family="structural")
    assert (st.n_pairs, st.right_to_wrong, st.wrong_to_right) == (4, 0, 1)


def test_model_vs_model(frame):
    fr, _ = frame
    m = C.model_vs_model(fr[fr["dataset"] == "nq_open"])
    r = m.iloc[0]
    assert (r.model_a, r.model_b) == ("model-a", "model-b")
    # shared decided replies: 16 per model minus model-b's error reply → 15;
    # a right, b wrong: prompt 0 and 1 bases (a right) → 2; b right, a wrong: p1 v0, v1, p3 base, v0, v1 → 5
    assert (r.n, r.a_only, r.b_only) == (15, 2, 5)
    assert r.p == pytest.approx(C.mcnemar_p(2, 5))


def test_prompt_outcomes(frame):
    fr, _ = frame
    o = C.prompt_outcomes(fr).set_index(["model", "prompt_id"])
    assert o.loc[("model-a", "nq_open:1"), "flipped"] and not o.loc[("model-a", "nq_open:0"), "flipped"]
    assert o.loc[("model-a", "nq_open:3"), "acc_change"] == pytest.approx(1 / 3)
    assert ("model-a", "truthfulqa:1") not in o.index  # every reply undecided
    assert int(o["flipped"].sum()) == 2 + 1 + 2  # model-a: nq 1, 3, tqa 0; model-b: nq 0, 1


def test_mcnemar_and_consistency_units():
    assert C.mcnemar_p(0, 0) == 1.0
    assert C.mcnemar_p(0, 5) == pytest.approx(2 / 32)
    assert C.mcnemar_p(5, 0) == pytest.approx(2 / 32)
    assert C.consistency_rate([["a", "a", "b"], ["x"]]) == pytest.approx(1 / 3)
    assert np.isnan(C.consistency_rate([["a"], []]))


def test_auroc_by_hand():
    assert C.auroc(np.array([0.1, 0.2, 0.3, 0.4]), np.array([False, False, True, True])) == 1.0
    assert C.auroc(np.array([0.4, 0.3, 0.2, 0.1]), np.array([False, False, True, True])) == 0.0
    assert C.auroc(np.array([0.5, 0.5, 0.5]), np.array([True, False, False])) == 0.5
    # positives 0.2, 0.4 vs negatives 0.1, 0.3: pairs won 1 + 2 = 3 of 4
    assert C.auroc(np.array([0.1, 0.2, 0.3, 0.4]), np.array([False, True, False, True])) == 0.75
    assert np.isnan(C.auroc(np.array([1.0, 2.0]), np.array([True, True])))
    lo, hi = C.bootstrap_auroc_ci(np.arange(20.0), np.arange(20) >= 10, n_boot=200)
    assert lo == hi == 1.0
    assert all(np.isnan(C.bootstrap_auroc_ci(np.arange(3.0), np.ones(3, bool))))


def _outcomes(n: int, flipped_high: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows, scores = [], []
    for i in range(n):
        flipped = (i >= n // 2) == flipped_high
        rows.append({"run_id": "r", "model": "m", "dataset": "d", "prompt_id": f"p{i}", "base_ok": True,
                     "var_acc": 0.0 if flipped else 1.0, "n_pairs": 1, "flipped": flipped,
                     "acc_change": -1.0 if flipped else 0.0})
        scores.append({"run_id": "r", "prompt_id": f"p{i}", "axis": "cos", "s": i / n})
        scores.append({"run_id": "r", "prompt_id": f"p{i}", "axis": "bleu", "s": 0.3})
    return pd.DataFrame(rows), pd.DataFrame(scores)


def test_instability_predicts_verdicts():
    out, ps = _outcomes(20, flipped_high=True)
    r = C.instability_predicts(out, ps, n_boot=200).set_index("axis")
    assert r.loc["cos", "verdict"] == "predicts flips" and r.loc["cos", "auroc"] == 1.0
    assert r.loc["cos", "spearman"] == pytest.approx(-np.sqrt(3) / 2, abs=0.02) or r.loc["cos", "spearman"] < -0.8
    assert r.loc["bleu", "verdict"] == "predicts nothing" and r.loc["bleu", "auroc"] == 0.5
    assert np.isnan(r.loc["bleu", "spearman"])
    out, ps = _outcomes(20, flipped_high=False)
    assert C.instability_predicts(out, ps, n_boot=200).set_index("axis").loc["cos", "verdict"] == "predicts stability"
    out, ps = _outcomes(6, flipped_high=True)
    assert set(C.instability_predicts(out, ps, n_boot=50)["verdict"]) == {"too few flips"}


def test_quadrants_by_hand():
    out = pd.DataFrame({"run_id": ["r"] * 4, "model": ["m"] * 4, "dataset": ["d"] * 4,
                        "prompt_id": ["p0", "p1", "p2", "p3"], "base_ok": [True, False, True, False],
                        "var_acc": [1.0, 0.5, 0.0, 0.0], "n_pairs": [2] * 4, "flipped": [False] * 4,
                        "acc_change": [0.0] * 4})
    ps = pd.DataFrame({"run_id": ["r"] * 4, "prompt_id": ["p0", "p1", "p2", "p3"], "axis": ["cos"] * 4,
                       "s": [0.1, 0.2, 0.3, 0.4]})
    pts, counts, thr = C.quadrants(out, ps, "cos")
    assert thr == pytest.approx(0.25)
    assert list(pts["quadrant"]) == ["stable and right", "stable but wrong", "unstable but right", "unstable and wrong"]
    assert counts.iloc[0][list(C.QUADRANTS)].tolist() == [1, 1, 1, 1] and counts.iloc[0]["n"] == 4
    pts, counts, _ = C.quadrants(out, ps, "cos", threshold=0.0, by="variants")
    assert list(pts["quadrant"]) == ["unstable but right", "unstable but right", "unstable and wrong",
                                     "unstable and wrong"]
    with pytest.raises(ValueError, match="by must be"):
        C.quadrants(out, ps, "cos", by="x")


def test_worst_cases_right_to_wrong(tmp_path):
    """Worst cases' "right → wrong" filter keeps exactly the pairs worked out by hand (tests/support/correctness_store.py)."""
    from sago_engine.views import worst

    cs.write_dataset_files(tmp_path / "data")
    path = cs.build(tmp_path / "w.duckdb")
    with open_store(path) as st:  # no verdicts yet: no rows
        assert worst.worst_cases(st, None, axis="bleu", by="variant", replies="right_to_wrong").empty
    rescore_correctness(path, data_dir=tmp_path / "data", all_short=True)
    with open_store(path) as st:
        v = worst.worst_cases(st, None, axis="bleu", by="variant", replies="right_to_wrong", limit=100)
        assert sorted(zip(v["model"], v["variant_id"])) == [
            ("model-a", "nq_open:1/v0"), ("model-a", "nq_open:1/v1"), ("model-a", "truthfulqa:0/v0")]
        assert (v["score"].abs().diff().dropna() <= 0).all()  # still ranked by |Δ̃|
        p = worst.worst_cases(st, None, axis="bleu", by="prompt", replies="right_to_wrong", limit=100)
        assert sorted(zip(p["model"], p["prompt_id"])) == [("model-a", "nq_open:1"), ("model-a", "truthfulqa:0")]
        assert len(worst.worst_cases(st, None, axis="bleu", by="variant", limit=100)) > len(v)


def test_delta_matrix_carries_both_verdicts(tmp_path):
    cs.write_dataset_files(tmp_path / "data")
    path = cs.build(tmp_path / "m.duckdb")
    rescore_correctness(path, data_dir=tmp_path / "data", all_short=True)
    exp = cs.expected_verdicts().set_index(["run_id", "variant_id"])
    base = cs.expected_verdicts()
    base = base[base["variant_id"].isna() & base["repeat"].isna()].set_index(["run_id", "prompt_id"])["verdict"]
    with open_store(path) as st:
        plain = st.delta_matrix()
        dm = st.delta_matrix(scorers=(("nq_open", "contains"), ("truthfulqa", "truthfulqa")))
    assert list(dm.columns) == [*plain.columns, "scorer", "base_verdict", "variant_verdict"]
    assert len(dm) == len(plain) and dm[plain.columns].equals(plain)
    for r in dm.itertuples():
        if r.dataset == "alpaca":  # not among the scorers asked for
            assert pd.isna(r.scorer) and pd.isna(r.base_verdict) and pd.isna(r.variant_verdict)
            continue
        assert r.variant_verdict == exp.loc[(r.run_id, r.variant_id), "verdict"]
        assert r.base_verdict == base.loc[(r.run_id, r.prompt_id)]
        assert r.scorer == ("contains" if r.dataset == "nq_open" else "truthfulqa")


def test_base_accuracy_per_prompt_and_over_pairs_by_hand():
    """Prompt p1: base right, one variant right; p2: base wrong, three variants (one right). Per prompt the base
    accuracy is 1/2; over the 4 pairs it is 1/4 (p2's wrong base counted three times); variant accuracy 2/4.
    change and PDR use the pairs: +1/4 and 1 − (2/4)/(1/4) = −1; neither follows from the per-prompt 1/2."""
    rows = [("p1", None, "correct"), ("p1", "v0", "correct"),
            ("p2", None, "wrong"), ("p2", "v0", "correct"), ("p2", "v1", "wrong"), ("p2", "v2", "wrong")]
    fr = pd.DataFrame([{"run_id": "r", "model": "m", "dataset": "d", "prompt_id": p, "variant_id": v,
                        "family": None if v is None else "f", "subtype": None, "strength": None, "position": None,
                        "kept": None if v is None else True, "verdict": verdict} for p, v, verdict in rows])
    a = _row(C.accuracy_table(fr, by=("model",)), model="m")
    assert (a.n_prompts, a.n_pairs) == (2, 4)
    assert a.base_acc == pytest.approx(1 / 2) and a.base_acc_pairs == pytest.approx(1 / 4)
    assert a.var_acc == pytest.approx(2 / 4)
    assert a.change == pytest.approx(a.var_acc - a.base_acc_pairs) == pytest.approx(1 / 4)
    assert a.pdr == pytest.approx(1 - a.var_acc / a.base_acc_pairs) == pytest.approx(-1.0)
    from dashboard.accuracy import CAPTION, shown
    cols = list(shown(C.accuracy_table(fr, by=("model",)), ("model",)).columns)
    assert cols[1:6] == ["prompts", "base acc, per prompt", "pairs", "base acc, over pairs", "variant acc, over pairs"]
    assert "variant acc − base acc, over pairs" in CAPTION and "1 − variant acc / base acc, over pairs" in CAPTION
