"""Each backend's settings dataclass: its keys reach the backend's constructor, and ``ModelConfig``
holds exactly the keys every entry has plus every registered backend's settings."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from precompute.model_config import ENTRY_KEYS, ModelConfig
from sago_engine.backends.base import BACKENDS, SETTINGS, settings_for
from sago_engine.backends.settings import BackendSettings


def _accepted(cls: type) -> set[str]:
    """Keyword parameters a class's constructor takes, following ``**kw`` up the MRO."""
    out: set[str] = set()
    for c in cls.__mro__:
        if "__init__" not in vars(c):
            continue
        params = inspect.signature(c.__init__).parameters
        out |= {k for k, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            break
    return out


#: Settings a backend's ``check_table`` refuses, so its constructor never gets them.
REFUSED = {"openai": ("api_version",), "openai_compatible": ("api_version",)}


@pytest.mark.parametrize("name", list(SETTINGS))
def test_every_setting_is_a_constructor_parameter(name):
    """``BackendSettings.spec`` passes the fields by name: a field the constructor lacks would fail at load."""
    accepted = _accepted(BACKENDS[name])
    missing = [k for k in SETTINGS[name].keys() if k not in accepted and k not in REFUSED.get(name, ())]
    assert not missing, f"{name}: settings {missing} are not parameters of {BACKENDS[name].__name__}"
    for k in REFUSED.get(name, ()):
        with pytest.raises(ValueError, match=k):
            SETTINGS[name].check_table({k: "v1", "base_url": "http://localhost:8000/v1"}, name)
    if SETTINGS[name].takes_run_seed:
        assert "seed" in accepted


def test_model_config_holds_the_entry_keys_and_every_backends_settings():
    keys = set(ModelConfig.__dataclass_fields__)
    union = {k for n in SETTINGS for k in SETTINGS[n].keys()}
    assert keys == set(ENTRY_KEYS) | union and not set(ENTRY_KEYS) & union
    for n in SETTINGS:  # the flat defaults are the settings' own
        for f in dataclasses.fields(SETTINGS[n]):
            assert ModelConfig.__dataclass_fields__[f.name].default == f.default, (n, f.name)
    m = ModelConfig(key="g", backend="gemini", top_logprobs=3)
    assert type(m.settings) is SETTINGS["gemini"] and m.settings.top_logprobs == 3
    assert m.settings.spec()["top_logprobs"] == 3 and "dtype" not in m.settings.spec()


def test_a_backend_registered_without_settings_takes_no_keys():
    assert settings_for("no-such-backend") is BackendSettings and BackendSettings.keys() == ()
    assert BackendSettings().spec() == {}


def test_importing_the_config_loads_no_model_library():
    code = ("import sys, precompute.config; "
            "assert not {'torch', 'transformers', 'openai', 'anthropic', 'google.genai'} & set(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[3])
