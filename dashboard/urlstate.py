"""Page choices in the URL query string, so a pasted link reopens the same view.

Each page declares which widget keys travel in the URL (``restore`` before its widgets) and
writes them back (``publish`` after them). A URL value is applied when it differs from what
this session last wrote — a pasted or edited link wins, the session's own echo is ignored.
Lists travel as repeated parameters (``?datasets=a&datasets=b``).

A link is untrusted input. Values a widget does not offer are dropped, never clamped and never
an error: the widget keeps its current value (or its default). Numbers must be finite (``inf``,
``nan``, ``1e309`` are dropped) and an ``int`` must be a whole number; a numeric field declares
the values it offers — ``choices``, or the closed range ``lo``…``hi`` of its widget — and a
value outside is dropped (one element at a time for lists). What a link asked for and did not get
is said once, in a toast naming the parameter and its (shortened) value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import streamlit as st

from dashboard import safe

_FIELDS = "_url_fields"  # this run's registered fields: {param: (session key, kind)}
_LAST = "_url_last"  # what this session last wrote per widget: {session key: [raw values]}

KINDS = ("str", "int", "float", "bool", "list", "floatlist")
#: Characters of a dropped URL value the toast shows (a link may carry a very long one).
SHOWN_CHARS = 40
#: Kinds whose values are numbers: ``restore`` needs their ``choices`` or their range.
NUMERIC_KINDS = ("int", "float", "floatlist")


def start_run() -> None:
    """Called by app.py at the top of every run: forget the previous run's fields."""
    st.session_state[_FIELDS] = {}


def _number(text: str) -> float:
    """A finite float from URL text; ValueError for anything else (``inf``, ``nan``, ``1e309``, ``abc``)."""
    x = float(text)
    if not math.isfinite(x):
        raise ValueError(f"not a finite number: {text!r}")
    return x


def _parse(kind: str, raw: list[str]) -> Any:
    """The URL text ``raw`` (every value of one parameter) as a ``kind`` value; ValueError /
    OverflowError when it is not one (the caller drops it)."""
    if kind == "list":
        return list(raw)
    if kind == "floatlist":
        out = []
        for v in raw:
            try:
                out.append(_number(v))
            except (ValueError, OverflowError):
                continue  # this element is dropped
        return out
    v = raw[-1]
    if kind == "int":
        x = _number(v)
        if x != int(x):
            raise ValueError(f"not a whole number: {v!r}")
        return int(x)
    if kind == "float":
        return _number(v)
    if kind == "bool":
        return v.lower() in ("1", "true", "yes", "on")
    return v


def _format(kind: str, value: Any) -> list[str]:
    if value is None:
        return []
    if kind in ("list", "floatlist"):
        return [f"{v:g}" if isinstance(v, float) else str(v) for v in value]
    if kind == "bool":
        return ["1"] if value else []
    if kind == "float":
        return [f"{float(value):g}"]
    return [str(value)]


def restore(param: str, key: str, kind: str = "str", choices: Iterable | None = None, default: Any = None,
            lo: float | None = None, hi: float | None = None) -> None:
    """Before the widget ``key`` is created: apply ``?param=…`` when the link is new, else seed ``default``.

    Args:
        param: name in the URL (short: ``x``, ``scope``, ``datasets``).
        key: the widget's session-state key.
        kind: one of ``KINDS`` (how the text is parsed).
        choices: the values the widget offers; a URL value outside them is dropped.
        default: set when the key has no value yet (so widgets need no ``index=``/``value=``).
        lo, hi: the closed range a numeric widget offers (its ``min_value``/``max_value``; either
            may be None, leaving that side open); a URL value outside it is dropped.
    Raises:
        ValueError: an unknown ``kind``, or a numeric kind (``NUMERIC_KINDS``) with neither
            ``choices`` nor both ``lo`` and ``hi`` (a programming error: every number from a
            link is bounded).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}")
    if kind in NUMERIC_KINDS and choices is None and (lo is None or hi is None):
        raise ValueError(f"URL parameter {param!r} ({kind}) needs choices or a range lo..hi")
    st.session_state[_FIELDS] = {**st.session_state.get(_FIELDS, {}), param: (key, kind)}
    raw = st.query_params.get_all(param)
    last = st.session_state.get(_LAST, {}).get(key)  # per widget: pages share param names
    if raw and raw != last:
        value, dropped = _accepted(kind, raw, choices, lo, hi)
        if dropped:
            _say_dropped(param, dropped)
        if value is not None:
            st.session_state[key] = value
            return
    if key not in st.session_state and default is not None:
        st.session_state[key] = default


def _accepted(kind: str, raw: list[str], choices: Iterable | None, lo: float | None, hi: float | None
              ) -> tuple[Any, list[str]]:
    """``(value, dropped)``: what the widget takes of the URL text ``raw`` (None: nothing, for a single
    value; a list kind keeps its offered elements, possibly none) and the URL texts it drops."""
    allowed = None if choices is None else list(choices)

    def offered(v: Any) -> bool:
        return (lo is None or lo <= v) and (hi is None or v <= hi) and (allowed is None or v in allowed)

    if kind in ("list", "floatlist"):
        value, dropped = [], []
        for text in raw:
            v = _parse(kind, [text])
            if v and offered(v[0]):
                value.append(v[0])
            else:
                dropped.append(text)
        return value, dropped
    try:
        v = _parse(kind, raw)
    except (ValueError, OverflowError):
        return None, [raw[-1]]
    return (v, []) if offered(v) else (None, [raw[-1]])


def _say_dropped(param: str, dropped: list[str]) -> None:
    """A toast: the link's ``param`` values the page does not offer (each shortened to ``SHOWN_CHARS``)."""
    shown = ", ".join(safe.md(t if len(t) <= SHOWN_CHARS else t[:SHOWN_CHARS] + "…") for t in dropped[:5])
    more = f" and {len(dropped) - 5} more" if len(dropped) > 5 else ""
    st.toast(f"Link parameter {safe.md(param)}: {shown}{more} not offered here, so not applied.")


def publish() -> None:
    """After the widgets: write every registered field's current value into the URL.

    Only this run's registered parameters are set or removed; others are left alone (app.py
    publishes the sidebar before the page has read its own parameters).
    """
    fields = st.session_state.get(_FIELDS, {})
    want = {p: _format(kind, st.session_state.get(key)) for p, (key, kind) in fields.items()}
    st.session_state[_LAST] = {**st.session_state.get(_LAST, {}), **{key: want[p] for p, (key, _) in fields.items()}}
    for p, v in want.items():
        if st.query_params.get_all(p) == v:
            continue
        if v:
            st.query_params[p] = v if len(v) > 1 else v[0]
        elif p in st.query_params:
            del st.query_params[p]
