"""One run-id formula (``runrecord.run_id``): the offline runner and Live's save both call it, and it
hashes exactly what each hashed before, so the ids of existing stores do not move."""

from pathlib import Path
from types import SimpleNamespace

from sago_engine.runrecord import run_id
from sago_engine.seeds import stable_hash

R = {"bert": 1.0, "bleu": 100.0, "cos": 2.0, "ent": 10.0, "mr": 1.0, "prob": 250.0}
FILTER = {"threshold": 0.85, "scale": "roberta-large", "level": "prompt"}
ROOT = Path(__file__).resolve().parents[3]


def test_run_id_is_the_formula_stores_were_written_with():
    # pinned: the ids these settings got from the two formulas before there was one
    assert run_id(("gemma-3-270m", "hf_local", "float32"), 48, 20261129, R, (FILTER, "0123abcd")) == "d3344a98e72e80f0"
    assert run_id(("gemma-3-270m", "hf_local", "float32"), 48, 20261129, R, (FILTER, "0123abcd"),
                  [{"label": "x"}]) == "24269054c7ca98d7"
    assert run_id(("live", "smollm2-135m-instruct"), 64, 3, R, ("live:abc", ["v1", "v2"])) == "5e0ed5806cedec03"


def test_runner_and_live_save_both_call_it(tmp_path):
    from precompute.config import load_config
    from precompute.runner import Plan, run_id_for
    from sago_engine.live.save import probe_run_id
    from tests.support.factories import tiny_toml

    (tmp_path / "t.toml").write_text(tiny_toml().format(store=tmp_path / "s.duckdb", data=ROOT / "data" / "datasets"))
    cfg = load_config(tmp_path / "t.toml")
    plan = Plan([], {}, None, {})
    m = cfg.models[0]
    want = run_id((m.key, m.backend, m.dtype), cfg.max_new_tokens_for(m), cfg.seed, cfg.normalizers,
                  (cfg.filter, plan.signature))
    assert run_id_for(cfg, m, plan) == want == stable_hash(
        m.key, m.backend, m.dtype, {"greedy": True, "max_new_tokens": cfg.max_new_tokens_for(m)}, cfg.seed,
        cfg.normalizers, cfg.filter, plan.signature, length=16)
    from sago_engine.live.probe import GREEDY, Sampling

    res = SimpleNamespace(model="smollm2-135m-instruct", max_new_tokens=64, normalizers=R, measured=["v1", "v2"],
                          probe=SimpleNamespace(seed=3, prompt_id="live:abc"), sampling=GREEDY)
    assert probe_run_id(res) == run_id(("live", res.model), 64, 3, R, ("live:abc", ["v1", "v2"])) == "5e0ed5806cedec03"
    sampled = SimpleNamespace(**{**vars(res), "sampling": Sampling(0.7, 4)})  # the runner's sampling extra
    assert probe_run_id(sampled) == run_id(("live", res.model), 64, 3, R, ("live:abc", ["v1", "v2"]),
                                           [{"sampling": {"temperature": 0.7, "top_p": 1.0, "top_k": 0, "samples": 4}}])
