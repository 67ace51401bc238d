"""Physical layout of a published store (store/layout.py): per-prompt tables in prompt order, same rows."""

from __future__ import annotations

import pandas as pd
import pytest

from sago_engine.filters import Filters
from sago_engine.store import SCHEMA_VERSION, STATS_TABLES, merge_stores, open_store, table_fingerprints
from sago_engine.store.layout import CLUSTER_ORDER, LAYOUT_VERSION
from tests.unit.store.test_store import _grid_store


def _with_responses(st):
    """Responses written run by run (base first), as the runner writes them: not in prompt order."""
    v = st.variants()
    rows = []
    for run in ("rb", "ra"):
        for pid in sorted(v["prompt_id"].unique(), reverse=True):
            rows.append({"response_id": f"{run}/{pid}", "run_id": run, "prompt_id": pid, "variant_id": None,
                         "response": f"base reply {run} {pid}", "n_tokens": 3})
            for vid in v.loc[v["prompt_id"] == pid, "variant_id"]:
                rows.append({"response_id": f"{run}/{vid}", "run_id": run, "prompt_id": pid, "variant_id": vid,
                             "response": f"reply {run} {vid}", "n_tokens": 2})
    st.insert_df("responses", pd.DataFrame(rows))
    return st


def _in_prompt_order(st) -> dict[str, bool]:
    """Per table of CLUSTER_ORDER: whether the rows in file order (rowid) are sorted by its order."""
    out = {}
    for t, order in CLUSTER_ORDER.items():
        cols = ", ".join(order)
        stored = st.con.execute(f"SELECT {cols} FROM {t} ORDER BY rowid").fetchall()
        out[t] = stored == st.con.execute(f"SELECT {cols} FROM {t} ORDER BY {cols}").fetchall()
    return out


def _page_numbers(st) -> dict:
    """What the pages read: per-prompt details of every prompt, the scores and the ablation sums."""
    pids = st.prompts()["prompt_id"].tolist()
    out = {"prompt_scores": st.prompt_scores(), "cells": st.ablation_frame()["cells"],
           "prompt_list": st.prompt_list(Filters()), "stats": st.stats_counts()}
    for pid in pids:
        for k, df in st.prompt_detail(Filters(), prompt_id=pid).items():
            out[f"{pid}/{k}"] = df
        out[f"{pid}/bm"] = st.prompt_detail(Filters(models=("m-b",), positions=("PREFIX",)), prompt_id=pid)["deltas"]
    return out


def _assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], pd.DataFrame):
            pd.testing.assert_frame_equal(a[k], b[k], check_exact=False, rtol=1e-12, obj=k)
        else:
            assert a[k] == b[k], k


def test_clustered_copy_keeps_every_row_in_prompt_order(tmp_path):
    src, dst = tmp_path / "g.duckdb", tmp_path / "c.duckdb"
    with _with_responses(_grid_store(src)) as st:
        assert not any(_in_prompt_order(st).values())  # written run by run
        want = _page_numbers(st)
        counts = st.write_clustered_copy(dst)
        with pytest.raises(FileExistsError):
            st.write_clustered_copy(dst)
    assert counts["deltas"] == 72 and counts["responses"] == 2 * 3 * 7 and counts["delta_stats"] > 0
    assert table_fingerprints(dst) == table_fingerprints(src)
    with open_store(dst) as st:
        assert st.meta()["layout_version"] == str(LAYOUT_VERSION) and st.stats_materialised
        assert all(_in_prompt_order(st).values())
        _assert_same(_page_numbers(st), want)
    with open_store(dst, read_only=False) as st:  # keys survive the copy: a repeated write adds nothing
        before = st.counts()
        st.insert_df("deltas", st.deltas(kept_only=False)[["run_id", "dataset", "prompt_id", "variant_id", "axis",
                                                            "delta", "delta_norm", "available", "reason",
                                                            "detector"]])
        assert st.counts() == before
        assert st.duplicate_keys() == {t: 0 for t in before}


def test_store_before_the_layout_is_rewritten_in_prompt_order_on_a_writable_open(tmp_path):
    """A schema-2 store without statistics tables and without ``meta.layout_version``: a read-only
    open leaves the file as it is; a writable open migrates it and rewrites it in prompt order."""
    p = tmp_path / "old.duckdb"
    with _with_responses(_grid_store(p)) as st:
        want = _page_numbers(st)
        for t in STATS_TABLES:
            st.con.execute(f"DROP TABLE {t}")
        st.con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
        st.con.execute("DELETE FROM meta WHERE key = 'layout_version'")
    fingerprints = table_fingerprints(p)
    before = p.read_bytes()
    with open_store(p) as st:
        assert not st.stats_materialised and not all(_in_prompt_order(st).values())
    assert p.read_bytes() == before
    with open_store(p, read_only=False) as st:
        assert int(st.meta()["schema_version"]) == SCHEMA_VERSION and st.stats_materialised
        assert st.meta()["layout_version"] == str(LAYOUT_VERSION)
        assert all(_in_prompt_order(st).values())
        _assert_same(_page_numbers(st), want)
    assert table_fingerprints(p) == fingerprints
    assert sorted(x.name for x in tmp_path.iterdir()) == ["old.duckdb"]  # no temporary file left behind
    # a store of this layout is not rewritten again: a writable open leaves the file's rows where they are
    with open_store(p, read_only=False) as st:
        st.insert_df("responses", pd.DataFrame([{"response_id": "late", "run_id": "ra", "prompt_id": "d0:0",
                                                 "response": "a later reply"}]))
    with open_store(p, read_only=False) as st:
        assert st.con.execute("SELECT response_id FROM responses ORDER BY rowid DESC LIMIT 1").fetchall() == [("late",)]
        assert not _in_prompt_order(st)["responses"]


def test_merged_store_is_in_prompt_order(tmp_path):
    parts = []
    for k in range(2):
        with _with_responses(_grid_store(tmp_path / f"s{k}.duckdb")) as st:
            if k == 0:
                want = _page_numbers(st)
        parts.append(tmp_path / f"s{k}.duckdb")
    merge_stores(tmp_path / "m.duckdb", parts)
    with open_store(tmp_path / "m.duckdb") as st:
        assert st.meta()["layout_version"] == str(LAYOUT_VERSION)
        assert all(_in_prompt_order(st).values())
        _assert_same(_page_numbers(st), want)


def test_runner_final_publish_is_in_prompt_order(tmp_path):
    """The runner appends chunk by chunk (axes in AXES order, not sorted); its final publish sorts by prompt."""
    from precompute.config import load_config
    from precompute.runner import run, work_path
    from tests.integration.precompute.test_runner import _cfg

    cfg = load_config(_cfg(tmp_path))
    run(cfg, progress=False)
    assert not work_path(cfg.store).exists()
    with open_store(cfg.store) as st:
        assert st.meta()["layout_version"] == str(LAYOUT_VERSION) and st.meta()["status"] == "complete"
        assert st.counts()["deltas"] > 0 and all(_in_prompt_order(st).values())
    assert sorted(x.name for x in tmp_path.iterdir()) == ["c.toml", "s.duckdb"]  # no temporary file left behind
