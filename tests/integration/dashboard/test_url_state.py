"""URL state is input: every number from a link is finite and inside what its widget offers; links name no server path."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from dashboard.frame import VIEWS
from tests.support.factories import make_store

ROOT = Path(__file__).resolve().parents[3]
PAGES = [v[0] for v in VIEWS]
NUMERIC_KINDS = ("int", "float", "floatlist")  # urlstate's kinds whose values are numbers
#: What a pasted link may hold in place of a number (T7): non-finite, negative, overflowing.
BAD = ("inf", "nan", "-inf", "-1", "1e309")
#: Every numeric URL parameter of the dashboard → (page, widget key, a finite value its widget does not offer).
NUMERIC = {
    ("pages/profiles.py", "B"): ("profiles_boot", "20000"),
    ("pages/pairwise.py", "B"): ("pairwise_boot", "30000"),
    ("pages/worst.py", "rows"): ("worst_rows", "7"),
    ("pages/significance.py", "eps"): ("significance_eps", "5"),
    ("pages/method_choices.py", "eps"): ("methods_eps", "0.07"),
    ("*", "strengths"): ("filter_strengths", "0.123"),  # the sidebar filter of every page with a store
}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return make_store(tmp_path_factory.mktemp("url") / "url.duckdb")


def _open(store, page: str, params: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.session_state["app_store_custom"] = str(store)
    for k, v in (params or {}).items():
        at.query_params[k] = v
    at.switch_page(page)  # the link's page is the first one this session runs
    at.run()
    assert not at.exception, (page, params, at.exception)
    return at


def _numeric_fields(at) -> dict[str, str]:
    """The numeric URL parameters this run registered (``urlstate.restore``): param → widget key."""
    fields = at.session_state["_url_fields"] if "_url_fields" in at.session_state else {}
    return {p: key for p, (key, kind) in fields.items() if kind in NUMERIC_KINDS}


def _params_of(page: str) -> dict[str, tuple[str, str]]:
    return {p: v for (pg, p), v in NUMERIC.items() if pg in (page, "*")}


def test_every_numeric_url_parameter_is_listed_here(store, monkeypatch):
    """Each page's numeric URL parameters are exactly the ones ``NUMERIC`` tests (a new one fails here)."""
    monkeypatch.setenv("SAGO_LIVE_WARMUP", "0")
    for page in PAGES:
        got = _numeric_fields(_open(store, page))
        want = {p: key for p, (key, _) in _params_of(page).items()}
        if page == "pages/paper_reference.py":  # the paper page reads no store: no filters
            want.pop("strengths")
        assert got == want, page


@pytest.mark.parametrize("page", ["pages/profiles.py", "pages/pairwise.py", "pages/worst.py",
                                  "pages/significance.py", "pages/method_choices.py"])
def test_pasted_numbers_outside_a_widget_are_dropped(store, page):
    """``inf``, ``nan``, ``-1``, ``1e309`` and an out-of-range value in every numeric parameter of the page at
    once: no exception, each widget keeps its default, and every table is the one the page shows without them."""
    params = _params_of(page)
    plain = _open(store, page)
    want_values = {key: plain.session_state[key] for key, _ in params.values()}
    want_tables = [df.value for df in plain.dataframe]
    want_heads = [h.value for h in plain.subheader]
    for bad in (*BAD, None):
        link = {p: (out if bad is None else bad) for p, (_, out) in params.items()}
        at = _open(store, page, link)
        for key in want_values:
            assert at.session_state[key] == want_values[key], (page, link, key)
        assert [h.value for h in at.subheader] == want_heads, (page, link)
        got_tables = [df.value for df in at.dataframe]
        assert len(got_tables) == len(want_tables)
        for g, w in zip(got_tables, want_tables):
            pd.testing.assert_frame_equal(g, w)


def test_significance_keeps_the_default_epsilon_and_its_markers_under_a_nan_link(store):
    """T7: ``eps=nan`` made every test one against ε = NaN (no markers, 0 rejections); it is dropped."""
    at = _open(store, "pages/significance.py", {"eps": "nan"})
    heads = [h.value for h in at.subheader]
    assert "SGS mean ± std and markers at ε = 0.050" in heads and "Models rejecting H0 per axis at ε = 0.050" in heads
    assert at.slider(key="significance_eps").value == pytest.approx(0.05)
    cells = at.dataframe[0].value
    assert any(str(c).endswith(("*", "†")) for c in cells.drop(columns="model").to_numpy().ravel())
    assert at.query_params["eps"] in ("0.05", ["0.05"])  # the link now carries the value shown


def test_a_valid_number_in_a_link_is_applied(store):
    at = _open(store, "pages/significance.py", {"eps": "0.1"})
    assert at.slider(key="significance_eps").value == pytest.approx(0.1)
    assert _open(store, "pages/profiles.py", {"B": "200"}).number_input(key="profiles_boot").value == 200
    assert _open(store, "pages/profiles.py", {"B": "250.5"}).number_input(key="profiles_boot").value == 1000  # not whole


def test_a_numeric_parameter_without_a_range_is_a_programming_error():
    from dashboard import urlstate

    for kind in NUMERIC_KINDS:
        with pytest.raises(ValueError, match="needs choices or a range"):
            urlstate.restore("n", "k", kind)


# ------------------------------------------------------------------ the store in a link
def test_a_local_link_names_the_store_not_its_server_path(tmp_path, monkeypatch):
    (tmp_path / "runs").mkdir()
    run = make_store(tmp_path / "runs" / "run.duckdb", models=("linked-model",))
    monkeypatch.setenv("SAGO_STORE", str(run))
    monkeypatch.delenv("SAGO_SHARE_DIR", raising=False)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
    at.run()
    assert not at.exception, at.exception
    link = at.query_params["store"]
    assert link in ("run.duckdb", ["run.duckdb"])  # no /tmp/... in the link
    assert all(str(tmp_path) not in str(v) for v in at.query_params.values())
    # the link reopens that store; a demo-store link picks the demo store; paths are not followed
    demo = str(ROOT / "data" / "sago_demo.duckdb")
    for value, want in (("sago_demo.duckdb", demo), ("run.duckdb", str(run)), (demo, str(run)),
                        ("../data/sago_demo.duckdb", str(run)), ("/etc/passwd", str(run))):
        opened = AppTest.from_file(str(ROOT / "app.py"), default_timeout=90)
        opened.query_params["store"] = value
        opened.run()
        assert not opened.exception, opened.exception
        assert opened.session_state["store_path"] == want, value
        assert opened.selectbox(key="app_store_pick").value in ("run.duckdb", "sago_demo.duckdb")


def test_store_tokens_are_names_and_never_absolute_paths(tmp_path):
    from dashboard.frame import ROOT as FRAME_ROOT
    from dashboard.frame import store_tokens

    outside = str(tmp_path / "sago_demo.duckdb")
    demo = str(FRAME_ROOT / "data" / "sago_demo.duckdb")
    cap = str(FRAME_ROOT / "data" / "sago_ablation_cap.duckdb")
    tokens = store_tokens([outside, demo, cap])
    assert tokens == {"sago_demo.duckdb": outside, "data/sago_demo.duckdb": demo, "sago_ablation_cap.duckdb": cap}
    assert not any(Path(t).is_absolute() for t in tokens)
    assert store_tokens(["meeting.duckdb"]) == {"meeting.duckdb": "meeting.duckdb"}  # share mode: names
