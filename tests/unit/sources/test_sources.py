"""Prompts from where users keep them (sago_engine.sources, [[data.sources]]): CSV, Parquet, JSONL with a
field mapping, Hugging Face save_to_disk folders and data files; every problem of a file at once, with
the file and the line or row; a missing file or folder named as missing."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from precompute.config import ConfigError, load_config
from precompute.data_config import check_data
from sago_engine.datasets import DatasetError
from sago_engine.sources import load_source

ROOT = Path(__file__).resolve().parents[3]


def _src(tmp_path, **spec):
    return load_source({"name": "mine", **spec}, tmp_path)


def _write_csv(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.write_bytes(text.encode(encoding))
    return path


# ---------------------------------------------------------------- CSV / Parquet / JSONL with a mapping
def test_csv_with_a_field_mapping_and_several_answers(tmp_path):
    _write_csv(tmp_path / "q.csv", 'qid,question,answers,topic\n'
                                   'a1,"What is the capital of France?",Paris|paris,geo\n'
                                   'a2,"Two lines,\nwith a comma",4|four,math\n')
    prompts, rec = _src(tmp_path, path="q.csv", prompt="question", reference="answers", reference_sep="|",
                        id="qid", category="topic")
    assert [(p.prompt_id, p.text, p.reference, p.category) for p in prompts] == [
        ("mine:a1", "What is the capital of France?", ["Paris", "paris"], "geo"),
        ("mine:a2", "Two lines,\nwith a comma", ["4", "four"], "math")]
    assert rec["format"] == "csv" and len(rec["sha256"]) == 64 and rec["selected_records"] == 2
    assert rec["fields"] == {"prompt": "question", "reference": "answers", "reference_sep": "|", "id": "qid",
                             "category": "topic"}


def test_csv_without_an_id_column_uses_line_numbers_and_rows_select(tmp_path):
    _write_csv(tmp_path / "q.tsv", "prompt\tanswer\nfirst\t1\nsecond\t2\nthird\t3\n")
    prompts, rec = _src(tmp_path, path="q.tsv", reference="answer", rows=[1, 3])
    assert [(p.source_id, p.text, p.reference) for p in prompts] == [("3", "second", "2"), ("4", "third", "3")]
    assert rec["rows"] == [1, 3]


def test_parquet_with_list_answers_and_several_reference_columns(tmp_path):
    pd.DataFrame({"id": [1, 2], "q": ["one?", "two?"], "gold": [["1", "one"], ["2"]], "alt": ["uno", None]}
                 ).to_parquet(tmp_path / "q.parquet")
    prompts, _ = _src(tmp_path, path="q.parquet", prompt="q", reference=["gold", "alt"])
    assert [(p.source_id, p.reference) for p in prompts] == [("1", [["1", "one"], "uno"]), ("2", [["2"]])]
    prompts, _ = _src(tmp_path, path="q.parquet", prompt="q", reference="gold")
    assert prompts[0].reference == ["1", "one"]


def test_jsonl_with_own_field_names(tmp_path):
    (tmp_path / "q.jsonl").write_text('{"question": "Why?", "answer": "because"}\n\n{"question": "How?"}\n',
                                      encoding="utf-8")
    prompts, _ = _src(tmp_path, path="q.jsonl", prompt="question", reference="answer")
    assert [(p.source_id, p.text, p.reference) for p in prompts] == [("1", "Why?", "because"), ("3", "How?", None)]


# ---------------------------------------------------------------- every problem at once, file and row named
def test_csv_every_problem_at_once_with_its_line(tmp_path):
    path = _write_csv(tmp_path / "bad.csv", "id,prompt\n1,fine\n2,\n1,again\n3,  \n")
    with pytest.raises(DatasetError) as ei:
        _src(tmp_path, path="bad.csv")
    msg = str(ei.value)
    assert msg.startswith(f"{path}: 3 problems")
    assert f"{path}:3: empty or non-text prompt" in msg
    assert f"{path}:4: duplicate id '1' (first at 2)" in msg
    assert f"{path}:5: empty or non-text prompt" in msg


def test_csv_bad_encoding_names_every_line(tmp_path):
    path = _write_csv(tmp_path / "latin.csv", "id,prompt\n1,café\n2,fine\n3,naïve\n", encoding="latin-1")
    with pytest.raises(DatasetError) as ei:
        _src(tmp_path, path="latin.csv")
    msg = str(ei.value)
    assert f"{path}:2: not valid UTF-8" in msg and f"{path}:4: not valid UTF-8" in msg and ":3:" not in msg


def test_mapped_column_missing_is_named_once_with_the_columns(tmp_path):
    path = _write_csv(tmp_path / "q.csv", "id,text\n1,a\n2,b\n")
    with pytest.raises(DatasetError) as ei:
        _src(tmp_path, path="q.csv", prompt="question", category="topic")
    msg = str(ei.value)
    assert "column 'question' (prompt) is not in the file; its columns: id, text" in msg
    assert "column 'topic' (category)" in msg and msg.count("question") == 1
    assert str(path) in msg


def test_jsonl_missing_mapped_field_per_line(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"id": 1, "question": "a"}\n{"id": 2}\n{"id": 3, "q": "c"}\n', encoding="utf-8")
    with pytest.raises(DatasetError) as ei:
        _src(tmp_path, path="q.jsonl", prompt="question")
    msg = str(ei.value)
    assert f"{path}:2: missing field 'question'" in msg and f"{path}:3: missing field 'question'" in msg


def test_missing_file_named_as_missing(tmp_path):
    with pytest.raises(DatasetError, match=r"nope\.csv: no such file"):
        _src(tmp_path, path="nope.csv")


# ---------------------------------------------------------------- Hugging Face datasets
@pytest.fixture()
def hf_folder(tmp_path):
    from datasets import Dataset, DatasetDict

    dd = DatasetDict({
        "train": Dataset.from_dict({"question": ["t1?", "t2?"], "answer": [["a"], ["b"]], "uid": ["x", "y"]}),
        "test": Dataset.from_dict({"question": [f"q{i}?" for i in range(5)], "answer": [[str(i)] for i in range(5)],
                                   "uid": [f"u{i}" for i in range(5)]}),
    })
    dd.save_to_disk(str(tmp_path / "saved"))
    return tmp_path


def test_hf_save_to_disk_folder_with_split_and_rows_recorded(hf_folder):
    prompts, rec = _src(hf_folder, hf="saved", split="test", rows=[1, 3], prompt="question", reference="answer",
                        id="uid")
    assert [(p.prompt_id, p.text, p.reference) for p in prompts] == [("mine:u1", "q1?", ["1"]), ("mine:u2", "q2?", ["2"])]
    assert rec["kind"] == "save_to_disk" and rec["split"] == "test" and rec["rows"] == [1, 3]
    assert rec["num_rows"] == 5 and rec["fingerprint"]


def test_hf_several_splits_need_one_and_a_wrong_one_lists_them(hf_folder):
    with pytest.raises(DatasetError, match=r"has the splits train, test; choose one"):
        _src(hf_folder, hf="saved", prompt="question")
    with pytest.raises(DatasetError, match=r"no split 'dev'; its splits: train, test"):
        _src(hf_folder, hf="saved", split="dev", prompt="question")


def test_hf_rows_with_problems_name_the_row(tmp_path):
    from datasets import Dataset

    Dataset.from_dict({"prompt": ["ok", "", "ok too"], "id": ["1", "2", "1"]}).save_to_disk(str(tmp_path / "d"))
    with pytest.raises(DatasetError) as ei:
        _src(tmp_path, hf="d")
    msg = str(ei.value)
    assert "d[]:1: empty or non-text prompt" in msg and "d[]:2: duplicate id '1' (first at 0)" in msg


def test_hf_missing_folder_named_as_missing(tmp_path):
    with pytest.raises(DatasetError, match=r"no such folder"):
        _src(tmp_path, hf="./not_saved_here")


def test_hf_data_files_through_a_builder(tmp_path):
    (tmp_path / "part.jsonl").write_text('{"prompt": "p1", "id": "a"}\n{"prompt": "p2", "id": "b"}\n', encoding="utf-8")
    prompts, rec = _src(tmp_path, hf="json", data_files="part.jsonl")
    assert [p.prompt_id for p in prompts] == ["mine:a", "mine:b"] and rec["kind"] == "files"


def test_hf_hub_id_offline_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DatasetError, match=r"needs the network"):
        _src(tmp_path, hf="someorg/somedata")


# ---------------------------------------------------------------- the config
def test_data_dir_missing_is_named_not_the_bundled_list(tmp_path):
    with pytest.raises(ConfigError) as ei:
        check_data({"dir": "my_prompts"}, tmp_path)
    assert str(ei.value) == f"data.dir: {tmp_path / 'my_prompts'} does not exist"
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"holds no \.jsonl file"):
        check_data({"dir": "empty"}, tmp_path)
    (tmp_path / "empty" / "mine.jsonl").write_text('{"id": 1, "prompt": "x"}\n')
    with pytest.raises(ConfigError) as ei:
        check_data({"dir": "empty", "datasets": ["mien"]}, tmp_path)
    assert "Did you mean 'mine'?" in str(ei.value) and "truthfulqa" not in str(ei.value)


def test_sources_config_errors(tmp_path):
    (tmp_path / "q.csv").write_text("id,prompt\n1,x\n")
    with pytest.raises(ConfigError, match=r"unknown data.sources\[0\] key 'promt'. Did you mean 'prompt'\?"):
        check_data({"sources": [{"path": "q.csv", "promt": "q"}]}, tmp_path)
    with pytest.raises(ConfigError, match=r"data.sources\[0\].path: .*nope.csv does not exist"):
        check_data({"sources": [{"path": "nope.csv"}]}, tmp_path)
    with pytest.raises(ConfigError, match=r"exactly one of path"):
        check_data({"sources": [{"path": "q.csv", "hf": "x"}]}, tmp_path)
    with pytest.raises(ConfigError, match=r"rows must be \[start, stop\]"):
        check_data({"sources": [{"path": "q.csv", "rows": [3, 1]}]}, tmp_path)
    with pytest.raises(ConfigError, match=r"several datasets or sources are named 'q'"):
        check_data({"sources": [{"path": "q.csv"}, {"path": "q.csv"}]}, tmp_path)
    _, datasets, sources = check_data({"sources": [{"path": "q.csv"}]}, tmp_path)
    assert datasets == () and sources[0]["name"] == "q"  # with sources, no bundled dataset by default


def test_a_run_on_a_csv_records_the_source(tmp_path):
    """`run` end to end (tiny random model) on a CSV: prompts and references stored, the source recorded."""
    from precompute.runner import run
    from sago_engine.store import open_store

    _write_csv(tmp_path / "mine.csv", "question,gold\nWhat is 2+2?,4|four\nName a colour.,red\n")
    (tmp_path / "c.toml").write_text(f"""
