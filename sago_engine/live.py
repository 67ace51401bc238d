"""Live probes: perturb one typed prompt, run base + variants in batches, score each batch as it lands.

SAGO (arXiv 2610.01428) §Notation, §Variants, §Axes. All numbers come from the same functions
as the offline runner: variants from ``sago_engine.variants``, Δ rows from
``sago_engine.pipeline.compute_rows``, s_X(i) from ``sago_engine.scoring.prompt_scores``.
Nothing here keeps results in module globals: the caller passes a cache (the Live page keeps
one per browser session in ``st.session_state``), so two sessions never see each other's probes.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, MutableMapping, Sequence

import numpy as np
import pandas as pd

from sago_engine.noop import model_input_noops, text_noops
from sago_engine.pipeline import Unit, compute_rows
from sago_engine.scoring import prompt_scores, resolve_normalizers
from sago_engine.seeds import stable_hash
from sago_engine.types import AXES, AXIS_LABELS, DEFAULT_MAX_NEW_TOKENS, GenerationResult, Variant, VariantSpec

__all__ = [
    "DEFAULT_MODEL", "LIVE_DATASET", "LiveError", "LiveProbe", "ProbeResult", "GENERATE_CALLS",
    "max_prompt_chars", "check_prompt", "choose_specs", "plan_probe", "batch_slices", "load_backend",
    "run_probe", "variant_table", "result_table", "prompt_profile", "default_user_store", "save_probe",
]

#: Default model of the Live page (small enough for a 2-core CPU).
DEFAULT_MODEL = "smollm2-135m-instruct"
#: Dataset name under which live probes are stored.
LIVE_DATASET = "live"
#: Default cap on the prompt length (characters); override with ``SAGO_LIVE_MAX_CHARS``.
DEFAULT_MAX_CHARS = 2000
#: Counter of backend ``generate`` calls made by ``run_probe`` (process-wide; a metric, not a result).
GENERATE_CALLS = {"n": 0}

_locks: dict[int, threading.Lock] = {}
_locks_guard = threading.Lock()


class LiveError(ValueError):
    """A probe that cannot run (empty or too long prompt, no variant selected); the message is for the user."""


def max_prompt_chars() -> int:
    """The prompt length cap: ``$SAGO_LIVE_MAX_CHARS`` or ``DEFAULT_MAX_CHARS``."""
    try:
        return max(1, int(os.environ.get("SAGO_LIVE_MAX_CHARS", DEFAULT_MAX_CHARS)))
    except ValueError:
        return DEFAULT_MAX_CHARS


def check_prompt(text: str | None, max_chars: int | None = None) -> str:
    """The prompt stripped of surrounding whitespace.

    Raises:
        LiveError: empty / whitespace-only, or longer than ``max_chars`` (default ``max_prompt_chars()``).
    """
    t = (text or "").strip()
    cap = max_prompt_chars() if max_chars is None else max_chars
    if not t:
        raise LiveError("The prompt is empty: type a prompt (or pick one from a dataset) first.")
    if len(t) > cap:
        raise LiveError(f"The prompt has {len(t):,} characters; the live page accepts at most {cap:,} "
                        "(set SAGO_LIVE_MAX_CHARS to change the limit).")
    return t


def choose_specs(families: Iterable[str], subtypes: Iterable[str] | None = None,
                 strengths: Iterable[float] | None = None, positions: Iterable[str] | None = None,
                 max_variants: int | None = None, prompt_id: str = "live", seed: int = 0) -> list[VariantSpec]:
    """The (F, u, s, p) cells of the chosen families that match the selections (empty/None = all).

    When more than ``max_variants`` cells match, a deterministic stratified sample
    (``variants.sample_grid``) of about max_variants/len(families) per family is taken, so every
    family is represented.

    Raises:
        LiveError: no family chosen, or no cell matches the selections.
    """
    from sago_engine.variants import full_grid, sample_grid

    fams = list(dict.fromkeys(families))
    if not fams:
        raise LiveError("Choose at least one variant family.")
    su = set(subtypes) if subtypes else None
    st = {float(s) for s in strengths} if strengths else None
    po = set(positions) if positions else None

    def keep(s: VariantSpec) -> bool:
        return (su is None or s.subtype in su) and (st is None or s.strength in st) and (po is None or s.position in po)

    grid = [s for s in full_grid(fams) if keep(s)]
    if not grid:
        raise LiveError("No variant matches the chosen families, subtypes, strengths and positions.")
    if max_variants is None or len(grid) <= max_variants:
        return grid
    sizes = {f: sum(1 for s in grid if s.family == f) for f in fams}
    present = [f for f in fams if sizes[f]]
    # share max_variants across the families present; a small family gives its unused share to the others
    per: dict[str, int] = {}
    left, todo = int(max_variants), sorted(present, key=lambda f: sizes[f])
    while todo:
        f = todo.pop(0)
        per[f] = min(sizes[f], left // (len(todo) + 1))
        left -= per[f]
    return sample_grid(prompt_id, per, seed, families=present, keep=keep)


@dataclass(frozen=True)
class LiveProbe:
    """One typed prompt and its variants (built before any model runs)."""

    prompt_id: str
    """``"live:<hash of the text>"``."""
    text: str
    """The base prompt x (stripped)."""
    variants: tuple[Variant, ...]
    """x^(v) for each chosen (F, u, s, p), in grid order."""
    seed: int
    """Run seed the variants' seeds derive from."""
    skipped: Mapping[str, str] = field(default_factory=dict)
    """variant_id → why it is never run: its text equals the prompt (``noop.text_noops``)."""


