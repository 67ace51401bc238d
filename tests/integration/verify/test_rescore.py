"""``python -m precompute rescore``: a stored run's text axes recomputed from its stored replies under the
current rules, replacing only the rows whose availability changes, idempotent, nothing else moved."""

from __future__ import annotations

import json
import shutil

import duckdb
import numpy as np
import pandas as pd
import pytest

from precompute.__main__ import main as cli_main
from sago_engine.store import open_store
from sago_engine.store.catalog import DEMO_STORE
from sago_engine.store.suffstats import materialise
from sago_engine.verify.rescore import rescore_run, rescore_store
from tests.support.factories import add_option_axes, make_store

OLD_REASON = "no visible reply (variant): token budget spent with no visible text"
API_REASON = ("no visible reply (variant): token budget spent with no visible text (30 hidden reasoning tokens): "
              "raise max_new_tokens or set thinking_budget / reasoning_effort")
TEXT = ("bleu", "bert", "mr", "bert@rescaled")
ALL_AXES = ("cos", "bleu", "bert", "prob", "ent", "mr", "bert@rescaled", "cos@user_last", "cos@user_mean",
            "cos@last_blocks", "cos@user_last_blocks", "cos@user_mean_blocks")
B = 0.12


def _old_rule(con: duckdb.DuckDBPyConnection, keys: list[tuple[str, str]], reason: str = OLD_REASON) -> None:
    """Store the text-axis rows of ``keys`` (run_id, variant_id) as the older rule did: unavailable."""
    for run_id, vid in keys:
        con.execute("UPDATE deltas SET delta = NULL, delta_norm = NULL, available = FALSE, reason = ?, detector = NULL "
                    "WHERE run_id = ? AND variant_id = ? AND list_contains(?, axis)", [reason, run_id, vid, list(TEXT)])
    materialise(con)


def _deltas(path) -> pd.DataFrame:
    with open_store(path) as st:
        d = st.deltas(kept_only=False, axes=[a for a in ALL_AXES if a in st.axis_names() or a in TEXT])
    for c in ("reason", "detector"):  # an all-NULL column reads as object, another as str: compare values
        d[c] = d[c].astype(object).where(d[c].notna(), None)
    return d.sort_values(["run_id", "variant_id", "axis"]).reset_index(drop=True)


def _stats(path) -> dict[str, pd.DataFrame]:
    with open_store(path) as st:
        names = tuple(st.axis_names())
        return {"prompt": st.prompt_stats(axes=names).sort_values(["run_id", "prompt_id", "axis"]).reset_index(drop=True),
                "total": st.view("sgs_total", axes=names)}


def _fresh_stats(path, tmp_path) -> dict[str, pd.DataFrame]:
    """The statistics of ``path`` rebuilt from its deltas from scratch (on a copy)."""
    copy = tmp_path / "fresh.duckdb"
    shutil.copyfile(path, copy)
    with open_store(copy, read_only=False) as st:
        materialise(st.con)
    return _stats(copy)


@pytest.fixture
def small(tmp_path):
    """A ``make_store`` store whose run-model-a has replies: prompt truthfulqa:0's surface-noise variant answered
    with tabs and newlines and its social-register variant with spaces (a judge said it mirrors), both stored
    under the older rule; truthfulqa:1's variant v1 a blank reply after 30 hidden reasoning tokens."""
    cfg = json.dumps({"axis_options": {"axes": ["bert@rescaled"], "bert_rescaled_baseline": B}})
    path = make_store(tmp_path / "s.duckdb", run_fields={"model-a": {"config": cfg}})
    add_option_axes(path, options={"bert": ("rescaled",)})
    with open_store(path, read_only=False) as st:
        rows = []
        for pid in ("truthfulqa:0", "truthfulqa:1"):
            rows.append((pid, None, "The capital of France is Paris.", "stop"))
            for j in range(3):
                rows.append((pid, f"{pid}/v{j}", "Paris is the capital of France.", "stop"))
        texts = {"truthfulqa:0/v1": ("\t \n  \t", "length"), "truthfulqa:0/v0": ("   \n", "length"),
                 "truthfulqa:1/v1": ("\n", "length")}
        rows = [(p, v, *texts.get(v, (t, f))) for p, v, t, f in rows]
        st.insert_df("responses", pd.DataFrame([{"response_id": f"x{k}", "run_id": "run-model-a", "prompt_id": p,
                                                 "variant_id": v, "response": t, "finish_reason": f}
                                                for k, (p, v, t, f) in enumerate(rows)]))
        api_row = next(k for k, r in enumerate(rows) if r[1] == "truthfulqa:1/v1")
        st.insert_df("api_responses", pd.DataFrame([{"response_id": f"x{api_row}", "run_id": "run-model-a",
                                                     "reasoning_tokens": 30}]))
        st.insert_df("mirroring_verdicts", pd.DataFrame([
            {"run_id": "run-model-a", "variant_id": "truthfulqa:0/v0", "prompt_id": "truthfulqa:0", "response_of": of,
             "judge_model": "j", "template_id": "t", "verdict": v, "raw": "YES" if v else "NO", "error": None,
             "heuristic_verdict": 0, "detector": "judge:j"} for of, v in (("variant", 1), ("base", 0))]))
        _old_rule(st.con, [("run-model-a", "truthfulqa:0/v1"), ("run-model-a", "truthfulqa:0/v0")])
        _old_rule(st.con, [("run-model-a", "truthfulqa:1/v1")], API_REASON)
    return path


