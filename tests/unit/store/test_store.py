"""The DuckDB store: creation, refusing foreign files, idempotent writes, transactions, views."""

from __future__ import annotations

import json
import math
import os

import duckdb
import numpy as np
import pandas as pd
import pytest

from sago_engine.scoring.scores import prompt_scores, sgs
from sago_engine.store import APP_ID, SCHEMA_VERSION, TABLES, StoreError, open_store


# ------------------------------------------------------------------ open / create
def test_create_sets_schema_version_and_meta(tmp_path):
    path = tmp_path / "s.duckdb"
    with open_store(path, read_only=False, create=True) as st:
        assert int(st.meta()["schema_version"]) == SCHEMA_VERSION == 5
        meta = dict(st.con.execute("SELECT key, value FROM meta").fetchall())
        assert meta == {"app": APP_ID, "schema_version": str(SCHEMA_VERSION), "layout_version": "1"}
        assert st.counts() == {t: 0 for t in TABLES}
    # reopen read-only, and again with create=True (existing store is kept, not re-initialised)
    with open_store(path) as st:
        assert st.read_only and int(st.meta()["schema_version"]) == 5
    with open_store(path, read_only=False, create=True) as st:
        assert st.con.execute("SELECT count(*) FROM meta").fetchone()[0] == 3


def test_create_read_only_is_refused(tmp_path):
    with pytest.raises(ValueError):
        open_store(tmp_path / "x.duckdb", read_only=True, create=True)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        open_store(tmp_path / "absent.duckdb")
    assert not (tmp_path / "absent.duckdb").exists()


def _plain_duckdb(path, sql):
    con = duckdb.connect(str(path))
    con.execute(sql)
    con.close()


def test_non_sago_duckdb_file(tmp_path):
    path = tmp_path / "other.duckdb"
    _plain_duckdb(path, "CREATE TABLE customers (id INTEGER, name VARCHAR)")
    with pytest.raises(StoreError, match=r"not a sago store.*customers"):
        open_store(path)
    with pytest.raises(StoreError):
        open_store(path, read_only=False, create=True)  # create must not adopt a foreign file
    con = duckdb.connect(str(path), read_only=True)  # untouched, and the handle was released
    assert {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()} == {"customers"}
    con.close()


def test_empty_duckdb_file_is_not_a_store(tmp_path):
    path = tmp_path / "empty.duckdb"
    _plain_duckdb(path, "SELECT 1")
    with pytest.raises(StoreError, match="no meta table"):
        open_store(path)


def test_meta_of_other_app(tmp_path):
    path = tmp_path / "app.duckdb"
    _plain_duckdb(path, "CREATE TABLE meta (key VARCHAR, value VARCHAR); INSERT INTO meta VALUES ('app', 'someone-else')")
    with pytest.raises(StoreError, match="someone-else"):
        open_store(path)


def test_foreign_meta_table_shape(tmp_path):
    path = tmp_path / "meta.duckdb"
    _plain_duckdb(path, "CREATE TABLE meta (id INTEGER)")
    with pytest.raises(StoreError):
        open_store(path)


def test_garbage_schema_version(tmp_path):
    path = tmp_path / "garbage.duckdb"
    _plain_duckdb(path, f"CREATE TABLE meta (key VARCHAR, value VARCHAR); "
                        f"INSERT INTO meta VALUES ('app', '{APP_ID}'), ('schema_version', 'one')")
    with pytest.raises(StoreError):
        open_store(path)


@pytest.mark.parametrize("content", [os.urandom(4096), b"hello, I am a text file\n" * 50, b""])
def test_not_a_duckdb_file(tmp_path, content):
    path = tmp_path / "junk.duckdb"
    path.write_bytes(content)
    with pytest.raises(StoreError, match="cannot be opened"):
        open_store(path)
    assert path.read_bytes() == content  # never overwritten


def test_older_schema_version(tmp_path):
    path = tmp_path / "old.duckdb"
    with open_store(path, read_only=False, create=True) as st:
        st.con.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    with pytest.raises(StoreError) as ei:
        open_store(path)
    msg = str(ei.value)
    assert "version 0" in msg and f"versions 1, 2, 3, 4, {SCHEMA_VERSION}" in msg


