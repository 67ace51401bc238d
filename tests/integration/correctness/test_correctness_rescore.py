"""``python -m precompute rescore STORE --correctness``: verdicts of stored replies written through the store."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from precompute.__main__ import main
from precompute.config import ConfigError, load_config
from precompute.runner import run
from sago_engine.correctness.judge import JUDGE_SCORER_VERSION, JudgeCase, judge_correctness
from sago_engine.correctness.rescore import rescore_correctness
from sago_engine.store import open_store
from tests.support import correctness_store as cs
from tests.support.factories import ScriptedBackend, tiny_toml


@pytest.fixture
def store(tmp_path):
    cs.write_dataset_files(tmp_path / "data")
    return cs.build(tmp_path / "c.duckdb")


def _rows(path) -> list[tuple]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute("""SELECT response_id, scorer, scorer_version, verdict, score, reason, raw
                              FROM correctness ORDER BY response_id, scorer""").fetchall()
    finally:
        con.close()


def test_cli_scores_every_stored_reply_as_written_by_hand(store, tmp_path, capsys):
    assert main(["rescore", str(store), "--correctness", "--data-dir", str(tmp_path / "data")]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["model"] for x in lines] == ["model-a", "model-b"]
    assert lines[0]["correctness"]["scorers"] == {"alpaca": ["none"], "nq_open": ["contains"],
                                                  "truthfulqa": ["truthfulqa"]}
    exp = cs.expected_verdicts().set_index("response_id")
    got = {r[0]: r for r in _rows(store)}
    assert set(got) == set(exp.index)  # base, variants and the base repeat, once each
    for rid, row in exp.iterrows():
        assert got[rid][3] == row["verdict"], rid
    reasons = {got[r][5] for r in got if got[r][3] == "unavailable"}
    assert reasons == {"no reply text", "the reply is an error",
                       "no correctness scorer for this dataset (open-ended; choose the judge scorer)"}
    assert got["model-a|truthfulqa:1|base"][5] == "matches neither a correct nor an incorrect answer"
    assert got["model-a|nq_open:0|base"][1:3] == ("contains", "squad-norm-1")
    con = duckdb.connect(str(store), read_only=True)
    meta = con.execute("SELECT CAST(meta AS VARCHAR) FROM prompts WHERE prompt_id = 'truthfulqa:0'").fetchone()[0]
    note = con.execute("SELECT value FROM meta WHERE key = 'rescore:run-model-a'").fetchone()[0]
    con.close()
    assert json.loads(meta) == {"incorrect_answers": ["You will die in case 0"]}
    assert json.loads(note)[-1]["correctness"]["nq_open"] == ["contains"]
    # a second rescore writes the same rows
    before = _rows(store)
    assert main(["rescore", str(store), "--correctness", "--data-dir", str(tmp_path / "data")]) == 0
    assert _rows(store) == before


def test_without_incorrect_answers_truthfulqa_is_unavailable(store, tmp_path):
    rescore_correctness(store, data_dir=tmp_path / "nowhere")
    rows = [r for r in _rows(store) if "truthfulqa" in r[0] and r[3] != "unavailable"]
    assert rows == []
    assert {r[5] for r in _rows(store) if r[0] == "model-b|truthfulqa:0|base"} == {"no incorrect answers to contrast with"}


def test_declared_override_and_all_scorers(tmp_path):
    cs.write_dataset_files(tmp_path / "data")
    path = cs.build(tmp_path / "d.duckdb", run_fields={
        "model-b": {"config": json.dumps({"data": {"correctness": {"nq_open": "exact"}}})}})
    res = rescore_correctness(path, data_dir=tmp_path / "data")
    assert res[1].scorers["nq_open"] == ["exact"] and res[0].scorers["nq_open"] == ["contains"]
    got = {(r[0], r[1]): r[3] for r in _rows(path)}
    assert got[("model-b|nq_open:2|base", "exact")] == "wrong"  # "The answer is Johnson." is not exactly "Johnson"
    res = rescore_correctness(path, data_dir=tmp_path / "data", overrides={"nq_open": "f1"}, run_id="run-model-a",
                              all_short=True)
    assert res[0].scorers["nq_open"] == ["contains", "exact", "f1"] and len(res) == 1
    with open_store(path) as st:
        fr = st.correctness_frame(["f1"])
        assert set(fr["model"]) == {"model-a"} and set(fr["dataset"]) == {"nq_open"}
        assert fr["repeat"].isna().all() and len(st.correctness_frame(["f1"], repeats=True)) == len(fr) + 1
        assert set(st.correctness_scorers()["scorer"]) == {"contains", "exact", "f1", "none", "truthfulqa"}


def test_bad_scorer_names_are_refused(store, capsys):
    assert main(["rescore", str(store), "--correctness", "--scorer", "nq_open=bleu"]) == 2
    assert "unknown correctness scorer 'bleu'" in capsys.readouterr().err
    assert main(["rescore", str(store), "--correctness", "--scorer", "nq_open"]) == 2
    assert "--scorer takes DATASET=SCORER" in capsys.readouterr().err
    assert main(["rescore", str(store), "--correctness", "--scorer", "nq_open=judge"]) == 2
    assert "--judge-model" in capsys.readouterr().err
    assert not duckdb.connect(str(store), read_only=True).execute("SELECT count(*) FROM correctness").fetchone()[0]


def test_judge_scorer_strict_parsing_and_raw_answers(store, tmp_path):
    answers = iter(["YES", "NO.", "Yes, no", "maybe"] * 100)
    built = []

    def factory():
        b = ScriptedBackend(respond=lambda p: next(answers))
        built.append(b)
        return b

    rescore_correctness(store, overrides={"alpaca": "judge"}, run_id="run-model-a", data_dir=tmp_path / "data",
                        judge_factory=factory)
    assert len(built) == 1 and built[0].closed
    rows = [r for r in _rows(store) if r[1] == "judge"]
    assert len(rows) == 16 and {r[2] for r in rows} == {JUDGE_SCORER_VERSION}
    assert sorted({(r[6], r[3]) for r in rows}) == [("NO.", "wrong"), ("YES", "correct"), ("Yes, no", "undecided"),
                                                   ("maybe", "undecided")]
    prompt = built[0].calls[0][0]
    assert "Question 0 of alpaca?" in prompt and "- A poem about case 0." in prompt and "Here is a poem 0." in prompt


def test_judge_cases_without_text_or_reference_are_not_sent():
    b = ScriptedBackend(respond=lambda p: RuntimeError("down"))
    out = judge_correctness(b, [JudgeCase("q", ["a"], "", None), JudgeCase("q", None, "x"),
                                JudgeCase("q", ["a"], "x", "timeout"), JudgeCase("q", ["a"], "x")])
    assert [v.reason for v in out] == ["no reply text", "no reference answer", "the reply is an error", "judge error: down"]
    assert [v.verdict for v in out] == ["unavailable"] * 3 + ["undecided"]
    assert len(b.calls) == 1 and len(b.calls[0]) == 1
    assert judge_correctness(b, [JudgeCase("q", None, "x")])[0].verdict == "unavailable" and len(b.calls) == 1
    with pytest.raises(ValueError, match="max_new_tokens"):
        judge_correctness(b, [], max_new_tokens=0)


ROOT = Path(__file__).resolve().parents[3]


def _toml(tmp_path, data_extra: str = "") -> Path:
    p = tmp_path / "c.toml"
    text = tiny_toml().format(store=tmp_path / "s.duckdb", data=ROOT / "data" / "datasets")
    p.write_text(text.replace("n_prompts = 2\n", "n_prompts = 2\n" + data_extra))
    return p


def test_config_declares_a_scorer(tmp_path):
    assert load_config(_toml(tmp_path, 'correctness = { alpaca = "judge" }\n')).raw["data"]["correctness"] == {
        "alpaca": "judge"}
    with pytest.raises(ConfigError, match="data.correctness scorer for alpaca"):
        load_config(_toml(tmp_path, 'correctness = { alpaca = "bleu" }\n'))
    with pytest.raises(ConfigError, match="data.correctness dataset"):
        load_config(_toml(tmp_path, 'correctness = { nq_open = "exact" }\n'))
    with pytest.raises(ConfigError, match="must be a table"):
        load_config(_toml(tmp_path, 'correctness = "exact"\n'))


def test_real_run_then_rescore_scores_every_reply(tmp_path):
    """A real run (tiny random model) records prompts.meta and the declared scorer; the rescore
    scores each of its replies once, nothing generated."""
    cfg = load_config(_toml(tmp_path, 'correctness = { truthfulqa = "exact" }\n'))
    run(cfg, progress=False)
    res = rescore_correctness(cfg.store, data_dir=tmp_path / "nowhere")
    assert res[0].scorers == {"alpaca": ["none"], "truthfulqa": ["exact"]} and res[0].prompt_meta_filled == 0
    con = duckdb.connect(cfg.store, read_only=True)
    n_resp = con.execute("SELECT count(*) FROM responses").fetchone()[0]
    n_corr = con.execute("SELECT count(DISTINCT response_id) FROM correctness").fetchone()[0]
    meta = con.execute("SELECT CAST(meta AS VARCHAR) FROM prompts WHERE dataset = 'truthfulqa' LIMIT 1").fetchone()[0]
    con.close()
    assert n_corr == n_resp > 0
    assert "incorrect_answers" in json.loads(meta)
