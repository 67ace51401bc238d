"""Text from outside made inert where a terminal, a log or a page shows it: one rule for all three.

Stores, imported CSVs, configs, model replies and server messages are untrusted text. A terminal
acts on some characters instead of showing them: ESC starts a control sequence (erase a line,
colour, move the cursor, set the window title), BEL rings, CR returns to the line's start so the
text after it overwrites what was shown, C1 controls (U+0080–U+009F; U+009B is a one-character
CSI) act as ESC sequences do on many terminals, and bidi marks, embeddings, overrides and
isolates reorder what is shown ("Trojan Source", CVE-2021-42574). A lone UTF-16 surrogate cannot
be encoded at all: printing one raises ``UnicodeEncodeError``.

``neutral`` replaces every such character with U+FFFD REPLACEMENT CHARACTER, keeping those named
in ``keep``; the three uses differ only in what they keep:

- ``terminal`` (tab and newline kept): text printed to a terminal or written to a log file;
- ``one_line`` (tab kept): a value placed inside one line (a log message's argument, a label in a
  progress line), so that it cannot start a line of its own;
- pages keep CR and the line/paragraph separators too (``PAGE_KEEPS``, ``dashboard.safe.visible``):
  a browser shows them as white space.

``guarded_terminal`` applies the rule to everything a command line tool writes: ``sys.stdout``
and ``sys.stderr`` pass their text through ``terminal`` and every log record's message and
arguments go through ``terminal`` / ``one_line`` while it is active (every ``python -m
precompute`` command, ``python -m dashboard.password``, the benchmarks). ``inert_logs`` does the
latter for a whole process (the dashboard server, whose log is Streamlit's).
"""

from __future__ import annotations

import logging
import re
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

#: The characters made inert: C0 controls, DEL, C1 controls, the Arabic letter mark, LRM/RLM, the
#: bidi embeddings/overrides (U+202A–U+202E) and isolates (U+2066–U+2069), the line and paragraph
#: separators, and lone surrogates (U+D800–U+DFFF).
_CONTROL = "\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
REPLACEMENT = "\ufffd"
#: What a page keeps of ``_CONTROL``: tab, newline, CR, line and paragraph separators.
PAGE_KEEPS = "\t\n\r\u2028\u2029"
_PATTERNS: dict[str, re.Pattern[str]] = {}


def neutral(text: Any, keep: str = "\t\n") -> str:
    """``str(text)`` with every control, bidi-formatting, line-separator and lone-surrogate
    character replaced by U+FFFD, except the characters of ``keep`` (tab, newline, carriage return,
    line and paragraph separators). Printable text of any script is unchanged."""
    pat = _PATTERNS.get(keep)
    if pat is None:
        kept = "".join(re.escape(c) for c in keep)
        pat = _PATTERNS[keep] = re.compile(f"(?![{kept}])[{_CONTROL}]" if kept else f"[{_CONTROL}]")
    return pat.sub(REPLACEMENT, str(text))


def terminal(text: Any) -> str:
    """``text`` as a terminal or a log file may receive it: tab and newline kept, every other
    control (CR included), bidi mark and lone surrogate replaced by U+FFFD."""
    return neutral(text, "\t\n")


def one_line(text: Any) -> str:
    """``text`` as a value inside one line: as ``terminal``, and newlines replaced too."""
    return neutral(text, "\t")


class TerminalStream:
    """A text stream that writes through ``terminal`` to the stream it wraps.

    A carriage return that opens a write is kept (a progress bar redrawing its line writes
    ``"\\r" + bar``); every other control character is replaced. Other attributes (``fileno``,
    ``isatty``, ``encoding``, ``buffer``…) are the wrapped stream's.
    """

    def __init__(self, raw: TextIO):
        self.raw = raw

    def write(self, s: str) -> int:
        lead = "\r" if s.startswith("\r") else ""
        self.raw.write(lead + terminal(s[len(lead):]))
        return len(s)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self.raw, name)


def raw_stream(stream: TextIO) -> TextIO:
    """The stream under a ``TerminalStream`` (``stream`` itself otherwise): for a progress bar,
    which writes its own control sequences (its label must go through ``one_line``)."""
    return stream.raw if isinstance(stream, TerminalStream) else stream


def _inert_arg(value: Any) -> Any:
    """A log argument as ``one_line`` text; numbers (for ``%d`` / ``%.2f``) and None unchanged."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return one_line(value)


def inert_record(record: logging.LogRecord) -> logging.LogRecord:
    """``record`` with its message through ``terminal`` and each argument through ``one_line``
    (in place; returned for convenience). Exception text is left to the stream."""
    if isinstance(record.msg, str):
        record.msg = terminal(record.msg)
    elif record.msg is not None and not record.args:
        record.msg = terminal(record.msg)
    if isinstance(record.args, dict):
        record.args = {k: _inert_arg(v) for k, v in record.args.items()}
    elif record.args:
        record.args = tuple(_inert_arg(a) for a in record.args)
    return record


def _inert_factory(factory: Callable[..., logging.LogRecord]) -> Callable[..., logging.LogRecord]:
    """A log record factory that makes ``factory``'s records inert (``inert_record``)."""
    if getattr(factory, "sago_inert", False):
        return factory

    def make(*args, **kwargs) -> logging.LogRecord:
        return inert_record(factory(*args, **kwargs))

    make.sago_inert = True  # type: ignore[attr-defined]
    return make


def inert_logs() -> None:
    """Make every log record of this process inert from now on (``inert_record``, through the log
    record factory), whatever handler writes it (the dashboard server's log included). Idempotent."""
    logging.setLogRecordFactory(_inert_factory(logging.getLogRecordFactory()))


def inert_excepthook(kind, value, tb) -> None:
    """``sys.excepthook`` that prints the traceback of an uncaught exception through ``terminal``
    (an exception's message may quote a reply, a cell or a server's answer)."""
    sys.stderr.write(terminal("".join(traceback.format_exception(kind, value, tb))))


@contextmanager
def guarded_terminal() -> Iterator[None]:
    """For the ``with`` block: ``sys.stdout`` and ``sys.stderr`` are ``TerminalStream``\\ s and
    every log record is made inert (``inert_record``, through the log record factory); both are
    restored afterwards. Handlers created inside the block (``logging.basicConfig``) write to the
    guarded ``sys.stderr``. An exception leaving the block sets ``sys.excepthook`` to
    ``inert_excepthook``, so that its traceback, printed after the block, is inert too."""
    out, err = sys.stdout, sys.stderr
    factory = logging.getLogRecordFactory()
    sys.stdout = TerminalStream(out) if not isinstance(out, TerminalStream) else out
    sys.stderr = TerminalStream(err) if not isinstance(err, TerminalStream) else err
    logging.setLogRecordFactory(_inert_factory(factory))
    try:
        yield
    except Exception:
        sys.excepthook = inert_excepthook
        raise
    finally:
        sys.stdout, sys.stderr = out, err
        logging.setLogRecordFactory(factory)
