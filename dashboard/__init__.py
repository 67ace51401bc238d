"""The dashboard's frame (Streamlit): access mode, navigation, cached store reads, URL state, layout and exports.

``app.py`` builds the frame; ``pages/*.py`` render one view each. Numbers come from
``sago_engine``; this package holds no SQL and no statistics.

On a cold start the first run imports this package and everything under it (pandas, SciPy, Plotly,
DuckDB, ``sago_engine``: several seconds on a busy machine) before the page draws anything. The package's
first import, in that run, therefore draws ``STARTING`` at once; app.py clears it (``started``) right before
the view runs.
"""

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

#: What the page says while a cold start imports the dashboard's modules (once per server start).
STARTING = ":material/hourglass_top: Starting the dashboard: loading its modules (once per server start, a few seconds)…"


def _starting_note():
    """The note's placeholder and the session it was drawn in, when this import runs inside a page run."""
    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is None:  # imported outside Streamlit (tests, the CLI)
        return None
    note = st.empty()
    note.markdown(STARTING)
    return note, ctx.session_id


_note = _starting_note()


def started() -> None:
    """Clear the cold start's note (app.py, before the view runs): once, in the session that drew it."""
    global _note
    ctx = get_script_run_ctx(suppress_warning=True)
    if _note is None or ctx is None or ctx.session_id != _note[1]:
        return
    note, _note = _note[0], None
    note.empty()
