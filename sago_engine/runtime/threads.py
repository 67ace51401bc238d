"""How many CPU threads torch computes with, chosen from the CPUs this process may use, and threads that sleep when idle.

Thread count. torch's default is one intra-op thread per CPU of the machine. A process pinned to
fewer CPUs (``taskset``, a container's ``--cpuset-cpus``, Slurm) or held to a CPU quota (cgroup
v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``: ``docker --cpus``, systemd
``CPUQuota``, Kubernetes limits) then runs more threads than it has CPUs, and an OpenMP parallel
region waits for its slowest thread. ``choose_threads`` takes the smaller of the CPUs in
``os.sched_getaffinity`` and the quota (rounded down, at least 1), read along the process's
cgroup path as ``sago_engine.runtime.memlimit`` reads memory limits (the smallest level wins).
``SAGO_THREADS`` overrides the choice. The choice and what it rests on are recorded with every
run (``runs.decoding.thread_choice``).

Idle threads. torch's CPU wheel runs its parallel regions on GNU OpenMP, whose idle threads spin
(busy-wait) before sleeping unless ``OMP_WAIT_POLICY=PASSIVE``. On a machine shared with another
CPU-bound process a spinning thread takes the core the working thread needs: on a 2-core machine
with one busy neighbour the Live page's 24-variant probe took 161.5 s instead of 8.1 s
(benchmarks/README.md, ``live_latency.py``). ``quiet_openmp`` sets ``OMP_WAIT_POLICY=PASSIVE``
(and ``KMP_BLOCKTIME=0``, its Intel OpenMP equivalent) unless the user set them; OpenMP reads
them once, when torch is first imported, so sago sets them when ``sago_engine`` is imported
(``sago_engine/__init__.py``) and ``scripts/dashboard.sh`` exports them. Whether they took effect
(torch imported before sago) is recorded (``thread_choice.wait_policy``).

Source: ``sched_getaffinity(2)``; Linux ``Documentation/admin-guide/cgroup-v2.rst`` (cpu.max),
``scheduler/sched-bwc.rst`` (CFS bandwidth: cfs_quota_us, cfs_period_us); GNU libgomp manual
(OMP_WAIT_POLICY, GOMP_SPINCOUNT); Intel OpenMP (KMP_BLOCKTIME).
"""

from __future__ import annotations

import math
import os
import posixpath
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from typing import Any

from sago_engine.runtime.memlimit import cgroup_folders, read_text

__all__ = ["THREADS_ENV", "WAIT_ENV", "ThreadChoice", "affinity_cpus", "apply_threads", "choose_threads",
           "cgroup_cpu_quota", "last_choice", "quiet_openmp"]

#: Environment variable that fixes torch's CPU thread count.
THREADS_ENV = "SAGO_THREADS"
#: OpenMP settings that make idle threads sleep instead of spin (set unless the user set them).
WAIT_ENV = {"OMP_WAIT_POLICY": "PASSIVE", "KMP_BLOCKTIME": "0"}


def quiet_openmp(environ: dict | None = None) -> dict[str, str]:
    """Set ``WAIT_ENV``'s variables in ``environ`` (default ``os.environ``) where they are unset.

    Effective only before torch (its OpenMP runtime) is first imported in the process.
    Returns the variables this call set ({} when all were set already).
    """
    env = os.environ if environ is None else environ
    out = {k: v for k, v in WAIT_ENV.items() if not env.get(k)}
    env.update(out)
    return out


def affinity_cpus() -> int:
    """The CPUs this process may run on (``os.sched_getaffinity``; ``os.cpu_count`` where that does not exist)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _quota(version: str, folder: str, read: Callable[[str], str | None]) -> tuple[float | None, str]:
    """CPUs' worth of the quota one cgroup folder sets (None: no quota or unreadable), and its file."""
    if version == "v2":
        f = posixpath.join(folder, "cpu.max")
        parts = (read(f) or "").split()
        if len(parts) != 2 or parts[0] == "max":
            return None, f
        quota, period = parts
    else:
        f = posixpath.join(folder, "cpu.cfs_quota_us")
        quota, period = (read(f) or "").strip(), (read(posixpath.join(folder, "cpu.cfs_period_us")) or "").strip()
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None, f
    return (q / p if q > 0 and p > 0 else None), f  # v1 writes -1 for no quota


def cgroup_cpu_quota(read: Callable[[str], str | None] = read_text) -> tuple[float | None, str | None]:
    """The smallest CPU quota on this process's cgroup path, in CPUs (quota / period), and its file.

    Args:
        read: ``path -> text or None`` (default: the real file system; tests pass a mocked one).
    Returns:
        ``(cpus, file)``, e.g. ``(1.5, "/sys/fs/cgroup/job/cpu.max")``; ``(None, None)`` when no
        level sets a quota (``max`` in v2, ``-1`` in v1, or nothing readable).
    """
    best: tuple[float | None, str | None] = (None, None)
    for version, folder in cgroup_folders(read, "cpu"):
        cpus, f = _quota(version, folder, read)
        if cpus is not None and (best[0] is None or cpus < best[0]):
            best = (cpus, f)
    return best


