"""A user's dataset that declares no correctness scorer: the rescore CLI and the Right or wrong page name it and
the fix, instead of leaving every verdict unavailable without a word."""

from __future__ import annotations

import json

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from precompute.__main__ import main
from tests.support import correctness_store as cs
from tests.support.apptest import open_page


def _right_or_wrong(store) -> AppTest:
    at = open_page(store, "correctness")
    assert not at.exception, at.exception
    return at


@pytest.fixture
def own_store(tmp_path):
    """The correctness test store with only its open-ended prompts, renamed to a user's dataset ``esc``."""
    path = cs.build(tmp_path / "c.duckdb")
    con = duckdb.connect(str(path))
    try:
        tables = {r[0] for r in con.execute("SHOW TABLES").fetchall()}
        ids = [r[0] for r in con.execute("SELECT prompt_id FROM prompts WHERE dataset <> 'alpaca'").fetchall()]
        for t in ("responses", "base_repeats", "variants", "deltas", "prompts"):
            if t in tables and "prompt_id" in {r[0] for r in con.execute(f"DESCRIBE {t}").fetchall()}:
                con.execute(f"DELETE FROM {t} WHERE prompt_id IN (SELECT unnest(?))", [ids])
        for (t,) in con.execute("SELECT table_name FROM information_schema.columns WHERE column_name = 'dataset'"
                                ).fetchall():
            if t in tables:
                con.execute(f"UPDATE {t} SET dataset = 'esc' WHERE dataset = 'alpaca'")
    finally:
        con.close()
    return path


def test_cli_names_the_dataset_without_a_scorer_and_the_fix(own_store, capsys):
    assert main(["rescore", str(own_store), "--correctness"]) == 0
    out = capsys.readouterr()
    lines = [json.loads(x) for x in out.out.splitlines()]
    assert lines and all(x["correctness"]["scorers"] == {"esc": ["none"]} for x in lines)
    assert set(lines[0]["correctness"]["verdicts"]) == {"unavailable"}
    hints = [x for x in out.err.splitlines() if x.startswith("hint:")]
    assert len(hints) == 1  # once per dataset, not once per run
    assert "dataset esc has no correctness scorer" in hints[0]
    assert "--scorer esc=contains" in hints[0] and '[data] correctness = { esc = "contains" }' in hints[0]
    # with the fix the hint is gone
    assert main(["rescore", str(own_store), "--correctness", "--scorer", "esc=contains"]) == 0
    assert "hint:" not in capsys.readouterr().err


def test_cli_gives_no_hint_for_open_ended_builtin_datasets(tmp_path, capsys):
    cs.write_dataset_files(tmp_path / "data")
    store = cs.build(tmp_path / "c.duckdb")
    assert main(["rescore", str(store), "--correctness", "--data-dir", str(tmp_path / "data")]) == 0
    assert "hint:" not in capsys.readouterr().err  # alpaca is open-ended by design


def test_right_or_wrong_page_names_the_fix(own_store):
    assert main(["rescore", str(own_store), "--correctness"]) == 0
    at = _right_or_wrong(own_store)
    text = " ".join(w.value.replace("\\", "") for w in at.warning)
    assert "dataset esc has no correctness scorer" in text
    assert "--scorer esc=contains" in text and '[data] correctness = { esc = "contains" }' in text


def test_right_or_wrong_page_prints_the_accuracy_caption_once(tmp_path):
    from dashboard.accuracy import CAPTION

    cs.write_dataset_files(tmp_path / "data")
    store = cs.build(tmp_path / "c.duckdb")
    assert main(["rescore", str(store), "--correctness", "--data-dir", str(tmp_path / "data")]) == 0
    at = _right_or_wrong(store)
    assert len(at.get("dataframe")) >= 2  # the per-model table and the breakdown
    assert [c.value for c in at.caption].count(CAPTION) == 1


def test_right_or_wrong_page_names_an_inspect_scorer_not_run_and_why(tmp_path):
    """A task's model-graded scorer, stored "not run" beside the dataset's own verdicts: the page lists it with its
    reason (and still reads the dataset's scorer that ran)."""
    from sago_engine.correctness import inspect_scorers as isc
    from sago_engine.store import open_store

    cs.write_dataset_files(tmp_path / "data")
    store = cs.build(tmp_path / "c.duckdb")
    assert main(["rescore", str(store), "--correctness", "--data-dir", str(tmp_path / "data")]) == 0
    [graded] = isc.plan_scorers([{"name": "inspect_ai/model_graded_qa", "params": {}}])
    with open_store(store, read_only=False) as st:
        replies = st.replies_to_score()
        st.write_correctness(isc.score_rows(replies[replies["dataset"] == "nq_open"], graded))
        assert list(st.scorers_not_run()["scorer"]) == ["none", "inspect:model_graded_qa"]  # alpaca's, nq_open's
    at = _right_or_wrong(store)
    text = " ".join(w.value.replace("\\", "") for w in at.warning)
    assert "nq_open inspect:model_graded_qa — model-graded: it asks a grader model" in text
    assert "alpaca" not in text  # open-ended by design, no Inspect scorer: not listed as "not run"
    assert len(at.get("dataframe")) >= 2  # the page goes on with nq_open's contains verdicts