[run]
store = "{tmp_path / 's.duckdb'}"
max_new_tokens = 4
[data]
n_prompts = 2
[[data.sources]]
path = "mine.csv"
prompt = "question"
reference = "gold"
reference_sep = "|"
[variants]
families = ["surface_noise"]
per_family = {{ surface_noise = 1 }}
[semantic_filter]
enabled = false
[[models]]
key = "tiny-random"
""")
    cfg = load_config(tmp_path / "c.toml", base_dir=tmp_path)
    [summary] = run(cfg, progress=False)
    assert summary["status"] == "complete"
    with open_store(cfg.store) as st:
        p = st.prompts(["mine"]).sort_values("source_id")
        rec = json.loads(st.runs().loc[0, "config"])["data_sources"]
    assert list(p["text"]) == ["What is 2+2?", "Name a colour."]
    assert [json.loads(r) for r in p["reference"]] == [["4", "four"], ["red"]]
    assert rec[0]["name"] == "mine" and rec[0]["format"] == "csv" and rec[0]["fields"]["reference_sep"] == "|"


# ---------------------------------------------------------------- an unbalanced quote never swallows rows
def test_csv_unbalanced_quote_to_the_end_is_refused_naming_its_line(tmp_path):
    path = _write_csv(tmp_path / "q.csv", 'id,question\n1,"What is an unbalanced quote?\n2,Fine question?\n')
    with pytest.raises(DatasetError) as ei:
        _src(tmp_path, path="q.csv")
    assert f"{path}:2: a quote is never closed" in str(ei.value)


def test_csv_quote_closed_by_a_later_quote_is_refused_naming_its_line(tmp_path):
    path = _write_csv(tmp_path / "q.csv", 'id,question\n1,"What is it?\n2,A "quoted" word\n3,x\n')
    with pytest.raises(DatasetError) as ei:
        _src(tmp_path, path="q.csv")
    assert f"{path}:2: " in str(ei.value) and "expected after" in str(ei.value)
