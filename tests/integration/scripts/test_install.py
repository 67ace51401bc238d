"""`pip install .` as a user does it: a wheel built from this checkout, installed into a fresh virtualenv
in a temporary folder, gives a `sago` command that works away from the checkout (`--help`, `plan` on a
small config of the user's own prompts). The new venv reuses this environment's packages through a
.pth file and installs the wheel with --no-deps --no-index: nothing is downloaded."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from precompute.cli import forwarded, main, usage

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the fresh venv's bin folder, a folder outside the checkout) with the wheel installed."""
    tmp = tmp_path_factory.mktemp("install")
    src, wheels = tmp / "src", tmp / "wheels"  # built from a copy: the checkout gets no build/ folder
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "app.py"):
        shutil.copy2(ROOT / name, src / name)
    for pkg in ("sago_engine", "precompute", "dashboard", "pages", "data/datasets"):
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(wheels)], check=True, cwd=tmp, capture_output=True)
    [wheel] = wheels.glob("sago-*.whl")
    venv = tmp / "venv"
    base_python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base_python, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "shared-env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # reuse, don't download
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--no-deps", "--no-index", str(wheel)], check=True, capture_output=True)
    return venv / "bin", tmp, wheel


def _env():
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def test_wheel_holds_the_packages_the_dashboard_and_the_configs(installed):
    _, _, wheel = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    for f in ("precompute/cli.py", "precompute/configs/demo.toml", "sago_engine/sources/__init__.py",
              "dashboard/favicon.png", "app.py", "pages/rankings.py"):
        assert f in names, f
    assert not any(n.startswith(("tests/", "data/")) for n in names)


def test_sago_help_from_the_installed_wheel(installed):
    bin_dir, tmp, _ = installed
    out = subprocess.run([str(bin_dir / "sago"), "--help"], cwd=tmp, capture_output=True, text=True, env=_env())
    assert out.returncode == 0, out.stderr
    for sub in ("run", "plan", "dashboard", "merge", "rescore", "import-authors", "report"):
        assert f"\n  {sub} " in out.stdout, (sub, out.stdout)
    where = subprocess.run([str(bin_dir / "python"), "-c", "import precompute; from sago_engine.datasets import "
                            "bundled_dir; print(precompute.__file__); print(bundled_dir())"],
                           cwd=tmp, capture_output=True, text=True, env=_env())
    module, bundled = where.stdout.split()
    assert module.startswith(str(bin_dir.parent)) and str(ROOT) not in where.stdout  # the installed copy ran
    assert Path(bundled) == bin_dir.parent / "share" / "sago" / "datasets"  # the wheel's copy of the samples
    assert sorted(p.name for p in Path(bundled).glob("*.jsonl")) == sorted(p.name for p in (ROOT / "data" / "datasets").glob("*.jsonl"))


def test_sago_plan_on_own_prompts_from_the_installed_wheel(installed):
    bin_dir, tmp, _ = installed
    (tmp / "mine.csv").write_text("question\nWhat is 2+2?\nName a colour.\nWhy is the sky blue?\n", encoding="utf-8")
    (tmp / "study.toml").write_text(f"""
[run]
store = "{tmp / 'study.duckdb'}"
[data]
n_prompts = 2
[[data.sources]]
path = "mine.csv"
prompt = "question"
[variants]
families = ["surface_noise"]
per_family = {{ surface_noise = 2 }}
[semantic_filter]
enabled = false
[[models]]
key = "tiny-random"
""")
    out = subprocess.run([str(bin_dir / "sago"), "plan", "study.toml"], cwd=tmp, capture_output=True, text=True,
                         env=_env(), timeout=300)
    assert out.returncode == 0, out.stderr
    assert "prompts: 2  variants: 4" in out.stdout, out.stdout
    assert "tiny-random: run " in out.stdout and "2 prompts pending" in out.stdout


def test_runner_subcommands_are_found_generically(capsys):
    subs = forwarded()
    assert {"merge", "rescore", "import-authors", "report"} <= set(subs)
    assert "ray" not in subs  # ray_main(cfg, args) is not a subcommand
    assert subs["report"].startswith("a result you can send") and all(subs.values())
    for name in subs:  # each reaches the runner's own parser
        with pytest.raises(SystemExit) as ei:
            main([name, "--help"])
        assert ei.value.code == 0 and f"{name}" in capsys.readouterr().out


def test_unknown_subcommand_suggests_the_closest(capsys):
    assert main(["rnu"]) == 2
    assert "did you mean 'run'?" in capsys.readouterr().err
    assert main(["--help"]) == 0 and "subcommands:" in capsys.readouterr().out
    assert "dashboard" in usage()


def test_dashboard_command_is_the_local_streamlit_app(tmp_path):
    from precompute.cli import dashboard_command

    store = tmp_path / "s.duckdb"
    store.write_bytes(b"")
    cmd, env = dashboard_command([str(store), "--port", "8612"])
    assert cmd[1:4] == ["-m", "streamlit", "run"] and Path(cmd[4]) == ROOT / "app.py"
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1" and cmd[cmd.index("--server.port") + 1] == "8612"
    assert env["SAGO_STORE"] == str(store.resolve()) and "SAGO_SHARE_DIR" not in env
    with pytest.raises(SystemExit):
        dashboard_command([str(tmp_path / "missing.duckdb")])


def test_sago_dashboard_from_the_installed_wheel_serves_a_store(installed):
    """The installed app.py and pages/ (site-packages) run: the server answers, and the Profiles page of the
    store renders in chromium with the store's models."""
    from tests.support.browser import browser_page, free_port, require_chromium
    from tests.support.factories import make_store

    require_chromium()
    bin_dir, tmp, _ = installed
    store = make_store(tmp / "dash.duckdb", models=("model-x", "model-y"))
    port = free_port()
    proc = subprocess.Popen([str(bin_dir / "sago"), "dashboard", str(store), "--port", str(port)], cwd=tmp,
                            env={**_env(), "SAGO_LIVE_WARMUP": "0"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import time
        import urllib.request

        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, "the dashboard did not start"
            time.sleep(1)
        with browser_page(1300, 900) as page:
            page.goto(f"http://127.0.0.1:{port}/")
            page.get_by_text("model-y").first.wait_for(timeout=90_000)
            assert page.locator("[data-testid='stException']").count() == 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
