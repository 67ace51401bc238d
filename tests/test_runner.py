"""The precompute runner end to end (tiny random model): store contents, idempotent rerun, config errors, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from precompute.__main__ import main as cli_main
from precompute.config import ConfigError, load_config
from precompute.runner import run
from sago_engine.store import open_store
from sago_engine.types import AXES, OPTION_AXES
from tests.factories import tiny_toml

ROOT = Path(__file__).resolve().parent.parent

TINY = tiny_toml()  # seed 7, chunk_prompts 2, n_prompts 2, batch_size 4


def _cfg(tmp_path, text=TINY, **kw):
    p = tmp_path / "c.toml"
    p.write_text(text.format(store=tmp_path / "s.duckdb", data=ROOT / "data" / "datasets", **kw))
    return p


class CountingFactory:
    """Wraps get_backend and counts how many backends were built and prompts generated."""

    def __init__(self):
        self.built = 0
        self.generated = 0

    def __call__(self, spec):
        from sago_engine.backends import get_backend

        self.built += 1
        b = get_backend(spec)
        orig = b.generate

        def generate(prompts, max_new_tokens):
            self.generated += len(prompts)
            return orig(prompts, max_new_tokens)

        b.generate = generate
        return b


def test_end_to_end_then_idempotent_rerun(tmp_path):
    cfg = load_config(_cfg(tmp_path))
    f = CountingFactory()
    [summary] = run(cfg, progress=False, backend_factory=f)
    assert f.built == 1 and f.generated == 4 * (1 + 5) == summary["generated"]
    with open_store(cfg.store) as st:
        counts = st.counts()
        assert counts["prompts"] == 4 and counts["variants"] == 20 and counts["units"] == 4
        assert counts["responses"] == 4 * 6
        # the six axes plus every option axis (white-box run: all are computed by default)
        assert counts["deltas"] == 20 * (len(AXES) + len(OPTION_AXES))
        d = st.deltas(kept_only=False)
        assert set(d["axis"]) == set(AXES)  # plain reads show the six only
        assert d["available"].all()  # hf_local measures all six axes
        assert d["delta_norm"].between(-1, 1).all()
        o = st.deltas(kept_only=False, axes=OPTION_AXES)
        assert set(o["axis"]) == set(OPTION_AXES) and o["available"].all() and o["delta_norm"].between(-1, 1).all()
        rec = json.loads(st.runs().loc[0, "config"])["axis_options"]
        assert rec["axes"] == list(OPTION_AXES) and 0 < rec["bert_rescaled_baseline"] < 1
        runs = st.runs()
        assert len(runs) == 1 and runs.loc[0, "status"] == "complete"
        for col in ("seed", "normalizers", "versions", "encoder", "fingerprint", "semantic_filter", "dtype"):
            assert runs.loc[0, col] is not None
        assert "tiny-random" in runs.loc[0, "fingerprint"]
        base = st.con.execute("SELECT count(*) FROM responses WHERE variant_id IS NULL").fetchall()[0][0]
        assert base == 4
        assert len(st.view("sgs_total")) == len(AXES)
    # rerun: no backend built, no generation, no new rows
    f2 = CountingFactory()
    [s2] = run(cfg, progress=False, backend_factory=f2)
    assert f2.built == 0 and f2.generated == 0 and s2["pending"] == 0
    with open_store(cfg.store) as st:
        assert st.counts() == counts


def test_partial_store_resumes_only_missing_units(tmp_path):
    cfg = load_config(_cfg(tmp_path))
    run(cfg, progress=False)
    with open_store(cfg.store, read_only=False) as st:
        full = st.deltas(kept_only=False)
        pid = sorted(st.done_units(st.runs().loc[0, "run_id"]))[0]
        st.con.execute("DELETE FROM units WHERE prompt_id = ?", [pid])
        st.con.execute("DELETE FROM deltas WHERE prompt_id = ?", [pid])
        st.con.execute("DELETE FROM responses WHERE prompt_id = ?", [pid])
    f = CountingFactory()
    run(cfg, progress=False, backend_factory=f)
    # only the chunk holding the missing prompt runs again (chunk_prompts = 2 → 2 × (base + 5 variants)),
    # with exactly the batches of the first run, so its numbers come back identical
    assert f.generated == 12
    with open_store(cfg.store) as st:
        assert st.counts()["units"] == 4
        again = st.deltas(kept_only=False)
    pd.testing.assert_frame_equal(full, again)


@pytest.mark.parametrize(
    "patch, match",
    [
        (("tiny-random", "tiny-randon"), r"unknown model 'tiny-randon'.*Did you mean 'tiny-random'"),
        (('"alpaca"', '"alpacca"'), r"unknown dataset 'alpacca'.*Valid:.*alpaca"),
        (('"structural"]', '"structurel"]'), r"unknown variant family 'structurel'.*structural"),
        (("seed = 7", "seed = 7\nsede = 1"), r"unknown key 'sede'"),
        (("seed = 7", 'seed = "abc"'), r"seed must be an integer"),
        (("chunk_prompts = 2", "chunk_prompts = 0"), r"chunk_prompts must be an integer ≥ 1"),
        (("max_new_tokens = 6", "max_new_tokens = -5"), r"max_new_tokens must be an integer ≥ 1"),
        (('key = "tiny-random"', 'dtype = "float32"'), r"\[\[models\]\] entry has no key"),
        (("batch_size = 4", 'batch_size = 4\ndevice = "tpu"'), r"unknown device 'tpu'"),
        (("[run]", "run = 5\n[other]"), r"unknown config section 'other'|must be a table"),
        (("per_family", 'positions = ["PREFIX", "MIDDLE"]\nper_family'), r"unknown position 'MIDDLE'.*GLOBAL.*PREFIX.*SUFFIX"),
        (("per_family", "strengths = [1, 7]\nper_family"), r"unknown strength 7.*Valid: -5"),
        (("per_family", 'subtypes = ["politness"]\nper_family'), r"unknown subtype 'politness'.*Did you mean 'politeness'"),
    ],
)
def test_config_errors_list_valid_choices(tmp_path, patch, match):
    text = TINY.replace(*patch)
    with pytest.raises(ConfigError, match=match):
        load_config(_cfg(tmp_path, text))


def test_grid_filter_restricts_variants(tmp_path):
    text = TINY.replace("per_family", 'positions = ["SUFFIX"]\nper_family')
    from precompute.runner import make_plan

    plan = make_plan(load_config(_cfg(tmp_path, text)))
    specs = [v.spec for vs in plan.variants.values() for v in vs]
    assert specs and {s.position for s in specs} == {"SUFFIX"}
    assert "structural" not in {s.family for s in specs}  # structural is GLOBAL only


def test_cli_help_and_bad_config(tmp_path, capsys):
    out = subprocess.run([sys.executable, "-m", "precompute", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0
    for opt in ("--config", "--store", "--model", "--n-prompts", "--plan", "--no-progress"):
        assert opt in out.stdout
    bad = _cfg(tmp_path, TINY.replace("tiny-random", "gpt-7"))
    assert cli_main(["--config", str(bad)]) == 2
    assert "unknown model 'gpt-7'" in capsys.readouterr().err
