"""T3: the packed-weights memory cap reads the process's own cgroup and every level above it (v1
and v2), on a mocked file system, and records the limit it used."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from torch import nn

from sago_engine.runtime import kernels

GiB = 1 << 30
#: cgroup v1's "no limit" (2^63 rounded down to a page).
V1_UNLIMITED = "9223372036854771712\n"
SLURM = "/system.slice/slurmstepd.scope/job_4749/step_0/user/task_0"
#: This machine's layout: cgroup v1 with the memory controller nested under process_api, v2 unified at /.
V1_MOUNTINFO = """31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""


def _fs(files: dict[str, str]):
    """``open`` over a dict of path → text (FileNotFoundError for anything else), and its reader."""
    def fake_open(path, *a, **k):
        if str(path) in files:
            return io.StringIO(files[str(path)])
        raise FileNotFoundError(path)

    def read(path):
        return files.get(path)

    return fake_open, read


def cgroup_memory_limit(read=None):
    from sago_engine.runtime.memlimit import cgroup_memory_limit as limit

    return limit() if read is None else limit(read)


def _slurm_files(**extra: str) -> dict[str, str]:
    base = "/sys/fs/cgroup" + SLURM
    files = {"/proc/self/cgroup": f"0::{SLURM}\n", f"{base}/memory.max": "max\n",
             f"{base.rsplit('/', 1)[0]}/memory.max": "max\n",
             "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_4749/memory.max": f"{64 * GiB}\n"}
    files.update(extra)
    return files


def _meta_model(n_bytes: int) -> nn.Module:
    """Linear layers on the meta device holding ``n_bytes`` of float32 weights (nothing allocated),
    routed through the oneDNN kernel class as a loaded CPU model would be."""
    n = n_bytes // (4 * 1000 * 1_000_000)
    net = nn.Sequential(*[nn.Linear(1000, 1_000_000, bias=False, device="meta") for _ in range(n)])
    for m in net:
        m.__class__ = kernels.OneDNNLinear
    return net


def test_t3_slurm_job_limit_caps_the_packs(monkeypatch):
    """The T3 case: a Slurm step's task cgroup (``max``) under the job's 64 GiB, the root without a
    limit, 512 GiB of RAM: the budget is 16 GiB, so 28 GB of linear weights get no packs."""
    fake_open, _ = _fs(_slurm_files())
    monkeypatch.setattr(kernels, "open", fake_open, raising=False)
    monkeypatch.setattr("psutil.virtual_memory", lambda: SimpleNamespace(total=512 * GiB))
    monkeypatch.setattr(kernels, "mkl_packed_usable", lambda: True)
    monkeypatch.setattr(kernels, "onednn_pack_usable", lambda: True)
    monkeypatch.delenv(kernels.PACK_ENV, raising=False)
    assert kernels._total_memory() == 64 * GiB
    net = _meta_model(28 * 10**9)
    assert sum(m.weight.numel() * 4 for m in net) == 28 * 10**9
    rec = kernels.pack_linear_weights(net, 8)
    assert kernels.PACK_MEMORY_FRACTION * rec["memory_bytes"] == 16 * GiB
    assert rec == {"rows": 8, "mkl": False, "onednn": False, "bytes": 0, "memory_bytes": 64 * GiB,
                   "memory_source": "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_4749/memory.max"}
    assert all(m.__dict__["_packs"] is None for m in net)


def test_t3_v1_nested_memory_controller():
    """cgroup v1 (this machine's layout): the process's own level unlimited, its parent 8 GiB, the
    root unlimited; the v2 line (``0::/``) has no limit."""
    _, read = _fs({
        "/proc/self/mountinfo": V1_MOUNTINFO,
        "/proc/self/cgroup": "9:name=systemd:/\n4:memory:/process_api/c121d69e\n1:cpu:/\n0::/\n",
        "/sys/fs/cgroup/memory/process_api/c121d69e/memory.limit_in_bytes": V1_UNLIMITED,
        "/sys/fs/cgroup/memory/process_api/memory.limit_in_bytes": f"{8 * GiB}\n",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes": V1_UNLIMITED,
        "/sys/fs/cgroup/unified/memory.max": "max\n",
        "/sys/fs/cgroup/cpu/process_api/memory.limit_in_bytes": f"{GiB}\n",  # not the memory controller
    })
    assert cgroup_memory_limit(read) == (8 * GiB, "/sys/fs/cgroup/memory/process_api/memory.limit_in_bytes")


def test_t3_deeper_level_smaller_than_the_job(monkeypatch):
    """A step limited below its job: the deepest, smallest limit wins (the walk does not stop at the
    first limit it meets), and the physical memory when it is smaller still."""
    files = _slurm_files(**{"/sys/fs/cgroup/system.slice/slurmstepd.scope/job_4749/step_0/memory.max": f"{32 * GiB}\n"})
    fake_open, read = _fs(files)
    assert cgroup_memory_limit(read) == (
        32 * GiB, "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_4749/step_0/memory.max")
    monkeypatch.setattr(kernels, "open", fake_open, raising=False)
    monkeypatch.setattr("psutil.virtual_memory", lambda: SimpleNamespace(total=16 * GiB))
    assert kernels._memory_limit() == (16 * GiB, "physical memory")


def test_container_cgroup_mounted_at_its_own_root():
    """A container without its own cgroup namespace: the mount shows the container's cgroup as the
    mount's root, so ``/proc/self/cgroup``'s path is read relative to it."""
    _, read = _fs({
        "/proc/self/mountinfo": "40 30 0:40 /docker/abc /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw\n",
        "/proc/self/cgroup": "0::/docker/abc/app\n",
        "/sys/fs/cgroup/app/memory.max": "max\n",
        "/sys/fs/cgroup/memory.max": f"{2 * GiB}\n",
    })
    assert cgroup_memory_limit(read) == (2 * GiB, "/sys/fs/cgroup/memory.max")


@pytest.mark.parametrize("cgroup", [None, "0::/../outside\n"])
def test_without_a_usable_cgroup_path_the_mount_root_is_read(cgroup):
    files = {"/sys/fs/cgroup/memory.max": f"{3 * GiB}\n", "/sys/fs/cgroup/memory/memory.limit_in_bytes": V1_UNLIMITED}
    if cgroup is not None:
        files["/proc/self/cgroup"] = cgroup
    _, read = _fs(files)
    assert cgroup_memory_limit(read) == (3 * GiB, "/sys/fs/cgroup/memory.max")
    _, read = _fs({"/proc/self/cgroup": "0::/a\n", "/sys/fs/cgroup/a/memory.max": "garbage\n"})
    assert cgroup_memory_limit(read) == (None, None)


def test_this_machine_reads_a_limit_or_none():
    """On the real file system the answer is a positive byte count with its file, or no limit."""
    n, where = cgroup_memory_limit()
    assert (n is None and where is None) or (n > 0 and where.startswith("/"))
    total, source = kernels._memory_limit()
    assert total > 0 and source
