"""Synthetic sago stores for page tests (no model needed): known deltas, two models, two datasets."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from sago_engine.store import open_store
from sago_engine.types import AXES, DEFAULT_NORMALIZERS


#: A small real run on the tiny random model ({store}, {data} filled by the caller; knobs as keywords).
TINY_TOML = """
[run]
store = "{{store}}"
seed = {seed}
max_new_tokens = 6
chunk_prompts = {chunk_prompts}

[data]
dir = "{{data}}"
datasets = ["truthfulqa", "alpaca"]
n_prompts = {n_prompts}

[variants]
families = ["social_register", "surface_noise", "structural"]
per_family = {{{{ social_register = 2, surface_noise = 2, structural = 1 }}}}

[[models]]
key = "tiny-random"
batch_size = {batch_size}
"""


def tiny_toml(seed: int = 7, chunk_prompts: int = 2, n_prompts: int = 2, batch_size: int = 4) -> str:
    """TINY_TOML with its knobs set; still a template over ``{store}`` and ``{data}``."""
    return TINY_TOML.format(seed=seed, chunk_prompts=chunk_prompts, n_prompts=n_prompts, batch_size=batch_size)


def make_store(path, models=("model-a", "model-b"), datasets=("truthfulqa", "nq_open"), n_prompts=4, n_variants=3,
               seed=0, missing_axes: dict | None = None):
    """Write a small store with random signed deltas; ``missing_axes`` = {model: [axes]} stored as unavailable."""
    rng = np.random.default_rng(seed)
    missing_axes = missing_axes or {}
    with open_store(path, read_only=False, create=True) as st:
        runs = pd.DataFrame([{"run_id": f"run-{m}", "model": m, "backend": "synthetic", "seed": seed,
                              "normalizers": json.dumps(DEFAULT_NORMALIZERS), "status": "complete",
                              "fingerprint": f"synthetic|{m}"} for m in models])
        prompts, variants, deltas = [], [], []
        for d in datasets:
            for i in range(n_prompts):
                pid = f"{d}:{i}"
                prompts.append({"prompt_id": pid, "dataset": d, "source_id": str(i), "text": f"Question {i} of {d}?"})
                for j in range(n_variants):
                    vid = f"{pid}/v{j}"
                    fam = ("social_register", "surface_noise", "structural")[j % 3]
                    variants.append({"variant_id": vid, "prompt_id": pid, "family": fam, "subtype": "x",
                                     "strength": float(j), "position": "GLOBAL", "text": f"Q {i} {d} v{j}",
                                     "seed": j, "kept": True, "semantic_score": 0.9, "passes_filter": True})
                    for m in models:
                        for a in AXES:
                            if a in missing_axes.get(m, ()):
                                deltas.append((f"run-{m}", d, pid, vid, a, None, None, False, "unavailable (test)", None))
                                continue
                            x = -abs(rng.normal(0.2, 0.1)) if a in ("cos", "bleu", "bert") else rng.normal(0, 0.2)
                            deltas.append((f"run-{m}", d, pid, vid, a, x * DEFAULT_NORMALIZERS[a],
                                           float(np.clip(x, -1, 1)), True, None, None))
        st.insert_df("runs", runs)
        st.insert_df("prompts", pd.DataFrame(prompts))
        st.insert_df("variants", pd.DataFrame(variants))
        st.insert_df("deltas", pd.DataFrame(deltas, columns=["run_id", "dataset", "prompt_id", "variant_id", "axis",
                                                             "delta", "delta_norm", "available", "reason", "detector"]))
    return path


class ScriptedBackend:
    """A fake ``Backend`` for LLM judge / rewriter tests: answers from a script, records every prompt.

    ``respond(prompt) -> str`` gives each answer (default: ``"YES"``); an answer that is an
    ``Exception`` instance becomes a result with ``error`` set. ``calls`` holds one list of
    prompts per ``generate`` call.
    """

    name = "scripted"
    capabilities = frozenset()

    def __init__(self, model: str = "scripted-judge", respond=None, **kwargs):
        self.model_id = model
        self.respond = respond or (lambda prompt: "YES")
        self.kwargs = kwargs
        self.calls: list[list[str]] = []
        self.closed = False

    def info(self) -> dict:
        return {"backend": self.name, "model_id": self.model_id, "source": "test script"}

    def generate(self, prompts, max_new_tokens):
        from sago_engine.types import GenerationResult

        self.calls.append(list(prompts))
        out = []
        for p in prompts:
            a = self.respond(p)
            out.append(GenerationResult(text="", error=str(a)) if isinstance(a, Exception) else GenerationResult(text=a))
        return out

    def close(self) -> None:
        self.closed = True


def scripted_factory(respond, built: list):
    """A runner ``backend_factory``: specs with ``backend = "scripted"`` get a ``ScriptedBackend``
    answering with ``respond(prompt)`` (appended to ``built``); any other spec goes to ``get_backend``."""

    def factory(spec):
        if spec.get("backend") == "scripted":
            built.append(ScriptedBackend(spec["model"], respond=respond))
            return built[-1]
        from sago_engine.backends import get_backend

        return get_backend(spec)

    return factory
