"""Sentences from ``sago_engine`` (they name models and datasets from the store) shown as Markdown
text, each store string made inert by ``safe.md``."""

from __future__ import annotations

from collections.abc import Iterable

import streamlit as st

from dashboard import links, safe


def sentences(lines: Iterable[str]) -> None:
    """Show each sentence as one bullet of Markdown text (``safe.md``: reads literally)."""
    lines = [safe.md(s).replace("\n", " ") for s in lines]
    if lines:
        st.markdown("\n".join(f"- {s}" for s in lines))


def assumptions_note(lines: Iterable[str], key: str) -> None:
    """Beside a claim: the open method choices it depends on (``choices.assumption_statements``), as bullets
    under "Depends on an open method choice", with a link to the Method choices page. Nothing when empty.

    ``key``: the container's key (``st-key-<key>`` on the page, for tests and styling)."""
    lines = list(lines)
    if not lines:
        return
    with st.container(key=key, border=True):
        st.markdown("**Depends on an open method choice** — the conclusion above holds under the stored "
                    "default; these options the store also holds change it:")
        sentences(lines)
        links.page_link(links.METHOD_CHOICES, {}, "Every option side by side: Method choices",
                        icon=":material/alt_route:")