def plan_probe(text: str, specs: Sequence[VariantSpec], seed: int = 0, max_chars: int | None = None) -> LiveProbe:
    """Check the prompt and build its variants (``variants.make_variants``); no model is touched.

    A variant whose text equals the prompt (case noise on a script without letter case, a prompt
    that is all protected spans) is listed in ``skipped`` with its reason: it is never run.

    Raises:
        LiveError: bad prompt (see ``check_prompt``) or no spec.
    """
    from sago_engine.variants import make_variants

    t = check_prompt(text, max_chars)
    if not specs:
        raise LiveError("No variant selected.")
    pid = f"live:{stable_hash(t, length=12)}"
    vs = tuple(make_variants(pid, t, specs, seed))
    return LiveProbe(pid, t, vs, int(seed), text_noops(t, vs))


def batch_slices(n: int, first: int = 3, size: int = 8) -> list[slice]:
    """Variant index ranges per batch: a small first batch (it also carries the base prompt), then ``size``."""
    out, i = [], 0
    if n and first > 0:
        out.append(slice(0, min(first, n)))
        i = min(first, n)
    while i < n:
        out.append(slice(i, min(i + max(1, size), n)))
        i = out[-1].stop
    return out


def load_backend(model: str, dtype: str = "float32", device: str = "cpu", batch_size: int = 8):
    """Load a local model (zoo key, ``"tiny-random"`` or folder) through ``backends.get_backend``.

    Weights are not packed (``HFLocalBackend(pack_weights=False)``). Sets torch's thread count to
    ``$SAGO_LIVE_THREADS`` when given (else torch's default, one per core) unless ``SAGO_THREADS``
    is set.

    Raises:
        whatever the backend raises (ModelUnavailableError, ValueError, OSError …); the page shows it.
    """
    from sago_engine.backends import get_backend

    if not os.environ.get("SAGO_THREADS") and os.environ.get("SAGO_LIVE_THREADS"):
        import torch

        # On the 2-core box, quiet: 2 threads give the full 24-variant profile in 9.1 s vs 15.3 s
        # with 1; under heavy load from other processes 1 thread was ~10x faster (OpenMP threads
        # spin against them). So torch's default unless SAGO_LIVE_THREADS says otherwise.
        torch.set_num_threads(max(1, int(os.environ["SAGO_LIVE_THREADS"])))
    # not packed (kernels.pack_linear_weights): a live model stays loaded for the server's life,
    # and its few rows per call gain little from the extra copies of its weights
    return get_backend({"name": "hf_local", "model": model, "dtype": dtype, "device": device,
                        "batch_size": batch_size, "pack_weights": False})


# ---------------------------------------------------------------- background warm-up (issue #15.7)
# One loaded backend per model per server process, shared read-only by sessions (generate calls
# are serialised by ``_lock_for``). The dashboard starts loading the default model and the
# BERTScore encoder when it starts, so the first probe does not wait for both.
_shared: dict[str, Any] = {}
_shared_guard = threading.Lock()
_warm: dict[str, Any] = {"state": "idle", "model": None, "step": "", "t0": None, "ready_s": None, "error": None}
_warm_done = threading.Event()


def shared_backend(model: str) -> Any:
    """The process-wide backend of ``model``: waits for a running warm-up of it, else loads it once.

    Raises whatever ``load_backend`` raises (the Live page shows it).
    """
    if _warm["model"] == model and _warm["state"] == "loading":
        _warm_done.wait()
    with _shared_guard:
        if model not in _shared:
            _shared[model] = load_backend(model)
        return _shared[model]


