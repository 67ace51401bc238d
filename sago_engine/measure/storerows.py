"""Store rows of a run, built once for the offline runner and the live page.

``precompute.runner`` and ``sago_engine.live.probe`` both record a run: its ``runs`` record, the
``prompts`` and ``variants`` rows it measured and one ``units`` row per finished prompt. They
build them here, so a saved live probe and a precompute run are the same kind of record (the
``responses`` and ``deltas`` rows come from their shared measurement step, ``sago_engine.measure.step``).
Pure functions: nothing here touches the store.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from sago_engine.types import Variant, VariantSpec

PROMPT_COLUMNS = ["prompt_id", "dataset", "source_id", "text", "reference", "category", "meta"]
VARIANT_COLUMNS = ["variant_id", "prompt_id", "family", "subtype", "strength", "position", "text", "seed",
                   "generator", "meta", "semantic_score", "passes_filter", "kept", "skip_reason"]
UNIT_COLUMNS = ["run_id", "prompt_id", "n_variants", "finished_at"]


def utc_now() -> dt.datetime:
    """The current UTC time without tzinfo (how the store keeps timestamps)."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def run_record(*, run_id: str, model: str, backend: str, info: Mapping[str, Any], dtype: str | None,
               device: str | None, decoding: dict, seed: int, normalizers: Mapping[str, float],
               semantic_filter: dict, capabilities: Iterable[str], config: Any, started_at: dt.datetime,
               status: str, finished_at: dt.datetime | None = None,
               versions: dict[str, str] | None = None,
               axis_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``runs`` row of a run (JSON fields as Python objects; ``Store.upsert_run`` serialises them).

    Args:
        info: the backend's ``info()`` (source, weights_sha256 or gguf_sha256, device).
        device: the device to record; None = ``info["device"]`` (empty string when absent).
        versions: library versions; None = ``runrecord.library_versions()``.
        axis_options: which option axes the run computed and how (``axis_options_record``);
            stored as ``config["axis_options"]`` (``config`` must then be a dict). None: not recorded.
    Returns:
        A dict with every ``runs`` column, ``encoder`` from ``bertscore.encoder_info()`` and
        ``fingerprint`` from ``runrecord.fingerprint``.
    """
    from sago_engine.models.bertscore import encoder_info
    from sago_engine.runrecord import fingerprint, library_versions

    if axis_options is not None:
        config = {**config, "axis_options": dict(axis_options)}
    record = {
        "run_id": run_id, "model": model, "backend": backend, "model_source": str(info.get("source", "")),
        "weights_sha256": info.get("weights_sha256") or info.get("gguf_sha256"), "dtype": dtype,
        "device": str(info.get("device", "") if device is None else device), "decoding": decoding, "seed": seed,
        "normalizers": dict(normalizers), "semantic_filter": semantic_filter, "encoder": encoder_info(),
        "capabilities": sorted(capabilities), "versions": library_versions() if versions is None else versions,
        "config": config, "started_at": started_at, "status": status,
    }
    if finished_at is not None:
        record["finished_at"] = finished_at
    record["fingerprint"] = fingerprint(record)
    return record


def axis_options_record(axes: Sequence[str], bert_baseline: float | None) -> dict[str, Any]:
    """The run record's ``config["axis_options"]``: the option axes a run computed and how.

    Returns ``{"axes": [...], "r_x": "each option axis uses its base axis's R_X", "cos": {option:
    [position, layer set]}, "bert_rescaled_baseline": b or None}``, plus ``"base_reply"`` (how the
    base reply was forced) and ``"mr"`` (option → rule) when those options are stored
    (docs/METHOD.md "Axis options").
    """
    from sago_engine.axes import COS_OPTION_SPECS
    from sago_engine.axis_spec import OPTION_AXIS_SPECS

    axes = list(axes)
    specs = [OPTION_AXIS_SPECS[a] for a in axes]
    rec = {"axes": axes, "r_x": "each option axis uses its base axis's R_X (runs.normalizers)",
           "cos": {s.option: list(COS_OPTION_SPECS[s.option]) for s in specs if s.base == "cos"},
           "bert_rescaled_baseline": bert_baseline if any("bert_baseline" in s.needs for s in specs) else None}
    if any("forced_base_reply" in s.needs for s in specs):
        rec["base_reply"] = ("the base reply's token ids teacher-forced after every variant prompt and after the "
                             "base prompt (one extra pass per prompt)")
    mr = [s.option for s in specs if s.base == "mr"]
    if mr:
        rec["mr"] = {o: "the SAGO authors' rules (sago_engine.axes.mirroring_code)" for o in mr}
    return rec


def prompt_rows(prompts: Iterable[Any]) -> pd.DataFrame:
    """``prompts`` rows from objects with prompt_id, dataset, source_id, text, reference, category and
    optionally meta (``sago_engine.datasets.Prompt``); ``reference`` and ``meta`` as JSON text (None stays NULL)."""
    rows = [{"prompt_id": p.prompt_id, "dataset": p.dataset, "source_id": p.source_id, "text": p.text,
             "reference": None if p.reference is None else json.dumps(p.reference, ensure_ascii=False),
             "category": p.category,
             "meta": None if getattr(p, "meta", None) is None else json.dumps(p.meta, ensure_ascii=False)}
            for p in prompts]
    return pd.DataFrame(rows, columns=PROMPT_COLUMNS)


def variant_rows(variants: Sequence[Variant], semantic_score: Mapping[str, float | None],
                 passes: Mapping[str, bool], kept: Mapping[str, bool], json_meta: bool = True,
                 skip_reason: Mapping[str, str] | None = None) -> pd.DataFrame:
    """``variants`` rows: (F, u, s, p), text, seed, generator, meta and the semantic filter's verdict.

    Args:
        semantic_score / passes / kept: per variant_id (SAGO §Variants; a missing id → None / True / True).
        json_meta: meta as JSON text (what the store takes); False keeps the dict.
        skip_reason: per variant_id, why it is not run (``noop.text_noop_reason``); such a
            variant is stored with ``kept = False`` whatever ``kept`` says. Missing id → NULL.
    """
    skip = skip_reason or {}
    rows = [{"variant_id": v.variant_id, "prompt_id": v.prompt_id, **v.spec.as_dict(), "text": v.text,
             "seed": v.seed, "generator": v.generator,
             "meta": json.dumps(v.meta, sort_keys=True, ensure_ascii=False) if json_meta else v.meta,
             "semantic_score": semantic_score.get(v.variant_id), "passes_filter": passes.get(v.variant_id, True),
             "kept": kept.get(v.variant_id, True) and v.variant_id not in skip,
             "skip_reason": skip.get(v.variant_id)} for v in variants]
    return pd.DataFrame(rows, columns=VARIANT_COLUMNS)


def variant_from_record(r: Any) -> Variant:
    """The ``Variant`` of a stored ``variants`` row (``Store.variant_records``: attributes
    variant_id, prompt_id, family, subtype, strength, position, text, seed, generator, meta_json),
    the inverse of ``variant_rows``; a NULL meta becomes {}."""
    return Variant(r.variant_id, r.prompt_id, VariantSpec(r.family, r.subtype, float(r.strength), r.position), r.text,
                   int(r.seed), r.generator, json.loads(r.meta_json) if r.meta_json else {})


def unit_rows(run_id: str, units: Iterable[tuple[str, int]], finished_at: dt.datetime) -> pd.DataFrame:
    """``units`` rows: one per finished prompt, ``units`` = (prompt_id, number of variants run)."""
    return pd.DataFrame([{"run_id": run_id, "prompt_id": pid, "n_variants": int(n), "finished_at": finished_at}
                         for pid, n in units], columns=UNIT_COLUMNS)
