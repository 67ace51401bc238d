"""The paper_code preset (the SAGO authors' setup) loads, plans its grid, and its switches work.

V per prompt: the authors' 81 = 10 politeness levels × 3 places + 3 surface-noise subtypes × 5
strengths × 3 places + 5 length ratios + 1 form. sago's families give 62: politeness 10 × 3 = 30
(−5 … 5 without 0, their −10 … 10 step 2 at half the scale), surface noise 3 × 3 strengths × 3 =
27 (18 fewer: sago has strengths 1, 2, 3 where they have five), length 4 ratios (one fewer),
form 1.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from precompute import runner
from precompute.__main__ import main as cli_main
from precompute.config import ConfigError, load_config
from sago_engine.axis_spec import OPTION_AXIS_SPECS
from sago_engine.store import open_store
from sago_engine.types import ALL_OPTION_AXES, AXES
from tests.support.factories import tiny_toml

ROOT = Path(__file__).resolve().parents[3]
PRESET = ROOT / "precompute" / "configs" / "paper_code.toml"

#: The opt-in options of the authors' code (``OptionAxisSpec.opt_in``).
BASE_REPLY_AXES = tuple(a for a, s in OPTION_AXIS_SPECS.items() if "forced_base_reply" in s.needs)
MR_CODE_AXES = tuple(a for a, s in OPTION_AXIS_SPECS.items() if s.base == "mr")
AUTHORS_V = 10 * 3 + 3 * 5 * 3 + 5 + 1
SAGO_V = 10 * 3 + 3 * 3 * 3 + 4 + 1


def test_preset_loads_and_plans_62_variants_per_prompt(monkeypatch):
    monkeypatch.chdir(ROOT)
    cfg = load_config(PRESET, check_keys=False, check_devices=False)
    assert cfg.filter is None and cfg.max_new_tokens == 100 and cfg.axis_options == ALL_OPTION_AXES
    assert [m.dtype for m in cfg.models] == ["float16"] * 8 and len({m.key for m in cfg.models}) == 8
    qwen35 = next(m for m in cfg.models if m.key == "Qwen/Qwen3.5-9B")
    assert qwen35.chat_template_kwargs == {"enable_thinking": True}
    assert cfg.datasets == ("truthfulqa", "nq_open", "alpaca", "simpleqa_verified", "triviaqa", "hotpotqa")
    plan = runner.make_plan(cfg, None, request_rewrites=False)
    assert len(plan.prompts) == 6 * 16
    assert AUTHORS_V == 81 and SAGO_V == 62
    assert {len(v) for v in plan.variants.values()} == {SAGO_V}
    vs = next(iter(plan.variants.values()))
    cells = collections.Counter(v.spec.subtype for v in vs)
    assert cells == {"politeness": 30, "spacing": 9, "punctuation": 9, "case": 9, "length": 4, "mood": 1}
    assert sorted({v.spec.strength for v in vs if v.spec.subtype == "politeness"}) == [-5, -4, -3, -2, -1, 1, 2, 3, 4, 5]
    assert not plan.filter_info and plan.variant_rows["kept"].all()  # no semantic filter: every variant kept


def test_plan_command_parses_the_preset_without_a_gpu(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert cli_main(["--config", str(PRESET), "--plan", "--model", "Qwen/Qwen2.5-1.5B-Instruct"]) == 0
    assert f"variants: {96 * SAGO_V}" in capsys.readouterr().out


def test_semantic_filter_switch(tmp_path):
    text = tiny_toml().format(store=tmp_path / "s.duckdb", data=ROOT / "data" / "datasets")
    for value, ok in (("false", True), ("true", True), ('"no"', False)):
        p = tmp_path / "c.toml"
        p.write_text(text + f"\n[semantic_filter]\nenabled = {value}\n")
        if ok:
            cfg = load_config(p, check_keys=False)
            assert (cfg.filter is None) == (value == "false")
            assert cfg.filter is None or "enabled" not in cfg.filter
        else:
            with pytest.raises(ConfigError, match="enabled must be true or false"):
                load_config(p, check_keys=False)


def test_run_with_the_authors_options_on_tiny_random(tmp_path):
    """The runner stores every authors' option axis; the base reply is teacher-forced once per variant."""
    text = tiny_toml(n_prompts=1).format(store=tmp_path / "s.duckdb", data=ROOT / "data" / "datasets")
    opts = ", ".join(f'"{a}"' for a in ("cos@last_layer", *BASE_REPLY_AXES, *MR_CODE_AXES))
    text = text.replace("chunk_prompts = 2", f"chunk_prompts = 2\naxis_options = [{opts}]")
    text += "\n[semantic_filter]\nenabled = false\n"
    p = tmp_path / "c.toml"
    p.write_text(text)
    cfg = load_config(p, check_keys=False)
    [summary] = runner.run(cfg, progress=False)
    with open_store(cfg.store) as st:
        names = ("cos@last_layer", *BASE_REPLY_AXES, *MR_CODE_AXES)
        d = st.deltas(kept_only=False, axes=(*AXES, *names))
        n_var = st.counts()["variants"]
    assert set(d["axis"]) == {*AXES, *names} and len(d) == n_var * (len(AXES) + len(names))
    for ax in ("cos@last_layer", *BASE_REPLY_AXES):
        assert d.loc[d["axis"] == ax, "available"].all(), ax
    assert d.loc[d["axis"] == "prob@base_reply", "delta"].abs().max() > 1e-3  # a real shift, not 0
    with open_store(cfg.store) as st:
        rec = json.loads(st.runs().loc[0, "config"])["axis_options"]
    assert rec["axes"] == list(names) and "teacher-forced" in rec["base_reply"] and set(rec["mr"]) == {
        "pairwise", "length_fail", "paper_code"}
    assert summary["status"] == "complete"
