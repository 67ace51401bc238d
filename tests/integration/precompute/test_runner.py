"""The precompute runner end to end (tiny random model): store contents, idempotent rerun, config errors, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from precompute.__main__ import main as cli_main
from precompute.config import ConfigError, load_config
from precompute.runner import run
from sago_engine.store import open_store
from sago_engine.types import AXES, OPTION_AXES
from tests.support.factories import tiny_toml

ROOT = Path(__file__).resolve().parents[3]

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
    _requests_are_the_rendered_prompts(cfg.store)


def _requests_are_the_rendered_prompts(store) -> None:
    """Every reply stores its request: the chat template applied to the text it answered, as the
    tokenizer renders it (computed here with ``apply_chat_template``); a store whose requests were
    lost gets the same text back from ``rendered.fill_requests``."""
    from sago_engine.models import load_tokenizer
    from sago_engine.verify.rendered import fill_requests

    tok = load_tokenizer("smollm2-135m-instruct")  # the tiny random model's tokenizer
    sql = ("SELECT x.response_id, coalesce(v.text, p.text) AS text, x.request FROM responses x JOIN prompts p "
           "USING (prompt_id) LEFT JOIN variants v USING (variant_id) ORDER BY x.response_id")
    with open_store(store) as st:
        got = st.con.execute(sql).df()
    want = [tok.apply_chat_template([{"role": "user", "content": t}], tokenize=False, add_generation_prompt=True)
            for t in got["text"]]
    assert list(got["request"]) == want and all("<|im_start|>assistant" in w for w in want)
    con = duckdb.connect(str(store))
    con.execute("UPDATE responses SET request = NULL")
    con.close()
    [res] = fill_requests(store)
    assert res.rendered == len(got) and res.skipped is None
    with open_store(store) as st:
        assert list(st.con.execute(sql).df()["request"]) == want
    assert fill_requests(store)[0].rendered == 0  # nothing left to render


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


# ----------------------------------------------------------------------------- reply-cap ablation

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
    from sago_engine.scoring.runpairs import cap_pairs

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
    from sago_engine.scoring.runpairs import cap_pairs

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


# ---------------------------------------------------------------- variants that do not vary
SCRIPTS = ["ما هي عاصمة فرنسا؟", "法国的首都是哪里？", "מהי בירת צרפת?", "ราชธานีของฝรั่งเศสคืออะไร",
           "फ्रांस की राजधानी क्या है?"]
NOOP_TOML = """
[run]
store = "{store}"
seed = 3
max_new_tokens = 4

[data]
dir = "{data}"
datasets = ["scripts"]

[variants]
families = ["surface_noise"]
{grid}

