"""Bytes a terminal must never receive from data: the hostile text the terminal tests feed, and the check."""

from __future__ import annotations

import re

#: Each kind of character that acts on a terminal or reorders what it shows: ESC sequences (erase
#: line, colour, window title), BEL, carriage return, a C1 CSI, NUL, bidi override / isolate marks
#: ("Trojan Source"), a Unicode line separator and a lone surrogate.
HOSTILE = ("\x1b[2K\r\x1b[32mforged: all checks passed\x1b[0m\x1b]0;title\x07 \x9b31m C1 \x00 "
           "\u202eevil\u202c \u2066iso\u2069 \u2028 \ud83d end")
#: What may not appear raw in what was written (tab and newline are the only controls allowed).
_RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def assert_inert(written: bytes) -> None:
    """``written`` (what a command wrote to stdout/stderr) is valid UTF-8 and holds no control or
    bidi character but tab and newline."""
    text = written.decode("utf-8")  # a lone surrogate would not even encode
    bad = sorted({hex(ord(c)) for c in _RAW.findall(text)})
    assert not bad, f"raw control/bidi characters written: {bad}"
