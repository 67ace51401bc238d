"""The named aggregations (``scoring.scores.AGGREGATIONS``): one registry, one SGS function, and every
SGS a table, a gate, the noise floor or a pairwise comparison shows goes through it."""

import math

import numpy as np
import pandas as pd
import pytest

from sago_engine.measure.noise_floor import floor_table
from sago_engine.scoring import gate, pairwise, scores, stats


def test_registry_refuses_a_taken_name_and_names_the_valid_ones():
    assert {"mean", "rms", "mean_abs"} <= set(scores.AGGREGATIONS)
    with pytest.raises(ValueError, match="already registered"):
        scores.register_aggregation("mean", np.mean)
    with pytest.raises(ValueError, match=r"unknown aggregation 'meen'.*mean"):
        scores.get_aggregation("meen")
    assert all(scores.describe_aggregations().values())


def test_from_values_and_from_sums_agree():
    x = np.array([0.5, -0.25, 0.0, 1.0])
    n, s, sq, a = np.array([4]), np.array([x.sum()]), np.array([(x * x).sum()]), np.array([np.abs(x).sum()])
    for name in ("mean", "rms", "mean_abs"):
        agg = scores.get_aggregation(name)
        assert agg.of_stats(n, s, sq, a)[0] == pytest.approx(agg.of_values(x))
    assert math.isnan(scores.prompt_score(np.array([0]), np.array([0.0]), np.array([0.0]), np.array([0.0]))[0])


def test_sgs_of_drops_nan_and_an_empty_group_is_nan():
    assert scores.sgs_of([0.1, float("nan"), 0.3]) == pytest.approx(0.2)
    assert math.isnan(scores.sgs_of([])) and math.isnan(scores.sgs_of([float("nan")]))
    assert scores.sgs_of([0.3, 0.4], "rms") == pytest.approx(math.sqrt(0.125))


def _scores() -> pd.DataFrame:
    rows = [("r1", "m1", "d", f"p{i}", "cos", s) for i, s in enumerate([0.1, 0.5, 0.3, 0.0])]
    rows += [("r2", "m2", "d", f"p{i}", "cos", s) for i, s in enumerate([0.2, 0.2, 0.6, 0.4])]
    return pd.DataFrame(rows, columns=["run_id", "model", "dataset", "prompt_id", "axis", "s"])


def test_every_sgs_follows_the_registered_sgs_aggregation(monkeypatch):
    """Switching SGS_AGGREGATION moves every SGS sago shows: no module keeps its own mean."""
    sc = _scores()
    floor = pd.DataFrame({"model": "m1", "prompt_id": ["p0"], "repeat": 1, "axis": "cos", "delta_norm": 0.1,
                          "available": True})

    def shown() -> list[float]:
        return [*scores.sgs(sc, by=("model", "axis"))["sgs"], *scores.significance(sc, by=("model", "axis"))["sgs"],
                *stats.bootstrap_sgs(sc, ("model", "axis"), n_resamples=20)["sgs"],
                *pairwise.paired_table(sc, n_resamples=20)[["sgs_a", "sgs_b"]].iloc[0],
                *gate.level_checks(sc, {"r1": "a", "r2": "b"}, {"cos": 0.5})["value"],
                *floor_table(sc, floor)["sgs"], *scores.sgs_by(sc, ("model",))["sgs"]]

    means = shown()
    assert means == pytest.approx([0.225, 0.35] * 5 + [0.225, 0.35] * 2)
    monkeypatch.setattr(scores, "SGS_AGGREGATION", "rms")
    want = [math.sqrt(np.mean(np.square(v))) for v in ([0.1, 0.5, 0.3, 0.0], [0.2, 0.2, 0.6, 0.4])]
    assert shown() == pytest.approx(want * 7)


def test_leader_is_the_lowest_sgs_under_the_registered_aggregation(monkeypatch):
    sc = _scores()
    sc.loc[(sc["model"] == "m1") & (sc["prompt_id"] == "p1"), "s"] = 0.9
    assert pairwise.leader_sentences(sc, n_resamples=20)["leader"].tolist() == ["m1"]  # mean 0.325 < 0.35
    monkeypatch.setattr(scores, "SGS_AGGREGATION", "rms")
    assert pairwise.leader_sentences(sc, n_resamples=20)["leader"].tolist() == ["m2"]  # RMS 0.477 > 0.387
