"""Reply health counts a blank reply (any whitespace, tabs and newlines included) as empty, and as a
spent token budget only where nothing visible came back: no characters, or hidden reasoning tokens."""

from __future__ import annotations

import sys

import pandas as pd

from sago_engine.store import open_store


def _store(path, rows, reasoning=None):
    """A store with one run of ``rows`` (text, finish_reason) and API reasoning tokens per row index."""
    st = open_store(path, read_only=False, create=True)
    st.insert_df("runs", pd.DataFrame([{"run_id": "r1", "model": "m", "backend": "hf_local"}]))
    st.insert_df("responses", pd.DataFrame([{"response_id": f"x{i}", "run_id": "r1", "prompt_id": "p",
                                             "variant_id": f"v{i}", "response": t, "finish_reason": fr}
                                            for i, (t, fr) in enumerate(rows)]))
    if reasoning:
        st.insert_df("api_responses", pd.DataFrame([{"response_id": f"x{i}", "run_id": "r1", "reasoning_tokens": n}
                                                    for i, n in reasoning.items()]))
    return st


def test_tab_and_newline_replies_are_empty_and_only_textless_ones_spent_the_budget(tmp_path):
    rows = [("ok", "stop"), ("\t \n  \t", "length"), ("\n\n", "stop"), ("", "length"), ("\n", "length"),
            (" ", "length")]
    with _store(tmp_path / "h.duckdb", rows, reasoning={4: 40, 5: 0}) as st:
        h = st.reply_health().iloc[0]
    # empty: the five blank replies; budget spent: "" and the blank reply after 40 reasoning tokens
    assert (h["replies"], h["errors"], h["empty"], h["budget_spent"], h["refused"]) == (6, 0, 5, 2, 0)


def test_blank_is_what_python_strips():
    spaces = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
    others = ["\u200b", "\ufeff", "x", "\t.\t", "\u2060"]  # zero-width and joiners are not whitespace to Python
    rows = [(c * 2, "stop") for c in spaces] + [("".join(spaces), "stop")] + [(t, "stop") for t in others]
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d, _store(Path(d) / "h.duckdb", rows) as st:
        h = st.reply_health().iloc[0]
    assert h["empty"] == sum(not t.strip() for t, _ in rows) == len(spaces) + 1
