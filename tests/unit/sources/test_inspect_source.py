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
from inspect_ai.scorer import includes, match
from inspect_ai.solver import generate


@task
def arithmetic():
    return Task(dataset=MemoryDataset([
        Sample(input="What is 2+2?", target="4", id="a", metadata={"topic": "math"}),
        Sample(input="Capital of France?", target=["Paris", "paris"], id="b", metadata={"topic": "geo"}),
        Sample(input="Pick the even number.", choices=["3", "8"], target="B", id="c", metadata={"topic": "math"}),
    ]), solver=generate(), scorer=match())


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
    """`run` end to end (tiny random model) on the task: its samples stored as prompts, the task recorded."""
    from precompute.config import load_config
    from precompute.runner import run
    from sago_engine.store import open_store

    (tasks / "c.toml").write_text(f"""
[run]
store = "{tasks / 's.duckdb'}"
max_new_tokens = 4
[[data.sources]]
inspect = "tasks.py@arithmetic"
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
        p = st.prompts(["arithmetic"]).sort_values("source_id")
        rec = json.loads(st.runs().loc[0, "config"])["data_sources"][0]
    assert list(p["source_id"]) == ["a", "b", "c"] and json.loads(p["reference"].iloc[1]) == ["Paris", "paris"]
    assert rec["task"] == "arithmetic" and rec["scorers"][-1].endswith("match")
