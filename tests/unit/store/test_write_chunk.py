"""``Store.write_chunk``: the one writer of measured rows (the runner's chunks, Live's saved probe)."""

import json

import duckdb
import pandas as pd
import pytest

from sago_engine.store import open_store
from sago_engine.store.errors import StoreError
from sago_engine.store.merge import table_fingerprints
from sago_engine.store.writes import CHUNK_TABLES
from tests.support.factories import make_store


def _frames(path):
    with open_store(path) as st:
        run = st.con.execute("SELECT * FROM runs").df().iloc[0].to_dict()
        frames = {t: st.con.execute(f"SELECT * FROM {t}").df() for t in ("deltas", "variants", "prompts", "units")}
    run["normalizers"] = json.loads(run["normalizers"])
    return {k: v for k, v in run.items() if v is not None and v == v}, frames


def test_a_chunk_is_written_in_table_order_with_its_statistics(tmp_path):
    src = tmp_path / "src.duckdb"
    make_store(src, models=("model-a",))
    run, frames = _frames(src)  # deltas first in the mapping: write_chunk still stores the variants before them
    out = tmp_path / "out.duckdb"
    with open_store(out, read_only=False, create=True) as st:
        st.write_chunk(frames, run=run)
        st.write_chunk(frames, run=run)  # keyed rows: a second write adds nothing
    a, b = table_fingerprints(src), table_fingerprints(out)
    for t in ("prompts", "variants", "deltas"):
        assert a[t] == b[t] and a[t + ".rows"] == b[t + ".rows"] != "0", t
    with open_store(src) as s1, open_store(out) as s2:
        # the statistics tables were kept current: the same scores up to the last bits of DuckDB's sums
        # (summed in another order on another run, they differ by an ulp or two)
        pd.testing.assert_frame_equal(s1.prompt_scores(), s2.prompt_scores(), check_exact=False, rtol=1e-12, atol=0.0)


def test_a_failing_table_leaves_nothing_and_bad_calls_are_refused(tmp_path):
    src = tmp_path / "src.duckdb"
    make_store(src, models=("model-a",))
    run, frames = _frames(src)
    out = tmp_path / "out.duckdb"
    with open_store(out, read_only=False, create=True) as st:
        bad = {**frames, "deltas": frames["deltas"].assign(no_such_column=1)}  # fails after runs, prompts, variants
        with pytest.raises(duckdb.Error):
            st.write_chunk(bad, run=run)
        assert st.con.execute("SELECT count(*) FROM runs").fetchone()[0] == 0  # one transaction: the run too
        assert st.con.execute("SELECT count(*) FROM deltas").fetchone()[0] == 0
        with pytest.raises(ValueError, match="not a table of a chunk: meta"):
            st.write_chunk({"meta": frames["prompts"]})
    with open_store(out) as st, pytest.raises(StoreError, match="read-only"):
        st.write_chunk(frames)
    assert CHUNK_TABLES.index("variants") < CHUNK_TABLES.index("deltas")