[[models]]
key = "tiny-random"
"""


def _scripts_cfg(tmp_path, grid: str):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / "scripts.jsonl").write_text("".join(json.dumps({"id": str(i), "prompt": t}, ensure_ascii=False) + "\n"
                                                for i, t in enumerate([*SCRIPTS, "What is the capital of France?"])))
    p = tmp_path / "c.toml"
    p.write_text(NOOP_TOML.format(store=tmp_path / "s.duckdb", data=data, grid=grid))
    return load_config(p)


def test_case_noise_on_scripts_without_case_is_stored_as_noop_and_never_run(tmp_path, capsys):
    from precompute.runner import make_plan

    cfg = _scripts_cfg(tmp_path, 'subtypes = ["case"]')  # the full case grid: 9 cells per prompt
    plan = make_plan(cfg)
    reason = "no-op: nothing to change for surface_noise · case"
    assert len(plan.noops) == 5 * 9 and set(plan.noops.values()) == {reason}
    assert plan.noops.keys() <= plan.skip
    rows = plan.variant_rows.set_index("variant_id")
    assert not rows.loc[list(plan.noops), "kept"].any() and (rows.loc[list(plan.noops), "skip_reason"] == reason).all()
    english = rows[rows["prompt_id"] == "scripts:5"]
    assert english["kept"].all() and english["skip_reason"].isna().all()
    assert cli_main(["--config", str(tmp_path / "c.toml"), "--plan"]) == 0
    assert "no-op variants (text equals the base prompt; stored with kept = false, not run): 45" in capsys.readouterr().out
    f = CountingFactory()
    [summary] = run(cfg, progress=False, backend_factory=f)
    assert f.generated == 6 + 9  # six base prompts, the English prompt's nine case variants; no no-op
    assert summary["noop_text"] == {"surface_noise · case": 45}
    with open_store(cfg.store) as st:
        v = st.variants()
        assert len(v) == 54 and (v["skip_reason"] == reason).sum() == 45
        d = st.deltas(kept_only=False)
        assert set(d["prompt_id"]) == {"scripts:5"}  # no Δ row (least of all Δ = 0) for a no-op
        assert set(st.prompt_scores()["prompt_id"]) == {"scripts:5"}
        counts = st.noop_counts()
    assert counts["model"].isna().all() and counts["n"].sum() == 45 and set(counts["reason"]) == {reason}
    assert len(counts) == 9  # one row per cell (strength × position)


def test_sampled_grid_draws_cells_that_change_the_prompt(tmp_path):
    from precompute.runner import make_plan
    from sago_engine.variants import sample_grid

    cfg = _scripts_cfg(tmp_path, "per_family = { surface_noise = 6 }")
    plan = make_plan(cfg)
    assert not plan.noops
    for p in plan.prompts:
        specs = [v.spec for v in plan.variants[p.prompt_id]]
        assert len(specs) == 6 and all(v.text != p.text for v in plan.variants[p.prompt_id])
        if p.prompt_id == "scripts:5":  # English: every cell applies, so the picks are the unconditioned ones
            assert specs == sample_grid(p.prompt_id, {"surface_noise": 6}, cfg.seed)
        else:
            assert "case" not in {s.subtype for s in specs}
    thai = [v.spec.subtype for v in plan.variants["scripts:3"]]  # no spaces either: punctuation is all that applies
    assert set(thai) == {"punctuation"}


def test_same_model_input_is_skipped_per_model_and_left_out_of_every_score(tmp_path):
    """A variant whose model input equals its base prompt's under a template that trims the message
    (Llama-3 / Gemma style): not generated, stored as unavailable rows with the reason, counted per
    model and cell, shown on the Variants page; scores equal those of the run without it."""
    from dataclasses import replace

    from streamlit.testing.v1 import AppTest

    from precompute.runner import make_plan, run_model, write_plan
    from sago_engine.backends.hf_local import HFLocalBackend
    from sago_engine.measure.storerows import variant_rows
    from sago_engine.variants.noop import MODEL_INPUT_NOOP
    from tests.integration.live.test_live import TRIM_TEMPLATE

    cfg = _scripts_cfg(tmp_path, 'subtypes = ["spacing"]\npositions = ["SUFFIX"]')
    cfg = replace(cfg, datasets=("scripts",), n_prompts=6)
    plan = make_plan(cfg)
    pid = "scripts:5"
    base = next(p.text for p in plan.prompts if p.prompt_id == pid)
    first = plan.variants[pid][0]
    edge = replace(first, variant_id="edge-whitespace", text=base + "\n")
    plan.variants[pid] = [*plan.variants[pid], edge]
    plan = replace(plan, variant_rows=pd.concat([plan.variant_rows, variant_rows([edge], {}, {}, {}, json_meta=False)],
                                                ignore_index=True))
    built = []

    def factory(spec):
        be = HFLocalBackend("tiny-random", batch_size=8, pack_weights=False)
        be.template = TRIM_TEMPLATE
        built.append(be)
        return be

    with open_store(tmp_path / "m.duckdb", read_only=False, create=True) as st:
        write_plan(st, plan)
        summary = run_model(cfg, cfg.models[0], plan, st, progress=False, backend_factory=factory)
        assert summary["noop_model_input"] == {"surface_noise · spacing": 1}
        assert summary["generated"] == sum(1 + len(plan.to_generate(p.prompt_id)) for p in plan.prompts) - 1
        d = st.deltas(kept_only=False, axes=(*AXES, *OPTION_AXES))
        e = d[d["variant_id"] == "edge-whitespace"]
        assert len(e) == len(AXES) + len(OPTION_AXES) and not e["available"].any()
        assert set(e["reason"]) == {MODEL_INPUT_NOOP} and e["delta_norm"].isna().all()
        assert st.con.execute("SELECT count(*) FROM responses WHERE variant_id = 'edge-whitespace'").fetchall() == [(0,)]
        scores = st.prompt_scores().set_index(["prompt_id", "axis"])
        n_other = len(plan.variants[pid]) - 1
        assert (scores.loc[pid, "n_variants"] == n_other).all()
        plain = d[(d["prompt_id"] == pid) & d["available"] & d["axis"].isin(AXES)]
        for a in AXES:  # s_X over the variants that were run, exactly
            x = plain.loc[plain["axis"] == a, "delta_norm"].to_numpy()
            assert scores.loc[(pid, a), "s"] == pytest.approx(float(np.sqrt(np.mean(x ** 2))), abs=1e-12)
        avail = st.axis_availability().set_index("axis")
        assert (avail["n_unavailable"] == 1).all() and avail["reasons"].str.contains("no-op: model input").all()
        counts = st.noop_counts()
        assert counts[["model", "subtype", "position", "reason", "n"]].values.tolist()[-1] == [
            "tiny-random", "spacing", "SUFFIX", MODEL_INPUT_NOOP, 1]
        assert counts["model"].isna().sum() == 3  # and every model: spacing cannot change the Thai prompt (no spaces)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["app_store_custom"] = str(tmp_path / "m.duckdb")
    at.run()
    at.switch_page("pages/variants.py")
    at.run()
    assert not at.exception, at.exception
    table = next(t.value for t in at.dataframe if "why" in t.value.columns)
    assert table[["model", "why", "variants"]].values.tolist() == [
        *[["every model", "nothing to change for surface_noise · spacing", 1]] * 3,
        ["tiny-random", "model input equals the base prompt's after the chat template", 1]]
