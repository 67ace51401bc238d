"""The option-axis registry ``OPTION_AXIS_SPECS``: every record is complete (a row function, a
definition, a docs/METHOD.md line), registration refuses incomplete records, and ``compute_rows``
stores exactly the registry's option axes, in its order."""

from __future__ import annotations

import importlib
import inspect
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from precompute.config import ConfigError, load_config
from sago_engine.axis_spec import (
    AXIS_SPECS,
    OPTION_AXIS_SPECS,
    OPTION_NEEDS,
    OPTION_SEP,
    OptionAxisSpec,
    register_option_axis,
)
from sago_engine.measure.pipeline import Unit, compute_rows, option_axes_for
from sago_engine.measure.step import Scoring
from sago_engine.measure.storerows import axis_options_record
from sago_engine.types import (
    ALL_OPTION_AXES,
    AXES,
    DEFAULT_NORMALIZERS,
    OPTION_AXES,
    GenerationResult,
    Variant,
    VariantSpec,
    axis_label,
)
from tests.support.factories import tiny_toml

ROOT = Path(__file__).resolve().parents[3]
METHOD = (ROOT / "docs" / "METHOD.md").read_text(encoding="utf-8")
CAPS = frozenset({"cos", "prob", "ent"})


@pytest.mark.parametrize("name", OPTION_AXIS_SPECS.names())
def test_every_option_axis_has_a_row_function_and_a_doc_line(name):
    spec = OPTION_AXIS_SPECS[name]
    assert spec.name == name == f"{spec.base}{OPTION_SEP}{spec.option}" and spec.base in AXIS_SPECS
    mod, _, attr = spec.rows.partition(":")
    fn = getattr(importlib.import_module(mod), attr)
    assert callable(fn) and list(inspect.signature(fn).parameters) == ["name", "inputs"]
    assert fn.__doc__ and spec.definition.strip() and spec.label.strip()
    assert set(spec.needs) <= set(OPTION_NEEDS)
    assert f"`{name}`" in METHOD, f"docs/METHOD.md has no line for {name}"
    assert axis_label(name).endswith(f"@ {spec.label}")


def test_the_type_views_are_the_registry():
    assert ALL_OPTION_AXES == OPTION_AXIS_SPECS.names()
    assert OPTION_AXES == tuple(n for n in ALL_OPTION_AXES if not OPTION_AXIS_SPECS[n].opt_in)
    # the always-stored options of a base come before its opt-in ones; bases in the paper's order
    bases = [AXES.index(OPTION_AXIS_SPECS[n].base) for n in ALL_OPTION_AXES]
    assert bases == sorted(bases)


def test_register_option_axis_refuses_incomplete_records():
    good = OPTION_AXIS_SPECS["bert@rescaled"]
    for bad, match in ((replace(good, option="x", rows=""), "module:function"),
                       (replace(good, option="x", needs=("telepathy",)), "needs"),
                       (replace(good, option="x", base="nope"), "base"),
                       (replace(good, option="a@b"), "option"),
                       (replace(good, option=""), "option"),
                       (good, "already")):
        with pytest.raises(ValueError, match=match):
            register_option_axis(bad)
    assert "bert@x" not in OPTION_AXIS_SPECS


