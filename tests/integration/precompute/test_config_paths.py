"""Paths in a config resolve against the config file's folder, not the working folder
(docs/CONFIG.md, "Paths"): a study folder can be moved or run from anywhere. ``--plan`` of the paper
presets from another folder: tests/integration/precompute/test_plan_estimate.py."""

import shutil
from pathlib import Path

import pytest

from precompute.config import load_config

ROOT = Path(__file__).resolve().parents[3]
PRESETS = sorted((ROOT / "precompute" / "configs").glob("*.toml"))

STUDY = """
[run]
store = "out/study.duckdb"
[data]
dir = "prompts"
datasets = ["alpaca"]
n_prompts = 2
[[data.sources]]
path = "mine.csv"
prompt = "question"
[variants]
families = ["surface_noise"]
per_family = { surface_noise = 1 }
[semantic_filter]
enabled = false
[[models]]
key = "tiny-random"
"""


@pytest.fixture
def study(tmp_path, monkeypatch):
    d = tmp_path / "study"
    (d / "prompts").mkdir(parents=True)
    shutil.copy(ROOT / "data" / "datasets" / "alpaca.jsonl", d / "prompts" / "alpaca.jsonl")
    (d / "mine.csv").write_text("question\nWhat is 2+2?\nName a colour.\n", encoding="utf-8")
    (d / "study.toml").write_text(STUDY, encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return d


def test_relative_paths_resolve_against_the_config_folder(study):
    cfg = load_config(Path("..") / "study" / "study.toml", check_keys=False)
    assert Path(cfg.store) == study / "out" / "study.duckdb"
    assert Path(cfg.data_dir) == study / "prompts"
    assert [s["name"] for s in cfg.sources] == ["mine"]


@pytest.mark.parametrize("preset", PRESETS, ids=[p.name for p in PRESETS])
def test_bundled_configs_name_the_repository_data_from_any_folder(preset, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_config(preset, check_keys=False, check_devices=False)
    assert Path(cfg.store).parent == ROOT / "data" and Path(cfg.data_dir) == ROOT / "data" / "datasets"
