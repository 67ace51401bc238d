"""Sentences from ``sago_engine`` (they name models and datasets from the store) shown as Markdown text.

Every ASCII punctuation character is backslash-escaped (CommonMark allows it for all of them), so
a model name such as ``**x**``, ``[a](b)``, ``:red[x]`` or ``$x$`` reads literally; Streamlit
renders no raw HTML in ``st.markdown`` by default.
"""

from __future__ import annotations

import re
from typing import Iterable

import streamlit as st

_PUNCT = re.compile(r"([!-/:-@\[-`{-~])")


def escape_md(text: str) -> str:
    """``text`` with every ASCII punctuation character backslash-escaped (reads literally as Markdown)."""
    return _PUNCT.sub(r"\\\1", str(text)).replace("\n", " ")


def sentences(lines: Iterable[str]) -> None:
    """Show each sentence as one bullet of Markdown text (escaped)."""
    lines = [escape_md(s) for s in lines]
    if lines:
        st.markdown("\n".join(f"- {s}" for s in lines))
