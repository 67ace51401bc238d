"""A real sampled run (tiny random model, k = 4): its ``sample_deltas`` rows, the floors the pages read, and
the dice-vs-rephrasing view, checked against the raw rows with plain SQL."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

from sago_engine.measure.sample_deltas import SAMPLED_AXES
from sago_engine.store import open_store
from sago_engine.views import sampling
from tests.support.factories import make_store

K = 4


def _sql(path, q, *params):
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute(q, list(params)).df()
    finally:
        con.close()


def test_every_sample_has_its_delta_against_base_sample_0(tiny_sampled_store):
    assert SAMPLED_AXES == ("bleu", "bert", "prob", "ent")  # Δ-Cos reads the prompt only; Δ-MR needs a variant
    n = _sql(tiny_sampled_store, """
        SELECT prompt_id, variant_id IS NULL AS base, count(DISTINCT (variant_id, sample)) AS replies,
               count(*) AS rows FROM sample_deltas GROUP BY ALL ORDER BY ALL""")
    variants = _sql(tiny_sampled_store, "SELECT prompt_id, count(*) AS v FROM responses "
                                        "WHERE variant_id IS NOT NULL GROUP BY ALL").set_index("prompt_id")["v"]
    for r in n.itertuples():
        assert r.replies == (K - 1 if r.base else K * variants[r.prompt_id])
        assert r.rows == r.replies * len(SAMPLED_AXES)
    # sample 0 of a variant is its responses row: the Δ of deltas (Δ-BERT up to the float32 encoder's
    # rounding in another batch of pairs, ~1e-7; the others byte for byte)
    same = _sql(tiny_sampled_store, """
        SELECT s.axis, s.delta AS a, d.delta AS b, s.available = d.available AS avail
        FROM sample_deltas s JOIN deltas d USING (run_id, prompt_id, variant_id, axis) WHERE s.sample = 0""")
    assert len(same) == 4 * 5 * len(SAMPLED_AXES) and same["avail"].all()
    exact = same[same["axis"] != "bert"]
    assert (exact["a"].eq(exact["b"]) | (exact["a"].isna() & exact["b"].isna())).all()
    bert = same[same["axis"] == "bert"]
    np.testing.assert_allclose(bert["a"], bert["b"], rtol=0, atol=1e-6)
    # Δ-Prob of a base sample: its own sequence log-prob minus base sample 0's (nats), from the raw columns
    prob = _sql(tiny_sampled_store, """
        SELECT s.delta, x.seq_logprob - b.seq_logprob AS raw FROM sample_deltas s
        JOIN samples x ON x.response_id = s.response_id
        JOIN responses b ON b.run_id = s.run_id AND b.prompt_id = s.prompt_id AND b.variant_id IS NULL
        WHERE s.axis = 'prob' AND s.variant_id IS NULL AND s.available""")
    assert len(prob) == 4 * (K - 1)
    np.testing.assert_allclose(prob["delta"], prob["raw"], rtol=0, atol=1e-4)  # 1e-4 nats: NOISE_TOL["prob"]


def test_the_view_matches_the_raw_rows(tiny_sampled_store):
    raw = _sql(tiny_sampled_store, """
        SELECT prompt_id, axis, sqrt(avg(delta_norm ^ 2) FILTER (WHERE variant_id IS NULL)) AS floor,
               sqrt(avg(delta_norm ^ 2) FILTER (WHERE variant_id IS NOT NULL)) AS move
        FROM sample_deltas WHERE available GROUP BY ALL ORDER BY ALL""")
    with open_store(tiny_sampled_store) as st:
        view = sampling.separation_view(st)
        fl = sampling.floors(st)
    per = view["prompts"].sort_values(["prompt_id", "axis"]).reset_index(drop=True)
    assert len(per) == len(raw) == 4 * len(SAMPLED_AXES)
    np.testing.assert_allclose(per["floor"], raw["floor"], rtol=1e-12)
    np.testing.assert_allclose(per["move"], raw["move"], rtol=1e-12)
    assert per["method"].eq("exact (all 1,771 splits)").all()  # C(3 + 5·4, 3): three floor values, twenty moved
    assert ((per["p"] > 0) & (per["p"] <= 1)).all()
    m = view["models"].set_index("axis")
    assert set(m.index) == set(SAMPLED_AXES) and (m["n_prompts"] == 4).all()
    for a in SAMPLED_AXES:
        g = per[per["axis"] == a]
        assert m.loc[a, "share"] == pytest.approx(1 - (g["floor"] ** 2).sum() / (g["move"] ** 2).sum())
    assert view["pass_k"]["prompts"].tolist() == [4]
    assert sorted(fl["repeat"].unique()) == [1, 2, 3] and set(fl["axis"]) == set(SAMPLED_AXES)


def test_a_store_without_sampled_runs_shows_what_it_showed(tmp_path):
    path = tmp_path / "greedy.duckdb"
    make_store(path)
    with open_store(path) as st:
        view = sampling.separation_view(st)
        assert all(v.empty for v in view.values())
        assert sampling.floors(st).equals(st.noise_floor())
