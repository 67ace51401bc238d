"""Configuration values are values from outside: every number of a config (TOML has nan and inf)
and every environment variable sago reads is checked for type, finiteness and range before any
work starts, naming the key."""

from __future__ import annotations

import re

import pytest

from precompute.__main__ import main as cli_main
from precompute.config import ConfigError, load_config
from sago_engine.envcheck import ENV_VARS, EnvError, check_environment
from tests.integration.precompute.test_runner import TINY, _cfg

API = '\n[[models]]\nkey = "served"\nbackend = "openai_compatible"\nbase_url = "http://127.0.0.1:9/v1"\n'


@pytest.mark.parametrize("patch, match", [
    (("seed = 7", "seed = 7\n[normalizers]\ncos = nan"), r"normalizers\.cos = nan: every number in a config must be finite"),
    (("per_family", "strengths = [1, inf]\nper_family"), r"variants\.strengths\[1\] = inf"),
    (("batch_size = 4", "batch_size = 4" + API + "timeout_s = -inf"), r"models\[1\]\.timeout_s = -inf"),
    (("batch_size = 4", "batch_size = 4" + API + "price_in_per_mtok = nan"), r"models\[1\]\.price_in_per_mtok = nan"),
    (("batch_size = 4", "batch_size = 4" + API + "timeout_s = 1e308"), r"timeout_s must be a number > 0, finite and ≤ 1e\+09"),
    (("batch_size = 4", "batch_size = 4" + API + "max_concurrency = 9223372036854775807"),
     r"max_concurrency must be an integer ≥ 1 and ≤ 1000000000"),
    (("max_new_tokens = 6", "max_new_tokens = 9223372036854775807"), r"max_new_tokens must be an integer ≥ 1 and ≤ 2147483647"),
])
def test_non_finite_and_out_of_range_numbers_are_refused_naming_the_key(tmp_path, patch, match):
    text = TINY.replace(*patch)
    assert text != TINY
    with pytest.raises(ConfigError, match=match):
        load_config(_cfg(tmp_path, text), check_keys=False)


@pytest.mark.parametrize("name, value, want", [
    ("SAGO_THREADS", "nan", "an integer from 1 to 4096"),
    ("SAGO_THREADS", "0", "an integer from 1 to 4096"),
    ("SAGO_LIVE_THREADS", "1e308", "an integer from 1 to 4096"),
    ("SAGO_LIVE_MAX_CHARS", "99999999999999999999", "an integer from 1 to 1000000"),
    ("SAGO_LINEAR_KERNEL", "mkl", "one of onednn, torch"),
    ("SAGO_LIVE", "maybe", "one of 0, 1"),
    ("HF_HUB_OFFLINE", "offline", "one of 0, 1"),
    ("SAGO_USER_STORE", "/", "a file path (it names a folder)"),
    ("RAY_ADDRESS", "a\x00b", "text without NUL"),
])
def test_each_environment_variable_is_checked_by_name(name, value, want):
    with pytest.raises(EnvError, match=f"environment variable {name}=.* is not valid: it must be {re.escape(want)}"):
        check_environment({name: value})
    check_environment({name: ""})  # unset or empty: the default applies


def test_a_bad_environment_value_stops_the_cli_before_any_work(tmp_path, monkeypatch, capsys):
    conf = _cfg(tmp_path)
    monkeypatch.setenv("SAGO_THREADS", "nan\x1b[2J")
    assert cli_main(["--config", str(conf), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "environment variable SAGO_THREADS='nan\\x1b[2J' is not valid" in err and "\x1b" not in err
    assert not (tmp_path / "s.duckdb").exists()


def test_every_variable_the_docs_list_is_checked():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "CONFIG.md").read_text(encoding="utf-8")
    assert all(name in doc for name in ENV_VARS)
