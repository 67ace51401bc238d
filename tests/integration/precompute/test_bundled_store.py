"""The bundled stores are what their configs produce today.

``test_bundled_store_ids_are_the_plans``: the run ids, per run the finished prompt ids, and the variant
ids of each bundled store equal what ``--plan`` computes from its config (``plan_report.plan_runs``),
so a user who re-runs the bundled config gets "nothing to do". ``test_bundled_slice_reruns_identically``:
the demo config cut to two prompts and smollm2-135m-instruct (greedy), re-run
into a temporary store, writes the rows the bundled store holds for those prompts in every per-prompt
table (``precompute.reproduce``; replies and token ids exactly, floats within the float-noise tolerances),
its correctness verdicts rescored as the bundled store's were (``rescore --correctness --all-scorers``).
The checks themselves are tested on stores built here (``tiny_store``, ``tiny_sampled_store``).
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import duckdb
import pytest

from precompute.config import load_config
from precompute.reproduce import cut_config, slice_differences, store_vs_plan
from precompute.runner import run
from sago_engine.correctness.rescore import rescore_correctness

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = ROOT / "precompute" / "configs"
#: The demo run the slice re-runs (a ``[[models]]`` label of demo.toml): greedy only. The sampled run's
#: slice (4× the replies) would cost about twice the greedy one; ``tiny_sampled_store`` covers the
#: comparison of ``samples`` / ``sample_deltas`` rows below.
SLICE_MODELS = ("smollm2-135m-instruct",)
SLICE_PROMPTS = 2


def _config(name: str):
    return load_config(CONFIGS / name, check_keys=False, check_devices=False)


@pytest.mark.parametrize("config", ["demo.toml", "ablation_cap.toml"])
def test_bundled_store_ids_are_the_plans(config):
    cfg = _config(config)
    assert Path(cfg.store).parent == ROOT / "data"
    assert store_vs_plan(cfg) == []


def test_bundled_slice_reruns_identically(tmp_path):
    cfg = _config("demo.toml")
    cut = cut_config(cfg, SLICE_MODELS, SLICE_PROMPTS, tmp_path / "slice.duckdb")
    summaries = run(cut, progress=False)
    assert [s["generated"] for s in summaries] and all(s["generated"] > 0 for s in summaries)
    # the bundled store's correctness verdicts were written by `rescore --correctness --all-scorers` after the run
    rescore_correctness(cut.store, all_short=True, data_dir=cfg.data_dir)
    assert slice_differences(cfg.store, cut.store, SLICE_MODELS) == []


def _tiny_config(store: Path, name: str):
    return load_config(store.parent / name, check_keys=False, check_devices=False)


def test_store_vs_plan_finds_nothing_on_the_store_its_config_built(tiny_store):
    assert store_vs_plan(_tiny_config(tiny_store, "tiny.toml")) == []


def test_store_vs_plan_names_runs_and_variants_of_another_seed(tiny_store):
    cfg = replace(_tiny_config(tiny_store, "tiny.toml"), seed=12)
    found = store_vs_plan(cfg)
    assert any("planned, not in the store" in line and "the store's" in line for line in found)
    assert any("stored, not planned" in line and line.startswith("run ") for line in found)
    assert any(line.startswith(tuple(f"{n} variant ids planned" for n in range(1, 1000))) for line in found)


def test_store_vs_plan_names_a_run_with_missing_prompts(tiny_store, tmp_path):
    cfg = _tiny_config(tiny_store, "tiny.toml")
    copy = tmp_path / "copy.duckdb"
    shutil.copy(tiny_store, copy)
    with duckdb.connect(str(copy)) as con:
        con.execute("DELETE FROM units WHERE prompt_id = (SELECT min(prompt_id) FROM units)")
    found = store_vs_plan(cfg, copy)
    assert len(found) == 1 and "1 planned prompts not finished, 0 finished prompts not planned" in found[0]


def _rerun_cut(store: Path, name: str, tmp_path: Path):
    """The cut of ``store``'s config to its first prompt's dataset and 2 prompts, re-run; (config, re-run path)."""
    cfg = _tiny_config(store, name)
    cut = cut_config(cfg, [m.name for m in cfg.models], 2, tmp_path / "cut.duckdb")
    run(cut, progress=False)
    return cfg, Path(cut.store)


@pytest.mark.parametrize("which", ["tiny_store", "tiny_sampled_store"])
def test_slice_rerun_of_a_built_store_matches_and_a_changed_row_is_found(which, request, tmp_path):
    store = request.getfixturevalue(which)
    cfg, rerun = _rerun_cut(store, {"tiny_store": "tiny.toml", "tiny_sampled_store": "sampled.toml"}[which], tmp_path)
    names = [m.name for m in cfg.models]
    assert slice_differences(store, rerun, names) == []
    with duckdb.connect(str(rerun)) as con:  # the re-run holds the rows compared (not two empty sides)
        n = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
             for t in ("responses", "deltas", "variants", "samples", "sample_deltas", "delta_stats")}
    assert min(n["responses"], n["deltas"], n["variants"], n["delta_stats"]) > 0
    assert (n["samples"] > 0 and n["sample_deltas"] > 0) == (which == "tiny_sampled_store")
    with duckdb.connect(str(rerun)) as con:
        con.execute("UPDATE responses SET response = response || ' x' WHERE response_id = "
                    "(SELECT min(response_id) FROM responses WHERE variant_id IS NOT NULL)")
        con.execute("UPDATE deltas SET delta = delta - 0.5 WHERE axis = 'prob' AND delta IS NOT NULL AND "
                    "variant_id = (SELECT min(variant_id) FROM deltas WHERE axis = 'prob' AND delta IS NOT NULL)")
    found = slice_differences(store, rerun, names)
    assert sum(" responses " in line and " response: " in line for line in found) == 1
    assert sum(" deltas " in line and "'prob') delta: differs by 0.5 " in line for line in found) == 1
