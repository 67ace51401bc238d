"""A Live probe running in the background: the page shows its progress while it runs and can cancel it at once.

``ProbeJob`` loads the model (``live_models.shared_backend``) and runs ``live.run_probe`` in a
daemon thread; the page polls ``status()`` — what it is doing, the seconds since the click, the
latest (partial) result — and redraws, so work is visible from the click on. ``cancel()`` stops the
probe within one forward pass of the model: a local model's forward calls are watched
(``interruptible``) and raise ``ProbeCancelled`` in the job's thread once it is cancelled, so the
generate call in flight ends and the shared model is free for the next probe at once; the
variants scored before it stay, marked as a cancelled (partial) result. A backend without a torch
model (an API) stops between batches.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from sago_engine.live.loaded_models import decoding_as, lock_for, shared_backend

__all__ = ["ProbeCancelled", "ProbeJob", "interruptible"]


class ProbeCancelled(BaseException):
    """Raised inside a watched model's forward pass once its probe is cancelled (a BaseException:
    the backend's per-prompt retry of a failing batch, ``except Exception``, must not catch it)."""


_watch = threading.local()  # .stop: the cancel check of the probe running in this thread
_hooked: set[int] = set()
_hooked_guard = threading.Lock()


def _check(module: Any, args: Any) -> None:
    stop = getattr(_watch, "stop", None)
    if stop is not None and stop():
        raise ProbeCancelled()


@contextmanager
def interruptible(backend: Any, should_stop: Callable[[], bool]) -> Iterator[None]:
    """Within the block, ``backend.model``'s forward calls made by this thread raise
    ``ProbeCancelled`` once ``should_stop()`` is true (a forward pre-hook, installed once per model;
    other threads' calls are never affected). A backend without a torch ``model`` is left alone."""
    model = backend.model
    if model is not None and hasattr(model, "register_forward_pre_hook"):
        with _hooked_guard:
            if id(model) not in _hooked:
                model.register_forward_pre_hook(_check)
                _hooked.add(id(model))
    _watch.stop = should_stop
    try:
        yield
    finally:
        _watch.stop = None


class ProbeJob:
    """One probe run in a background thread (see the module doc).

    Args:
        model: the model key or folder (``live_models.shared_backend`` loads it once per process).
        probe: a ``live.LiveProbe``.
        max_new_tokens, cache: ``live.run_probe``'s.
        run_kw: further ``live.run_probe`` arguments (first_batch, batch_size, semantic_filter, sampling).
        backend_of: model → backend (default ``shared_backend``).
    """

    def __init__(self, model: str, probe: Any, max_new_tokens: int, cache: MutableMapping | None = None,
                 backend_of: Callable[[str], Any] = shared_backend, **run_kw: Any) -> None:
        self.model, self.probe, self.max_new_tokens = model, probe, int(max_new_tokens)
        self.cache = {} if cache is None else cache
        self.backend_of, self.run_kw = backend_of, run_kw
        self.t0 = time.perf_counter()
        self._stop = threading.Event()
        self._done = threading.Event()
        self.state = "starting"  # starting | loading | running | done | cancelled | failed
        self.step = "starting"
        self.result: Any = None  # the latest ProbeResult snapshot
        self.info: dict | None = None  # backend.info() once loaded
        self.error: tuple[str, str] | None = None  # (kind, message): "load" | "probe"
        self.finished_s: float | None = None
        self._thread = threading.Thread(target=self._run, name="sago-live-probe", daemon=True)

    def start(self) -> ProbeJob:
        """Start the thread (once); returns self."""
        self._thread.start()
        return self

    def cancel(self) -> None:
        """Ask the probe to stop (within one forward pass of a local model; between batches otherwise)."""
        self._stop.set()

    @property
    def running(self) -> bool:
        return not self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the job ends (True) or ``timeout`` seconds pass (False)."""
        return self._done.wait(timeout)

    def elapsed_s(self) -> float:
        """Seconds since the job was made (the click), frozen when it ends."""
        return (self.finished_s if self.finished_s is not None else time.perf_counter()) - self.t0

    def _snapshot(self, res: Any) -> None:
        self.result = replace(res, timings=dict(res.timings), skipped=dict(res.skipped))
        n = len(res.probe.variants) - len(res.skipped)
        self.step = f"{res.done}/{n} variants scored"

    def _info(self, backend: Any) -> dict:
        """``backend.info()`` as this probe decodes (a sampled probe's settings in its decoding record)."""
        smp = self.run_kw.get("sampling")
        if smp is None or smp.greedy or backend.sampling is None:
            return backend.info()
        with lock_for(backend), decoding_as(backend, smp.temperature, smp.top_p, smp.top_k):
            return backend.info()

    def _run(self) -> None:
        from sago_engine.live import probe as live

        try:
            self.state, self.step = "loading", f"loading {self.model}"
            try:
                backend = self.backend_of(self.model)
                self.info = self._info(backend)
            except Exception as e:  # noqa: BLE001 - shown by the page
                self.state, self.error = "failed", ("load", f"{type(e).__name__}: {e}")
                return
            self.state, self.step = "running", "answering the base prompt"
            try:
                with interruptible(backend, self._stop.is_set):
                    res = live.run_probe(backend, self.probe, self.max_new_tokens, cache=self.cache,
                                         on_batch=self._snapshot, should_stop=self._stop.is_set, **self.run_kw)
                self._snapshot(res)
                self.state = "cancelled" if res.cancelled else "done"
            except ProbeCancelled:
                if self.result is not None:
                    self.result.cancelled = True
                self.state = "cancelled"
            except live.LiveError as e:
                self.state, self.error = "failed", ("probe", str(e))
            except Exception as e:  # noqa: BLE001 - shown by the page
                self.state, self.error = "failed", ("probe", f"{type(e).__name__}: {e}")
        finally:
            self.finished_s = time.perf_counter()
            self._done.set()

    def status(self) -> dict[str, Any]:
        """``{"state", "step", "elapsed_s", "result", "error"}``: what the page draws."""
        return {"state": self.state, "step": self.step, "elapsed_s": self.elapsed_s(), "result": self.result,
                "error": self.error}
