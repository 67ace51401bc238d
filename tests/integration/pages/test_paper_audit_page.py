"""The Paper reference page's audit view (AppTest): the table shows ``external.audit.audit_view``'s numbers
for a store built by the importer from files in the authors' format, plus a sago run of the same model."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from sago_engine.external.audit import audit_view
from sago_engine.external.importer import import_authors
from sago_engine.store import open_store
from tests.support.authors_files import add_sago_run, make_clone

ROOT = Path(__file__).resolve().parents[3]


def _page(store) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.session_state["app_store_custom"] = str(store)
    at.run()
    at.switch_page("pages/paper_reference.py")
    at.run()
    assert not at.exception, at.exception
    return at


def test_audit_table_on_the_page(tmp_path):
    out = tmp_path / "audit.duckdb"
    import_authors(make_clone(tmp_path), out, models=["G-2B"])
    add_sago_run(out)
    with open_store(out) as st:
        want = audit_view(st)
    at = _page(out)
    [shown] = [d.value for d in at.dataframe if "gap" in d.value.columns]
    assert len(shown) == len(want) > 0
    row = shown[(shown["model"] == "Gemma-2B-IT") & (shown["axis"] == "Δ-BLEU")].iloc[0]
    ref = want[(want["model"] == "Gemma-2B-IT") & (want["axis"] == "bleu")].iloc[0]
    for col in ("published", "authors_way", "gap", "sago_released", "sago_cleaned", "leak_effect", "sago_run"):
        assert float(row[col]) == pytest.approx(float(ref[col]), abs=5e-4), col  # shown to 4 significant digits
    cos = shown[(shown["model"] == "Gemma-2B-IT") & (shown["axis"] == "Δ-Cos")].iloc[0]
    assert cos["sago_released"] == "not recomputable from text"  # an empty cell says why


def test_no_audit_rows_says_how_to_get_them(tmp_path):
    from tests.support.factories import make_store

    at = _page(make_store(tmp_path / "s.duckdb"))
    assert not [d for d in at.dataframe if "gap" in d.value.columns]
    assert any("import-authors" in i.value for i in at.info)
