"""Dataset loading: the six bundled files, hostile files (tests/hostile/), odd-but-valid text.

Every hostile file must be refused with a ``DatasetError`` that names the file and the line;
valid-but-unusual text must load unchanged and survive a round trip through the store.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from sago_engine.datasets import DATASETS, MAX_PROMPT_CHARS, DatasetError, Prompt, load_dataset
from sago_engine.store import open_store

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "data" / "datasets"
HOSTILE = Path(__file__).resolve().parents[2] / "hostile"

# The exact prompts written into tests/hostile/odd_text.jsonl (kept here so the test does not
# re-derive them from the file it is checking).
ODD = {
    "rtl_ar": "ما هي عاصمة فرنسا؟",
    "rtl_he": "מהי בירת צרפת? \u200fשאלה\u200f",
    "emoji": "What does 👩\u200d👩\u200d👧\u200d👦 mean? 🇫🇷🔥 \U0001F600",
    "cjk": "法国的首都是哪里？東京は日本の首都です。서울은 한국의 수도입니다.",
    "sql": "'; DROP TABLE prompts; --",
    "html": "<script>alert(1)</script>",
    "quotes": 'He said "hi" \\ and \'bye\' \\n not a newline',
    "combining": "e\u0301 vs \u00e9; Zalgo: Z\u0351\u0352\u0353a\u0300l\u0301g\u0302o",
    "tabs_newlines": "line one\nline two\r\n\ttabbed",
    "astral": "\U0001D54F math \U00020000 ext-B",
}


# ---------------------------------------------------------------- the real files
def test_six_dataset_files_exist_and_match_names():
    stems = sorted(p.stem for p in DATA.glob("*.jsonl"))
    assert stems == sorted(DATASETS)
    assert len(stems) == 6


@pytest.mark.parametrize("name", DATASETS)
def test_real_dataset_first_16(name):
    ps = load_dataset(DATA / f"{name}.jsonl", n=16)
    assert len(ps) == 16
    assert all(isinstance(p, Prompt) for p in ps)
    assert all(p.dataset == name for p in ps)
    assert all(p.prompt_id == f"{name}:{p.source_id}" for p in ps)
    assert all(p.text.strip() and len(p.text) <= MAX_PROMPT_CHARS for p in ps)
    assert len({p.prompt_id for p in ps}) == 16
    # file order: the first prompt is the first line's
    first = json.loads((DATA / f"{name}.jsonl").read_text(encoding="utf-8").split("\n", 1)[0])
    assert ps[0].source_id == str(first["id"]) and ps[0].text == first["prompt"]


def test_prompt_ids_unique_across_datasets():
    ids = [p.prompt_id for name in DATASETS for p in load_dataset(DATA / f"{name}.jsonl", n=16)]
    assert len(ids) == 96 == len(set(ids))


def test_n_limits_and_dataset_override():
    ps = load_dataset(DATA / "alpaca.jsonl", n=3, dataset="custom")
    assert len(ps) == 3
    assert {p.dataset for p in ps} == {"custom"}
    assert all(p.prompt_id.startswith("custom:") for p in ps)


def test_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_dataset(tmp_path / "nope.jsonl")


# ---------------------------------------------------------------- hostile files
@pytest.mark.parametrize(
    "fname, line, pattern",
    [
        ("broken_json.jsonl", 3, r"broken JSON"),
        ("missing_field.jsonl", 2, r"missing field 'prompt'"),
        ("missing_id.jsonl", 2, r"missing field 'id'"),
        ("empty_prompt.jsonl", 3, r"empty"),
        ("nul_byte_escaped.jsonl", 2, r"NUL"),
        ("nul_byte_raw.jsonl", 2, r"(NUL|broken JSON)"),
        ("invalid_utf8.jsonl", 3, r"UTF-8"),
        ("long_prompt.jsonl", 2, r"100000 characters"),
        ("duplicate_ids.jsonl", 3, r"duplicate id 'a'"),
        ("not_an_object.jsonl", 2, r"JSON object"),
    ],
)
def test_hostile_file_refused_naming_file_and_line(fname, line, pattern):
    path = HOSTILE / fname
    with pytest.raises(DatasetError) as ei:
        load_dataset(path)
    msg = str(ei.value)
    assert f"{path}:{line}:" in msg, msg
    assert re.search(pattern, msg), msg


def test_hostile_lines_before_the_bad_one_are_not_silently_returned():
    # the whole file is checked, whatever n: no partial list, and a problem past n still counts
    with pytest.raises(DatasetError):
        load_dataset(HOSTILE / "duplicate_ids.jsonl", n=10)
    with pytest.raises(DatasetError, match=r"duplicate_ids.jsonl:3: duplicate id 'a' \(first at 1\)"):
        load_dataset(HOSTILE / "duplicate_ids.jsonl", n=2)


def test_every_problem_of_a_file_is_reported_at_once(tmp_path):
    p = tmp_path / "mine.jsonl"
    p.write_bytes(b'{"id": "1", "prompt": "fine"}\n'
                  b'{"id": "2"}\n'                                # missing prompt
                  b'{"prompt": "no id"}\n'                        # missing id
                  b'{"id": "4", "prompt": "  "}\n'                # empty prompt
                  b'{"id": "1", "prompt": "again"}\n'             # duplicate id
                  b'{"id": "6", "prompt": "caf\xe9"}\n'           # Latin-1, not UTF-8
                  b'{"id": "7", "prompt": \n'                     # broken JSON
                  b'["not", "an", "object"]\n')
    with pytest.raises(DatasetError) as ei:
        load_dataset(p)
    msg = str(ei.value)
    assert msg.startswith(f"{p}: 7 problems"), msg
    for line, what in ((2, "missing field 'prompt'"), (3, "missing field 'id'"), (4, "empty or non-text prompt"),
                       (5, "duplicate id '1' (first at 1)"), (6, "not valid UTF-8"), (7, "broken JSON"),
                       (8, "expected a JSON object")):
        assert f"{p}:{line}: {what}" in msg, (line, msg)


def test_dataset_error_is_a_value_error():
    assert issubclass(DatasetError, ValueError)


def test_empty_id_refused():
    with pytest.raises(DatasetError, match=r"empty_id.jsonl:2:"):
        load_dataset(HOSTILE / "empty_id.jsonl")


# ---------------------------------------------------------------- odd but valid text
def test_odd_text_loads_unchanged():
    ps = load_dataset(HOSTILE / "odd_text.jsonl")
    got = {p.source_id: p.text for p in ps}
    assert got == ODD
    for k, v in ODD.items():
        assert got[k].encode("utf-8") == v.encode("utf-8")


def test_unicode_line_separators_inside_json_strings_load():
    ps = load_dataset(HOSTILE / "line_separator.jsonl")
    assert {p.source_id: p.text for p in ps} == {
        "ls": "before\u2028after", "nel": "before\u0085after", "ps": "para\u2029graph"}


def test_crlf_line_endings_and_blank_lines(tmp_path):
    p = tmp_path / "crlf.jsonl"
    p.write_bytes(b'{"id": "1", "prompt": "one"}\r\n\r\n{"id": "2", "prompt": "two"}\r\n')
    assert [(x.source_id, x.text) for x in load_dataset(p)] == [("1", "one"), ("2", "two")]


def test_odd_text_round_trips_through_store(tmp_path):
    ps = load_dataset(HOSTILE / "odd_text.jsonl", dataset="odd")
    df = pd.DataFrame([{
        "prompt_id": p.prompt_id, "dataset": p.dataset, "source_id": p.source_id, "text": p.text,
        "reference": json.dumps(p.reference, ensure_ascii=False), "category": p.category,
    } for p in ps])
    path = tmp_path / "s.duckdb"
    with open_store(path, read_only=False, create=True) as st:
        st.insert_df("prompts", df)
    with open_store(path) as st:  # reopen read-only: what the dashboard sees
        back = st.prompts(["odd"])
        assert st.counts()["prompts"] == len(ODD)  # the SQL-looking prompt dropped nothing
    got = dict(zip(back["source_id"], back["text"]))
    assert set(got) == set(ODD)
    for k, v in ODD.items():
        assert got[k].encode("utf-8") == v.encode("utf-8"), k


# ---------------------------------------------------------------- a dataset folder is untrusted input
@pytest.mark.parametrize("line, pattern", [
    ('{"id": "1", "prompt": "half an emoji \\ud83d"}', r"lone surrogate"),
    ('{"id": "1", "prompt": "ok", "reference": "\\udc00"}', r"lone surrogate"),
    ('{"id": NaN, "prompt": "ok"}', r"not a finite number \(NaN\)"),
    ('{"id": "1", "prompt": "ok", "reference": Infinity}', r"not a finite number \(Infinity\)"),
    ('{"id": 1e400, "prompt": "ok"}', r"not a finite number \(1e400\)"),
    ('{"id": "1", "prompt": "ok", "category": {"a": 1}}', r"category must be text"),
    ('{"id": {"x": 1}, "prompt": "ok"}', r"id must be text or a number"),
    ('{"id": ' + "9" * 5000 + ', "prompt": "ok"}', r"digits"),
])
def test_values_a_store_cannot_hold_are_refused_naming_file_and_line(tmp_path, line, pattern):
    p = tmp_path / "d.jsonl"
    p.write_text('{"id": "0", "prompt": "fine"}\n' + line + "\n")
    with pytest.raises(DatasetError, match=rf"{re.escape(str(p))}:2: .*{pattern}"):
        load_dataset(p)


def test_a_dataset_outside_the_data_folder_is_refused(tmp_path):
    """A link in data.dir to a file elsewhere, and a dataset name with ``..``: refused, naming the file."""
    from precompute.config import load_config
    from precompute.runner import make_plan
    from tests.support.factories import tiny_toml

    data = tmp_path / "data"
    data.mkdir()
    for name in ("truthfulqa", "alpaca"):
        (data / f"{name}.jsonl").write_bytes((DATA / f"{name}.jsonl").read_bytes())
    (tmp_path / "private.jsonl").write_text('{"id": "1", "prompt": "private text"}\n')
    with pytest.raises(DatasetError, match=r"outside"):
        load_dataset(data / "../private.jsonl", root=data)
    (data / "alpaca.jsonl").unlink()
    (data / "alpaca.jsonl").symlink_to(tmp_path / "private.jsonl")
    conf = tmp_path / "c.toml"
    conf.write_text(tiny_toml().format(store=tmp_path / "s.duckdb", data=data))
    with pytest.raises(DatasetError, match=r"alpaca\.jsonl: a link .* outside"):
        make_plan(load_config(conf))
    assert [p.text for p in load_dataset(data / "truthfulqa.jsonl", n=1, root=data)]  # inside: read