def test_missing_schema_version_counts_as_zero(tmp_path):
    path = tmp_path / "nov.duckdb"
    with open_store(path, read_only=False, create=True) as st:
        st.con.execute("DELETE FROM meta WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="version 0"):
        open_store(path)


# ------------------------------------------------------------------ synthetic data
RUNS = pd.DataFrame([
    {"run_id": "r1", "model": "model-a", "backend": "fake", "status": "done"},
    {"run_id": "r2", "model": "model-b", "backend": "fake", "status": "done"},
])
PROMPTS = pd.DataFrame([
    {"prompt_id": "d1:1", "dataset": "d1", "source_id": "1", "text": "q1"},
    {"prompt_id": "d2:1", "dataset": "d2", "source_id": "1", "text": "q2"},
    {"prompt_id": "d2:2", "dataset": "d2", "source_id": "2", "text": "q3"},
    {"prompt_id": "d2:3", "dataset": "d2", "source_id": "3", "text": "q4"},
])


def _variant(vid, pid, kept=True, family="surface_noise"):
    return {"variant_id": vid, "prompt_id": pid, "family": family, "subtype": "case", "strength": 1.0,
            "position": "GLOBAL", "text": f"text of {vid}", "seed": 7, "generator": "rules-v1",
            "meta": json.dumps({"target": "upper"}), "semantic_score": 0.9, "passes_filter": kept, "kept": kept}


VARIANTS = pd.DataFrame([
    _variant("v11", "d1:1"), _variant("v12", "d1:1"), _variant("v13", "d1:1", kept=False),
    _variant("v21", "d2:1"), _variant("v22", "d2:1"),
    _variant("v31", "d2:2"),
    _variant("v41", "d2:3"), _variant("v42", "d2:3"),
])
DS = {"d1:1": "d1", "d2:1": "d2", "d2:2": "d2", "d2:3": "d2"}
PID = dict(zip(VARIANTS["variant_id"], VARIANTS["prompt_id"]))


def _delta(run, vid, axis, norm, available=True):
    return {"run_id": run, "dataset": DS[PID[vid]], "prompt_id": PID[vid], "variant_id": vid, "axis": axis,
            "delta": None if not available else norm * 100, "delta_norm": None if not available else norm,
            "available": available, "reason": None if available else "backend exposes no activations",
            "detector": None}


DELTAS = pd.DataFrame([
    # r1 / bleu
    _delta("r1", "v11", "bleu", -0.6), _delta("r1", "v12", "bleu", -0.8),
    _delta("r1", "v13", "bleu", -1.0),                      # variant not kept → excluded
    _delta("r1", "v21", "bleu", -0.1), _delta("r1", "v22", "bleu", -0.1),
    _delta("r1", "v31", "bleu", -0.1),
    _delta("r1", "v41", "bleu", -0.1), _delta("r1", "v42", "bleu", 0.0, available=False),  # excluded
    # r1 / cos unavailable everywhere → no score at all
    _delta("r1", "v11", "cos", 0.0, available=False), _delta("r1", "v21", "cos", 0.0, available=False),
    # r2 / mr
    _delta("r2", "v11", "mr", 1.0), _delta("r2", "v12", "mr", 0.0),
    _delta("r2", "v21", "mr", -1.0), _delta("r2", "v31", "mr", 0.0),
])


def _counts(st):
    """Row counts via fetchall."""
    return {t: st.con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in TABLES}


def _fill(st):
    st.insert_df("runs", RUNS)
    st.insert_df("prompts", PROMPTS)
    st.insert_df("variants", VARIANTS)
    st.insert_df("deltas", DELTAS)


@pytest.fixture
def store(tmp_path):
    st = open_store(tmp_path / "s.duckdb", read_only=False, create=True)
    _fill(st)
    yield st
    st.close()


def test_insert_or_ignore_is_idempotent(store):
    before = _counts(store)
    assert before["runs"] == 2 and before["variants"] == 8 and before["deltas"] == len(DELTAS)
    _fill(store)
    assert _counts(store) == before
    # a changed row with an existing key is ignored, not updated or duplicated
    changed = DELTAS.iloc[:1].copy()
    changed["delta_norm"] = 0.123
    store.insert_df("deltas", changed)
    assert _counts(store) == before
    row = store.con.execute("SELECT delta_norm FROM deltas WHERE run_id='r1' AND variant_id='v11' AND axis='bleu'").fetchone()
    assert row[0] == pytest.approx(-0.6)
    assert store.counts() == before


def test_insert_df_edge_cases(store):
    store.insert_df("deltas", DELTAS.iloc[:0])  # empty: no-op
    with pytest.raises(ValueError):
        store.insert_df("not_a_table; DROP TABLE runs", RUNS)
    assert store.counts()["runs"] == 2


def test_transaction_rollback(store):
    before = _counts(store)
    extra = pd.DataFrame([{"run_id": "r9", "model": "m9", "backend": "fake"}])
    with pytest.raises(RuntimeError, match="boom"):
        with store.transaction():
            store.insert_df("runs", extra)
            store.insert_df("prompts", pd.DataFrame([{"prompt_id": "d9:1", "dataset": "d9", "text": "t"}]))
            raise RuntimeError("boom")
    assert _counts(store) == before
    assert store.existing_ids("runs", "run_id", ["r9", "r1"]) == {"r1"}
    with store.transaction():
        store.insert_df("runs", extra)
    assert _counts(store)["runs"] == 3


@pytest.mark.parametrize("read", ["counts", "meta"])
def test_reads_do_not_block_later_writes(store, read):
    getattr(store, read)()
    store.insert_df("runs", pd.DataFrame([{"run_id": "r7", "model": "m7", "backend": "fake"}]))
    assert store.existing_ids("runs", "run_id", ["r7"]) == {"r7"}


def test_read_only_store_refuses_writes(tmp_path):
    path = tmp_path / "ro.duckdb"
    with open_store(path, read_only=False, create=True) as st:
        _fill(st)
    with open_store(path) as st:
        assert st.read_only
        with pytest.raises(duckdb.Error):
            st.insert_df("runs", pd.DataFrame([{"run_id": "rx", "model": "m", "backend": "b"}]))
        with pytest.raises(duckdb.Error):
            st.con.execute("DELETE FROM deltas")
        assert st.counts()["runs"] == 2


def test_upsert_run(store):
    store.upsert_run({"run_id": "r3", "model": "m3", "backend": "fake", "status": "running",
                      "normalizers": {"prob": 250.0}, "seed": 42})
    store.upsert_run({"run_id": "r3", "model": "m3", "backend": "fake", "status": "done", "seed": 42})
    runs = store.runs().set_index("run_id")
    assert runs.loc["r3", "status"] == "done"
    assert json.loads(runs.loc["r3", "normalizers"]) == {"prob": 250.0}
    assert store.counts()["runs"] == 3


def test_done_units_and_existing_ids(store):
    store.insert_df("units", pd.DataFrame([{"run_id": "r1", "prompt_id": "d1:1", "n_variants": 2}]))
    assert store.done_units("r1") == {"d1:1"}
    assert store.done_units("r2") == set()
    assert store.existing_ids("variants", "variant_id", ["v11", "nope"]) == {"v11"}
    assert store.existing_ids("variants", "variant_id", []) == set()


# ------------------------------------------------------------------ views vs pandas
# Hand-computed per-prompt RMS (kept variants, available rows only):
#   r1/bleu: d1:1 → sqrt((0.36+0.64)/2) = sqrt(0.5); d2:1 → 0.1; d2:2 → 0.1; d2:3 → 0.1 (v42 unavailable)
#   r2/mr:   d1:1 → sqrt((1+0)/2) = sqrt(0.5); d2:1 → 1; d2:2 → 0
HAND_S = {
    ("r1", "d1:1", "bleu"): math.sqrt(0.5), ("r1", "d2:1", "bleu"): 0.1, ("r1", "d2:2", "bleu"): 0.1,
    ("r1", "d2:3", "bleu"): 0.1,
    ("r2", "d1:1", "mr"): math.sqrt(0.5), ("r2", "d2:1", "mr"): 1.0, ("r2", "d2:2", "mr"): 0.0,
}


def test_view_prompt_scores_by_hand(store):
    v = store.view("prompt_scores")
    got = {(r.run_id, r.prompt_id, r.axis): r.s for r in v.itertuples()}
    assert got.keys() == HAND_S.keys()  # no cos rows (all unavailable), nothing from v13 alone
    for k, s in HAND_S.items():
        assert got[k] == pytest.approx(s), k
    n = {(r.run_id, r.prompt_id, r.axis): r.n_variants for r in v.itertuples()}
    assert n[("r1", "d1:1", "bleu")] == 2  # v13 (kept=False) not counted
    assert n[("r1", "d2:3", "bleu")] == 1  # unavailable v42 not counted
    assert set(v["model"]) == {"model-a", "model-b"}


def test_view_sgs_by_hand(store):
    tot = store.view("sgs_total").set_index(["run_id", "axis"])
    # r1/bleu: prompt-weighted (sqrt(.5) + 3·0.1)/4; mean of dataset means would be (sqrt(.5)+0.1)/2
    assert tot.loc[("r1", "bleu"), "sgs"] == pytest.approx((math.sqrt(0.5) + 0.3) / 4)
    assert tot.loc[("r1", "bleu"), "sgs"] != pytest.approx((math.sqrt(0.5) + 0.1) / 2)
    assert tot.loc[("r1", "bleu"), "n_prompts"] == 4
    assert tot.loc[("r2", "mr"), "sgs"] == pytest.approx((math.sqrt(0.5) + 1.0) / 3)
    assert ("r1", "cos") not in tot.index
    per = store.view("sgs_dataset").set_index(["run_id", "dataset", "axis"])
    assert per.loc[("r1", "d1", "bleu"), "sgs"] == pytest.approx(math.sqrt(0.5))
    assert per.loc[("r1", "d2", "bleu"), "sgs"] == pytest.approx(0.1)
    assert per.loc[("r1", "d2", "bleu"), "n_prompts"] == 3
    assert per.loc[("r2", "d2", "mr"), "sgs"] == pytest.approx(0.5)
    assert per.loc[("r2", "d2", "mr"), "std"] == pytest.approx(math.sqrt(0.5))  # sample std of [1, 0]


def test_views_agree_with_pandas_scoring(store):
    d = store.deltas()
    ps = prompt_scores(d).sort_values(["run_id", "prompt_id", "axis"]).reset_index(drop=True)
    v = store.view("prompt_scores").sort_values(["run_id", "prompt_id", "axis"]).reset_index(drop=True)
    assert v[["run_id", "dataset", "prompt_id", "axis"]].equals(ps[["run_id", "dataset", "prompt_id", "axis"]])
    np.testing.assert_allclose(v["s"].to_numpy(), ps["s"].to_numpy(), rtol=1e-12)
    assert v["n_variants"].tolist() == ps["n_variants"].tolist()

    tot_pd = sgs(ps).sort_values(["run_id", "axis"]).reset_index(drop=True)
    tot_sql = store.view("sgs_total").sort_values(["run_id", "axis"]).reset_index(drop=True)
    np.testing.assert_allclose(tot_sql["sgs"].to_numpy(), tot_pd["sgs"].to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(tot_sql["std"].to_numpy(dtype=float), tot_pd["std"].to_numpy(dtype=float), rtol=1e-12)

    per_pd = sgs(ps, by=("run_id", "dataset", "axis")).sort_values(["run_id", "dataset", "axis"]).reset_index(drop=True)
    per_sql = store.view("sgs_dataset").sort_values(["run_id", "dataset", "axis"]).reset_index(drop=True)
    np.testing.assert_allclose(per_sql["sgs"].to_numpy(), per_pd["sgs"].to_numpy(), rtol=1e-12)
    assert per_sql["n_prompts"].tolist() == per_pd["n_prompts"].tolist()


def test_view_unknown_name(store):
    with pytest.raises(ValueError):
        store.view("deltas; DROP TABLE runs")


# ------------------------------------------------------------------ deltas() / reads
def test_deltas_join(store):
    d = store.deltas()
    assert list(d.columns) == ["run_id", "model", "dataset", "prompt_id", "variant_id", "family", "subtype",
                               "strength", "position", "axis", "delta", "delta_norm", "available", "reason",
                               "detector", "kept", "semantic_score"]
    assert len(d) == len(DELTAS) - 1  # v13 dropped by kept_only
    assert "v13" not in set(d["variant_id"])
    assert len(store.deltas(kept_only=False)) == len(DELTAS)
    unav = d[~d["available"]]
    assert unav["delta_norm"].isna().all() and unav["delta"].isna().all()
    assert (unav["reason"] == "backend exposes no activations").all()
    row = d[(d.run_id == "r2") & (d.variant_id == "v21")].iloc[0]
    assert (row.model, row.dataset, row.family, row.subtype, row.position) == ("model-b", "d2", "surface_noise", "case", "GLOBAL")
    assert row.delta_norm == -1.0
    only_r2 = store.deltas(run_ids=["r2"])
    assert set(only_r2["run_id"]) == {"r2"} and len(only_r2) == 4


def test_prompt_and_variant_reads(store):
    assert store.prompts(["d2"])["prompt_id"].tolist() == ["d2:1", "d2:2", "d2:3"]
    assert len(store.prompts()) == 4
    assert set(store.variants("d1:1")["variant_id"]) == {"v11", "v12", "v13"}


def test_responses_base_first(store):
    store.insert_df("responses", pd.DataFrame([
        {"response_id": "x2", "run_id": "r1", "prompt_id": "d1:1", "variant_id": "v11", "response": "B"},
        {"response_id": "x1", "run_id": "r1", "prompt_id": "d1:1", "variant_id": None, "response": "A"},
    ]))
    r = store.responses("d1:1")
    assert r["response"].tolist() == ["A", "B"]
    assert r["variant_id"].isna().tolist() == [True, False]
    assert (r["model"] == "model-a").all()


def test_merge_adds_up_api_usage_of_shards(tmp_path):
    """Two shards of one API run: the merged run_usage sums counters and cost, unions model strings."""
    from sago_engine.store import merge_stores

    parts = []
    for k, (req, toks, model) in enumerate([(3, 100, "gpt-x-2026-01-01"), (5, 50, "gpt-x-2026-02-01")]):
        p = tmp_path / f"s{k}.duckdb"
        with open_store(p, read_only=False, create=True) as st:
            st.add_run_usage("run1", {"requests": req, "cache_hits": 1, "retries": 0, "errors": 0,
                                      "prompt_tokens": toks, "completion_tokens": toks, "models": [model]},
                             price_in_per_mtok=1.0, price_out_per_mtok=2.0)
        parts.append(p)
    merge_stores(tmp_path / "all.duckdb", parts)
    with open_store(tmp_path / "all.duckdb") as st:
        u = st.run_usage().iloc[0]
    assert (u["requests"], u["cache_hits"], u["prompt_tokens"]) == (8, 2, 150)
    assert u["cost_usd"] == pytest.approx(150 * 3.0 / 1e6)
    assert json.loads(u["models_returned"]) == ["gpt-x-2026-01-01", "gpt-x-2026-02-01"]


def test_schema_v2_store_reads_and_gains_token_ids_on_a_writable_open(tmp_path):
    """A version-2 store (responses without ``token_ids``) reads as it is; a writable open adds the
    column (NULL for old rows) and a merge of a v2 and a v3 store keeps every row (columns by name)."""
    from sago_engine.store import merge_stores

    old = tmp_path / "v2.duckdb"
    with open_store(old, read_only=False, create=True) as st:
        st.con.execute("ALTER TABLE responses DROP COLUMN token_ids")
        st.con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
        st.con.execute("INSERT INTO responses (response_id, run_id, prompt_id, response) VALUES ('a', 'r', 'p', 'x ')")
    with open_store(old) as st:
        assert int(st.meta()["schema_version"]) == 2 and "token_ids" not in st.responses("p").columns
    new = tmp_path / "v3.duckdb"
    with open_store(new, read_only=False, create=True) as st:
        st.con.execute("INSERT INTO responses (response_id, run_id, prompt_id, response, token_ids) "
                       "VALUES ('b', 'r', 'p', 'y\t', [5, 0])")
    merged = tmp_path / "m.duckdb"
    merge_stores(merged, [old, new])
    with open_store(merged) as st:
        got = st.con.execute("SELECT response_id, response, token_ids FROM responses ORDER BY 1").fetchall()
    assert got == [("a", "x ", None), ("b", "y\t", [5, 0])]
    with open_store(old, read_only=False) as st:
        assert int(st.meta()["schema_version"]) == SCHEMA_VERSION
        assert st.con.execute("SELECT token_ids FROM responses").fetchall() == [(None,)]


# ------------------------------------------------------------------ sufficient-statistics tables (schema 3)
def _grid_store(path):
    """Two runs × 3 prompts × 6 variants over two cells and two positions; one axis partly unavailable;
    one variant not kept. Δ̃ values are drawn once from a seeded generator."""
    rng = np.random.default_rng(5)
    runs = pd.DataFrame([{"run_id": "ra", "model": "m-a", "backend": "fake"},
                         {"run_id": "rb", "model": "m-b", "backend": "fake"}])
    prompts = pd.DataFrame([{"prompt_id": f"d{k % 2}:{k}", "dataset": f"d{k % 2}", "text": f"q{k}"} for k in range(3)])
    cells = [("surface_noise", "case", 1.0, "GLOBAL"), ("structural", "length", 0.5, "PREFIX"),
             ("structural", "length", 0.5, "SUFFIX"), ("social_register", "politeness", -1.0, "PREFIX")]
    vrows = []
    for p in prompts.itertuples():
        for j in range(6):
            fam, sub, s, pos = cells[j % len(cells)]
            vrows.append({"variant_id": f"{p.prompt_id}/v{j}", "prompt_id": p.prompt_id, "family": fam, "subtype": sub,
                          "strength": s, "position": pos, "text": "t", "seed": j, "generator": "g",
                          "meta": json.dumps({"target_ratio": s} if sub == "length" else {}),
                          "semantic_score": 0.9, "passes_filter": True, "kept": j != 5})
    variants = pd.DataFrame(vrows)
    drows = []
    for run in ("ra", "rb"):
        for v in vrows:
            for axis in ("bleu", "cos"):
                ok = not (run == "rb" and axis == "cos")
                x = float(np.clip(rng.normal(0, 0.5), -1, 1))
                drows.append({"run_id": run, "dataset": v["prompt_id"].split(":")[0], "prompt_id": v["prompt_id"],
                              "variant_id": v["variant_id"], "axis": axis, "delta": x * 2 if ok else None,
                              "delta_norm": x if ok else None, "available": ok,
                              "reason": None if ok else "backend exposes no activations", "detector": None})
    st = open_store(path, read_only=False, create=True)
    with st.transaction():
        st.insert_df("runs", runs)
        st.insert_df("prompts", prompts)
        st.insert_df("variants", variants)
    for run in ("ra", "rb"):  # two writes, as the runner's chunks
        st.insert_df("deltas", pd.DataFrame([d for d in drows if d["run_id"] == run]))
    return st


FILTERS_TO_CHECK = [
    {}, {"models": ("m-b",)}, {"datasets": ("d1",)}, {"families": ("structural",)},
    {"positions": ("PREFIX",)}, {"strengths": (0.5, 1.0)}, {"subtypes": ("case", "politeness"), "datasets": ("d0",)},
    {"families": ()},
]


def _engine_scores(st, f):
    """What the page must show, computed by the engine from the raw deltas (pandas, no SQL sums)."""
    d = st.deltas()
    keep = pd.Series(True, index=d.index)
    for name, col in (("models", "model"), ("datasets", "dataset"), ("families", "family"), ("subtypes", "subtype"),
                      ("strengths", "strength"), ("positions", "position")):
        vals = getattr(f, name)
        if vals is not None:
            keep &= d[col].isin(list(vals))
    d = d[keep & d["available"]]
    return prompt_scores(d, group=("run_id", "model", "dataset", "prompt_id", "axis"))


@pytest.mark.parametrize("kw", FILTERS_TO_CHECK)
def test_prompt_scores_from_statistics_equal_the_engine_on_raw_deltas(tmp_path, kw):
    from sago_engine.filters import Filters

    f = Filters(**kw)
    with _grid_store(tmp_path / "g.duckdb") as st:
        assert st.stats_materialised
        got = st.prompt_scores(f).sort_values(["run_id", "prompt_id", "axis"]).reset_index(drop=True)
        want = _engine_scores(st, f).sort_values(["run_id", "prompt_id", "axis"]).reset_index(drop=True)
    assert got[["run_id", "model", "dataset", "prompt_id", "axis"]].astype(str).equals(
        want[["run_id", "model", "dataset", "prompt_id", "axis"]].astype(str))
    np.testing.assert_allclose(got["s"].to_numpy(), want["s"].to_numpy(), rtol=1e-12)
    assert got["n_variants"].tolist() == want["n_variants"].tolist()
    if not kw:  # 3 prompts × (ra: bleu, cos; rb: bleu) and 5 kept variants per prompt
        assert len(got) == 9 and set(got["n_variants"]) == {5}


def test_availability_and_cells_from_statistics(tmp_path):
    from sago_engine.filters import Filters

    with _grid_store(tmp_path / "g.duckdb") as st:
        av = st.axis_availability().set_index(["model", "axis"])
        assert av.loc[("m-b", "cos"), "n_available"] == 0 and av.loc[("m-b", "cos"), "n_unavailable"] == 15
        assert not av.loc[("m-b", "cos"), "available"]
        assert av.loc[("m-b", "cos"), "reasons"] == "backend exposes no activations"
        assert av.loc[("m-a", "cos"), "n_available"] == 15 and pd.isna(av.loc[("m-a", "cos"), "reasons"])
        assert st.axis_availability(Filters(positions=("PREFIX",))).set_index(["model", "axis"]).loc[
            ("m-a", "bleu"), "n_available"] == 6  # kept PREFIX variants: j = 1, 3 of 3 prompts
        d = st.deltas()
        d = d[d["available"]]
        ab = st.ablation_frame()
        cells = ab["cells"].set_index(["model", "axis", "family", "subtype", "strength", "position"])
        g = d.groupby(["model", "axis", "family", "subtype", "strength", "position"])["delta_norm"]
        for key, x in g:
            row = cells.loc[key]
            assert row["n"] == len(x)
            assert row["sum_sq"] == pytest.approx(float((x ** 2).sum()), rel=1e-12)
            assert row["sum_abs"] == pytest.approx(float(x.abs().sum()), rel=1e-12)
        # length factor: s_i over prompt i's length variants (PREFIX and SUFFIX, ratio 0.5)
        lv = d[d["subtype"] == "length"]
        s = lv.groupby(["model", "axis", "prompt_id"])["delta_norm"].apply(lambda x: math.sqrt(float((x ** 2).mean())))
        length = ab["length"].set_index(["model", "axis", "target_ratio"])
        for (model, axis), grp in s.groupby(level=[0, 1]):
            row = length.loc[(model, axis, 0.5)]
            assert row["n_prompts"] == len(grp)
            assert row["sum_s"] == pytest.approx(float(grp.sum()), rel=1e-12)
            assert row["sum_s2"] == pytest.approx(float((grp ** 2).sum()), rel=1e-12)
        # with a variant filter the per-prompt path gives the same numbers for the kept cells
        only = st.ablation_frame(Filters(families=("structural",)))["length"].set_index(["model", "axis", "target_ratio"])
        pd.testing.assert_frame_equal(only, length, check_exact=False, rtol=1e-12)


def test_refresh_is_exact_when_a_write_repeats(tmp_path):
    with _grid_store(tmp_path / "g.duckdb") as st:
        before = st.prompt_scores()
        counts = st.stats_counts()
        st.insert_df("deltas", st.deltas(kept_only=False)[["run_id", "dataset", "prompt_id", "variant_id", "axis",
                                                            "delta", "delta_norm", "available", "reason", "detector"]])
        assert st.stats_counts() == counts
        pd.testing.assert_frame_equal(st.prompt_scores(), before)


def test_old_store_without_statistics_reads_the_same_and_gains_them_on_a_writable_open(tmp_path):
    """A v2 store (no statistics tables, old SQL views): a read-only open computes the same scores from
    ``deltas``; a writable open migrates it to v3 and materialises the tables with the same numbers."""
    from sago_engine.store import STATS_TABLES

    p = tmp_path / "g.duckdb"
    with _grid_store(p) as st:
        want = st.prompt_scores()
        want_ab = st.ablation_frame()
        counts = st.stats_counts()
        for t in STATS_TABLES:
            st.con.execute(f"DROP TABLE {t}")
        st.con.execute("CREATE VIEW prompt_scores AS SELECT 1 AS x")  # schema 1/2 had SQL views
        st.con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    with open_store(p) as st:
        assert not st.stats_materialised and int(st.meta()["schema_version"]) == 2 and st.stats_counts() == {}
        pd.testing.assert_frame_equal(st.prompt_scores(), want, check_exact=False, rtol=1e-12)
        pd.testing.assert_frame_equal(st.ablation_frame()["cells"], want_ab["cells"], check_exact=False, rtol=1e-12)
        pd.testing.assert_frame_equal(st.ablation_frame()["length"], want_ab["length"], check_exact=False, rtol=1e-12)
    with open_store(p, read_only=False) as st:
        assert int(st.meta()["schema_version"]) == SCHEMA_VERSION and st.stats_materialised and st.stats_counts() == counts
        assert not st._has_table("prompt_scores")
        pd.testing.assert_frame_equal(st.prompt_scores(), want, check_exact=False, rtol=1e-12)


def test_merged_shards_have_the_statistics_of_one_store(tmp_path):
    from sago_engine.store import merge_stores

    with _grid_store(tmp_path / "all.duckdb") as st:
        want = st.prompt_scores()
        vr = st.variants()
        d = st.deltas(kept_only=False)
        runs, prompts = st.runs(), st.prompts()
    cols = ["run_id", "dataset", "prompt_id", "variant_id", "axis", "delta", "delta_norm", "available", "reason",
            "detector"]
    parts = []
    for k, run in enumerate(("ra", "rb")):
        p = tmp_path / f"s{k}.duckdb"
        with open_store(p, read_only=False, create=True) as st:
            st.insert_df("runs", runs[runs["run_id"] == run][["run_id", "model", "backend"]])
            st.insert_df("prompts", prompts[["prompt_id", "dataset", "text"]])
            st.insert_df("variants", vr.assign(meta=vr["meta"].astype(str)))
            st.insert_df("deltas", d[d["run_id"] == run][cols])
        parts.append(p)
    merge_stores(tmp_path / "m.duckdb", parts)
    with open_store(tmp_path / "m.duckdb") as st:
        assert st.stats_materialised
        pd.testing.assert_frame_equal(st.prompt_scores(), want, check_exact=False, rtol=1e-12)


def test_duplicate_keys_and_unit_keys(store):
    assert store.duplicate_keys() == {t: 0 for t in TABLES}
    store.insert_df("units", pd.DataFrame([{"run_id": "r1", "prompt_id": "d1:1", "n_variants": 2}]))
    assert store.unit_keys() == {("r1", "d1:1")}


def test_resume_under_other_numerics_is_recorded(tmp_path):
    """A resumed run keeps its first record, but a resume under another linear kernel / thread
    count / library version (none of which changes the run id) is listed in decoding.resumed_with."""
    import datetime as dt

    rec = {"run_id": "r1", "model": "m", "backend": "hf_local", "status": "running",
           "decoding": {"greedy": True, "max_new_tokens": 8, "linear_kernel": "onednn", "threads": 2},
           "versions": {"torch": "2.13.0", "sago": "0.1"}, "started_at": dt.datetime(2026, 12, 1, 8, 0)}
    with open_store(tmp_path / "s.duckdb", read_only=False, create=True) as st:
        st.upsert_run(rec)
        st.upsert_run({**rec, "started_at": dt.datetime(2026, 12, 1, 9, 0)})  # same numerics: nothing added
        assert "resumed_with" not in json.loads(st.runs().loc[0, "decoding"])
        st.upsert_run({**rec, "decoding": {**rec["decoding"], "linear_kernel": "torch"},
                       "versions": {"torch": "2.14.0", "sago": "0.1"}, "started_at": dt.datetime(2026, 12, 1, 10, 0)})
        st.upsert_run({"run_id": "r1", "status": "complete", "finished_at": dt.datetime(2026, 12, 1, 11, 0)})
        dec = json.loads(st.runs().loc[0, "decoding"])
    assert dec["linear_kernel"] == "onednn"  # the first record stays
    assert dec["resumed_with"] == [{"started_at": "2026-12-01 10:00:00", "decoding": {"linear_kernel": "torch"},
                                    "versions": {"torch": "2.14.0"}}]


def test_resume_without_a_watched_setting_is_recorded(tmp_path):
    """A setting the first record had and the resume's lacks (packing turned off: the key is left
    out) is a change to None; one the resume adds is a change too."""
    import datetime as dt

    packed = {"rows": 112, "mkl": True, "onednn": True, "bytes": 1}
    rec = {"run_id": "r1", "model": "m", "backend": "hf_local", "status": "running",
           "decoding": {"greedy": True, "linear_kernel": "onednn", "packed_weights": packed},
           "versions": {"torch": "2.13.0"}, "started_at": dt.datetime(2026, 12, 1, 8, 0)}
    with open_store(tmp_path / "s.duckdb", read_only=False, create=True) as st:
        st.upsert_run(rec)
        off = {k: v for k, v in rec["decoding"].items() if k != "packed_weights"}
        st.upsert_run({**rec, "decoding": off, "started_at": dt.datetime(2026, 12, 1, 9, 0)})
        st.upsert_run({**rec, "decoding": {**off, "threads": 2}, "started_at": dt.datetime(2026, 12, 1, 10, 0)})
        dec = json.loads(st.runs().loc[0, "decoding"])
    assert dec["packed_weights"] == packed
    assert dec["resumed_with"] == [
        {"started_at": "2026-12-01 09:00:00", "decoding": {"packed_weights": None}, "versions": {}},
        {"started_at": "2026-12-01 10:00:00", "decoding": {"packed_weights": None, "threads": 2}, "versions": {}}]
