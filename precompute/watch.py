"""A model's progress bar during a run: replies done, rate and ETA, moved as each reply finishes."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

from tqdm import tqdm

from sago_engine.textsafe import raw_stream


class ReplyBar:
    """A model's progress bar in replies (tqdm: count, rate, ETA), moved as each reply finishes.

    ``within(n)`` is the ``sago_engine.runtime.progress`` callback of one chunk of ``n`` replies: a thread-safe
    tick that never runs past the chunk (a batch retried one prompt at a time reports twice);
    ``set_done(k)`` sets the count to the replies committed so far, exactly. ``step(k, cap)`` is the
    ``progress.stepping`` callback: the bar's note says how far the decoding batch is ("token k/cap"),
    redrawn at most every ``STEP_EVERY_S`` seconds, so a batch of long replies shows it is alive.
    """

    STEP_EVERY_S = 1.0

    def __init__(self, total: int, name: str, enabled: bool = True) -> None:
        self._bar = tqdm(total=total, desc=name, unit="reply", disable=not enabled, dynamic_ncols=True, smoothing=0.1,
                         file=raw_stream(sys.stderr))  # the bar draws with CR; its label is inert (shown)
        self._lock = threading.Lock()
        self._shown_at = 0.0
        self.step_note = ""
        """The decoding batch's last note ("" before the first step)."""
        self.n = 0
        """Replies counted so far (also when the bar is hidden)."""

    def within(self, n: int) -> Callable[[int], None]:
        """The tick of a chunk of ``n`` replies starting at the current count."""
        stop = self.n + n

        def tick(k: int) -> None:
            with self._lock:
                self._move(max(0, min(k, stop - self.n)))
        return tick

    def step(self, k: int, cap: int) -> None:
        """Note that the decoding batch has generated ``k`` of at most ``cap`` tokens per reply."""
        now = time.monotonic()
        with self._lock:
            self.step_note = f"decoding: token {k}/{cap}"
            if now - self._shown_at >= self.STEP_EVERY_S or k >= cap:
                self._shown_at = now
                self._bar.set_postfix_str(self.step_note)

    def set_done(self, k: int) -> None:
        """Show ``k`` replies done."""
        with self._lock:
            self._move(k - self.n)

    def _move(self, k: int) -> None:
        self.n += k
        self._bar.update(k)

    def __enter__(self) -> ReplyBar:
        return self

    def __exit__(self, *exc) -> None:
        self._bar.close()
