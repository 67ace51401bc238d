"""Server-vs-local log-prob agreement of the hybrid backend: per reply the largest |server log-prob −
local log-prob| over the scored tokens, and counts over every reply (replies beyond the tolerance
point at other weights or another revision on one side).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["DEFAULT_LOGPROB_TOL", "LogprobCheck", "max_abs_diff"]

#: Default tolerance (nats) on max |server log-prob − local log-prob| per reply: float32 locally
#: against a bfloat16 server differ by ~1e-2 on typical tokens; a different checkpoint by far more.
DEFAULT_LOGPROB_TOL = 0.05


def max_abs_diff(server: Sequence[float] | None, local: np.ndarray, n_ids: int, appended: bool) -> float | None:
    """max |server − local| in nats over the finite differences, or None when not comparable.

    ``server``: the server's log-probs (T_s,); ``local``: the local ones (n_ids,). They are compared
    when the server's cover the scored tokens, or all but an EOS appended locally (``appended``).
    """
    if server is None or not len(server) or len(server) not in (n_ids, n_ids - appended):
        return None
    d = np.abs(np.asarray(server, dtype=np.float64) - local[: len(server)])
    d = d[np.isfinite(d)]
    return float(d.max()) if len(d) else None


class LogprobCheck:
    """Thread-safe counts of the agreement over replies (``record``), read by ``counts``."""

    def __init__(self, tol: float) -> None:
        self.tol = float(tol)
        self._lock = threading.Lock()
        self._counts = self._zero()

    def _zero(self) -> dict[str, Any]:
        return {"replies": 0, "checked": 0, "beyond_tol": 0, "max_abs_diff": None, "re_tokenized": 0,
                "tol": self.tol}

    def record(self, diff: float | None, re_tokenized: bool) -> bool:
        """Count one reply (``diff``: ``max_abs_diff``, None = not compared); True when beyond ``tol``."""
        mismatch = diff is not None and diff > self.tol
        with self._lock:
            c = self._counts
            c["replies"] += 1
            c["re_tokenized"] += re_tokenized
            if diff is not None:
                c["checked"] += 1
                c["beyond_tol"] += mismatch
                c["max_abs_diff"] = diff if c["max_abs_diff"] is None else max(c["max_abs_diff"], diff)
        return mismatch

    def counts(self) -> dict[str, Any]:
        """A copy of the counts: replies, checked, beyond_tol, max_abs_diff (nats or None),
        re_tokenized, tol (nats)."""
        with self._lock:
            return dict(self._counts)

    def restore(self, counts: dict[str, Any]) -> None:
        """Set the counts back to an earlier ``counts()`` (a reply that must not count, e.g. a probe)."""
        with self._lock:
            self._counts = dict(counts)