def test_a_registered_option_axis_flows_to_config_rows_and_record(tmp_path):
    """A new record is valid in a config, stored by ``compute_rows`` with its function's values
    (through the base axis's R_X and availability rules) and listed in the run record."""
    spec = register_option_axis(OptionAxisSpec(
        base="bleu", option="halved", label="half", needs=(), opt_in=True,
        rows=f"{__name__}:_halved_bleu", definition="half of Δ-BLEU (a test option)"))
    try:
        cfg = load_config(_config(tmp_path, '"bleu@halved", "bert@rescaled"'), check_keys=False)
        assert cfg.axis_options == ("bert@rescaled", "bleu@halved")  # registry order
        base = GenerationResult("Paris is the capital of France.", 7)
        res = [GenerationResult("Paris is the capital.", 5), GenerationResult("", 1, finish_reason="length")]
        vs = [Variant(f"p/v{k}", "p", VariantSpec("surface_noise", "case", 1.0, "GLOBAL"), f"v{k}", seed=k)
              for k in range(2)]
        _, d = compute_rows("r", [Unit("p", "ds", base, vs, res)], DEFAULT_NORMALIZERS, frozenset(),
                            options=("bleu@halved",))
        got = d[d["axis"] == spec.name].set_index("variant_id")
        bleu = d[d["axis"] == "bleu"].set_index("variant_id")
        assert got.loc["p/v0", "delta"] == pytest.approx(bleu.loc["p/v0", "delta"] / 2)
        assert got.loc["p/v0", "detector"] == "halved"
        # the base axis's availability rule: an empty reply cut by the token budget is not measured
        assert not got.loc["p/v1", "available"] and got.loc["p/v1", "reason"] == bleu.loc["p/v1", "reason"]
        assert axis_options_record(option_axes_for(("bleu@halved",), frozenset()), None)["axes"] == ["bleu@halved"]
    finally:
        OPTION_AXIS_SPECS.unregister(spec.name)
    with pytest.raises(ConfigError):
        load_config(_config(tmp_path, '"bleu@halved"'), check_keys=False)


def _config(tmp_path: Path, options: str) -> Path:
    """The tiny run config with ``[run] axis_options = [options]``."""
    text = tiny_toml(n_prompts=1).format(store=tmp_path / "s.duckdb", data=ROOT / "data" / "datasets")
    p = tmp_path / "c.toml"
    p.write_text(text.replace("chunk_prompts = 2", f"chunk_prompts = 2\naxis_options = [{options}]"))
    return p


def _halved_bleu(name, inputs):
    """Half of Δ-BLEU, labelled with the option (the test option's row function)."""
    from sago_engine.measure.option_rows import OptionValues

    n = len(inputs.unit.variants)
    return OptionValues(np.asarray(inputs.plain["bleu"], dtype=np.float64) / 2, None, ["halved"] * n)


def test_compute_rows_stores_exactly_the_registry_axes():
    """Every option asked for, with every input present: one row per (variant, axis), the six
    plain axes then the registry's option axes in its order, none dropped or added."""
    h = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    base = GenerationResult("Paris is the capital of France.", 7, hidden_last=h, hidden_user_last=h,
                            hidden_user_mean=h, token_logprobs=np.array([-1.0, -2.0]),
                            token_entropies=np.array([1.0, 1.0]), token_ids=[1, 2])
    res = [GenerationResult("PARIS is the capital.", 5, hidden_last=h + 1, hidden_user_last=h - 1,
                            hidden_user_mean=h * 2, token_logprobs=np.array([-2.0, -2.0]),
                            token_entropies=np.array([1.5, 1.5]), token_ids=[1, 3])]
    v = Variant("p/v0", "p", VariantSpec("surface_noise", "case", 1.0, "GLOBAL"), "WHAT IS IT?", seed=0)
    forced = (np.array([-0.5, -0.25]), np.array([1.0, 2.0]))
    unit = Unit("p", "ds", base, [v], res, prompt_text="What is it?", forced=[forced], forced_base=forced)
    _, d = compute_rows("r", [unit], DEFAULT_NORMALIZERS, CAPS, options=ALL_OPTION_AXES, bert_baseline=0.12)
    assert tuple(d["axis"]) == (*AXES, *OPTION_AXIS_SPECS.names())
    assert Scoring("r", DEFAULT_NORMALIZERS, CAPS, options=ALL_OPTION_AXES).axes == tuple(d["axis"])
    opt = d[d["axis"].isin(OPTION_AXIS_SPECS.names())].set_index("axis")
    assert opt["available"].all(), opt.loc[~opt["available"], "reason"].to_dict()
