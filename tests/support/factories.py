"""Synthetic sago stores for page tests (no model needed): known deltas, two models, two datasets."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from sago_engine.backends import Backend
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
               seed=0, missing_axes: dict | None = None, run_fields: dict | None = None,
               model_scale: dict | None = None, variant_fields=None):
    """Write a small store with random signed deltas; ``missing_axes`` = {model: [axes]} stored as unavailable;
    ``run_fields`` = {model: {runs column: value}} added to that model's run record (JSON columns as text);
    ``model_scale`` = {model: factor} multiplies that model's Δ̃ (well-separated models: no ranking is close);
    ``variant_fields(dataset, i, j) -> {variants column: value}`` adds or replaces columns of variant j of
    prompt i (e.g. subtype, ``meta`` as JSON text, semantic_score, kept); the deltas are drawn the same."""
    rng = np.random.default_rng(seed)
    model_scale = model_scale or {}
    missing_axes = missing_axes or {}
    run_fields = run_fields or {}
    with open_store(path, read_only=False, create=True) as st:
        runs = pd.DataFrame([{"run_id": f"run-{m}", "model": m, "backend": "synthetic", "seed": seed,
                              "normalizers": json.dumps(DEFAULT_NORMALIZERS), "status": "complete",
                              "fingerprint": f"synthetic|{m}", **run_fields.get(m, {})} for m in models])
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
                                     "seed": j, "kept": True, "semantic_score": 0.9, "passes_filter": True,
                                     **(variant_fields(d, i, j) if variant_fields else {})})
                    for m in models:
                        for a in AXES:
                            if a in missing_axes.get(m, ()):
                                deltas.append((f"run-{m}", d, pid, vid, a, None, None, False, "unavailable (test)", None))
                                continue
                            x = -abs(rng.normal(0.2, 0.1)) if a in ("cos", "bleu", "bert") else rng.normal(0, 0.2)
                            x *= model_scale.get(m, 1.0)
                            deltas.append((f"run-{m}", d, pid, vid, a, x * DEFAULT_NORMALIZERS[a],
                                           float(np.clip(x, -1, 1)), True, None, None))
        st.insert_df("runs", runs)
        st.insert_df("prompts", pd.DataFrame(prompts))
        st.insert_df("variants", pd.DataFrame(variants))
        st.insert_df("deltas", pd.DataFrame(deltas, columns=["run_id", "dataset", "prompt_id", "variant_id", "axis",
                                                             "delta", "delta_norm", "available", "reason", "detector"]))
    return path


def add_option_axes(path, options: dict | None = None, factors: dict | None = None, seed: int = 0):
    """Add option axes ``<base>@<option>`` to a ``make_store`` store: for every stored (run, variant) of
    ``base``, Δ̃ = clip(factor × Δ̃_base + N(0, 0.02)), Δ = Δ̃ × R_base. ``options`` = {base: (option, …)}
    (default: Δ-Cos user_last / user_mean, Δ-BERT rescaled); ``factors`` = {"base@option": factor}
    (default 1.5 for every option; a model-dependent factor is {"base@option": {model: factor}})."""
    options = options or {"cos": ("user_last", "user_mean"), "bert": ("rescaled",)}
    factors = factors or {}
    rng = np.random.default_rng(seed)
    with open_store(path, read_only=False) as st:
        d = st.deltas(kept_only=False)
        rows = []
        for base, opts in options.items():
            b = d[(d["axis"] == base) & d["available"]]
            for o in opts:
                name = f"{base}@{o}"
                fac = factors.get(name, 1.5)
                for r in b.itertuples(index=False):
                    k = fac.get(r.model, 1.5) if isinstance(fac, dict) else fac
                    x = float(np.clip(k * r.delta_norm + rng.normal(0, 0.02), -1, 1))
                    rows.append((r.run_id, r.dataset, r.prompt_id, r.variant_id, name, x * DEFAULT_NORMALIZERS[base],
                                 x, True, None, None))
        st.insert_df("deltas", pd.DataFrame(rows, columns=["run_id", "dataset", "prompt_id", "variant_id", "axis",
                                                           "delta", "delta_norm", "available", "reason", "detector"]))
    return path


def add_judge_verdicts(path, verdicts=None, seed: int = 0):
    """Add base and variant replies and two ``mirroring_verdicts`` rows (response_of "variant" / "base") per
    (run, social_register variant) of a ``make_store`` store. ``verdicts(i) -> (judge 1/0/None, heuristic 1/0)``
    for the i-th row in (run, variant, response_of) order; default: seeded random with 75% agreement."""
    rng = np.random.default_rng(seed)

    def rnd(i):
        h = int(rng.integers(0, 2))
        return (h if rng.random() < 0.75 else 1 - h), h

    verdicts = verdicts or rnd
    with open_store(path, read_only=False) as st:
        runs = st.runs()
        var = st.variants()
        sr = var[var["family"] == "social_register"].sort_values("variant_id")
        resp, ver = [], []
        i = 0
        for run_id in sorted(runs["run_id"]):
            for pid in sorted(var["prompt_id"].unique()):
                resp.append({"response_id": f"{run_id}/{pid}/base", "run_id": run_id, "prompt_id": pid,
                             "variant_id": None, "response": f"Base reply to {pid}."})
            for v in sr.itertuples(index=False):
                resp.append({"response_id": f"{run_id}/{v.variant_id}", "run_id": run_id, "prompt_id": v.prompt_id,
                             "variant_id": v.variant_id, "response": f"Reply to {v.variant_id}, in kind."})
                for of in ("base", "variant"):
                    j, h = verdicts(i)
                    i += 1
                    ver.append({"run_id": run_id, "variant_id": v.variant_id, "prompt_id": v.prompt_id,
                                "response_of": of, "judge_model": "scripted-judge", "template_id": "t1",
                                "verdict": j, "raw": {1: "YES", 0: "NO", None: "maybe?"}[j], "error": None,
                                "heuristic_verdict": h, "detector": "judge:scripted-judge"})
        st.insert_df("responses", pd.DataFrame(resp))
        st.insert_df("mirroring_verdicts", pd.DataFrame(ver).astype({"verdict": "Int64"}))
    return path


def make_cap_store(path, caps=(48, 128), seed: int = 0, **kwargs):
    """A ``make_store`` store whose two runs are one model at two reply length caps (labels
    ``smol-cap<cap>``): run records equal except ``max_new_tokens`` in decoding and
    ``config.run_model``, as the runner writes them for ``precompute/configs/ablation_cap.toml``."""
    models = tuple(f"smol-cap{c}" for c in caps)

    def fields(c):
        return {"model_source": "zoo:smol", "dtype": "float32",
                "decoding": json.dumps({"greedy": True, "max_new_tokens": c, "batch_size": 8}),
                # as precompute's runner records a labelled run with its own cap (runner.run_model_record)
                "config": json.dumps({"run": {"seed": seed, "max_new_tokens": caps[0], "store": "cap.duckdb"},
                                      "models": [{"key": "smol", "label": f"smol-cap{k}", "max_new_tokens": k}
                                                 for k in caps],
                                      "run_model": {"key": "smol", "label": f"smol-cap{c}", "max_new_tokens": c}})}

    return make_store(path, models=models, seed=seed, run_fields={m: fields(c) for m, c in zip(models, caps)}, **kwargs)


class ScriptedBackend(Backend):
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


def register_scripted_backend():
    """Register backend ``scripted`` (``ScriptedBackend``) so that configs accept it; returns the undo."""
    from sago_engine.backends import BACKENDS

    BACKENDS.register("scripted", "tests.support.factories:ScriptedBackend")
    return lambda: BACKENDS.unregister("scripted")


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
