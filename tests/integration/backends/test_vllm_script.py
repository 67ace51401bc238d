"""``scripts/vllm_server.sh`` acts on a PID only after checking it is the server it started
(start time, command line, token); a stale PID file is removed and nothing is signalled (U10).

No vLLM here: ``status`` and ``stop`` against processes this test starts, in a private state
folder (``SAGO_VLLM_STATE``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "vllm_server.sh"

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")


def _script(state: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SAGO_VLLM_STATE": str(state)}
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60)


def _leader(*argv: str, env: dict | None = None) -> subprocess.Popen:
    """A process-group leader of its own (as the server, started with setsid, is)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", *argv], start_new_session=True,
                            env={**os.environ, **(env or {})})


def _start_time(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[19]


def _write(state: Path, line: str) -> None:
    state.mkdir(exist_ok=True)
    (state / "server.pid").write_text(line + "\n")
    (state / "server.url").write_text("http://127.0.0.1:9/v1\n")


@pytest.mark.parametrize("case", ["bare pid", "other start time", "not vllm", "other token"])
def test_u10_a_stale_pid_file_is_removed_and_nothing_is_signalled(tmp_path, case):
    """U10: the PID file names an unrelated process-group leader (the bare PID an older script wrote,
    or a full identity of which one part differs): ``status`` says not running, ``stop`` signals
    nothing, and the stale files are gone."""
    state = tmp_path / "state"
    other = _leader("vllm.entrypoints.openai.api_server" if case != "not vllm" else "unrelated",
                    env={"SAGO_VLLM_TOKEN": "tok"})
    try:
        st = _start_time(other.pid)
        line = {"bare pid": f"{other.pid}", "other start time": f"{other.pid} {int(st) + 1} tok",
                "not vllm": f"{other.pid} {st} tok", "other token": f"{other.pid} {st} nottok"}[case]
        _write(state, line)
        s = _script(state, "status")
        assert s.returncode == 3 and s.stdout.strip() == "not running"
        assert "stale PID file" in s.stderr and "nothing signalled" in s.stderr
        assert not (state / "server.pid").exists() and not (state / "server.url").exists()
        _write(state, line)
        assert _script(state, "stop").returncode == 0
        time.sleep(0.3)
        assert other.poll() is None  # still running: never signalled
        assert not (state / "server.pid").exists()
    finally:
        other.kill()
        other.wait()


def test_the_server_it_started_is_reported_and_stopped(tmp_path):
    """The same checks pass for the process the PID file does describe: it is stopped (its group)."""
    state = tmp_path / "state"
    srv = _leader("vllm.entrypoints.openai.api_server", env={"SAGO_VLLM_TOKEN": "tok123"})
    try:
        _write(state, f"{srv.pid} {_start_time(srv.pid)} tok123")
        s = _script(state, "status")
        assert s.returncode == 0 and s.stdout.strip() == f"running http://127.0.0.1:9/v1 pid {srv.pid}"
        assert _script(state, "stop").returncode == 0
        assert srv.wait(timeout=30) is not None
        assert not (state / "server.pid").exists()
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()


def test_a_start_waits_for_another_starts_lock_only_so_long(tmp_path):
    """Another start holds the lock (a hung one): this start gives up after START_TIMEOUT +
    INSTALL_WAIT seconds with the fix, instead of waiting for ever."""
    import fcntl

    state = tmp_path / "state"
    state.mkdir()
    with open(state / "start.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        env = {**os.environ, "SAGO_VLLM_STATE": str(state), "SAGO_VLLM_START_TIMEOUT": "1",
               "SAGO_VLLM_INSTALL_WAIT": "1"}
        t0 = time.monotonic()
        p = subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=60)
        assert p.returncode == 1 and time.monotonic() - t0 < 30
        assert f"another start has held {state}/start.lock for more than 2 s" in p.stderr


def test_numeric_settings_are_checked_before_anything_runs(tmp_path):
    env = {**os.environ, "SAGO_VLLM_STATE": str(tmp_path), "SAGO_VLLM_MAX_MODEL_LEN": "nan\x1b[2J"}
    p = subprocess.run(["bash", str(SCRIPT), "status"], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "SAGO_VLLM_MAX_MODEL_LEN must be a positive integer, got 'nan?[2J'" in p.stderr
    assert "\x1b" not in p.stderr
