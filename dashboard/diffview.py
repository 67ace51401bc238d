"""The edit of a variant as the pages show it (Prompts, Live): cached, bounded, always escaped.

``sago_engine.views.textdiff.bounded_diff`` caps the work of one diff; the result is cached by the two
texts, so a widget change elsewhere on the page never diffs again. A text too long to compare is
shown beside its variant instead of highlighted.
"""

from __future__ import annotations

import streamlit as st

from dashboard.safe import visible
from sago_engine.views.textdiff import TextDiff, bounded_diff, diff_html


@st.cache_data(show_spinner=False, max_entries=64)
def cached_diff(base: str, variant: str) -> TextDiff:
    """``bounded_diff(base, variant)``, cached by the two texts."""
    return bounded_diff(base, variant)


def show_edit(base: str, variant: str) -> None:
    """Render what ``variant`` changed in ``base``: struck red = removed, green = added.

    Texts too long for a word-level pass are compared line by line (said below the diff); texts
    too long even for that are shown side by side with their word count.
    """
    d = cached_diff(base, variant)
    if d.level == "none":
        st.caption(f"Too long to highlight ({d.words:,} words): the base prompt and the variant side by side.")
        left, right = st.columns(2)
        with left:
            st.code(visible(base), language=None, wrap_lines=True)
        with right:
            st.code(visible(variant), language=None, wrap_lines=True)
        return
    st.html(diff_html(list(d.segments)))
    if d.level == "line":
        st.caption(f"A long text ({d.words:,} words): compared line by line and sentence by sentence, the changed "
                   "ones word by word where the comparison stays short.")
