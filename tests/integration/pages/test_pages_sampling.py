"""Profiles and Significance on a real sampled run (tiny random model, k = 4): the floor of the sampled run
beside the SGS, and the dice-vs-rephrasing section, against numbers recomputed from the raw rows with SQL."""

from __future__ import annotations

import json

import duckdb
import numpy as np
import pandas as pd

from tests.support.apptest import open_page


def _raw_floor(path) -> pd.Series:
    """Per axis: mean over prompts of √mean Δ̃² of the base samples against base sample 0."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute("""
            SELECT axis, avg(f) AS floor FROM (
                SELECT axis, prompt_id, sqrt(avg(delta_norm ^ 2)) AS f FROM sample_deltas
                WHERE variant_id IS NULL AND available GROUP BY ALL) GROUP BY axis""").df().set_index("axis")["floor"]
    finally:
        con.close()


def _table_with(at, column: str) -> pd.DataFrame:
    [df] = [d.value for d in at.dataframe if column in d.value.columns]
    return df


def test_profiles_and_significance_show_the_sampled_floor_and_the_separation(tiny_sampled_store):
    raw = _raw_floor(tiny_sampled_store)
    at = open_page(tiny_sampled_store, "profiles")
    assert not at.exception, at.exception
    shown = _table_with(at, "floor")
    shown = shown[shown["floor"].notna()]
    assert len(shown) == 4  # Δ-BLEU, Δ-BERT, Δ-Prob, Δ-Ent: the axes a sample can move
    assert set(shown["axis"]) == {"bleu", "bert", "prob", "ent"}
    np.testing.assert_allclose(shown["floor"].to_numpy(float), raw[list(shown["axis"])].to_numpy(), rtol=1e-12)

    at = open_page(tiny_sampled_store, "significance")
    assert not at.exception, at.exception
    assert at.selectbox(key="significance_sampling_axis").value == "bleu"
    models = _table_with(at, "share")
    assert len(models) == 4 and set(models["n_prompts"]) == {4}
    assert "pass_k_dice" in _table_with(at, "pass_k_dice").columns
    [fig] = [json.loads(el.proto.spec) for el in at.get("plotly_chart") if "significance_sampling" in el.proto.id]
    dots = sum(len(t["x"]) for t in fig["data"] if t.get("mode") == "markers")
    assert dots == 4 and any(t.get("name") == "rephrasing = dice" for t in fig["data"])
