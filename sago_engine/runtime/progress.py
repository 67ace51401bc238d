"""Progress of a long generation call, reported as each reply finishes (not only when the call returns).

A caller that shows progress (the precompute runner's bar) wraps its ``backend.generate`` call in
``reporting(callback)``; the backends call ``advance(n)`` as replies finish: ``hf_local`` when rows
leave the decoding batch, the API backends per answered request (from their worker threads), the
reply cache per hit. Without ``reporting`` ``advance`` does nothing. The callback is held in a
``ContextVar`` (a Streamlit session and the runner never see each other's), and a backend that
reports from worker threads reads it with ``current()`` in the calling thread first.

Between finished replies a local model reports its decoding steps (``stepping`` / ``step``): a
batch of long replies can decode for minutes before its first reply ends, and a bar that shows
only finished replies would sit at 0 without a sign of life all that time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

Callback = Callable[[int], None]
StepCallback = Callable[[int, int], None]

_SINK: ContextVar[Callback | None] = ContextVar("sago_progress", default=None)
_STEP: ContextVar[StepCallback | None] = ContextVar("sago_progress_step", default=None)


@contextmanager
def reporting(callback: Callback) -> Iterator[None]:
    """Within the block, ``advance(n)`` calls ``callback(n)`` (n ≥ 1 replies finished). The callback
    must be thread-safe: API backends call it from their worker threads."""
    token = _SINK.set(callback)
    try:
        yield
    finally:
        _SINK.reset(token)


def current() -> Callback | None:
    """The callback of the enclosing ``reporting`` block in this context, or None."""
    return _SINK.get()


def advance(n: int = 1, sink: Callback | None = None) -> None:
    """Report ``n`` finished replies to ``sink`` (default ``current()``); nothing when n < 1 or no sink."""
    cb = sink if sink is not None else _SINK.get()
    if cb is not None and n > 0:
        cb(int(n))


@contextmanager
def stepping(callback: StepCallback) -> Iterator[None]:
    """Within the block, ``step(k, cap)`` calls ``callback(k, cap)``: the decoding batch in progress has
    generated ``k`` of at most ``cap`` tokens per reply."""
    token = _STEP.set(callback)
    try:
        yield
    finally:
        _STEP.reset(token)


def step_sink() -> StepCallback | None:
    """The callback of the enclosing ``stepping`` block, or None (a backend then reports no steps)."""
    return _STEP.get()
