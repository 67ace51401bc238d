"""The Backend protocol declares every optional ability with its default: callers never probe a
backend with ``getattr``/``hasattr``, and the reply-cache wrapper forwards each ability by name."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from sago_engine.backends import Backend
from sago_engine.backends.caching import CachingBackend
from sago_engine.backends.protocol import OPTIONAL_ABILITIES
from sago_engine.types import GenerationResult

ROOT = Path(__file__).resolve().parents[3]
MEMBERS = {"name", "model_id", "capabilities", "info", "generate", "close", *OPTIONAL_ABILITIES}
#: What the code calls a backend (``backend``, ``be``, ``self.local``, ``self.backend``, ``inner``…).
BACKEND_NAMES = re.compile(r"(^|\.)(backend|be|local|inner|server)\b")


class Bare(Backend):
    name, model_id, capabilities = "bare", "bare-1", frozenset()

    def info(self):
        return {"backend": self.name}

    def generate(self, prompts, max_new_tokens):
        return [GenerationResult(text=p) for p in prompts]


class Able(Bare):
    """Overrides every optional ability with a value that names it."""

    template, context_length, model, thread_choice, sampling = "T", 7, "M", {"threads": 1}, "S"

    def encode_prompt(self, prompt):
        return [1, 2]

    def context_error(self, prompt, max_new_tokens):
        return "too long"

    def teacher_force(self, prompts, responses):
        return ["tf"]

    def take_usage(self):
        return {"requests": 1}

    def totals(self):
        return {"requests": 2}

    def cache_key(self, prompt, max_new_tokens, repeat=0):
        return "key"

    def result_from_cache(self, value):
        return GenerationResult(text="cached")

    def logprob_check(self):
        return {"max_abs_diff": 0.0}


class NoCache:
    def get(self, key):
        return None

    def put(self, key, value):
        pass

    def close(self):
        pass


def test_every_optional_ability_has_a_default_of_none():
    be = Bare()
    assert isinstance(be, Backend)
    calls = {"encode_prompt": ("q",), "context_error": ("q", 4), "teacher_force": (["q"], [[1]]),
             "cache_key": ("q", 4), "result_from_cache": ({},)}
    for name in OPTIONAL_ABILITIES:
        value = getattr(be, name)
        assert (value(*calls.get(name, ())) if callable(value) else value) is None, name


@pytest.mark.parametrize("name", OPTIONAL_ABILITIES)
def test_the_reply_cache_wrapper_forwards_every_ability(name):
    inner, wrapped = Able(), CachingBackend(Able(), NoCache())
    args = {"encode_prompt": ("q",), "context_error": ("q", 4), "teacher_force": (["q"], [[1]]),
            "cache_key": ("q", 4), "result_from_cache": ({},)}.get(name, ())
    a, b = getattr(inner, name), getattr(wrapped, name)
    got, want = (b(*args), a(*args)) if callable(a) else (b, a)
    if name in ("take_usage", "totals"):  # the wrapper adds its cache hits to the wrapped counters
        assert {k: got[k] for k in want} == want
    elif isinstance(want, GenerationResult):
        assert got.text == want.text
    else:
        assert got == want


def _probes(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value in MEMBERS
                and BACKEND_NAMES.search(ast.unparse(node.args[0]))):
            out.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.func.id}(…, {node.args[1].value!r})")
    return out


def test_no_module_probes_a_declared_backend_member():
    """A declared ability is called (its default answers None), never looked up with getattr/hasattr."""
    probes = [p for top in ("sago_engine", "precompute", "dashboard", "pages")
              for f in sorted((ROOT / top).rglob("*.py")) for p in _probes(f)]
    assert not probes, "getattr/hasattr probes of Backend members: " + "; ".join(probes)
