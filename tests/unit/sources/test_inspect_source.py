"""An Inspect task as a prompt source ([[data.sources]] inspect = "tasks.py@task"): its samples' input as the
prompt, target as the reference, its scorer's name recorded; chat inputs with other roles and missing files
or tasks refused with the sample or file named. inspect-ai is pinned in requirements.txt (scripts/setup.sh
installs it into .venv, so CI runs these tests); skipped, saying so, only in an environment without it."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("inspect_ai", reason="inspect-ai is not installed here: bash scripts/setup.sh installs "
                    "requirements.txt (or pip install 'sago[inspect]')")

from sago_engine.datasets import DatasetError  # noqa: E402
from sago_engine.sources import load_source  # noqa: E402

TASKS = '''
from inspect_ai import Task, task
from inspect_ai.dataset import FieldSpec, MemoryDataset, Sample, json_dataset
from inspect_ai.model import ChatMessageSystem, ChatMessageUser
from inspect_ai.scorer import CORRECT, Score, accuracy, includes, match, model_graded_qa, scorer
from inspect_ai.solver import generate


@scorer(metrics=[accuracy()])
def always_right():
    async def score(state, target):
        return Score(value=CORRECT)
    return score


@task
def arithmetic():
    return Task(dataset=MemoryDataset([
        Sample(input="What is 2+2?", target="4", id="a", metadata={"topic": "math"}),
        Sample(input="Capital of France?", target=["Paris", "paris"], id="b", metadata={"topic": "geo"}),
        Sample(input="Pick the even number.", choices=["3", "8"], target="B", id="c", metadata={"topic": "math"}),
    ]), solver=generate(), scorer=match())


@task
def graded():
    return Task(dataset=arithmetic().dataset, scorer=[match(location="any"), model_graded_qa(), always_right()])


@task
def from_file():
    return Task(dataset=json_dataset("qa.jsonl", FieldSpec(input="question", target="answer", id="qid")),
                scorer=includes())


@task
def with_system():
    return Task(dataset=MemoryDataset([
        Sample(input="fine"),
        Sample(input=[ChatMessageSystem(content="be terse"), ChatMessageUser(content="hi")]),
    ]))
'''


@pytest.fixture()
def tasks(tmp_path):
    (tmp_path / "tasks.py").write_text(TASKS, encoding="utf-8")
    (tmp_path / "qa.jsonl").write_text('{"qid": "q1", "question": "Why is the sky blue?", "answer": "Rayleigh"}\n',
                                       encoding="utf-8")
    return tmp_path


def test_samples_become_prompts_and_the_scorer_is_recorded(tasks):
    prompts, rec = load_source({"name": "arith", "inspect": "tasks.py@arithmetic", "category": "topic"}, tasks)
    assert [(p.prompt_id, p.text, p.reference, p.category) for p in prompts] == [
        ("arith:a", "What is 2+2?", "4", "math"), ("arith:b", "Capital of France?", ["Paris", "paris"], "geo"),
        ("arith:c", "Pick the even number.\n\nA) 3\nB) 8", "B", "math")]
    assert rec["task"] == "arithmetic" and rec["samples"] == 3 and rec["leaves"] == ["solver", "tools", "sandbox"]
    assert [s.rsplit("/", 1)[-1] for s in rec["scorers"]] == ["match"]
    json.dumps(rec)  # stored in the run record


def test_a_task_reading_its_own_data_file(tasks, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("cwd")
    prompts, rec = load_source({"name": "ff", "inspect": str(tasks / "tasks.py") + "@from_file"}, elsewhere)
    assert [(p.source_id, p.text, p.reference) for p in prompts] == [("q1", "Why is the sky blue?", "Rayleigh")]
    assert [s.rsplit("/", 1)[-1] for s in rec["scorers"]] == ["includes"]


def test_chat_input_with_a_system_message_is_named(tasks):
    with pytest.raises(DatasetError, match=r"tasks.py@with_system sample:2: chat input with system messages"):
        load_source({"name": "s", "inspect": "tasks.py@with_system"}, tasks)


def test_missing_file_and_task_are_named(tasks):
    with pytest.raises(DatasetError, match=r"nope.py: no such task file"):
        load_source({"name": "s", "inspect": "nope.py@x"}, tasks)
    with pytest.raises(DatasetError, match=r"no task 'arithmetc'"):
        load_source({"name": "s", "inspect": "tasks.py@arithmetc"}, tasks)


def test_a_run_on_an_inspect_task(tasks):
    """`run` end to end (tiny random model) on the task: its samples stored as prompts, the task recorded, its
    offline scorer (match) run by inspect_ai on every stored reply, the model-graded and the custom scorer
    stored "not run" with the reason, in the summary, its closing lines and the store; a rescore agrees."""
    import asyncio

    from inspect_ai.model import ModelOutput
    from inspect_ai.scorer import Target, match
    from inspect_ai.solver import TaskState

    from precompute.closing import correctness_lines
    from precompute.config import load_config
    from precompute.runner import run
    from sago_engine.correctness.rescore import rescore_correctness
    from sago_engine.store import open_store

    (tasks / "c.toml").write_text(f"""
