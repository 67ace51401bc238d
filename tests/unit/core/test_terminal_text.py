"""Nothing from a store, a CSV, a config, a reply or a server reaches a terminal or a log raw.

Each command line entry point is fed ``terminal_bytes.HOSTILE`` (ESC sequences, BEL, CR, a C1
CSI, NUL, bidi marks, a line separator, a lone surrogate) where its input can carry text, and the
bytes it wrote to stdout and stderr (``capfdbinary``: the file descriptors themselves) are checked.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from precompute.__main__ import main as cli_main
from tests.support.factories import make_store, tiny_toml
from tests.support.terminal_bytes import HOSTILE, assert_inert

ROOT = Path(__file__).resolve().parents[3]
STORED = HOSTILE.replace("\ud83d", "")


@pytest.fixture
def cli_logging(monkeypatch):
    """Root logging as a fresh process has it (no handler), so the command's own ``basicConfig``
    writes to its stderr, as it does outside pytest (pytest adds its capture handler when the test
    starts: the test calls the returned function first)."""

    def fresh():
        monkeypatch.setattr(logging.root, "handlers", [])
        monkeypatch.setattr(logging.root, "level", logging.WARNING)

    return fresh


# ---------------------------------------------------------------- the neutraliser itself
def test_every_control_and_bidi_character_is_replaced_and_text_kept():
    from sago_engine.textsafe import neutral, one_line, terminal

    assert_inert(terminal(HOSTILE).encode())
    assert_inert(one_line(HOSTILE).encode())
    assert "forged: all checks passed" in terminal(HOSTILE) and "evil" in terminal(HOSTILE)
    assert terminal("a\tb\nc\rd") == "a\tb\nc\ufffdd"  # CR would let a line overwrite itself
    assert one_line("a\nb\u2028c\u2029d\te") == "a\ufffdb\ufffdc\ufffdd\te"  # a value cannot start a new log line
    assert neutral("a\rb\u2028", keep="\t\n\r\u2028") == "a\rb\u2028"  # pages keep CR: a browser does not act on it
    assert terminal("Δ-BLEU ± 0.5 → café 日本 \u2060") == "Δ-BLEU ± 0.5 → café 日本 \u2060"
    for c in map(chr, [*range(0x20), 0x7F, *range(0x80, 0xA0), 0x61C, 0x200E, 0x200F, *range(0x202A, 0x202F),
                       *range(0x2066, 0x206A), 0xD800, 0xDFFF]):
        assert terminal(c) in (c, "\ufffd") and (terminal(c) == c) == (c in "\t\n")
    assert terminal(3.5) == "3.5" and terminal(None) == "None"


def test_a_stream_keeps_only_a_progress_bars_opening_cr():
    import io

    from sago_engine.textsafe import TerminalStream, raw_stream

    buf = io.StringIO()
    s = TerminalStream(buf)
    s.write("\r 50%|█████     | 5/10")  # a progress bar redrawing its line
    s.write("label\r\x1b[32mforged\n")
    assert buf.getvalue() == "\r 50%|█████     | 5/10label\ufffd\ufffd[32mforged\n"
    assert raw_stream(s) is buf and raw_stream(buf) is buf


def test_the_dashboard_rule_is_the_same_rule():
    from dashboard.safe import visible
    from sago_engine.textsafe import PAGE_KEEPS, neutral

    assert visible(HOSTILE) == neutral(HOSTILE, keep=PAGE_KEEPS)
    assert visible("a\u2028b\rc\ud83d\x1b") == "a\u2028b\rc\ufffd\ufffd"


def test_guard_neutralises_prints_and_log_lines_and_restores_the_streams(capfdbinary, cli_logging):
    cli_logging()
    import sys

    from sago_engine.textsafe import guarded_terminal

    before = sys.stdout, sys.stderr
    with guarded_terminal():
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        print(HOSTILE)
        print(HOSTILE, file=sys.stderr)
        logging.getLogger("sago.test").warning("%s: %d replies; %r", HOSTILE, 3, HOSTILE)
        logging.getLogger("sago.test").error(HOSTILE)
        try:
            raise ValueError(HOSTILE)
        except ValueError:
            logging.getLogger("sago.test").exception("failed")
    assert (sys.stdout, sys.stderr) == before
    got = capfdbinary.readouterr()
    assert_inert(got.out + got.err)
    assert got.err.count(b"\n") >= 4 and b"WARNING sago.test: " in got.err
    # one log call is one line: a value cannot forge another
    warn = next(line for line in got.err.split(b"\n") if line.startswith(b"WARNING"))
    assert b"3 replies" in warn and b"end" in warn


# ---------------------------------------------------------------- each entry point
def _hostile_store(path: Path) -> Path:
    """A small store whose model labels and run status carry the hostile text (a store holds UTF-8:
    no lone surrogate)."""
    m = "model-a" + STORED
    make_store(path, models=(m,), run_fields={m: {"status": "failed: " + STORED}})
    return path


def test_merge_prints_store_text_inert(tmp_path, capfdbinary, cli_logging):
    cli_logging()
    shard = _hostile_store(tmp_path / "part.duckdb")
    assert cli_main(["merge", "--out", str(tmp_path / "all.duckdb"), str(shard)]) == 0
    got = capfdbinary.readouterr()
    assert b"forged: all checks passed" in got.err  # the run's line was printed, inert
    assert_inert(got.out + got.err)


def test_merge_error_naming_a_hostile_path_is_inert(tmp_path, capfdbinary, cli_logging):
    cli_logging()
    assert cli_main(["merge", "--out", str(tmp_path / "x.duckdb"), str(tmp_path / ("missing" + HOSTILE[:40]))]) == 2
    got = capfdbinary.readouterr()
    assert b"error:" in got.err
    assert_inert(got.out + got.err)


def test_rescore_prints_store_text_inert(tmp_path, capfdbinary, cli_logging):
    cli_logging()
    store = _hostile_store(tmp_path / "s.duckdb")
    assert cli_main(["rescore", str(store)]) == 0
    assert cli_main(["rescore", str(store), "--run", "nope" + HOSTILE[:30]]) == 2
    got = capfdbinary.readouterr()
    assert b"model-a" in got.out
    assert_inert(got.out + got.err)


def test_plan_prints_config_text_inert(tmp_path, capfdbinary, cli_logging, monkeypatch):
    cli_logging()
    monkeypatch.setenv("TQDM_DISABLE", "1")  # a model loader's progress bar redraws with CR (kept by the guard)
    label = "".join(c if " " <= c <= "~" and c not in '"\\' else f"\\u{ord(c):04x}" for c in STORED)
    text = tiny_toml().replace('key = "tiny-random"', f'key = "tiny-random"\nlabel = "{label}"')
    conf = tmp_path / "c.toml"
    conf.write_text(text.format(store=tmp_path / "s.duckdb", data=ROOT / "data" / "datasets"))
    assert cli_main(["--config", str(conf), "--plan"]) == 0
    got = capfdbinary.readouterr()
    assert b"forged: all checks passed" in got.out
    assert_inert(got.out + got.err)


def test_run_summary_and_exit_status_are_inert(capfdbinary, cli_logging):
    """What a run prints at its end: reply health warnings (model label from the config, the first
    error from a server's reply) and the failed-run line."""
    cli_logging()
    from precompute.__main__ import exit_status
    from precompute.summary import Health, final_status
    from sago_engine.textsafe import guarded_terminal

    h = Health(replies=4, errors=4, invalid_logprobs=1, first_error="HTTP 500: " + HOSTILE)
    with guarded_terminal():
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
        status = final_status(HOSTILE, h, 0, None, 8)
        assert exit_status([{"model": HOSTILE, "status": status}]) == 4
    got = capfdbinary.readouterr()
    assert got.err.count(b"HTTP 500") >= 1 and b"failed: most replies of" in got.err
    assert_inert(got.out + got.err)


def test_api_backend_log_of_a_server_message_is_inert(capfdbinary, cli_logging):
    cli_logging()
    from sago_engine.backends.api.server_limits import log as api_log
    from sago_engine.textsafe import guarded_terminal

    with guarded_terminal():
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
        api_log.warning("%s %s: prompt failed: %s", "openai", "m", "HTTP 400: " + HOSTILE)
    got = capfdbinary.readouterr()
    assert b"prompt failed: HTTP 400" in got.err
    assert_inert(got.err)


def test_password_check_names_a_hostile_file_inert(tmp_path, capfdbinary):
    from dashboard.password import main as password_main

    bad = tmp_path / ("secrets\x1b]0;t\x07\u202e" + ".toml")
    bad.write_text('sago_password = "unclosed\n')
    assert password_main(["--secrets.files", str(bad)]) == 2
    got = capfdbinary.readouterr()
    assert b"refusing to share" in got.err
    assert_inert(got.out + got.err)


def test_the_dashboard_server_log_is_inert():
    """The dashboard process makes every log record inert (``inert_logs`` in app.py): a store
    label logged by any module reaches Streamlit's log without its control characters."""
    import io

    from streamlit.testing.v1 import AppTest

    old = logging.getLogRecordFactory()
    try:
        AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
        assert getattr(logging.getLogRecordFactory(), "sago_inert", False)
        buf = io.StringIO()
        handler = logging.StreamHandler(buf)
        logger = logging.getLogger("sago.store")
        logger.addHandler(handler)
        try:
            logger.warning("%s: a write-ahead log lay beside it", STORED)
        finally:
            logger.removeHandler(handler)
        assert "forged: all checks passed" in buf.getvalue()
        assert_inert(buf.getvalue().encode())
    finally:
        logging.setLogRecordFactory(old)


def test_every_script_entry_point_runs_guarded():
    """Each ``if __name__ == "__main__":`` block of the benchmarks and the dashboard's command line
    tools runs inside ``guarded_terminal`` (``python -m precompute`` guards itself: tests above)."""
    import ast

    files = sorted([*(ROOT / "benchmarks").glob("*.py"), *(ROOT / "dashboard").glob("*.py"),
                    *(ROOT / "scripts").glob("*.py"), *(ROOT / "sago_engine").rglob("*.py")])
    mains = {}
    for f in files:
        for node in ast.parse(f.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
                mains[f.relative_to(ROOT).as_posix()] = ast.unparse(node)
    assert {"benchmarks/vllm_compare.py", "benchmarks/precompute_speed.py", "dashboard/password.py"} <= set(mains)
    unguarded = [f for f, src in mains.items() if "with guarded_terminal():" not in src]
    assert not unguarded, f"entry points that print without the guard: {unguarded}"


def test_progress_bars_draw_with_cr_and_show_their_labels_inert(capfdbinary):
    """A progress bar writes its own CR to the terminal; a label from the config (a model name, a
    shard key) is made inert (``--ray``'s bars; the runner's bar is built the same way)."""
    from precompute.ray_launch import _Bars
    from sago_engine.textsafe import guarded_terminal

    with guarded_terminal():
        bars = _Bars([STORED], enabled=True)
        bars.show({STORED: {"total": 4, "done": 2, "state": "running"}})
        bars.close()
    got = capfdbinary.readouterr()
    assert b"\r" in got.err and b"forged: all checks passed" in got.err and b"2/4" in got.err
    assert_inert(got.err.replace(b"\r", b""))


def test_a_ray_shard_task_runs_guarded(tmp_path, capfdbinary, cli_logging, monkeypatch):
    """What a shard task logs and prints on a Ray worker (its worker-*.out/err log files) is inert."""
    from precompute import ray_launch, runner
    from precompute.config import load_config

    cli_logging()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    conf = tmp_path / "c.toml"
    conf.write_text(tiny_toml().format(store=tmp_path / "s.duckdb", data=ROOT / "data" / "datasets"))
    cfg = load_config(conf, check_devices=False)

    def fake_run(cfg, **kwargs):  # the run's own logging, a server's message in it
        logging.getLogger("sago.api").warning("%s: prompt failed: %s", cfg.models[0].name, "HTTP 400: " + HOSTILE)
        print("reply: " + HOSTILE)
        return [{"model": cfg.models[0].name, "status": "complete"}]

    monkeypatch.setattr(runner, "run", fake_run)
    task = ray_launch.ShardTask(cfg.models[0].name, 1, 1, ray_launch.Resources(1.0, 0, "cpu", 1))
    out = ray_launch._shard_task(cfg, task, b"seed", str(tmp_path), ("probe", "x"), (str(tmp_path), "w"), "bytes",
                                 None, 30.0, None)
    assert out["summaries"][0]["status"] == "complete"
    got = capfdbinary.readouterr()
    assert b"prompt failed: HTTP 400" in got.err and b"reply: " in got.out
    assert_inert(got.out + got.err)


def test_an_uncaught_exception_prints_its_traceback_inert(capfdbinary, monkeypatch):
    """An exception that leaves a command (its message quoting a reply) is printed by the
    interpreter after the guard: the guard leaves an inert ``sys.excepthook`` behind."""
    import sys

    from sago_engine.textsafe import guarded_terminal

    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    with pytest.raises(KeyError) as ei:
        with guarded_terminal():
            raise KeyError("reply " + HOSTILE)
    sys.excepthook(ei.type, ei.value, ei.tb)  # what the interpreter does with an uncaught exception
    got = capfdbinary.readouterr()
    assert b"KeyError" in got.err and b"forged: all checks passed" in got.err
    assert_inert(got.err)
