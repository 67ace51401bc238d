"""Live probes: perturb one typed prompt, run base + variants in batches, score each batch as it lands.

SAGO (arXiv 2610.01428) §Notation, §Variants, §Axes. All numbers come from the same functions
as the offline runner: variants from ``sago_engine.variants``, each batch measured by
``sago_engine.measure.step`` (screen, prepare, generate, score), s_X(i) from
``sago_engine.scoring.scores.prompt_scores``. Nothing here keeps results in module globals: the caller
passes a cache (the Live page keeps one per browser session in ``st.session_state``), so two
sessions never see each other's probes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from sago_engine.live.loaded_models import (
    DEFAULT_MODEL,
    LIVE_BATCH,
    decoding_as,
    load_backend,
    lock_for,
    shared_backend,
    start_warmup,
    warmup_status,
)
from sago_engine.live.request import (
    GREEDY,
    LIVE_DATASET,
    LIVE_RUN,
    LiveError,
    Sampling,
    Selection,
    check_prompt,
    choose_specs,
    max_prompt_chars,
)
from sago_engine.measure.step import Rows, Scoring, Screening, generate, prepare, score, screen, set_aside_rows
from sago_engine.scoring.scores import prompt_scores, resolve_normalizers, sgs
from sago_engine.seeds import stable_hash
from sago_engine.types import AXES, AXIS_LABELS, DEFAULT_MAX_NEW_TOKENS, GenerationResult, Variant, VariantSpec
from sago_engine.variants import make_variants
from sago_engine.variants.semantic_filter import FilterConfig
from sago_engine.views.detail import variant_label
from sago_engine.views.sampling import prompt_separation

__all__ = [
    "DEFAULT_MODEL", "LIVE_BATCH", "LIVE_DATASET", "LIVE_RUN", "LiveError", "LiveProbe", "ProbeResult", "Selection",
    "Sampling", "GREEDY",
    "max_prompt_chars", "check_prompt", "choose_specs", "probe_id", "plan_probe", "batch_slices", "run_probe",
    "variant_table", "result_table", "prompt_profile", "store_profile", "probe_movement",
    # the loaded models (sago_engine.live.loaded_models)
    "load_backend", "shared_backend", "start_warmup", "warmup_status",
]

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
    """variant_id → why it is never run: its text equals the prompt (``measure.screen``' no-ops)."""




def probe_id(text: str) -> str:
    """``"live:<hash of the text>"``: the prompt id of a probe of ``text`` (already checked and stripped)."""
    return f"live:{stable_hash(text, length=12)}"


def plan_probe(text: str, specs: Sequence[VariantSpec] | Selection, seed: int = 0,
               max_chars: int | None = None) -> LiveProbe:
    """Check the prompt and build its variants (``variants.make_variants``); no model is touched.

    ``specs`` are the cells, or a ``Selection`` drawn for this prompt's id. A variant whose text
    equals the prompt (case noise on a script without letter case, a prompt that is all protected
    spans) is listed in ``skipped`` with its reason (``measure.screen``): it is never run.

    Raises:
        LiveError: bad prompt (see ``check_prompt``), nothing chosen (see ``choose_specs``) or no spec.
    """
    t = check_prompt(text, max_chars)
    pid = probe_id(t)
    specs = specs.specs(pid) if isinstance(specs, Selection) else specs
    if not specs:
        raise LiveError("No variant selected.")
    vs = tuple(make_variants(pid, t, specs, seed))
    return LiveProbe(pid, t, vs, int(seed), dict(screen(vs, {pid: t}).noops))


def batch_slices(n: int, first: int = 1, size: int = LIVE_BATCH, ramp: bool = False) -> list[slice]:
    """Variant index ranges, one per generate call: a small first batch (it also carries the base
    prompt: a fast first result), then batches of ``size`` variants. With ``ramp`` the later batches
    double from ``first`` up to ``size`` instead (variants arrive a few at a time, at the cost of more
    and smaller generate calls: on a CPU a decoding step of 2 rows costs about what one of 8 does).

    Examples: ``batch_slices(24)`` → sizes 1, 23; ``batch_slices(24, 1, 8, ramp=True)`` → 1, 2, 4, 8, 8, 1.
    """
    out, i = [], 0
    k = max(1, first) if first > 0 else max(1, size)
    while i < n:
        out.append(slice(i, min(i + k, n)))
        i, k = out[-1].stop, min(max(1, size), k * 2) if ramp else max(1, size)
    return out


@dataclass
class _Seen:
    """A session's measurements of one prompt under one model, reply cap and R_X: the base reply
    and every row measured so far (reused by any later probe of the same prompt)."""

    base: GenerationResult | None = None
    rows: Rows = field(default_factory=Rows.empty)


@dataclass
class ProbeResult:
    """What a (possibly partial) probe produced so far."""

    probe: LiveProbe
    model: str
    max_new_tokens: int
    normalizers: dict[str, float]
    capabilities: frozenset[str]
    sampling: Sampling = GREEDY
    """How the replies were decoded (greedy, or k seeded samples per input)."""
    base: GenerationResult | None = None
    rows: Rows = field(default_factory=Rows.empty)
    """The store rows measured so far (``measure.score``, run id ``LIVE_RUN`` until saved): the
    base reply's and the variants' ``responses`` and ``deltas`` rows, and once the probe has run
    the unavailable ``deltas`` rows of the variants set aside for this model; a sampled probe's
    ``samples`` (samples 1..k−1) and ``sample_deltas`` (every sample against base sample 0)."""
    screening: Screening | None = None
    """Text no-ops and the semantic filter's verdicts (``measure.screen``), decided before generation."""
    skipped: dict[str, str] = field(default_factory=dict)
    """variant_id → why it was not run: the probe's text no-ops and, for this model, variants whose
    model input equals the prompt's (``noop.model_input_noops``). No Δ, in no score."""
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds per stage: filter, generate, score; and first_result_s / total_s."""
    cached: int = 0
    """How many variants came from the cache."""
    cancelled: bool = False

    @property
    def measured(self) -> list[str]:
        """The variant ids with a reply, in the probe's order."""
        ids = set(self.rows.responses["variant_id"].dropna())
        return [v.variant_id for v in self.probe.variants if v.variant_id in ids]

    @property
    def done(self) -> int:
        return len(self.measured)

    @property
    def complete(self) -> bool:
        return self.done + len(self.skipped) == len(self.probe.variants) and not self.cancelled

    @property
    def kept(self) -> dict[str, bool]:
        """variant_id → the semantic filter's ``kept`` ({} without the filter)."""
        return {} if self.screening is None else {i: vd.kept for i, vd in self.screening.verdicts.items()}

    @property
    def filter_info(self) -> dict:
        """The filter's effective threshold ({} without the filter)."""
        return {} if self.screening is None else self.screening.info

    def delta_frame(self) -> pd.DataFrame:
        """All ``deltas`` rows so far (``compute_rows`` columns)."""
        return self.rows.deltas


def _key(model: str, max_new: int, normalizers: dict, text: str, sampling: Sampling, seed: int) -> tuple:
    return (model, int(max_new), tuple(sorted(normalizers.items())), text, sampling,
            None if sampling.greedy else int(seed))


def _screen(probe: LiveProbe, cache: MutableMapping, semantic_filter: bool) -> Screening:
    """``measure.screen`` of every variant of the probe (cached per prompt + variant set)."""
    key = ("filter", probe.text, tuple(v.variant_id for v in probe.variants), semantic_filter)
    if key not in cache:
        cache[key] = screen(probe.variants, {probe.prompt_id: probe.text}, FilterConfig() if semantic_filter else None)
    return cache[key]


def run_probe(backend: Any, probe: LiveProbe, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, normalizers: dict | None = None,
              cache: MutableMapping | None = None, on_batch: Callable[[ProbeResult], None] | None = None,
              should_stop: Callable[[], bool] | None = None, first_batch: int = 1, batch_size: int = LIVE_BATCH,
              semantic_filter: bool = True, sampling: Sampling = GREEDY, ramp: bool = False) -> ProbeResult:
    """Run base + variants in batches; after each batch its rows are scored and ``on_batch`` is called.

    Each batch is one measurement step of ``sago_engine.measure.step`` (the offline runner's): first
    the probe is screened (text no-ops; the semantic filter of SAGO §Variants, as in a stored
    run: its verdicts say which variants count in s_X; rejected variants are answered all the
    same), then no-op variants (``ProbeResult.skipped``: text equal to the prompt, or the same
    token ids as the prompt for this backend) are set aside and never run. The first batch holds
    the base prompt and ``first_batch`` variants (a fast first result); the rest follow in
    batches of ``batch_size`` variants — by default all of a 24-variant probe in one more generate
    call, one decoding batch on a Live backend (``loaded_models.LIVE_BATCH`` rows) — or, with
    ``ramp``, in batches doubling up to ``batch_size`` (``batch_slices``). Replies and rows are cached in ``cache`` per (model,
    max_new_tokens, R_X, prompt, sampling) — a repeated probe makes no generate call. ``should_stop`` is
    checked between batches; a stopped probe is returned partial with ``cancelled=True``.

    ``sampling`` (``Sampling``; default greedy): with temperature > 0 each input is answered k
    times, seeded as the runner seeds a sampled run (``measure.step.generate`` with the probe's
    seed as the run seed): sample 0 gives the ``deltas`` rows, samples 1..k−1 the ``samples`` rows,
    and every sample its ``sample_deltas`` rows against base sample 0 (the dice and rephrasing,
    ``probe_movement``). The shared backend samples only for this probe's generate calls
    (``loaded_models.decoding_as``).

    Raises:
        LiveError: the base prompt plus ``max_new_tokens`` does not fit the model's context (a
            backend with ``context_error``, e.g. ``HFLocalBackend``); nothing is generated. A
            variant that does not fit is an error row (every axis n/a), as in a stored run. Sampled
            settings for a backend that does not sample (no ``sampling`` attribute).
    """
    t0 = time.perf_counter()
    norms = resolve_normalizers(normalizers)
    cache = {} if cache is None else cache
    model = str(backend.model_id)
    if not sampling.greedy and backend.sampling is None:
        raise LiveError(f"{model} cannot sample here: set temperature 0 (greedy) for this model.")
    res = ProbeResult(probe, model, int(max_new_tokens), norms, frozenset(backend.capabilities), sampling)
    tim = res.timings = {"generate": 0.0, "score": 0.0, "filter": 0.0}
    res.screening = _screen(probe, cache, semantic_filter)
    tim["filter"] = time.perf_counter() - t0
    item = prepare(backend, probe.prompt_id, LIVE_DATASET, probe.text,
                   [v for v in probe.variants if v.variant_id not in res.screening.skip])
    res.skipped = {**probe.skipped, **item.same_input}
    seen = cache.setdefault(_key(model, max_new_tokens, norms, probe.text, sampling, probe.seed), _Seen())
    if seen.base is not None:
        res.base, res.rows = seen.base, seen.rows.of_variants(v.variant_id for v in item.variants)
        res.cached = res.done
    if res.done and on_batch:
        tim["first_result_s"] = time.perf_counter() - t0
        on_batch(res)
    why = backend.context_error(probe.text, max_new_tokens) if res.base is None else None
    if why:
        raise LiveError(f"This prompt cannot be answered by {model}: {why}. Shorten the prompt or lower New tokens.")
    scoring = Scoring(LIVE_RUN, norms, res.capabilities)
    measured = set(res.measured)
    todo = [v for v in item.variants if v.variant_id not in measured]
    for sl in batch_slices(len(todo), first_batch, batch_size, ramp) or ([slice(0, 0)] if res.base is None else []):
        if should_stop and should_stop():
            res.cancelled = True
            break
        t = time.perf_counter()
        ask = [replace(item, variants=tuple(todo[sl]), same_input={}, base=res.base)]
        # sessions share the loaded model: one generate call at a time, in this probe's decoding
        with lock_for(backend), decoding_as(backend, sampling.temperature, sampling.top_p, sampling.top_k):
            [answered] = (generate(backend, ask, max_new_tokens) if sampling.greedy else
                          generate(backend, ask, max_new_tokens, samples=sampling.samples, seed=probe.seed))
        tim["generate"] += time.perf_counter() - t
        t = time.perf_counter()
        rows = replace(score([answered], scoring), replies=[])  # the rows keep no hidden states
        res.base = seen.base = answered.base
        res.rows, seen.rows = res.rows + rows, seen.rows + rows
        tim["score"] += time.perf_counter() - t
        tim.setdefault("first_result_s", time.perf_counter() - t0)
        if on_batch:
            on_batch(res)
    if item.same_input:
        res.rows = res.rows + replace(Rows.empty(), deltas=set_aside_rows(scoring, item))
    tim["total_s"] = time.perf_counter() - t0
    return res


# ---------------------------------------------------------------- tables and the radar
def _label(spec: VariantSpec) -> str:
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

    Columns: label, the Δ̃ columns (``AXIS_LABELS`` order: what a reader looks at first), status,
    mirroring, kept, variant, response, family, subtype, strength, position, skip_reason.

    Unfinished variants have status "pending" and empty cells; a no-op variant has status
    "skipped" and its ``skip_reason`` (never Δ = 0); a variant whose reply is an error (e.g.
    longer than the model's context) has status "error" and the reason as its response; an
    unavailable axis is NaN (n/a). ``kept`` is the semantic filter's verdict (known before any
    reply; None without the filter).
    """
    resp = res.rows.responses
    resp = resp[resp["variant_id"].notna()].set_index("variant_id")
    d = res.rows.deltas
    d = d[d["variant_id"].isin(resp.index)]
    ok = d["available"].astype(bool)
    norm = d.assign(x=d["delta_norm"].where(ok)).pivot(index="variant_id", columns="axis", values="x")
    mr = d[ok & (d["axis"] == "mr")].set_index("variant_id")["delta"]
    kept = res.kept
    rows = []
    for v in res.probe.variants:
        vid = v.variant_id
        row: dict[str, Any] = {"label": _label(v.spec), **v.spec.as_dict(), "variant": v.text,
                               "skip_reason": res.skipped.get(vid)}
        if vid not in resp.index:
            row.update(status="skipped" if row["skip_reason"] else "pending", response=None, mirroring=None,
                       kept=False if row["skip_reason"] else kept.get(vid))
            row.update({AXIS_LABELS[a]: np.nan for a in AXES})
        else:
            err = resp.at[vid, "error"]
            err = err if isinstance(err, str) and err else None
            row.update(status="error" if err else "done", response=err or resp.at[vid, "response"], kept=kept.get(vid),
                       mirroring=_mirroring_verdict(mr.get(vid)))
            row.update({AXIS_LABELS[a]: float(norm.at[vid, a]) if a in norm.columns else np.nan for a in AXES})
        rows.append(row)
    cols = ["label", *[AXIS_LABELS[a] for a in AXES], "status", "mirroring", "kept", "variant", "response",
            "family", "subtype", "strength", "position", "skip_reason"]
    return pd.DataFrame(rows, columns=cols)


def prompt_profile(res: ProbeResult) -> pd.DataFrame:
    """s_X of the probed prompt per axis (``scoring.prompt_scores``): axis, axis_label, s, n_variants.

    Only variants the semantic filter keeps count (as in a stored run); an axis with no
    available delta gets NaN (shown as n/a, never 0).
    """
    d = res.rows.deltas
    d = d[~d["variant_id"].isin([vid for vid, k in res.kept.items() if not k])]
    d = d.assign(delta_norm=d["delta_norm"].where(d["available"].astype(bool)))
    sc = prompt_scores(d) if len(d) else pd.DataFrame(columns=["axis", "s", "n_variants"])
    vals = dict(zip(sc["axis"], sc["s"]))
    ns = dict(zip(sc["axis"], sc["n_variants"]))
    return pd.DataFrame([{"axis": a, "axis_label": AXIS_LABELS[a], "s": float(vals.get(a, np.nan)),
                          "n_variants": int(ns.get(a, 0))} for a in AXES])


def store_profile(scores: pd.DataFrame) -> pd.DataFrame:
    """SGS_X per axis of a model's stored runs, beside a probe's s_X (``scoring.sgs`` over prompts).

    Args:
        scores: ``Store.prompt_scores`` of one model (columns model, axis, s, …).
    Returns:
        axis, axis_label, sgs — one row per axis of ``AXES``; NaN where the store has no score
        (n/a, never 0).
    """
    tot = sgs(scores, by=("model", "axis")).set_index("axis")["sgs"] if len(scores) else pd.Series(dtype=float)
    return pd.DataFrame([{"axis": a, "axis_label": AXIS_LABELS[a], "sgs": float(tot[a]) if a in tot.index else np.nan}
                         for a in AXES])


def probe_movement(res: ProbeResult, alpha: float = 0.05) -> pd.DataFrame:
    """The dice beside the rephrasing for the probed prompt: per axis the floor (base samples 1..k−1
    against base sample 0), the movement (every kept variant's samples against base sample 0), the
    rephrasing excess and share and the exact one-sided permutation test
    (``views.sampling.prompt_separation``, the Significance page's numbers for a saved probe).

    Returns:
        One row per sampled axis (``AXES`` order) with both sets: model, axis, prompt_id, n_floor,
        floor, n_move, move, excess, share, p, method, axis_label, exceeds (p < alpha). Empty for
        a greedy probe, k = 1, or before a variant's samples arrive.
    """
    sd = res.rows.sample_deltas
    sd = sd[~sd["variant_id"].isin([vid for vid, k in res.kept.items() if not k])]  # as every score: kept only
    per = prompt_separation(sd.assign(model=res.model), alpha)
    order = {a: i for i, a in enumerate(AXES)}
    return per.sort_values("axis", key=lambda c: c.map(order), kind="stable").reset_index(drop=True)
