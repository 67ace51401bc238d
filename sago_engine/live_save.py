"""Save a live probe as a run in a user store (never the shipped demo store).

The run record, prompt, variants, responses, deltas and unit rows of a probe are built with the
offline runner's helpers (``storerows``, ``pipeline.compute_rows``, ``noop``), so a saved probe
and a precompute run are the same kind of record. ``sago_engine.live`` re-exports these names.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from sago_engine.live import LIVE_DATASET, LiveError
from sago_engine.noop import noop_delta_rows
from sago_engine.pipeline import Unit, compute_rows, response_id
from sago_engine.seeds import stable_hash
from sago_engine.types import AXES

if TYPE_CHECKING:
    from sago_engine.live import ProbeResult


def default_user_store() -> Path:
    """Where "save to store" writes: ``$SAGO_USER_STORE``, else ``${SAGO_CACHE_DIR:-~/.cache/sago}/probes.duckdb``."""
    if os.environ.get("SAGO_USER_STORE"):
        return Path(os.environ["SAGO_USER_STORE"]).expanduser()
    root = Path(os.environ.get("SAGO_CACHE_DIR") or Path.home() / ".cache" / "sago").expanduser()
    return root / "probes.duckdb"


def probe_run_id(res: ProbeResult) -> str:
    """Deterministic run key of a saved probe: model, decoding, seed, R_X and the variant ids."""
    return stable_hash("live", res.model, {"greedy": True, "max_new_tokens": res.max_new_tokens}, res.probe.seed,
                       res.normalizers, res.probe.prompt_id, [v.variant_id for v in res.probe.variants
                                                             if v.variant_id in res.deltas], length=16)


def probe_frames(res: ProbeResult, backend_info: dict | None = None) -> tuple[dict, dict[str, pd.DataFrame]]:
    """The run record and the table frames of a finished (or partial) probe, keyed like the runner's."""
    from sago_engine.datasets import Prompt
    from sago_engine.runrecord import local_decoding_record
    from sago_engine.storerows import prompt_rows, run_record, unit_rows, utc_now, variant_rows

    info = backend_info or {}
    run_id = probe_run_id(res)
    now = utc_now()
    record = run_record(
        run_id=run_id, model=res.model, backend=info.get("backend", "hf_local"), info=info, dtype=info.get("dtype"),
        device=None,
        decoding=local_decoding_record(info, res.max_new_tokens, (info.get("decoding") or {}).get("batch_size")),
        seed=res.probe.seed, normalizers=res.normalizers, semantic_filter=res.filter_info,
        capabilities=res.capabilities, config={"source": "live page", "prompt_id": res.probe.prompt_id},
        started_at=now, finished_at=now, status="complete" if res.complete else "partial")
    done = [v for v in res.probe.variants if v.variant_id in res.deltas]
    text_skip = {k: w for k, w in res.skipped.items() if k in res.probe.skipped}
    same_input = [v.variant_id for v in res.probe.variants if v.variant_id in res.skipped and v.variant_id not in text_skip]
    stored = [v for v in res.probe.variants if v.variant_id in res.deltas or v.variant_id in res.skipped]
    prompts = prompt_rows([Prompt(prompt_id=res.probe.prompt_id, dataset=LIVE_DATASET, source_id=None,
                                  text=res.probe.text, reference=None, category=None)])
    # a probe's filter verdict is recorded as both passes_filter and kept (as before this module existed)
    variants = variant_rows(stored, res.semantic, res.kept, res.kept, skip_reason=text_skip)
    resp_rows = []
    base_row = compute_rows(run_id, [Unit(res.probe.prompt_id, LIVE_DATASET, res.base, [], [])], res.normalizers,
                            res.capabilities)[0] if res.base is not None else pd.DataFrame()
    for v in done:
        r = dict(res.responses[v.variant_id])
        r["run_id"], r["response_id"] = run_id, response_id(run_id, res.probe.prompt_id, v.variant_id)
        resp_rows.append(r)
    responses = pd.concat([base_row, pd.DataFrame(resp_rows)], ignore_index=True)
    deltas = pd.concat([res.delta_frame(), noop_delta_rows(run_id, LIVE_DATASET, res.probe.prompt_id, same_input, AXES)],
                       ignore_index=True).assign(run_id=run_id)
    units = unit_rows(run_id, [(res.probe.prompt_id, len(done))], now)
    return record, {"prompts": prompts, "variants": variants, "responses": responses, "deltas": deltas,
                    "units": units}


def save_probe(res: ProbeResult, path: str | Path | None = None, backend_info: dict | None = None) -> tuple[Path, str]:
    """Write the probe as a run into a user store (created if new). Returns (path, run_id).

    Raises:
        LiveError: ``path`` is the shipped demo store, or the probe has no finished variant.
        StoreError: the file exists but is not a sago store.
    """
    from sago_engine.store_catalog import DEMO_STORE
    from sago_engine.store import open_store

    p = Path(path) if path else default_user_store()
    if p.resolve() == Path(DEMO_STORE).resolve():
        raise LiveError("Live probes are never written into the shipped demo store; choose a user store.")
    if not res.done or res.base is None:
        raise LiveError("Nothing to save yet: run the probe first.")
    p.parent.mkdir(parents=True, exist_ok=True)
    record, frames = probe_frames(res, backend_info)
    with open_store(p, read_only=False, create=True) as store:
        store.write_probe(record, frames)
    return p, record["run_id"]