[run]
store = "{tasks / 's.duckdb'}"
max_new_tokens = 4
[[data.sources]]
inspect = "tasks.py@graded"
[variants]
families = ["social_register"]
per_family = {{ social_register = 1 }}
[semantic_filter]
enabled = false
[[models]]
key = "tiny-random"
""")
    cfg = load_config(tasks / "c.toml", base_dir=tasks)
    [summary] = run(cfg, progress=False)
    assert summary["status"] == "complete"
    with open_store(cfg.store) as st:
        p = st.prompts(["graded"]).sort_values("source_id")
        rec = json.loads(st.runs().loc[0, "config"])["data_sources"][0]
        replies = st.replies_to_score()
        rows = st.con.execute("SELECT * FROM correctness").df()  # the raw rows
        gone = st.scorers_not_run()
    assert list(p["source_id"]) == ["a", "b", "c"] and json.loads(p["reference"].iloc[1]) == ["Paris", "paris"]
    assert rec["task"] == "graded" and rec["scorers"][0].endswith("match")
    assert rec["scorer_specs"][0] == {"name": "inspect_ai/match", "params": {"location": "any"}}

    corr = summary["correctness"]
    assert corr["scorers"] == {"graded": ["inspect:match", "inspect:model_graded_qa", "inspect:always_right"]}
    assert set(corr["not_run"]["graded"]) == {"inspect:model_graded_qa", "inspect:always_right"}
    assert "grader model" in corr["not_run"]["graded"]["inspect:model_graded_qa"]
    assert "custom scorer" in corr["not_run"]["graded"]["inspect:always_right"]
    lines = "\n".join(correctness_lines(corr))
    assert "inspect:model_graded_qa not run: model-graded" in lines and "inspect:always_right not run" in lines
    assert list(gone["scorer"]) == ["inspect:always_right", "inspect:model_graded_qa"]

    match_rows = rows[rows["scorer"] == "inspect:match"].merge(
        replies[["response_id", "response", "error", "reference"]], on="response_id")
    assert len(match_rows) == len(replies) > 0
    assert set(match_rows["scorer_version"]) == {'inspect-ai==0.3.285 {"location": "any"}'}

    async def direct(reply, targets):  # inspect_ai's match, called as inspect does, on the stored reply
        state = TaskState(model="m/x", sample_id=0, epoch=1, input="q", messages=[], target=Target(targets),
                          output=ModelOutput.from_content("m/x", reply))
        return (await match(location="any")(state, Target(targets))).value
    for r in match_rows.itertuples():
        if r.error or not str(r.response or "").strip():
            assert r.verdict == "unavailable"
        else:
            want = asyncio.run(direct(r.response, json.loads(r.reference)))
            assert r.verdict == {"C": "correct", "I": "wrong"}[want], r
    assert (rows[rows["scorer"] != "inspect:match"]["reason"].str.startswith("not run: ")).all()

    [res] = rescore_correctness(cfg.store)
    assert res.scorers == corr["scorers"] and res.not_run == corr["not_run"] and res.by_scorer == corr["by_scorer"]


def _replies(*texts):
    import pandas as pd

    return pd.DataFrame([{"run_id": "r", "response_id": f"x{i}", "prompt_id": "p", "variant_id": None, "repeat": None,
                          "question": "What is 2+2?", "reference": json.dumps(ref), "response": text, "error": err}
                         for i, (text, ref, err) in enumerate(texts)])


def test_the_task_scorer_is_inspects_own_code():
    """match (location "end", its default) reads the end of the reply: "4 apples, not 5" is wrong under it though
    sago's own contains scorer calls it right; an error or a blank reply is unavailable, never wrong."""
    from sago_engine.correctness import inspect_scorers as isc
    from sago_engine.correctness.scorers import score

    [m] = isc.plan_scorers([{"name": "inspect_ai/match", "params": {}}])
    assert m.name == "inspect:match" and m.reason is None and m.version.startswith("inspect-ai==0.3.285")
    rows = isc.score_rows(_replies(("The answer is 4.", "4", None), ("4 apples, not 5", "4", None),
                                   ("x", "4", "timeout"), ("  ", "4", None), ("Paris!", ["London", "paris"], None)), m)
    assert list(rows["verdict"]) == ["correct", "wrong", "unavailable", "unavailable", "correct"]
    assert list(rows["reason"][2:4]) == ["the reply is an error", "no reply text"]
    assert score("contains", "4 apples, not 5", "4").verdict == "correct"


def test_a_scorer_that_cannot_run_is_named_with_its_reason():
    from sago_engine.correctness import inspect_scorers as isc

    plans = isc.plan_scorers([{"name": "inspect_ai/f1", "params": {"answer_fn": "<lambda>"}},
                              {"name": "inspect_ai/choice", "params": {}}, {"name": "inspect_ai/math", "params": {}},
                              {"name": "inspect_ai/f1", "params": {}}])
    assert [p.name for p in plans] == ["inspect:f1", "inspect:choice", "inspect:math", "inspect:f1#2"]
    assert "answer_fn is the task's own code" in plans[0].reason and "multiple_choice solver" in plans[1].reason
    assert "only inspect_ai's offline scorers" in plans[2].reason and plans[3].reason is None
    rows = isc.score_rows(_replies(("four", "4", None)), plans[0])
    assert rows.loc[0, "verdict"] == "unavailable" and rows.loc[0, "reason"] == plans[0].reason
    f1 = isc.score_rows(_replies(("the answer 4", "4", None), ("nothing here", "4", None)), plans[3])
    assert list(f1["verdict"]) == ["correct", "wrong"]


def test_the_pages_read_the_task_scorer_that_ran():
    """Among a dataset's Inspect scorers the pages read one sago ran, never one stored "not run" that sorts first."""
    from sago_engine.correctness.compare import pick_scorer

    assert pick_scorer("arith", {"inspect:always_right", "inspect:match", "inspect:model_graded_qa"}) == "inspect:match"
    assert pick_scorer("arith", {"inspect:f1#2", "inspect:choice"}) == "inspect:f1#2"
    assert pick_scorer("arith", {"inspect:match", "contains"}) == "contains"  # sago's own, when stored beside it