def _warm_up(model: str) -> None:
    try:
        _warm["step"] = f"loading {model}"
        with _shared_guard:
            if model not in _shared:
                _shared[model] = load_backend(model)
        _warm["step"] = "loading the BERTScore encoder"
        from sago_engine.bertscore import bertscore_f1

        bertscore_f1(["warm"], ["warm up"])  # loads and runs the encoder once
        _warm["state"], _warm["step"] = "ready", "ready"
    except Exception as e:  # noqa: BLE001 - reported by warmup_status; a probe then loads and shows the error
        _warm["state"], _warm["error"] = "failed", f"{type(e).__name__}: {e}"
    finally:
        _warm["ready_s"] = time.perf_counter() - _warm["t0"]
        _warm_done.set()


def start_warmup(model: str = DEFAULT_MODEL) -> bool:
    """Load ``model`` and the BERTScore encoder in a background thread (once per process).

    Returns True when this call started it. Never raises: a failure is kept in ``warmup_status``.
    """
    with _shared_guard:
        if _warm["state"] != "idle":
            return False
        _warm.update(state="loading", model=model, t0=time.perf_counter(), step="starting")
    threading.Thread(target=_warm_up, args=(model,), name="sago-live-warmup", daemon=True).start()
    return True


def warmup_status() -> dict[str, Any]:
    """``{"state": idle|loading|ready|failed, "model", "step", "elapsed_s", "ready_s", "error"}`` of the warm-up."""
    st = dict(_warm)
    st["elapsed_s"] = None if st["t0"] is None else time.perf_counter() - st["t0"]
    st.pop("t0", None)
    return st


def _lock_for(backend: Any) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(id(backend), threading.Lock())


def _generate(backend: Any, texts: list[str], max_new_tokens: int) -> list[GenerationResult]:
    """One ``backend.generate`` call, serialised per backend (sessions share the loaded model)."""
    with _lock_for(backend):
        GENERATE_CALLS["n"] += 1
        return backend.generate(texts, max_new_tokens)