def test_rescore_scores_whitespace_replies_and_changes_nothing_else(small, tmp_path):
    before, stats_before = _deltas(small), _stats(small)
    [a, b] = rescore_store(small)
    assert (a.run_id, a.rows_replaced, a.became_available, a.became_unavailable) == ("run-model-a", 8, 8, 0)
    assert a.per_axis == {ax: 2 for ax in sorted(TEXT)}
    assert (a.variants_scored, a.variants_without_replies) == (2, 18)
    assert b.rows_replaced == 0 and b.variants_without_replies == 24  # no replies stored: left as they are
    after = _deltas(small)
    key = ["run_id", "variant_id", "axis"]
    changed = after.set_index(key).compare(before.set_index(key)).index
    assert sorted({(r, v) for r, v, _ in changed}) == [("run-model-a", "truthfulqa:0/v0"),
                                                       ("run-model-a", "truthfulqa:0/v1")]
    ws = after[(after.run_id == "run-model-a") & (after.variant_id == "truthfulqa:0/v1")].set_index("axis")
    assert ws.loc[list(TEXT), "available"].all() and ws.loc[list(TEXT), "reason"].isna().all()
    assert ws.loc["bleu", "delta"] == -100.0 and ws.loc["bert", "delta"] == -1.0 and ws.loc["mr", "delta"] == 0.0
    assert ws.loc["bert@rescaled", "delta"] == pytest.approx(-1 / (1 - B)) and ws.loc["bert@rescaled", "delta_norm"] == -1.0
    judged = after[(after.run_id == "run-model-a") & (after.variant_id == "truthfulqa:0/v0")].set_index("axis")
    assert (judged.loc["mr", "delta"], judged.loc["mr", "detector"]) == (1.0, "judge:j")  # the run's verdicts
    api = after[(after.run_id == "run-model-a") & (after.variant_id == "truthfulqa:1/v1")].set_index("axis")
    assert not api.loc[list(TEXT), "available"].any() and (api.loc[list(TEXT), "reason"] == API_REASON).all()
    # the statistics tables are those of the new deltas; scores moved only for the rescored prompt
    stats_after = _stats(small)
    fresh = _fresh_stats(small, tmp_path)
    for k in stats_after:
        pd.testing.assert_frame_equal(stats_after[k], fresh[k])
    moved = stats_after["prompt"].merge(stats_before["prompt"], how="outer", indicator=True)
    assert set(moved.loc[moved["_merge"] != "both", "prompt_id"]) == {"truthfulqa:0"}
    with open_store(small) as st:
        [note] = st.rescore_records("run-model-a")
        assert (note["rows_replaced"], note["mode"]) == (8, "availability") and note["at"]
        assert st.rescore_records("run-model-b") == []


def test_rescore_is_idempotent_also_with_all(small):
    def meta():
        with open_store(small) as st:
            return st.meta()

    rescore_store(small)
    once, meta_once = _deltas(small), meta()
    assert [r.rows_replaced for r in rescore_store(small)] == [0, 0]
    pd.testing.assert_frame_equal(_deltas(small), once)
    assert meta() == meta_once
    # --all puts the text rows of the three other answered variants (the factory's random values) on the
    # recomputed ones; the two rescored variants already are, the API reply stays unavailable as stored
    [a, _] = rescore_store(small, all_rows=True)
    assert (a.rows_replaced, a.became_available, a.variants_scored) == (3 * len(TEXT), 3 * len(TEXT), 6)
    again = _deltas(small)
    assert [r.rows_replaced for r in rescore_store(small, all_rows=True)] == [0, 0]
    pd.testing.assert_frame_equal(_deltas(small), again)


def test_rescore_cli(small, capsys):
    assert cli_main(["rescore", str(small), "--run", "run-model-a"]) == 0
    [line] = capsys.readouterr().out.strip().splitlines()
    assert json.loads(line)["rows_replaced"] == 8
    assert cli_main(["rescore", str(small), "--run", "nope"]) == 2
    assert "no run 'nope'" in capsys.readouterr().err


