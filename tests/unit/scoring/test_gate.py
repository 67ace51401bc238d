"""The release gate: ``sago_engine.scoring.gate`` (thresholds, level and change checks) and ``python -m precompute check``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from precompute.check import check_main
from sago_engine.scoring import gate
from tests.support.factories import make_store

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("text, says", [
    ("blue=0.4", "did you mean 'bleu'"),
    ("bleu", "is not AXIS=VALUE"),
    ("bleu=1.5", "not a number in [0, 1]"),
    ("bleu=x", "not a number in [0, 1]"),
    ("bleu=0.1,bleu=0.2", "given twice"),
    (" , ", "needs AXIS=VALUE"),
])
def test_thresholds_refused_with_the_item_named(text, says):
    with pytest.raises(gate.GateError, match="--max-sgs") as e:
        gate.parse_thresholds(text)
    assert says in str(e.value)


def test_thresholds_read_axes_and_options():
    assert gate.parse_thresholds("bleu=0.4, mr=0,bert@rescaled=1") == {"bleu": 0.4, "mr": 0.0, "bert@rescaled": 1.0}


def _scores(rows):
    return pd.DataFrame(rows, columns=["run_id", "dataset", "prompt_id", "axis", "s"])


def test_level_check_fails_above_the_threshold_only():
    s = _scores([("r1", "d", f"p{i}", "bleu", v) for i, v in enumerate((0.2, 0.4, 0.6))]
                + [("r2", "d", f"p{i}", "bleu", v) for i, v in enumerate((0.1, 0.2, 0.3))])
    out = gate.level_checks(s, {"r1": "a", "r2": "b"}, {"bleu": 0.3, "mr": 0.5}).set_index(["label", "axis"])
    assert out.loc[("a", "bleu"), "value"] == pytest.approx(0.4)
    assert out.loc[("a", "bleu"), "result"] == gate.FAIL
    assert out.loc[("b", "bleu"), "value"] == pytest.approx(0.2)
    assert out.loc[("b", "bleu"), "result"] == gate.PASS
    assert out.loc[("a", "mr"), "result"] == gate.NOT_MEASURED  # no score: never 0, never a failure
    assert np.isnan(out.loc[("a", "mr"), "value"])


def test_change_check_pairs_prompts_and_needs_the_test():
    rng = np.random.default_rng(3)
    base = rng.uniform(0.1, 0.3, 20)
    rows = [("old", "d", f"p{i}", "mr", v) for i, v in enumerate(base)]
    rows += [("new", "d", f"p{i}", "mr", v + 0.1 + rng.uniform(0, 0.01)) for i, v in enumerate(base)]
    rows += [("new", "d", "only-new", "mr", 1.0)]  # unpaired: left out of d
    rows += [("same", "d", f"p{i}", "mr", v) for i, v in enumerate(base)]
    s = _scores(rows)
    out = gate.change_checks(s, s, {"new": ("new", "old"), "same": ("same", "old")}, {"mr": 0.05}).set_index("label")
    assert out.loc["new", "n_prompts"] == 20
    assert 0.1 < out.loc["new", "value"] < 0.11
    assert out.loc["new", "p"] < 0.001
    assert out.loc["new", "ci_low"] <= out.loc["new", "value"] <= out.loc["new", "ci_high"]
    assert out.loc["new", "result"] == gate.FAIL
    assert out.loc["same", "value"] == 0.0 and out.loc["same", "result"] == gate.PASS
    # three prompts: the test cannot reject at 0.05 → the increase alone does not fail, unless alpha = 1
    few = s[s["prompt_id"].isin(["p0", "p1", "p2"])]
    assert gate.change_checks(few, few, {"new": ("new", "old")}, {"mr": 0.05})["result"].iloc[0] == gate.PASS
    assert gate.change_checks(few, few, {"new": ("new", "old")}, {"mr": 0.05}, alpha=1.0)["result"].iloc[0] == gate.FAIL


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("gate")
    base = make_store(d / "base.duckdb", models=("m-a", "m-b"), n_prompts=8, seed=5)
    worse = make_store(d / "worse.duckdb", models=("m-a", "m-b"), n_prompts=8, seed=5, model_scale={"m-a": 2.0},
                       missing_axes={"m-b": ["cos"]})
    return base, worse


def test_cli_fails_naming_model_axis_value_and_threshold(stores, capsys):
    base, worse = stores
    assert check_main([str(worse), "--max-sgs", "mr=0.99", "--vs", str(base), "--max-increase", "mr=0.02,cos=0.5"]) == 1
    out, err = capsys.readouterr()
    assert "gate failed: 1 of" in err
    line = next(x for x in err.splitlines() if "m-a" in x)
    assert "mr paired increase" in line and "> 0.02" in line
    assert "m-b" not in err  # same draws: no change
    assert "not measured" in out and "m-b" in out  # m-b has no cos in the new store


def test_cli_passes_against_itself_and_on_levels_it_keeps(stores, capsys):
    base, _ = stores
    assert check_main([str(base), "--max-sgs", "bleu=1,mr=1", "--vs", str(base), "--max-increase", "bleu=0"]) == 0
    out, _ = capsys.readouterr()
    assert "gate passed: 6 checks" in out


def test_cli_vs_a_run_id_compares_every_other_run(stores, capsys):
    _, worse = stores
    assert check_main([str(worse), "--vs", "run-m-b", "--max-increase", "mr=0.0", "--alpha", "1"]) == 1
    _, err = capsys.readouterr()
    assert "m-a: mr paired increase" in err


@pytest.mark.parametrize("args, says", [
    (["--max-sgs", "mr=0.2", "--vs", "no-such-run", "--max-increase", "mr=0.1"], "no such store file and no run"),
    (["--max-sgs", "mr=0.2", "--model", "m-z"], "--model m-z has no run"),
])
def test_cli_usage_errors_exit_2(stores, capsys, args, says):
    assert check_main([str(stores[0]), *args]) == 2
    assert says in capsys.readouterr().err


def test_cli_no_store_exits_2(tmp_path, capsys):
    assert check_main([str(tmp_path / "none.duckdb"), "--max-sgs", "mr=0.2"]) == 2
    assert "no store at" in capsys.readouterr().err


def test_model_names_reach_the_terminal_escaped(tmp_path, capsys):
    p = make_store(tmp_path / "esc.duckdb", models=("evil\x1b[2Jname",), n_prompts=3)
    check_main([str(p), "--max-sgs", "mr=0"])
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "evil\\x1b[2Jname" in out


def test_entry_point_exit_status(stores):
    """The real command line: ``python -m precompute check`` exits 1 on a failed gate (what CI reads)."""
    base, worse = stores
    r = subprocess.run([sys.executable, "-m", "precompute", "check", str(worse), "--max-sgs", "mr=0.01"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    assert "m-a: mr SGS" in r.stderr and "> 0.01" in r.stderr
