"""Sentences from ``sago_engine`` (they name models and datasets from the store) shown as Markdown
text, each store string made inert by ``safe.md``."""

from __future__ import annotations

from typing import Iterable

import streamlit as st

from dashboard import safe


def sentences(lines: Iterable[str]) -> None:
    """Show each sentence as one bullet of Markdown text (``safe.md``: reads literally)."""
    lines = [safe.md(s).replace("\n", " ") for s in lines]
    if lines:
        st.markdown("\n".join(f"- {s}" for s in lines))
