"""The dashboard headless (Streamlit AppTest) on synthetic stores: radar, tables, markers, n/a, bad stores."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dashboard import safe
from dashboard.frame import VIEWS
from tests.support.factories import make_store

ROOT = Path(__file__).resolve().parents[3]


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
def test_bad_store_gives_clear_error(tmp_path, monkeypatch, content):
    """The store the dashboard opens with ($SAGO_STORE) is broken: the page says so and stops (a typed path
    to a broken file keeps the picked store open instead: the test below)."""
    bad = tmp_path / "bad.duckdb"
    bad.write_bytes(content)
    monkeypatch.setenv("SAGO_STORE", str(bad))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    assert not at.exception
    assert any("Cannot open the store bad\\.duckdb" in e.value for e in at.main.error), [e.value for e in at.error]


def test_a_typed_path_to_no_file_is_named_and_the_picked_store_stays_open(tmp_path):
    picked = make_store(tmp_path / "picked.duckdb", models=("model-p",))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state["app_store_custom"] = str(tmp_path / "nope.duckdb")
    at.run()
    assert not at.exception
    assert [e.value for e in at.sidebar.error] == [
        f"{safe.md(str(tmp_path / 'nope.duckdb'))} names no file: the picked store stays open. Correct or clear the path."]
    assert [t.value for t in at.toast] == ["The typed store path cannot be opened: the sidebar says why."]
    assert not at.main.error and at.get("plotly_chart")  # the page still shows the picked store (the demo)
    assert "gemma-3-270m" in set(at.dataframe[0].value["model"])
    at.text_input(key="app_store_custom").set_value(str(tmp_path)).run()
    assert [e.value for e in at.sidebar.error] == [
        f"{safe.md(str(tmp_path))} is a folder, not a store file: the picked store stays open. Correct or clear the path."]
    at.text_input(key="app_store_custom").set_value(str(picked)).run()
    assert not at.error and set(at.dataframe[0].value["model"]) == {"model-p"}
    # the link still names the picked store, so the sidebar says which store is open and that a link does not carry it
    assert "Open: picked\\.duckdb, from the typed path. A copied link opens the picked store." in [
        c.value for c in at.sidebar.caption]



def test_a_typed_path_to_a_file_that_is_no_store_is_named_and_the_picked_store_stays_open(tmp_path):
    """A text file and a DuckDB file without sago's tables: the sidebar names the file and why, the page goes on
    with the picked store (the demo)."""
    import duckdb

    notes = tmp_path / "notes.duckdb"
    notes.write_text("not a database\n")
    foreign = tmp_path / "foreign.duckdb"
    with duckdb.connect(str(foreign)) as con:
        con.execute("CREATE TABLE t (x INTEGER)")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    for bad in (notes, foreign):
        at.session_state["app_store_custom"] = str(bad)
        at.run()
        assert not at.exception
        [err] = [e.value for e in at.sidebar.error]
        assert err.startswith(safe.md(bad.name)) and err.endswith(
            "The picked store stays open. Correct or clear the path."), err
        assert str(tmp_path) not in err.replace("\\", "") and err.count(safe.md(bad.name)) <= 2, err  # named, not its path
        assert not at.main.error and "gemma-3-270m" in set(at.dataframe[0].value["model"])

# ---------------------------------------------------------------- share mode
def _share_dir(tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    make_store(share / "meeting.duckdb", models=("shared-a", "shared-b"))
    outside = make_store(tmp_path / "secret.duckdb", models=("secret-model",))
    (share / "escape.duckdb").symlink_to(outside)
    (share / "sub").mkdir()
    make_store(share / "sub" / "deeper.duckdb", models=("deeper-model",))
    return share, outside


def test_confined_store_refuses_paths_out_of_the_shared_folder(tmp_path):
    from dashboard.access import confined_store, shared_stores

    share, outside = _share_dir(tmp_path)
    assert [p.name for p in shared_stores(share)] == ["meeting.duckdb"]  # the symlink out is not listed
    assert confined_store("meeting.duckdb", share) == share / "meeting.duckdb"
    assert confined_store(str(share / "meeting.duckdb"), share) == share / "meeting.duckdb"
    for crafted in ("../secret.duckdb", str(outside), "escape.duckdb", str(share / "escape.duckdb"),
                    "sub/deeper.duckdb", str(share / "sub" / "deeper.duckdb"), "./meeting.duckdb/..", "", None,
                    "/etc/passwd", "nope.duckdb"):
        assert confined_store(crafted, share) is None, crafted


def test_access_mode_from_environment(tmp_path):
    from dashboard.access import access_from_env

    local = access_from_env({})
    assert not local.shared and local.live and local.writes and local.free_paths
    shared = access_from_env({"SAGO_SHARE_DIR": str(tmp_path)})
    assert shared.shared and not shared.live and not shared.writes and not shared.free_paths
    assert access_from_env({"SAGO_SHARE_DIR": str(tmp_path), "SAGO_LIVE": "1"}).live
    with pytest.raises(ValueError):
        access_from_env({"SAGO_SHARE_DIR": str(tmp_path / "missing")})


def test_share_mode_ignores_session_and_url_paths_out_of_the_folder(tmp_path, monkeypatch):
    share, outside = _share_dir(tmp_path)
    monkeypatch.setenv("SAGO_SHARE_DIR", str(share))
    monkeypatch.setenv("SAGO_STORE", str(outside))  # a launch-time store outside DIR is not offered either
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state["app_store_custom"] = str(outside)  # no such box in share mode: ignored
    at.session_state["store_path"] = str(outside)
    at.query_params["store"] = "../secret.duckdb"
    at.run()
    assert not at.exception, at.exception
    assert not [t for t in at.text_input if t.key == "app_store_custom"]
    assert at.selectbox(key="app_store_pick").options == ["meeting.duckdb"]
    nav = [p for p in at.get("page_link") if p.proto.label in {v[1] for v in VIEWS}]  # not the pages' own links
    assert [p.proto.label for p in nav] == [
        "Profiles", "Pareto", "Rankings", "Significance", "Sample size", "Model vs model", "Prompts", "Worst cases",
        "Right or wrong", "Variants", "Method choices", "Paper reference"]
    # each link keeps its view's icon (drawn from the bundled font; the pages themselves have none)
    assert [p.proto.icon for p in nav] == [v[2] for v in VIEWS if v[3] != "live"]
    total = at.dataframe[0].value
    assert set(total["model"]) == {"shared-a", "shared-b"}


def test_local_mode_offers_live_and_the_path_box(tmp_path):
    at = _run(make_store(tmp_path / "s.duckdb"))
    assert "Live" in [p.proto.label for p in at.get("page_link")]
    assert [t for t in at.text_input if t.key == "app_store_custom"]


def test_share_mode_saves_probes_inside_the_shared_folder(tmp_path):
    """In share mode (with --live) "Save to store" writes DIR/probes.duckdb, never a path outside DIR."""
    from dashboard.access import Access

    default = tmp_path / "home" / "probes.duckdb"
    assert Access().probe_store(default) == default
    assert Access(share_dir=tmp_path / "meet", live=True).probe_store(default) == tmp_path / "meet" / "probes.duckdb"


def test_pareto_on_one_axis_warns_and_its_table_still_renders(tmp_path):
    """x = y (a link, or both boxes on one axis): the page says to pick two axes, and its table (whose
    columns would otherwise repeat a name) renders with x: / y: headers — no exception."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.session_state["app_store_custom"] = str(make_store(tmp_path / "s.duckdb"))
    at.run()
    at.switch_page("pages/pareto.py")
    at.session_state["pareto_x"] = at.session_state["pareto_y"] = "cos"
    at.run()
    assert not at.exception, at.exception
    assert any("same axis" in w.value for w in at.warning)
    cols = [list(df.value.columns) for df in at.dataframe]
    assert ["model", "x: SGS Δ-Cos", "x: SGS Δ-Cos 95% CI", "y: SGS Δ-Cos", "y: SGS Δ-Cos 95% CI",
            "on Pareto frontier"] in cols, cols
