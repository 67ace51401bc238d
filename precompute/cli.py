"""The ``sago`` command (installed by ``pip install .``): one entry point over the runner's subcommands.

``sago run`` and ``sago plan`` are ``python -m precompute`` (``--plan`` for plan); ``sago dashboard``
starts the Streamlit dashboard; every other subcommand is the runner's own (``forwarded``: the names
``python -m precompute`` dispatches on), passed to it unchanged — so a subcommand added to the
runner is a ``sago`` subcommand too, with no change here.
"""

from __future__ import annotations

import difflib
import inspect
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

#: The subcommands defined here, with their one-line help.
OWN: dict[str, str] = {
    "run": "run a study: sago run CONFIG.toml [options of python -m precompute]",
    "plan": "print what a run would do and exit: sago plan CONFIG.toml [options]",
    "dashboard": "open the dashboard on a store: sago dashboard [STORE] [--port N]",
}


def forwarded() -> dict[str, str]:
    """The runner's subcommands: name → one line of help.

    A subcommand is a name ``python -m precompute``'s ``main`` (or the ``_main`` it wraps) dispatches on (``argv[0] == "name"``)
    or a function ``<name>_main(argv)`` of ``precompute.__main__`` (underscores as hyphens);
    ``ray_main`` (which takes a config) is not one. The help is the first sentence of the
    ``<name>_main`` docstring, found in ``precompute.__main__`` or in ``precompute.<name>``.
    """
    import precompute.__main__ as runner_cli

    dispatch = "".join(inspect.getsource(f) for f in (runner_cli.main, getattr(runner_cli, "_main", None)) if f)
    names = set(re.findall(r"""argv\[0\] == ["']([a-z][a-z0-9-]*)["']""", dispatch))
    for attr, fn in vars(runner_cli).items():
        if attr.endswith("_main") and not attr.startswith("_") and callable(fn) and _argv_only(fn):
            names.add(attr[: -len("_main")].replace("_", "-"))
    return {name: summary(inspect.getdoc(_entry(name)) or "") for name in sorted(names)}


def _argv_only(fn) -> bool:
    try:
        return list(inspect.signature(fn).parameters) == ["argv"]
    except (TypeError, ValueError):
        return False


def _entry(name: str) -> Callable | None:
    """The function behind a runner subcommand, for its docstring (None when none is found)."""
    import importlib

    attr = name.replace("-", "_") + "_main"
    import precompute.__main__ as runner_cli

    if hasattr(runner_cli, attr):
        return getattr(runner_cli, attr)
    dispatch = inspect.getsource(getattr(runner_cli, "_main", runner_cli.main))
    m = re.search(rf"""argv\[0\] == ["']{re.escape(name)}["']:\s*from (precompute\.\w+) import (\w+)""", dispatch)
    module, attr = (m.group(1), m.group(2)) if m else (f"precompute.{name.replace('-', '_')}", attr)
    try:
        return getattr(importlib.import_module(module), attr, None)
    except ImportError:
        return None


def summary(doc: str) -> str:
    """A subcommand's one-line help from its docstring ``"``usage``: what it does; more."``: "what it does"."""
    text = " ".join(doc.split())
    if text.startswith("``") and "``:" in text:
        text = text.split("``:", 1)[1]
    for stop in ("; ", ". "):
        text = text.split(stop, 1)[0]
    return text.replace("``", "").strip().rstrip(".")


def usage() -> str:
    """The text of ``sago --help``: every subcommand with one line."""
    from sago_engine import __version__

    rows = [(name, text) for name, text in OWN.items()]
    rows += list(forwarded().items())
    width = max(len(n) for n, _ in rows)
    lines = [f"sago {__version__} — how stable is an LLM when the same request is phrased differently (SAGO)",
             "", "usage: sago SUBCOMMAND [options]   (sago SUBCOMMAND --help for its options)", "", "subcommands:"]
    lines += [f"  {n.ljust(width)}  {t}" for n, t in rows]
    return "\n".join(lines)


def _with_config(argv: list[str]) -> list[str]:
    """``CONFIG.toml …`` → ``--config CONFIG.toml …`` (a first argument that is not an option is the config)."""
    if argv and not argv[0].startswith("-"):
        return ["--config", argv[0], *argv[1:]]
    return argv


def dashboard_command(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """The Streamlit command line and environment of ``sago dashboard [STORE] [--port N] [streamlit options]``.

    The same local settings as ``scripts/dashboard.sh`` without ``--share`` (this machine only,
    offline model hubs, no page list, no watcher). ``app.py`` is found next to the ``dashboard``
    package, in a clone and in an installed wheel alike.

    Returns:
        (argv of the child process, its environment).
    Raises:
        SystemExit(2): a STORE that is not a file.
    """
    import argparse

    import dashboard

    ap = argparse.ArgumentParser(prog="sago dashboard", description=OWN["dashboard"])
    ap.add_argument("store", nargs="?", help="a DuckDB store (default: the sidebar's choice, data/sago_demo.duckdb in a clone)")
    ap.add_argument("--port", type=int, default=8501, help="port on 127.0.0.1 (default 8501)")
    args, extra = ap.parse_known_args(argv)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
           "KMP_BLOCKTIME": os.environ.get("KMP_BLOCKTIME", "0")}
    for k in ("SAGO_SHARE_DIR", "SAGO_LIVE"):
        env.pop(k, None)
    if args.store:
        store = Path(args.store)
        if not store.is_file():
            ap.error(f"{args.store}: no such store file" + (" (it is a folder)" if store.is_dir() else ""))
        env["SAGO_STORE"] = str(store.resolve())
    app = Path(dashboard.__file__).resolve().parent.parent / "app.py"
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.headless", "true",
           "--server.address", "127.0.0.1", "--server.port", str(args.port), "--browser.gatherUsageStats", "false",
           "--client.toolbarMode", "viewer", "--client.showSidebarNavigation", "false",
           "--server.fileWatcherType", "none", *extra]
    return cmd, env


def main(argv: list[str] | None = None) -> int:
    """``sago SUBCOMMAND …``; returns the subcommand's exit status (2 for an unknown subcommand)."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    if argv[0] == "--version":
        from sago_engine import __version__

        print(f"sago {__version__}")
        return 0
    from precompute.__main__ import main as runner_main

    sub, rest = argv[0], argv[1:]
    if sub == "run":
        return runner_main(_with_config(rest))
    if sub == "plan":
        return runner_main([*_with_config(rest), "--plan"])
    if sub == "dashboard":
        cmd, env = dashboard_command(rest)
        return subprocess.call(cmd, env=env)
    subs = forwarded()
    if sub in subs:
        return runner_main([sub, *rest])
    near = difflib.get_close_matches(sub, [*OWN, *subs], n=1)
    print(f"error: unknown subcommand {sub!r}" + (f"; did you mean {near[0]!r}?" if near else "")
          + " (sago --help lists them)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