@dataclass
class ProbeResult:
    """What a (possibly partial) probe produced so far."""

    probe: LiveProbe
    model: str
    max_new_tokens: int
    normalizers: dict[str, float]
    capabilities: frozenset[str]
    base: GenerationResult | None = None
    responses: dict[str, dict] = field(default_factory=dict)
    """variant_id → response row (``compute_rows`` columns)."""
    deltas: dict[str, pd.DataFrame] = field(default_factory=dict)
    """variant_id → its six delta rows."""
    kept: dict[str, bool] = field(default_factory=dict)
    """variant_id → semantic filter verdict (filled after the last batch)."""
    skipped: dict[str, str] = field(default_factory=dict)
    """variant_id → why it was not run: the probe's text no-ops and, for this model, variants whose
    model input equals the prompt's (``noop.model_input_noops``). No Δ, in no score."""
    semantic: dict[str, float | None] = field(default_factory=dict)
    filter_info: dict = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds per stage: generate, score, filter; and first_result_s / total_s."""
    cached: int = 0
    """How many variants came from the cache."""
    cancelled: bool = False

    @property
    def done(self) -> int:
        return len(self.deltas)

    @property
    def complete(self) -> bool:
        return self.done + len(self.skipped) == len(self.probe.variants) and not self.cancelled

    def delta_frame(self) -> pd.DataFrame:
        """All delta rows so far (``compute_rows`` columns), in variant order."""
        parts = [self.deltas[v.variant_id] for v in self.probe.variants if v.variant_id in self.deltas]
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
            columns=["run_id", "dataset", "prompt_id", "variant_id", "axis", "delta", "delta_norm", "available",
                     "reason", "detector"])


def _key(model: str, max_new: int, normalizers: dict, text: str, variant_id: str) -> tuple:
    return (model, int(max_new), tuple(sorted(normalizers.items())), text, variant_id)


def run_probe(backend: Any, probe: LiveProbe, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, normalizers: dict | None = None,
              cache: MutableMapping | None = None, on_batch: Callable[[ProbeResult], None] | None = None,
              should_stop: Callable[[], bool] | None = None, first_batch: int = 3, batch_size: int = 8,
              semantic_filter: bool = True) -> ProbeResult:
    """Run base + variants in batches; after each batch its rows are scored and ``on_batch`` is called.

    The first batch holds the base prompt and ``first_batch`` variants (a fast first result);
    later batches hold ``batch_size`` variants. Each batch is scored with
    ``pipeline.compute_rows`` (the offline runner's code). Results are cached in ``cache`` per
    (model, max_new_tokens, R_X, prompt, variant) — a repeated probe makes no generate call.
    ``should_stop`` is checked between batches; a stopped probe is returned partial with
    ``cancelled=True``. After the last batch the semantic filter (SAGO §Variants) marks which
    variants are kept for s_X, as in a stored run. No-op variants (``ProbeResult.skipped``: text
    equal to the prompt, or the same token ids as the prompt for this backend) are not run.

    Raises:
        LiveError: the base prompt plus ``max_new_tokens`` does not fit the model's context (a
            backend with ``context_error``, e.g. ``HFLocalBackend``); nothing is generated. A
            variant that does not fit is an error row (every axis n/a), as in a stored run.
    """
    t0 = time.perf_counter()
    norms = resolve_normalizers(normalizers)
    cache = {} if cache is None else cache
    model = str(getattr(backend, "model_id", "?"))
    res = ProbeResult(probe, model, int(max_new_tokens), norms, frozenset(backend.capabilities))
    tim = {"generate": 0.0, "score": 0.0, "filter": 0.0}
    res.timings = tim
    bkey = _key(model, max_new_tokens, norms, probe.text, "<base>")
    res.base = cache.get(bkey)
    live_vs = [v for v in probe.variants if v.variant_id not in probe.skipped]
    res.skipped = {**probe.skipped, **model_input_noops(backend, probe.text, live_vs)}
    variants = [v for v in live_vs if v.variant_id not in res.skipped]
    todo = []
    for v in variants:
        hit = cache.get(_key(model, max_new_tokens, norms, probe.text, v.variant_id))
        if hit is not None and res.base is not None:
            res.responses[v.variant_id], res.deltas[v.variant_id] = hit
            res.cached += 1
        else:
            todo.append(v)
    if res.deltas and on_batch:
        tim["first_result_s"] = time.perf_counter() - t0
        on_batch(res)
    too_long = getattr(backend, "context_error", None)
    why = too_long(probe.text, max_new_tokens) if res.base is None and callable(too_long) else None
    if why:
        raise LiveError(f"This prompt cannot be answered by {model}: {why}. Shorten the prompt or lower New tokens.")
    for sl in batch_slices(len(todo), first_batch, batch_size) or ([slice(0, 0)] if res.base is None else []):
        if should_stop and should_stop():
            res.cancelled = True
            break
        batch = todo[sl]
        texts = ([probe.text] if res.base is None else []) + [v.text for v in batch]
        t = time.perf_counter()
        out = _generate(backend, texts, max_new_tokens)
        tim["generate"] += time.perf_counter() - t
        if res.base is None:
            res.base, out = out[0], out[1:]
            cache[bkey] = res.base
        t = time.perf_counter()
        if batch:
            resp, dl = compute_rows("live", [Unit(probe.prompt_id, LIVE_DATASET, res.base, batch, out)], norms,
                                    res.capabilities)
            for v in batch:
                r = resp[resp["variant_id"] == v.variant_id].iloc[0].to_dict()
                d = dl[dl["variant_id"] == v.variant_id].reset_index(drop=True)
                res.responses[v.variant_id], res.deltas[v.variant_id] = r, d
                cache[_key(model, max_new_tokens, norms, probe.text, v.variant_id)] = (r, d)
        tim["score"] += time.perf_counter() - t
        tim.setdefault("first_result_s", time.perf_counter() - t0)
        if on_batch:
            on_batch(res)
    if semantic_filter and res.done:
        t = time.perf_counter()
        _apply_filter(res, cache)
        tim["filter"] += time.perf_counter() - t
    tim["total_s"] = time.perf_counter() - t0
    return res


def _apply_filter(res: ProbeResult, cache: MutableMapping) -> None:
    """Semantic filter verdicts for the scored variants (cached per prompt + variant set)."""
    from sago_engine.variants.semantic_filter import FilterConfig, apply_filter, effective_threshold

    vs = [v for v in res.probe.variants if v.variant_id in res.deltas]
    key = ("filter", res.probe.text, tuple(v.variant_id for v in vs))
    if key not in cache:
        cfg = FilterConfig()
        verdicts = apply_filter(vs, {res.probe.prompt_id: res.probe.text}, cfg)
        cache[key] = ({vd.variant_id: vd.kept for vd in verdicts},
                      {vd.variant_id: vd.semantic_score for vd in verdicts},
                      {vd.variant_id: vd.passes for vd in verdicts}, effective_threshold(cfg))
    res.kept, res.semantic, _, res.filter_info = cache[key]


# ---------------------------------------------------------------- tables and the radar
def _label(spec: VariantSpec) -> str:
    from sago_engine.detail import variant_label

    return variant_label(spec.family, spec.subtype, spec.strength, spec.position)


def variant_table(probe: LiveProbe) -> pd.DataFrame:
    """One row per variant: label, family, subtype, strength, position, text, changed, skip_reason."""
    return pd.DataFrame([{"label": _label(v.spec), **v.spec.as_dict(), "text": v.text,
                          "changed": v.text != probe.text, "skip_reason": probe.skipped.get(v.variant_id)}
                         for v in probe.variants],
                        columns=["label", "family", "subtype", "strength", "position", "text", "changed", "skip_reason"])


def _mirroring_verdict(d: float | None) -> str:
    if d is None or d != d:
        return "n/a"
    return {1: "starts mirroring", -1: "stops mirroring"}.get(int(round(d)), "no change")


def result_table(res: ProbeResult) -> pd.DataFrame:
    """The variant table with, per finished variant, its response, Δ̃ per axis and the mirroring verdict.

    Unfinished variants have status "pending" and empty cells; a no-op variant has status
    "skipped" and its ``skip_reason`` (never Δ = 0); a variant whose reply is an error (e.g.
    longer than the model's context) has status "error" and the reason as its response; an
    unavailable axis is NaN (n/a).
    """
    rows = []
    for v in res.probe.variants:
        row: dict[str, Any] = {"label": _label(v.spec), **v.spec.as_dict(), "variant": v.text,
                               "skip_reason": res.skipped.get(v.variant_id)}
        d = res.deltas.get(v.variant_id)
        if d is None:
            row.update(status="skipped" if row["skip_reason"] else "pending", response=None, mirroring=None,
                       kept=False if row["skip_reason"] else None)
            row.update({AXIS_LABELS[a]: np.nan for a in AXES})
        else:
            by = d.set_index("axis")
            resp = res.responses[v.variant_id]
            row.update(status="error" if resp.get("error") else "done", response=resp.get("error") or resp["response"],
                       kept=res.kept.get(v.variant_id))
            for a in AXES:
                ok = a in by.index and bool(by.loc[a, "available"])
                row[AXIS_LABELS[a]] = float(by.loc[a, "delta_norm"]) if ok else np.nan
            mr = by.loc["mr", "delta"] if "mr" in by.index and bool(by.loc["mr", "available"]) else None
            row["mirroring"] = _mirroring_verdict(mr)
        rows.append(row)
    cols = ["status", "label", "family", "subtype", "strength", "position", "variant", "response",
            *[AXIS_LABELS[a] for a in AXES], "mirroring", "kept", "skip_reason"]
    return pd.DataFrame(rows, columns=cols)


def prompt_profile(res: ProbeResult) -> pd.DataFrame:
    """s_X of the probed prompt per axis (``scoring.prompt_scores``): axis, axis_label, s, n_variants.

    Only variants the semantic filter keeps count (as in a stored run); an axis with no
    available delta gets NaN (shown as n/a, never 0).
    """
    d = res.delta_frame()
    if res.kept:
        d = d[d["variant_id"].map(lambda vid: res.kept.get(vid, True))]
    d = d.assign(delta_norm=d["delta_norm"].where(d["available"].astype(bool)))
    sc = prompt_scores(d) if len(d) else pd.DataFrame(columns=["axis", "s", "n_variants"])
    vals = dict(zip(sc["axis"], sc["s"]))
    ns = dict(zip(sc["axis"], sc["n_variants"]))
    return pd.DataFrame([{"axis": a, "axis_label": AXIS_LABELS[a], "s": float(vals.get(a, np.nan)),
                          "n_variants": int(ns.get(a, 0))} for a in AXES])


# ---------------------------------------------------------------- save to a user store
_SAVE_NAMES = ("default_user_store", "probe_frames", "probe_run_id", "save_probe")


def __getattr__(name: str) -> Any:
    """``default_user_store``, ``probe_frames``, ``probe_run_id``, ``save_probe``: from ``live_save``."""
    if name in _SAVE_NAMES:
        from sago_engine import live_save

        return getattr(live_save, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
