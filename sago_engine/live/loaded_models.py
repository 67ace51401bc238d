"""The Live page's loaded models: loaded once per server process, shared by sessions, warmed up at start.

One loaded backend per model per server process, shared read-only by sessions (generate calls
are serialised by ``lock_for``). The dashboard starts loading the default model, the BERTScore
encoder and the semantic filter's encoder baseline when it starts, so the first probe does not
wait for them.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from sago_engine.backends import get_backend
from sago_engine.models.bertscore import bertscore_f1
from sago_engine.runtime.threads import apply_threads
from sago_engine.variants.semantic_filter import FilterConfig, effective_threshold

__all__ = ["DEFAULT_MODEL", "LIVE_BATCH", "load_backend", "shared_backend", "start_warmup", "warmup_status", "lock_for",
           "decoding_as"]

#: Default model of the Live page (small enough for a 2-core CPU).
DEFAULT_MODEL = "smollm2-135m-instruct"
#: Rows per decoding batch of a Live backend, and variants per generate call after a probe's first
#: batch: a 24-variant probe's other 23 variants decode as one batch. On a 2-core CPU a decoding
#: step of a few rows costs nearly what one of 8 does and one of 23 well under three times that
#: (``benchmarks/live_latency.py``: 23 rows in one batch took 0.37 of the time of batches of 2, 4, 8, 8, 1).
LIVE_BATCH = 32

_locks: dict[int, threading.Lock] = {}
_locks_guard = threading.Lock()
_shared: dict[str, Any] = {}
_shared_guard = threading.Lock()
_warm: dict[str, Any] = {"state": "idle", "model": None, "step": "", "t0": None, "ready_s": None, "error": None}
_warm_done = threading.Event()


def load_backend(model: str, dtype: str = "float32", device: str = "cpu", batch_size: int = LIVE_BATCH):
    """Load a local model (zoo key, ``"tiny-random"`` or folder) through ``backends.get_backend``.

    Weights are not packed (``HFLocalBackend(pack_weights=False)``). torch's thread count is
    ``sago_engine.runtime.threads``' choice (``SAGO_THREADS``, else the CPUs this process may use), or
    ``$SAGO_LIVE_THREADS`` when given and ``SAGO_THREADS`` is not; the backend's ``info()`` records it.

    Raises:
        whatever the backend raises (ModelUnavailableError, ValueError, OSError …); the page shows it.
    """
    # not packed (kernels.pack_linear_weights): a live model stays loaded for the server's life,
    # and its few rows per call gain little from the extra copies of its weights
    be = get_backend({"name": "hf_local", "model": model, "dtype": dtype, "device": device,
                      "batch_size": batch_size, "pack_weights": False})
    if os.environ.get("SAGO_LIVE_THREADS") and be.thread_choice is not None:
        choice = apply_threads(os.environ["SAGO_LIVE_THREADS"], "SAGO_LIVE_THREADS")
        be.threads, be.thread_choice = choice.threads, choice.record()
    return be


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
        bertscore_f1(["warm"], ["warm up"])  # loads and runs the encoder once
        _warm["step"] = "measuring the semantic filter's encoder baseline"
        effective_threshold(FilterConfig())  # once per process; every probe is screened before it runs
        _warm["state"], _warm["step"] = "ready", "ready"
    except Exception as e:  # noqa: BLE001 - reported by warmup_status; a probe then loads and shows the error
        _warm["state"], _warm["error"] = "failed", f"{type(e).__name__}: {e}"
    finally:
        _warm["ready_s"] = time.perf_counter() - _warm["t0"]
        _warm_done.set()


def start_warmup(model: str = DEFAULT_MODEL) -> bool:
    """Load ``model`` and the BERTScore encoder, and measure the semantic filter's encoder baseline
    (``semantic_filter.encoder_baseline``), in a background thread (once per process).

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


def lock_for(backend: Any) -> threading.Lock:
    """The lock serialising ``generate`` calls on ``backend`` (sessions share a loaded model)."""
    with _locks_guard:
        return _locks.setdefault(id(backend), threading.Lock())


@contextmanager
def decoding_as(backend: Any, temperature: float = 0.0, top_p: float = 1.0, top_k: int = 0) -> Iterator[Any]:
    """``backend`` decoding with these sampling settings inside the block, its own ones restored after.

    The shared backend of a model is loaded greedy; a sampled probe sets ``backend.sampling``
    (``hf_local.sampling.SamplingParams``) for its generate calls only. Hold ``lock_for(backend)``
    around the block: sessions share the backend. Greedy settings on a backend without a
    ``sampling`` attribute (a backend that does not sample) leave it as it is.

    Raises:
        ValueError: sampled settings (temperature > 0) for a backend that does not sample.
    """
    own = backend.sampling
    if own is None:
        if temperature != 0.0:
            raise ValueError(f"{backend.name} backends cannot sample here")
        yield backend
        return
    backend.sampling = replace(own, temperature=float(temperature), top_p=float(top_p), top_k=int(top_k))
    try:
        yield backend
    finally:
        backend.sampling = own
