"""Every page on small store shapes (one model and one dataset; one family): no page fails, and a page
with nothing to compare says why instead of drawing an empty chart or repeating a table (headless
Streamlit, the real pages)."""

from __future__ import annotations

import pytest

from sago_engine.scoring.store_shape import per_dataset_note, ranking_note
from tests.support.apptest import open_page
from tests.support.factories import make_store

PAGES = ("profiles", "pareto", "rankings", "significance", "sample_size", "pairwise", "prompts", "worst", "variants",
         "method_choices", "paper_reference")


def test_notes_by_shape():
    assert "nothing to rank" in ranking_note(1, 1)
    assert "every rank is 1" in ranking_note(1, 3)
    assert "reversals" in ranking_note(2, 1) and ranking_note(2, 2) is None
    assert per_dataset_note(1) and per_dataset_note(2) is None


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    d = tmp_path_factory.mktemp("shapes")
    one = make_store(d / "one.duckdb", models=("m-one",), datasets=("truthfulqa",), n_prompts=6, n_variants=3, seed=2)
    fam = make_store(d / "fam.duckdb", models=("m-a", "m-b"), datasets=("truthfulqa", "alpaca"), n_prompts=4,
                     n_variants=3, seed=4, variant_fields=lambda ds, i, j: {"family": "social_register"})
    return {"one": one, "family": fam}


@pytest.mark.parametrize("shape", ["one", "family"])
@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_something_or_says_why(shapes, shape, page):
    at = open_page(shapes[shape], page)
    assert not at.exception, at.exception
    shown = len(at.get("plotly_chart")) + len(at.get("vega_lite_chart")) + len(at.dataframe)
    said = [m.value for m in (*at.info, *at.warning)]
    assert shown or said, f"{page} on the {shape} store shows nothing and says nothing"


def test_one_model_one_dataset_says_why_rankings_and_profiles_are_thin(shapes):
    at = open_page(shapes["one"], "rankings")
    assert any("nothing to rank" in i.value for i in at.info)
    at = open_page(shapes["one"], "profiles")
    assert any("SGS per dataset equals the total SGS above" in c.value for c in at.caption)
    assert not any("dataset" in df.value.columns and "Δ-Cos" in df.value.columns for df in at.dataframe)


def test_sample_size_axis_spans_every_requested_n_on_a_small_store(shapes):
    """Six prompts: only N = 4 can be drawn; the x axis still spans 4…128, so its tick labels do not overlap."""
    import json

    from sago_engine.scoring.sample_size import SAMPLE_SIZES

    at = open_page(shapes["one"], "sample_size")
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    domains = [lay["encoding"]["x"]["scale"]["domain"] for lay in spec.get("layer", []) if "x" in lay.get("encoding", {})]
    assert domains and all(d == [min(SAMPLE_SIZES), max(SAMPLE_SIZES)] for d in domains)
