"""dashboard.access, the pure rules of local vs share mode: every setting and every path it decides."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard.access import Access, access_from_env, confined_store, shared_stores
from tests.support.factories import make_store


@pytest.mark.parametrize("value, live", [("1", True), ("true", True), ("yes", True), ("", False), ("0", False),
                                         ("TRUE", False), ("no", False)])
def test_live_flag_values(tmp_path, value, live):
    acc = access_from_env({"SAGO_SHARE_DIR": str(tmp_path), "SAGO_LIVE": value})
    assert acc.share_dir == tmp_path.resolve() and acc.live is live and acc.writes is live


def test_local_mode_and_refusals_say_what(tmp_path):
    assert access_from_env({"SAGO_SHARE_DIR": "  "}) == Access(None, live=True)  # blank: local mode
    missing = tmp_path / "missing"
    with pytest.raises(ValueError, match=rf"^SAGO_SHARE_DIR='{missing}' is not a folder$"):
        access_from_env({"SAGO_SHARE_DIR": str(missing)})
    f = tmp_path / "file.duckdb"
    f.write_bytes(b"")
    with pytest.raises(ValueError, match="is not a folder"):
        access_from_env({"SAGO_SHARE_DIR": str(f)})


def test_label_and_probe_stores_stay_inside_the_shared_folder(tmp_path):
    store = tmp_path / "runs" / "meeting.duckdb"
    local, shared = Access(), Access(share_dir=tmp_path / "meet", live=True)
    assert local.label_store(store) == tmp_path / "runs" / "meeting.judge-labels.db"  # beside the store
    assert shared.label_store(store) == tmp_path / "meet" / "meeting.judge-labels.db"  # inside DIR, same name
    home = tmp_path / "home" / "probes.duckdb"
    assert local.probe_store(home) == home and shared.probe_store(home) == tmp_path / "meet" / "probes.duckdb"
    assert local.free_paths and not shared.free_paths and not local.shared and shared.shared


def test_shared_stores_lists_regular_files_and_symlinks_inside_only(tmp_path):
    share = tmp_path / "share"
    (share / "sub").mkdir(parents=True)
    make_store(share / "b.duckdb")
    make_store(share / "sub" / "deep.duckdb")
    (share / "a.duckdb").symlink_to(share / "b.duckdb")  # a link to a store inside: listed
    (share / "c.duckdb").symlink_to(share / "sub" / "deep.duckdb")  # inside, but not directly in DIR
    (share / "notes.txt").write_text("x")
    (share / "d.duckdb").mkdir()  # a folder with the suffix is no store
    assert [p.name for p in shared_stores(share)] == ["a.duckdb", "b.duckdb"]
    assert confined_store("a.duckdb", share) == share / "a.duckdb"
    assert confined_store(Path(share / "b.duckdb"), share) == share / "b.duckdb"  # a PathLike is accepted
    assert confined_store("  b.duckdb  ", share) == share / "b.duckdb"  # surrounding blanks are no path
    for refused in ("c.duckdb", "d.duckdb", "notes.txt", str(share / "c.duckdb"), str(tmp_path / "b.duckdb")):
        assert confined_store(refused, share) is None, refused


def test_landing_store_is_named_demo_or_only_never_first_by_name(tmp_path):
    from dashboard.access import DEMO_NAME, landing_store, readable_stores, store_problem, unreadable_stores
    from tests.support.factories import make_store

    d = tmp_path / "share"
    d.mkdir()
    assert landing_store(d) is None  # empty folder: nothing to land on
    make_store(d / "b-run.duckdb")
    assert landing_store(d) == d / "b-run.duckdb"  # the only store
    make_store(d / "a-run.duckdb")
    assert landing_store(d) is None  # two stores, none named: the visitor picks (not a-run, first by name)
    assert landing_store(d, str(d / "b-run.duckdb")) == d / "b-run.duckdb"  # the host named it
    assert landing_store(d, "b-run.duckdb") == d / "b-run.duckdb"
    assert landing_store(d, str(tmp_path / "elsewhere.duckdb")) is None  # a name outside the folder is ignored
    make_store(d / DEMO_NAME)
    assert landing_store(d) == d / DEMO_NAME and landing_store(d, "b-run.duckdb") == d / "b-run.duckdb"
    # broken files: listed with a reason, never offered, never landed on
    (d / "0-broken.duckdb").write_bytes(b"this is not a database at all")
    (d / "0-empty.duckdb").write_bytes(b"")
    assert store_problem(d / "0-broken.duckdb") == "not a DuckDB database file"
    assert unreadable_stores(d) == [("0-broken.duckdb", "not a DuckDB database file"), ("0-empty.duckdb", "empty file")]
    assert [p.name for p in readable_stores(d)] == ["a-run.duckdb", "b-run.duckdb", DEMO_NAME]
    assert landing_store(d, "0-broken.duckdb") == d / DEMO_NAME
    for _name, why in unreadable_stores(d):
        assert str(tmp_path) not in why
