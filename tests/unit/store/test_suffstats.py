"""The sufficient-statistics tables (``store.suffstats``) hold exactly the sums of the raw deltas.

Each table is compared row by row with the same sums computed by pandas from the rows written
(tests/support/stats_store.py): after a write in chunks, after a repeated write, after deltas replaced in
place, after a rebuild, and as the on-the-fly SQL an old store without the tables reads.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest

from sago_engine.store import suffstats
from tests.support.stats_store import (
    CELL,
    FINE,
    PROMPT,
    VALUES,
    assert_rows,
    build,
    expected_length,
    expected_table,
    with_fields,
)

TABLES = {"delta_stats": FINE, "prompt_stats": PROMPT, "cell_stats": CELL}
LEVELS = {"fine": FINE, "prompt": PROMPT, "cell": CELL}
LENGTH = ["run_id", "dataset", "axis", "target_ratio"]
LENGTH_VALUES = ["n_prompts", "sum_s", "sum_s2"]


def _table(con, name: str) -> pd.DataFrame:
    return con.execute(f"SELECT * FROM {name}").df()


def _assert_tables(con, fr):
    """Every statistics table of ``con`` equals its pandas recomputation from ``fr``."""
    for name, grain in TABLES.items():
        got = _table(con, name)
        assert list(got.columns) == grain + VALUES, name
        assert_rows(got, expected_table(fr, grain), grain, VALUES)
    want_len = expected_length(with_fields(fr), LENGTH, ["run_id", "dataset", "prompt_id", "axis", "target_ratio"])
    got_len = _table(con, "length_stats")
    assert list(got_len.columns) == LENGTH + LENGTH_VALUES
    assert got_len["n_prompts"].dtype == np.int64
    assert_rows(got_len, want_len, LENGTH, LENGTH_VALUES)


def test_tables_written_in_chunks_hold_the_sums_of_the_raw_deltas(tmp_path):
    st, fr = build(tmp_path / "s.duckdb", chunks=2)
    with st:
        _assert_tables(st.con, fr)
        assert suffstats.has_stats(st.con)
        # the SQL a store without the tables runs gives the same rows
        for level, grain in LEVELS.items():
            got = st.con.execute(f"SELECT * FROM {suffstats.source(level, False)} s").df()
            assert list(got.columns) == grain + VALUES
            assert_rows(got, expected_table(fr, grain), grain, VALUES)
        assert [suffstats.source(k, True) for k in LEVELS] == ["delta_stats", "prompt_stats", "cell_stats"]
        # a rebuild from deltas (migration, merge) gives the same tables, from any state
        st.con.execute("INSERT INTO delta_stats SELECT * FROM delta_stats")
        st.con.execute("DELETE FROM length_stats")
        suffstats.materialise(st.con)
        _assert_tables(st.con, fr)
        suffstats.materialise(st.con)
        _assert_tables(st.con, fr)


def test_a_repeated_write_and_a_replacement_recompute_exactly_the_touched_keys(tmp_path):
    st, fr = build(tmp_path / "s.duckdb", chunks=1)
    with st:
        before = {t: _table(st.con, t) for t in suffstats.STATS_TABLES}
        st.insert_df("deltas", fr["deltas"])  # a resumed run writes rows that exist: nothing changes
        for t in suffstats.STATS_TABLES:
            assert len(_table(st.con, t)) == len(before[t]), t
        _assert_tables(st.con, fr)
        # replace the rows of two runs × two datasets (quotes in a run id and a dataset name)
        d = fr["deltas"]
        hit = d["prompt_id"].isin(["d'x:1", "dy:0"]) & d["run_id"].isin(["r'a", "rb"]) & d["available"]
        new = d.copy()
        new.loc[hit, "delta_norm"] = -new.loc[hit, "delta_norm"].abs() / 3
        new.loc[hit, "delta"] = new.loc[hit, "delta_norm"] * 50
        flip = hit & (new["axis"] == "bleu") & (new["variant_id"] == "dy:0/v0")
        new.loc[flip, ["delta", "delta_norm", "available", "reason"]] = [None, None, False, "reply error: empty"]
        st.replace_deltas(new[hit], {"why": "test"})
        fr2 = {**fr, "deltas": new}
        _assert_tables(st.con, fr2)
        for name in ("_sago_keys", "_sago_rd", "_sago_fine", "_sago_len"):  # nothing left on the connection
            with pytest.raises(duckdb.CatalogException):
                st.con.execute(f"SELECT 1 FROM {name}")
        # the other keys' rows are the very rows written before (not recomputed into something else)
        fine = _table(st.con, "delta_stats")
        untouched = fine[~fine["prompt_id"].isin(["d'x:1", "dy:0"]) | ~fine["run_id"].isin(["r'a", "rb"])]
        old = before["delta_stats"]
        old = old[~old["prompt_id"].isin(["d'x:1", "dy:0"]) | ~old["run_id"].isin(["r'a", "rb"])]
        assert_rows(untouched, old, FINE, VALUES)


def test_has_stats_needs_all_four_tables():
    con = duckdb.connect()
    con.execute(suffstats.STATS_DDL)
    assert suffstats.has_stats(con)
    con.execute("CREATE TABLE other_stats (x INTEGER)")
    assert suffstats.has_stats(con)
    for t in ("length_stats", "delta_stats"):
        con.execute(f"DROP TABLE {t}")
        assert not suffstats.has_stats(con), t


def test_length_rows_by_hand():
    """s_i = sqrt(sum_sq / n) per row; rows grouped by ``by`` (NULL keys kept as a group), sorted by it."""
    per = pd.DataFrame({"model": ["m-b", "m-a", "m-b", "m-a", "m-a"],
                        "axis": ["bleu", "bleu", "bleu", "bleu", "bleu"],
                        "target_ratio": [0.5, 0.5, 0.5, np.nan, 0.5],
                        "n": [4, 1, 2, 2, 3], "sum_sq": [1.0, 0.25, 0.5, 0.08, 0.27]})
    got = suffstats.length_rows(per, by=("model", "axis", "target_ratio"))
    assert list(got.columns) == ["model", "axis", "target_ratio", "n_prompts", "sum_s", "sum_s2"]
    assert got["model"].tolist() == ["m-a", "m-a", "m-b"]
    assert got["target_ratio"].tolist()[0] == 0.5 and np.isnan(got["target_ratio"].tolist()[1])
    assert got["n_prompts"].tolist() == [2, 1, 2] and got["n_prompts"].dtype == np.int64
    # s: m-b 0.5, 0.5; m-a (0.5) 0.5, 0.3; m-a (NULL) 0.2
    np.testing.assert_allclose(got["sum_s"], [0.8, 0.2, 1.0], rtol=1e-12)
    np.testing.assert_allclose(got["sum_s2"], [0.34, 0.04, 0.5], rtol=1e-12)
    default = suffstats.length_rows(per.rename(columns={"model": "run_id"}).assign(dataset="d"))
    assert list(default.columns) == ["run_id", "dataset", "axis", "target_ratio", "n_prompts", "sum_s", "sum_s2"]
    assert len(default) == 3
