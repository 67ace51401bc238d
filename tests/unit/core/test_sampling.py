"""Sampled decoding as a study setting: config checks, run ids and sample seeds. The sampled runs
themselves (byte-identical replies twice, at other batch sizes, after a SIGKILL and resume) are
tests/integration/precompute/test_sampled_runs.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from precompute.config import load_config
from precompute.config_errors import ConfigError
from precompute.plan import make_plan
from precompute.records import run_id_for
from sago_engine.seeds import sample_seed
from tests.support.factories import tiny_toml

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "data" / "datasets"
#: The run id of ``tiny_toml(seed=7)`` (greedy) as computed before sampled decoding existed.
GREEDY_TINY_RUN_ID = "3ce91cad13c737f9"
SAMPLED = "temperature = 0.8\ntop_p = 0.95\ntop_k = 40\nsamples = 3\n"


def _config(tmp_path: Path, extra: str = "", name: str = "c", **knobs):
    path = tmp_path / f"{name}.toml"
    path.write_text(tiny_toml(**{"seed": 7, **knobs}).format(store=tmp_path / f"{name}.duckdb", data=DATA) + extra)
    return path


@pytest.mark.parametrize("extra, words", [
    ("temperature = -0.1\n", "temperature must be a finite number in [0, 100]"),
    ("temperature = nan\n", "models[0].temperature = nan: every number in a config must be finite"),
    ("temperature = inf\n", "models[0].temperature = inf: every number in a config must be finite"),
    ("temperature = \"hot\"\n", "temperature must be a finite number"),
    ("temperature = 0.7\ntop_p = 0.0\n", "top_p must be a finite number in (0, 1]"),
    ("temperature = 0.7\ntop_p = 1.5\n", "top_p must be a finite number in (0, 1]"),
    ("temperature = 0.7\ntop_k = -1\n", "top_k must be an integer ≥ 0"),
    ("temperature = 0.7\ntop_k = 2.5\n", "top_k must be an integer ≥ 0"),
    ("temperature = 0.7\nsamples = 0\n", "samples must be an integer ≥ 1"),
    ("samples = 4\n", "samples = 4 needs sampled decoding: set temperature > 0"),
    ("top_p = 0.9\n", "top_p only apply to sampled decoding"),
    ("top_k = 5\n", "top_k only apply to sampled decoding"),
])
def test_sampling_keys_are_checked_and_named(tmp_path, extra, words):
    with pytest.raises(ConfigError) as e:
        load_config(_config(tmp_path, extra))
    # the model is named by its entry: its key, or its index where every number of a config is checked
    assert words in str(e.value) and ("tiny-random" in str(e.value) or "models[0]." in str(e.value))


def test_api_backend_refuses_sampling_keys_by_name(tmp_path):
    api = '\n[[models]]\nkey = "gpt-x"\nbackend = "openai"\ntemperature = 0.7\n'
    with pytest.raises(ConfigError, match="temperature do not apply to the openai backend"):
        load_config(_config(tmp_path, api))
    with pytest.raises(ConfigError, match="the openai backend offers no sampled decoding"):
        load_config(_config(tmp_path, '\n[[models]]\nkey = "gpt-x"\nbackend = "openai"\nsamples = 2\n'))


def test_greedy_run_ids_unchanged_and_sampling_enters_only_when_sampled(tmp_path):
    cfg = load_config(_config(tmp_path))
    plan = make_plan(cfg)
    assert run_id_for(cfg, cfg.models[0], plan) == GREEDY_TINY_RUN_ID  # byte-identical to before sampling existed
    explicit = load_config(_config(tmp_path, "temperature = 0.0\nsamples = 1\ntop_p = 1.0\ntop_k = 0\n", name="e"))
    assert run_id_for(explicit, explicit.models[0], plan) == GREEDY_TINY_RUN_ID
    assert cfg.models[0].sampling is None
    sampled = load_config(_config(tmp_path, SAMPLED, name="s"))
    m = sampled.models[0]
    assert m.sampling == {"temperature": 0.8, "top_p": 0.95, "top_k": 40, "samples": 3}
    ids = {run_id_for(sampled, m, plan)}
    for other in ("temperature = 0.7\n", "temperature = 0.8\n", "temperature = 0.8\nsamples = 2\n",
                  "temperature = 0.8\ntop_p = 0.5\n"):
        c = load_config(_config(tmp_path, other, name="o"))
        ids.add(run_id_for(c, c.models[0], plan))
    assert GREEDY_TINY_RUN_ID not in ids and len(ids) == 5


def test_sample_seeds_are_hashes_of_run_seed_prompt_variant_and_index():
    a = sample_seed(7, "p1", None, 0)
    assert a == sample_seed(7, "p1", None, 0) and 0 <= a < 2 ** 63
    others = {sample_seed(8, "p1", None, 0), sample_seed(7, "p2", None, 0), sample_seed(7, "p1", "v1", 0),
              sample_seed(7, "p1", None, 1)}
    assert a not in others and len(others) == 4
