"""The memory limit of the cgroup this process runs in: its own cgroup and every level above it.

A process in a nested cgroup (a Slurm job step, a systemd slice or ``systemd-run -p MemoryMax``, a
container without its own cgroup namespace) is bound by the limit of every cgroup on its path, and
the mount root's ``memory.max`` often reads ``max`` while a level below holds the real wall
(NVIDIA/enroot #169: ``…/job_4749/step_0/user/memory.max``; ClickHouse PR #59435). This module
reads ``/proc/self/cgroup`` — the cgroup v2 line ``0::<path>`` and the cgroup v1 line whose
controllers include ``memory`` — locates each hierarchy's mount and its root in
``/proc/self/mountinfo`` (default: v2 at ``/sys/fs/cgroup``, v1 at ``/sys/fs/cgroup/memory``, root
``/``), and walks from the process's cgroup up to the mount root, taking the smallest
``memory.max`` (v2) / ``memory.limit_in_bytes`` (v1). ``max`` and values of 2^62 and more (v1 writes
2^63 − a page for "no limit") count as no limit.

All reads go through one ``read(path) -> text or None`` function (tests pass a mocked file system).
Source: Linux ``Documentation/admin-guide/cgroup-v2.rst`` (memory.max), ``cgroup-v1/memory.rst``
(memory.limit_in_bytes), ``proc(5)`` (/proc/self/cgroup, /proc/self/mountinfo).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable

__all__ = ["UNLIMITED_FROM", "cgroup_folders", "cgroup_memory_limit", "read_text"]

#: Limits at or above this many bytes mean "no limit" (v1: 2^63 − page size).
UNLIMITED_FROM = 1 << 62

#: Default mount points: the v2 unified hierarchy, and a v1 controller's folder under it.
_V2_POINT = "/sys/fs/cgroup"


def read_text(path: str) -> str | None:
    """The text of ``path``, or None when it cannot be read (absent, no permission, not text)."""
    try:
        with open(path, encoding="ascii", errors="strict") as f:
            return f.read()
    except (OSError, ValueError):
        return None


def _unescape(field: str) -> str:
    """A mountinfo path with its octal escapes (``\\040`` = space) decoded."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _mounts(text: str | None, controller: str = "memory") -> dict[str, tuple[str, str]]:
    """``{"v2": (root, mount point), "v1": (root, mount point)}`` of the first cgroup2 mount and the
    first cgroup v1 mount holding ``controller`` in a ``/proc/self/mountinfo`` text."""
    out: dict[str, tuple[str, str]] = {}
    for line in (text or "").splitlines():
        left, sep, right = line.partition(" - ")
        f, r = left.split(), right.split()
        if not sep or len(f) < 5 or not r:
            continue
        root, point = _unescape(f[3]), _unescape(f[4])
        if r[0] == "cgroup2":
            out.setdefault("v2", (root, point))
        elif r[0] == "cgroup" and len(r) >= 3 and controller in r[2].split(","):
            out.setdefault("v1", (root, point))
    return out


def _levels(path: str, root: str, point: str) -> list[str]:
    """The folders from the process's cgroup ``path`` up to the mount point (deepest first).

    ``path`` is relative to the hierarchy's root, the mount shows ``root`` at ``point``; a path
    outside ``root`` or with ``..`` (another cgroup namespace) gives the mount point only."""
    if ".." in path.split("/"):
        return [point]
    path, root = ("/" + posixpath.normpath("/" + p).strip("/") for p in (path, root))  # normpath keeps "//"
    if root != "/":
        if path != root and not path.startswith(root + "/"):
            return [point]
        path = "/" + path[len(root):].lstrip("/")
    parts = [p for p in path.split("/") if p]
    return [posixpath.join(point, *parts[:k]) for k in range(len(parts), 0, -1)] + [point]


def _limit(text: str | None) -> int | None:
    """Bytes of a memory.max / memory.limit_in_bytes text, None for no limit or an unreadable one."""
    val = (text or "").strip()
    if not val.isdigit():  # "max", empty, garbage
        return None
    n = int(val)
    return None if n >= UNLIMITED_FROM else n


def cgroup_folders(read: Callable[[str], str | None] = read_text,
                   controller: str = "memory") -> list[tuple[str, str]]:
    """The cgroup folders on this process's path that can hold a limit of ``controller``.

    Args:
        read: ``path -> text or None`` (default ``read_text``: the real file system).
        controller: the cgroup v1 controller whose hierarchy is read (``"memory"``, ``"cpu"``);
            the v2 hierarchy holds every controller.
    Returns:
        ``[(version, folder), ...]``: ``"v2"`` / ``"v1"`` and each folder from the process's cgroup up
        to the hierarchy's mount point, deepest first per hierarchy. Without a readable
        ``/proc/self/cgroup`` only the default mount roots (``/sys/fs/cgroup`` and
        ``/sys/fs/cgroup/<controller>``).
    """
    mounts = _mounts(read("/proc/self/mountinfo"), controller)
    defaults = {"v2": _V2_POINT, "v1": posixpath.join(_V2_POINT, controller)}
    cg = read("/proc/self/cgroup")
    paths: list[tuple[str, str]] = [("v2", "/"), ("v1", "/")] if cg is None else []
    for line in (cg or "").splitlines():
        hid, _, rest = line.partition(":")
        ctrls, sep, path = rest.partition(":")
        if not sep:
            continue
        if hid == "0" and ctrls == "":
            paths.append(("v2", path))
        elif controller in ctrls.split(","):
            paths.append(("v1", path))
    out: list[tuple[str, str]] = []
    for version, path in paths:
        root, point = mounts.get(version, ("/", defaults[version]))
        out += [(version, folder) for folder in _levels(path.strip(), root, point)]
    return out


def cgroup_memory_limit(read: Callable[[str], str | None] = read_text) -> tuple[int | None, str | None]:
    """The smallest memory limit on this process's cgroup path, and where it is set.

    Args:
        read: ``path -> text or None`` (default ``read_text``: the real file system).
    Returns:
        ``(bytes, file)``: the smallest limit found over both hierarchies and every level, and the
        file that holds it; ``(None, None)`` when no level sets one. Without a readable
        ``/proc/self/cgroup`` only the default mount roots are read.
    """
    best: tuple[int | None, str | None] = (None, None)
    for version, folder in cgroup_folders(read, "memory"):
        f = posixpath.join(folder, "memory.max" if version == "v2" else "memory.limit_in_bytes")
        n = _limit(read(f))
        if n is not None and (best[0] is None or n < best[0]):
            best = (n, f)
    return best
