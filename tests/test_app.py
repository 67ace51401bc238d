"""The dashboard headless (Streamlit AppTest) on synthetic stores: radar, tables, markers, n/a, bad stores."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.factories import make_store

ROOT = Path(__file__).resolve().parent.parent


def _run(store_path, timeout=60):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
    at.session_state["app_store_custom"] = str(store_path)
    at.run()
    return at


def test_profiles_page_shows_radar_and_tables(tmp_path):
    at = _run(make_store(tmp_path / "s.duckdb"))
    assert not at.exception, at.exception
    assert len(at.get("plotly_chart")) >= 1
    tables = [df.value for df in at.dataframe]
    total = tables[0]
    assert list(total.columns) == ["model", "Δ-Cos", "Δ-BLEU", "Δ-BERT", "Δ-Prob", "Δ-Ent", "Δ-MR"]
    assert set(total["model"]) == {"model-a", "model-b"}
    # cells carry mean ± std and possibly a marker; no cross-axis total column anywhere
    for t in tables:
        assert not any("total" in str(c).lower() or "sum" in str(c).lower() for c in t.columns)
    assert all("±" in c for c in total["Δ-BLEU"])
    per = tables[1]
    assert set(per["dataset"]) == {"truthfulqa", "nq_open"} and len(per) == 4


def test_unavailable_axis_shows_na_not_zero(tmp_path):
    at = _run(make_store(tmp_path / "s.duckdb", missing_axes={"model-b": ["cos", "prob"]}))
    assert not at.exception
    total = at.dataframe[0].value.set_index("model")
    assert total.loc["model-b", "Δ-Cos"] == "n/a" and total.loc["model-b", "Δ-Prob"] == "n/a"
    assert total.loc["model-a", "Δ-Cos"] != "n/a"


@pytest.mark.parametrize("content", [b"not a database at all", b""])
def test_bad_store_gives_clear_error(tmp_path, content):
    bad = tmp_path / "bad.duckdb"
    bad.write_bytes(content)
    at = _run(bad)
    assert not at.exception
    assert any("Cannot open the store" in e.value for e in at.error)


def test_missing_store_gives_clear_error(tmp_path):
    at = _run(tmp_path / "nope.duckdb")
    assert not at.exception
    assert any("Cannot open the store" in e.value for e in at.error)
