"""Where a ``--ray`` launch would connect, checked before Ray is asked: a bounded TCP connect to the
address Ray would dial, and a clear error naming where a dead address came from (a stale
``ray_current_cluster`` file) and the fix. Ray itself waits minutes on a dead GCS address."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

__all__ = ["CONNECT_TIMEOUT_S", "LaunchError", "check_cluster_address", "cluster_address"]


class LaunchError(RuntimeError):
    """The launch cannot start (no cluster, an output it must not overwrite) or a task failed
    for good; the message says which shard and why, and what to run next."""


#: Seconds a launch waits for the cluster's address to accept a TCP connection before it gives up.
CONNECT_TIMEOUT_S = 10.0


def cluster_address(address: str | None) -> tuple[str | None, str]:
    """The address ``ray.init(address=address)`` will dial, and where it comes from.

    Ray's order (``ray._private.services.get_ray_address_from_environment``): ``RAY_ADDRESS``, then
    an explicit address, then for ``"auto"`` the file ``<RAY_TMPDIR or TMPDIR or /tmp>/ray/
    ray_current_cluster`` that the last ``ray start`` on this machine wrote — a file a stopped
    cluster leaves behind. Returns ``(address or None, source)``: source ``"RAY_ADDRESS"``,
    ``"--ray"`` or the file's path; ``(None, "")`` when there is none (Ray then looks for a
    running local cluster itself and fails fast).
    """
    env = (os.environ.get("RAY_ADDRESS") or "").strip()
    if env and env != "auto":
        return env, "RAY_ADDRESS"
    if address not in (None, "auto"):
        return address, "--ray"
    from ray._private.utils import get_ray_address_file  # Ray's own rule for the file (pinned version)

    f = Path(get_ray_address_file(None))
    try:
        text = f.read_text(encoding="utf-8", errors="replace").strip()
    except (FileNotFoundError, IsADirectoryError):
        return None, ""
    return text, str(f)


def check_cluster_address(address: str | None, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Raise ``LaunchError`` unless the address a launch will dial (``cluster_address``) accepts a
    TCP connection within ``timeout_s`` seconds: Ray itself waits minutes on a dead GCS address.
    The message names the address, where it came from and the fix (for a stale
    ``ray_current_cluster`` file: remove it or start a cluster)."""
    addr, source = cluster_address(address)
    if addr is None:
        return
    m = re.fullmatch(r"(?:ray://)?\[?([A-Za-z0-9_.:-]+?)\]?:(\d{1,5})", addr)
    port = int(m.group(2)) if m else 0
    if m is None or not 0 < port < 65536:
        raise LaunchError(f"the Ray cluster address {addr[:80]!r} (from {source}) is not HOST:PORT; "
                          + _address_fix(source))
    try:
        socket.create_connection((m.group(1), port), timeout=timeout_s).close()
    except OSError as e:
        raise LaunchError(f"no Ray cluster answers at {addr} (from {source}) within {timeout_s:g} s "
                          f"({type(e).__name__}: {e}); " + _address_fix(source)) from None


def _address_fix(source: str) -> str:
    if source in ("RAY_ADDRESS", "--ray"):
        return (f"fix {source} (the head's HOST:6379, or ray://HOST:10001), or start a cluster there with "
                "`ray start --head`")
    return (f"{source} was left by a Ray cluster that has stopped: start one with `ray start --head` (it rewrites "
            f"the file), or remove the file (`rm {source}`), or pass --ray HOST:PORT of a running cluster")
