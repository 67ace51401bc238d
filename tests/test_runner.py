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


def test_plan_lists_only_the_models_asked_for(tmp_path, capsys):
    """``--plan --model X`` lists X's run only, as the run itself would do only X's."""
    text = TINY + CAP_MODELS
    conf = _cfg(tmp_path, text.replace('label = "tiny·cap3"', 'label = "tiny-a"').replace('label = "tiny·cap9"', 'label = "tiny-b"'))
    assert cli_main(["--config", str(conf), "--plan"]) == 0
    both = capsys.readouterr().out
    assert "tiny-a: run" in both and "tiny-b: run" in both
    assert cli_main(["--config", str(conf), "--plan", "--model", "tiny-b"]) == 0
    one = capsys.readouterr().out
    assert "tiny-b: run" in one and "tiny-a: run" not in one


# ----------------------------------------------------------------------------- reply-cap ablation (issue #16 item 2)

CAP_MODELS = '''
[[models]]
key = "tiny-random"
batch_size = 4
label = "tiny·cap3"
max_new_tokens = 3

[[models]]
key = "tiny-random"
batch_size = 4
label = "tiny·cap9"
max_new_tokens = 9
'''


def test_labelled_runs_differ_only_in_cap_and_pair_up(tmp_path):
    """Two [[models]] entries of one model with a label and their own max_new_tokens: two runs
    under their labels, each capped at its own length, the zoo key kept in the record, and
    ``cap_pairs`` finds exactly that pair (and no pair in a plain run)."""
    import json

    from precompute.runner import make_plan, run_id_for
    from sago_engine.runpairs import cap_pairs

    text = TINY.split("[[models]]")[0] + CAP_MODELS
    cfg = load_config(_cfg(tmp_path, text))
    assert [cfg.max_new_tokens_for(m) for m in cfg.models] == [3, 9] and cfg.max_new_tokens == 6
    plan = make_plan(cfg)
    ids = [run_id_for(cfg, m, plan) for m in cfg.models]
    assert len(set(ids)) == 2
    from dataclasses import replace

    # the label and the cap each move the run id; a cap equal to [run]'s gives the unlabelled run's id
    m0 = cfg.models[0]
    assert run_id_for(cfg, replace(m0, label="other"), plan) != ids[0]
    assert run_id_for(cfg, replace(m0, max_new_tokens=4), plan) != ids[0]
    assert (run_id_for(cfg, replace(m0, label=None, max_new_tokens=6), plan)
            == run_id_for(cfg, replace(m0, label=None, max_new_tokens=None), plan))
    f = CountingFactory()
    summaries = run(cfg, progress=False, backend_factory=f)
    assert [s["model"] for s in summaries] == ["tiny·cap3", "tiny·cap9"]
    with open_store(cfg.store) as st:
        runs = st.runs().set_index("model")
        assert set(runs.index) == {"tiny·cap3", "tiny·cap9"}
        for label, cap in (("tiny·cap3", 3), ("tiny·cap9", 9)):
            r = runs.loc[label]
            assert json.loads(r["decoding"])["max_new_tokens"] == cap
            assert json.loads(r["config"])["run_model"] == {"key": "tiny-random", "label": label, "max_new_tokens": cap}
            assert f"max_new:{cap}" in r["fingerprint"]
        resp = st.con.execute("SELECT r.model, max(s.n_tokens), count(*) FROM responses s JOIN runs r USING (run_id) "
                              "GROUP BY r.model ORDER BY r.model").fetchall()
        assert [(m, n) for m, n, _ in resp] == [("tiny·cap3", 3), ("tiny·cap9", 9)]
        assert resp[0][2] == resp[1][2] == 4 * 6
        pairs = cap_pairs(st.runs())
    assert len(pairs) == 1
    p = pairs.iloc[0]
    assert (p["model_key"], p["model_short"], p["model_long"], p["cap_short"], p["cap_long"]) == (
        "tiny-random", "tiny·cap3", "tiny·cap9", 3, 9)
    assert {p["run_short"], p["run_long"]} == set(ids)
    # a second, plain store of the same model pairs with nothing (one run only)
    (tmp_path / "plain").mkdir()
    plain = load_config(_cfg(tmp_path / "plain"))
    run(plain, progress=False)
    with open_store(plain.store) as st:
        assert cap_pairs(st.runs()).empty
    # --model takes a label
    assert cli_main(["--config", str(tmp_path / "c.toml"), "--model", "tiny·cap9", "--no-progress"]) == 0


def test_cap_pairs_needs_every_other_setting_equal(tmp_path):
    """A second setting that differs (here the dtype, or the seed) breaks the pair."""
    from sago_engine.runpairs import cap_pairs

    base = {"run_id": "a", "model": "m·48", "backend": "hf_local", "dtype": "float32", "seed": 1,
            "decoding": '{"greedy": true, "max_new_tokens": 48, "batch_size": 8}',
            "config": '{"run_model": {"key": "m", "label": "m·48", "max_new_tokens": 48}}'}
    long = {**base, "run_id": "b", "model": "m·128",
            "decoding": '{"greedy": true, "max_new_tokens": 128, "batch_size": 8}',
            "config": '{"run_model": {"key": "m", "label": "m·128", "max_new_tokens": 128}}'}
    assert cap_pairs(pd.DataFrame([base, long]))[["run_short", "run_long"]].values.tolist() == [["a", "b"]]
    assert cap_pairs(pd.DataFrame([base, {**long, "dtype": "bfloat16"}])).empty
    assert cap_pairs(pd.DataFrame([base, {**long, "seed": 2}])).empty
    other_key = {**long, "config": '{"run_model": {"key": "n", "label": "m·128", "max_new_tokens": 128}}'}
    assert cap_pairs(pd.DataFrame([base, other_key])).empty
    assert cap_pairs(pd.DataFrame([base, {**base, "run_id": "c", "model": "m·48b"}])).empty  # same cap: no pair


def test_duplicate_run_names_are_rejected(tmp_path):
    text = TINY.split("[[models]]")[0] + CAP_MODELS.replace("tiny·cap9", "tiny·cap3")
    with pytest.raises(ConfigError, match=r"named 'tiny·cap3'.*distinct label"):
        load_config(_cfg(tmp_path, text))
    with pytest.raises(ConfigError, match=r"max_new_tokens must be an integer ≥ 1"):
        load_config(_cfg(tmp_path, TINY.split("[[models]]")[0] + CAP_MODELS.replace("= 9", "= 0")))
