"""Save a live probe as a run in a user store (never the shipped demo store).

A saved probe holds the rows its measurement produced (``sago_engine.measure.step``, the offline
runner's step) keyed for its run id, with a run record, prompt, variants and units rows built
by the runner's helpers (``storerows``): a saved probe and a precompute run are the same kind
of record.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from sago_engine import runrecord
from sago_engine.datasets import Prompt
from sago_engine.live.probe import LIVE_DATASET, LiveError, ProbeResult
from sago_engine.measure.storerows import prompt_rows, run_record, unit_rows, utc_now
from sago_engine.models.cache import sago_cache_dir
from sago_engine.runrecord import local_decoding_record
from sago_engine.seeds import SAMPLE_SEED_RULE
from sago_engine.store import open_store
from sago_engine.store.catalog import DEMO_STORE

__all__ = ["default_user_store", "probe_run_id", "probe_frames", "save_probe"]


def default_user_store() -> Path:
    """Where "save to store" writes: ``$SAGO_USER_STORE``, else ``sago_cache_dir()/probes.duckdb`` (``models.cache``)."""
    if os.environ.get("SAGO_USER_STORE"):
        return Path(os.environ["SAGO_USER_STORE"]).expanduser()
    return sago_cache_dir() / "probes.duckdb"


def probe_run_id(res: ProbeResult) -> str:
    """Deterministic run key of a saved probe (``runrecord.run_id``): model, decoding, seed, R_X and the
    measured variant ids; a sampled probe's settings (``Sampling.record``) as the runner's sampling extra
    (a greedy probe's id does not change)."""
    rec = res.sampling.record()
    return runrecord.run_id(("live", res.model), res.max_new_tokens, res.probe.seed, res.normalizers,
                            (res.probe.prompt_id, res.measured), [{"sampling": rec}] if rec else [])


def probe_frames(res: ProbeResult, backend_info: dict | None = None) -> tuple[dict, dict[str, pd.DataFrame]]:
    """The run record and the table frames of a finished (or partial) probe, keyed like the runner's.

    Returns:
        (record, frames): the ``runs`` record (status "complete" or "partial") and the
        ``prompts``, ``variants`` (the variants measured or set aside, with the screening's
        verdicts), ``responses``, ``deltas``, ``samples`` and ``sample_deltas`` (empty for a greedy
        probe; schema v5's tables, as a sampled run of the runner writes them) and ``units`` frames.
    """
    info = backend_info or {}
    run_id = probe_run_id(res)
    now = utc_now()
    decoding = local_decoding_record(info, res.max_new_tokens, (info.get("decoding") or {}).get("batch_size"))
    rec = res.sampling.record()
    if rec:  # as the runner records a sampled run (greedy probes keep their record)
        decoding.update(greedy=False, sampling={**decoding.get("sampling", {}), **rec, "seed_rule": SAMPLE_SEED_RULE})
    record = run_record(
        run_id=run_id, model=res.model, backend=info.get("backend", "hf_local"), info=info, dtype=info.get("dtype"),
        device=None, decoding=decoding,
        seed=res.probe.seed, normalizers=res.normalizers, semantic_filter=res.filter_info,
        capabilities=res.capabilities, config={"source": "live page", "prompt_id": res.probe.prompt_id},
        started_at=now, finished_at=now, status="complete" if res.complete else "partial")
    stored = set(res.measured) | set(res.skipped)
    screening = res.screening
    variants = screening.variant_rows() if screening is not None else pd.DataFrame()
    variants = variants[variants["variant_id"].isin(stored)].reset_index(drop=True) if len(variants) else variants
    prompts = prompt_rows([Prompt(prompt_id=res.probe.prompt_id, dataset=LIVE_DATASET, source_id=None,
                                  text=res.probe.text, reference=None, category=None)])
    rows = res.rows.for_run(run_id)
    units = unit_rows(run_id, [(res.probe.prompt_id, res.done)], now)
    return record, {"prompts": prompts, "variants": variants, "responses": rows.responses, "deltas": rows.deltas,
                    "samples": rows.samples, "sample_deltas": rows.sample_deltas, "units": units}


def save_probe(res: ProbeResult, path: str | Path | None = None, backend_info: dict | None = None) -> tuple[Path, str]:
    """Write the probe as a run into a user store (created if new). Returns (path, run_id).

    Raises:
        LiveError: ``path`` is the shipped demo store, or the probe has no finished variant.
        StoreError: the file exists but is not a sago store.
    """
    p = Path(path) if path else default_user_store()
    if p.resolve() == Path(DEMO_STORE).resolve():
        raise LiveError("Live probes are never written into the shipped demo store; choose a user store.")
    if not res.done or res.base is None:
        raise LiveError("Nothing to save yet: run the probe first.")
    p.parent.mkdir(parents=True, exist_ok=True)
    record, frames = probe_frames(res, backend_info)
    with open_store(p, read_only=False, create=True) as store:
        store.write_chunk(frames, run=record)
    return p, record["run_id"]
