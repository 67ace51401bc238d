"""A CPU-bound neighbour process for the loaded half of a benchmark: one busy core, as a second job would take.

``busy_neighbour()`` starts ``python -c "while True: pass"`` (one thread, no OpenMP), waits until it
runs, and stops it on exit. ``load_line()`` is ``/proc/loadavg`` for the printout: the figures of a
shared machine mean little without it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path


def load_line() -> str:
    """``/proc/loadavg``'s three averages (1, 5, 15 min), or ``"n/a"`` off Linux."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


@contextmanager
def busy_neighbour(n: int = 1):
    """Run ``n`` single-threaded busy-loop processes for the duration of the block."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
             for _ in range(max(0, n))]
    try:
        time.sleep(0.5)  # let them be scheduled before the measurement starts
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