def test_rescore_needs_the_recorded_baseline(tmp_path):
    path = make_store(tmp_path / "nb.duckdb", run_fields={"model-a": {"config": json.dumps(
        {"axis_options": {"axes": ["bert@rescaled"]}})}})
    add_option_axes(path, options={"bert": ("rescaled",)})
    with open_store(path, read_only=False) as st, pytest.raises(ValueError, match="bert_rescaled_baseline"):
        rescore_run(st, "run-model-a")


def _blank_length_variants(path) -> list[tuple[str, str]]:
    with open_store(path) as st:
        keys = []
        for run_id in st.runs()["run_id"]:
            r = st.stored_replies(run_id)
            blank = r[r["variant_id"].notna() & (r["finish_reason"] == "length") & (r["response"].str.strip() == "")]
            keys += [(run_id, v) for v in blank["variant_id"]]
    return keys


def test_demo_store_rescore_from_the_older_rule_rebuilds_it_exactly(tmp_path):
    # the bundled store under the older rule (blank replies cut by the budget unavailable), rescored
    copy = tmp_path / "demo.duckdb"
    shutil.copyfile(DEMO_STORE, copy)
    keys = _blank_length_variants(copy)
    assert len(keys) == 40  # all gemma-3-270m's (one run)
    with open_store(copy, read_only=False) as st:
        _old_rule(st.con, keys)
    old = _deltas(copy)
    [res] = rescore_store(copy, run_id=keys[0][0])
    assert (res.rows_replaced, res.became_available) == (4 * 40, 4 * 40)
    new = _deltas(copy)
    hit = pd.MultiIndex.from_tuples(keys, names=["run_id", "variant_id"])
    outside_old = old[~old.set_index(["run_id", "variant_id"]).index.isin(hit)]
    outside_new = new[~new.set_index(["run_id", "variant_id"]).index.isin(hit)]
    pd.testing.assert_frame_equal(outside_new, outside_old, check_dtype=False)  # every other stored row as it was
    pd.testing.assert_frame_equal(new, _deltas(DEMO_STORE), check_dtype=False)  # and the result is the bundled store
    committed = _stats(DEMO_STORE)
    for k, v in _stats(copy).items():
        pd.testing.assert_frame_equal(v, committed[k])
    assert np.isfinite(new.loc[new["available"], "delta"].to_numpy(dtype=float)).all()


def _sample_deltas(path) -> pd.DataFrame:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute("SELECT * FROM sample_deltas ORDER BY run_id, response_id, axis").df()


def test_rescore_recomputes_a_sampled_runs_sample_deltas_from_its_stored_samples(tiny_sampled_store, tmp_path, capsys):
    path = tmp_path / "sampled.duckdb"
    shutil.copy(tiny_sampled_store, path)
    before = _sample_deltas(path)
    assert (before["variant_id"].isna() & (before["axis"] == "bleu") & before["available"]).any()
    assert rescore_store(path, all_rows=True)[0].sample_rows_replaced == 0  # the run's own function: same rows
    assert cli_main(["rescore", str(path)]) == 0 and '"sample_rows_replaced": 0' in capsys.readouterr().out
    base_bleu = before[before["variant_id"].isna() & (before["axis"] == "bleu") & before["available"]].iloc[0]
    var_bert = before[before["variant_id"].notna() & (before["axis"] == "bert") & before["available"]].iloc[0]
    with duckdb.connect(str(path)) as con:  # one row stored as an older rule left it, one with another Δ
        con.execute("UPDATE sample_deltas SET delta = NULL, delta_norm = NULL, available = FALSE, reason = 'old' "
                    "WHERE response_id = ? AND axis = 'bleu'", [base_bleu["response_id"]])
        con.execute("UPDATE sample_deltas SET delta = delta - 0.25, delta_norm = delta_norm - 0.25 "
                    "WHERE response_id = ? AND axis = 'bert'", [var_bert["response_id"]])
    got = rescore_store(path)[0]  # availability mode: only the row whose availability differs
    assert (got.sample_rows_replaced, got.sample_per_axis) == (1, {"bleu": 1})
    got = rescore_store(path, all_rows=True)[0]
    assert (got.sample_rows_replaced, got.sample_per_axis) == (1, {"bert": 1})
    pd.testing.assert_frame_equal(_sample_deltas(path), before)
    assert rescore_store(path, all_rows=True)[0].sample_rows_replaced == 0  # a second rescore changes nothing
    with open_store(path) as st:
        notes = st.rescore_records(got.run_id)
    assert [n["sample_rows_replaced"] for n in notes] == [1, 1]