@dataclass(frozen=True)
class ThreadChoice:
    """torch's CPU thread count and what it was chosen from (recorded as ``runs.decoding.thread_choice``)."""

    threads: int
    """The intra-op thread count (≥ 1)."""
    source: str
    """``"SAGO_THREADS"`` (the user's), ``"cpu quota"`` or ``"cpu affinity"`` (the smaller of the two limits)."""
    affinity_cpus: int
    """CPUs in the process's affinity mask."""
    cpu_quota: float | None
    """CPUs' worth of the smallest cgroup quota on the process's path (None: none)."""
    quota_file: str | None
    """The cgroup file holding that quota."""
    wait_policy: str | None
    """``OMP_WAIT_POLICY`` when OpenMP started (None: unset, OpenMP's spinning default)."""

    def record(self) -> dict[str, Any]:
        """The choice as a JSON-ready dict."""
        return asdict(self)


def choose_threads(affinity: int, quota: float | None = None, quota_file: str | None = None,
                   requested: str | None = None, wait_policy: str | None = None) -> ThreadChoice:
    """The thread count for these limits: ``requested`` if given, else min(affinity, ⌊quota⌋), at least 1.

    Args:
        affinity: CPUs the process may run on (≥ 1; ``affinity_cpus``).
        quota: CPUs' worth of the cgroup quota (``cgroup_cpu_quota``), None for none. A fractional
            quota is rounded down (1.5 CPUs → 1 thread: a second thread would be throttled every
            period), never below 1.
        quota_file: where the quota is set (recorded).
        requested: ``SAGO_THREADS``' value (None/empty: choose).
        wait_policy: ``OMP_WAIT_POLICY`` in effect (recorded).
    Raises:
        ValueError: ``requested`` is not a positive integer, or ``affinity`` < 1.
    """
    if affinity < 1:
        raise ValueError(f"affinity must be >= 1 CPU, got {affinity}")
    if requested:
        try:
            n = int(requested)
        except ValueError:
            n = 0
        if n < 1:
            raise ValueError(f"the thread count ({THREADS_ENV}) must be a positive integer, got {requested!r}")
        return ThreadChoice(n, THREADS_ENV, affinity, quota, quota_file, wait_policy)
    by_quota = None if quota is None else max(1, math.floor(quota + 1e-9))
    if by_quota is not None and by_quota < affinity:
        return ThreadChoice(by_quota, "cpu quota", affinity, quota, quota_file, wait_policy)
    return ThreadChoice(affinity, "cpu affinity", affinity, quota, quota_file, wait_policy)


def _wait_policy_at_start(modules: Iterable[str]) -> str | None:
    """Set ``WAIT_ENV`` when torch is not loaded yet (its OpenMP then starts with it) and return
    ``OMP_WAIT_POLICY`` as OpenMP sees it; torch already loaded: the environment's value (set
    before the process started, it took effect)."""
    if "torch" not in modules:
        quiet_openmp()
    return os.environ.get("OMP_WAIT_POLICY") or None


_last: list[ThreadChoice] = []


def apply_threads(requested: str | None = None, source: str = THREADS_ENV) -> ThreadChoice:
    """Choose the thread count for this process (``choose_threads`` on its affinity, cgroup quota
    and ``SAGO_THREADS``) and apply it with ``torch.set_num_threads``.

    Args:
        requested: a count asked for by a narrower setting (e.g. ``SAGO_LIVE_THREADS``), used
            when ``SAGO_THREADS`` is unset; ``source`` names it in the record.
    Returns the choice (also ``last_choice()``). Raises ValueError on a bad requested count.
    """
    import torch

    quota, where = cgroup_cpu_quota()
    if os.environ.get(THREADS_ENV):
        requested, source = os.environ[THREADS_ENV], THREADS_ENV
    choice = choose_threads(affinity_cpus(), quota, where, requested, _WAIT_AT_START)
    if requested:
        choice = replace(choice, source=source)
    if torch.get_num_threads() != choice.threads:
        torch.set_num_threads(choice.threads)
    _last[:] = [choice]
    return choice


def last_choice() -> ThreadChoice | None:
    """The choice ``apply_threads`` last applied in this process (None before any)."""
    return _last[0] if _last else None


#: OMP_WAIT_POLICY as torch's OpenMP starts (or started) with it in this process.
_WAIT_AT_START = _wait_policy_at_start(sys.modules)
