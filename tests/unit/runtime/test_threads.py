"""torch's thread count comes from the CPUs the process may use (affinity mask, cgroup CPU quota v1/v2,
read up the cgroup path on a mocked file system), SAGO_THREADS overrides it, OpenMP's idle threads
sleep (OMP_WAIT_POLICY=PASSIVE before torch starts), and the choice is recorded with the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sago_engine.runtime import threads
from sago_engine.runtime.threads import cgroup_cpu_quota, choose_threads

ROOT = Path(__file__).resolve().parents[3]
SLURM = "/system.slice/slurmstepd.scope/job_4749/step_0/user/task_0"
#: cgroup v1 with the cpu controller mounted beside memory, v2 unified elsewhere.
V1_MOUNTINFO = """31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""


def test_choice_is_the_smaller_of_affinity_and_quota_rounded_down():
    assert choose_threads(8).threads == 8 and choose_threads(8).source == "cpu affinity"
    assert choose_threads(8, 2.0).threads == 2 and choose_threads(8, 2.0).source == "cpu quota"
    assert choose_threads(8, 1.5).threads == 1  # a second thread would be throttled every period
    assert choose_threads(4, 0.25).threads == 1  # never below one
    assert choose_threads(2, 16.0).threads == 2  # a quota above the mask: the mask
    c = choose_threads(2, None, requested="3", wait_policy="PASSIVE")
    assert (c.threads, c.source) == (3, "SAGO_THREADS")
    assert c.record() == {"threads": 3, "source": "SAGO_THREADS", "affinity_cpus": 2, "cpu_quota": None,
                          "quota_file": None, "wait_policy": "PASSIVE"}
    for bad in ("0", "-2", "two", "1.5"):
        with pytest.raises(ValueError, match="positive integer"):
            choose_threads(2, requested=bad)
    with pytest.raises(ValueError):
        choose_threads(0)


def test_cgroup_v2_quota_is_read_up_the_path_smallest_level_wins():
    base = "/sys/fs/cgroup" + SLURM
    files = {"/proc/self/cgroup": f"0::{SLURM}\n", f"{base}/cpu.max": "max 100000\n",
             "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_4749/cpu.max": "150000 100000\n",
             "/sys/fs/cgroup/system.slice/cpu.max": "400000 100000\n"}
    cpus, where = cgroup_cpu_quota(files.get)
    assert cpus == pytest.approx(1.5) and where == "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_4749/cpu.max"
    assert choose_threads(8, cpus).threads == 1


def test_cgroup_v1_cfs_quota_and_no_quota():
    files = {"/proc/self/mountinfo": V1_MOUNTINFO,
             "/proc/self/cgroup": "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n",
             "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "300000\n",
             "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
             "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
             "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
             "/sys/fs/cgroup/unified/cpu.max": "max 100000\n"}
    assert cgroup_cpu_quota(files.get) == (pytest.approx(3.0), "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us")
    files["/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us"] = "-1\n"  # docker without --cpus
    assert cgroup_cpu_quota(files.get) == (None, None)
    assert cgroup_cpu_quota(lambda p: None) == (None, None)  # nothing readable
    garbage = {"/proc/self/cgroup": "0::/\n", "/sys/fs/cgroup/cpu.max": "lots 0\n"}
    assert cgroup_cpu_quota(garbage.get) == (None, None)


def test_apply_threads_sets_torch_and_records_the_choice(monkeypatch):
    import torch

    before = torch.get_num_threads()
    try:
        monkeypatch.setattr(threads, "affinity_cpus", lambda: 1)
        monkeypatch.setattr(threads, "cgroup_cpu_quota", lambda: (None, None))
        monkeypatch.delenv("SAGO_THREADS", raising=False)
        c = threads.apply_threads()
        assert c.threads == 1 == torch.get_num_threads() and threads.last_choice() == c
        monkeypatch.setenv("SAGO_THREADS", "2")
        assert threads.apply_threads("1", "SAGO_LIVE_THREADS").source == "SAGO_THREADS"  # SAGO_THREADS wins
        monkeypatch.delenv("SAGO_THREADS")
        c = threads.apply_threads("1", "SAGO_LIVE_THREADS")
        assert (c.threads, c.source) == (1, "SAGO_LIVE_THREADS")
    finally:
        torch.set_num_threads(before)


def test_tiny_backend_records_its_thread_choice_in_the_run_record(tiny_backend):
    from sago_engine.runrecord import local_decoding_record

    dec = local_decoding_record(tiny_backend.info(), 8, 8)
    assert dec["threads"] == dec["thread_choice"]["threads"] >= 1
    assert dec["thread_choice"]["source"] in ("SAGO_THREADS", "cpu affinity", "cpu quota", "SAGO_LIVE_THREADS")
    assert dec["thread_choice"]["affinity_cpus"] == len(os.sched_getaffinity(0))


def _fresh_python(code: str, **env: str) -> str:
    e = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "KMP_BLOCKTIME", "SAGO_THREADS")}
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=e, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_importing_sago_sets_passive_waiting_before_torch_starts_and_keeps_the_users_value():
    code = ("import os, sago_engine, torch; from sago_engine.runtime import threads; "
            "print(os.environ['OMP_WAIT_POLICY'], os.environ['KMP_BLOCKTIME'], threads._WAIT_AT_START)")
    assert _fresh_python(code) == "PASSIVE 0 PASSIVE"
    assert _fresh_python(code, OMP_WAIT_POLICY="ACTIVE") == "ACTIVE 0 ACTIVE"
    late = "import torch, sago_engine, os; from sago_engine.runtime import threads; print(threads._WAIT_AT_START)"
    assert _fresh_python(late) == "None"  # torch first: OpenMP started spinning; recorded as unknown/default


def test_pinned_process_chooses_its_affinity():
    """A process pinned to one CPU (sched_setaffinity) gets one thread, whatever the machine has."""
    code = ("import os; os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]}); "
            "from sago_engine.runtime import threads; import torch; c = threads.apply_threads(); "
            "print(c.threads, torch.get_num_threads(), c.affinity_cpus)")
    assert _fresh_python(code) == "1 1 1"


def test_every_entry_point_imports_sago_before_torch():
    """Each command a user runs (the runner, the benchmarks) starts torch's OpenMP with the wait policy set: an
    import of torch above ``import sago_engine`` (an import sorter moves it there) leaves idle threads spinning,
    which made the loaded precompute benchmark 2.8× slower than quiet instead of ≤ 2.5×."""
    scripts = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py") if p.stem != "neighbour")
    code = ("import importlib, sys; sys.path.insert(0, 'benchmarks'); "
            "[importlib.import_module(m) for m in sys.argv[1:]]; "
            "from sago_engine.runtime import threads; print(threads._WAIT_AT_START)")
    for module in ["precompute.__main__", *scripts]:
        out = subprocess.run([sys.executable, "-c", code, module], cwd=ROOT, capture_output=True, text=True,
                             env={k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "KMP_BLOCKTIME")})
        assert out.returncode == 0, (module, out.stderr[-800:])
        assert out.stdout.strip().splitlines()[-1] == "PASSIVE", module
