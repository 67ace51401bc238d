"""A store is untrusted input: no view, macro or type; known tables and columns only; reads without file access."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from sago_engine.store import StoreError, merge_stores, open_store
from sago_engine.store.sidecar.judge_labels import read_labels, write_label
from tests.support.factories import make_store

ROOT = Path(__file__).resolve().parents[3]
SECRET = "TOP-SECRET-server-file"


def _secret(tmp_path) -> Path:
    """A file outside the store's folder that the server can read."""
    d = tmp_path / "outside"
    d.mkdir(exist_ok=True)
    p = d / "secret.txt"
    p.write_text(SECRET + "\n")
    return p


def _alter(path, sql: str) -> None:
    con = duckdb.connect(str(path))
    try:
        con.execute(sql)
    finally:
        con.close()


def _evil_prompts_view(path, secret: Path) -> Path:
    """The T4 store: ``prompts`` renamed and replaced by a VIEW that appends a server file to every text."""
    make_store(path)
    _alter(path, "ALTER TABLE prompts RENAME TO prompts_real; "
                 "CREATE VIEW prompts AS SELECT prompt_id, dataset, source_id, text || ' ' || "
                 f"(SELECT content FROM read_text('{secret}')) AS text FROM prompts_real")
    return path


# ------------------------------------------------------------------ T4: a view over read_text
def test_a_view_over_a_server_file_is_refused_and_the_base_table_reads(tmp_path):
    secret = _secret(tmp_path)
    share = tmp_path / "share"
    share.mkdir()
    evil = _evil_prompts_view(share / "evil.duckdb", secret)
    for read_only in (True, False):  # a writable open refuses it too, before anything runs
        with pytest.raises(StoreError, match=r"evil\.duckdb is not a sago store \(view `prompts`\)"):
            open_store(evil, read_only=read_only)
    con = duckdb.connect(str(evil), read_only=True)  # the file was not changed by the refused opens
    assert con.execute("SELECT table_type FROM information_schema.tables WHERE table_name = 'prompts'").fetchall() \
        == [("VIEW",)]
    con.close()
    # the same file with prompts as its base table again reads fine, and no secret is in it
    _alter(evil, "DROP VIEW prompts; ALTER TABLE prompts_real RENAME TO prompts")
    with open_store(evil) as st:
        texts = list(st.prompts()["text"])
        assert len(texts) == 8 and not any(SECRET in t for t in texts)
        with pytest.raises(duckdb.PermissionException, match="disabled by configuration"):
            st.con.execute(f"SELECT content FROM read_text('{secret}')").fetchall()


@pytest.mark.parametrize("sql", [
    "SELECT * FROM read_text('{secret}')",
    "SELECT * FROM read_csv('{secret}')",
    "SELECT * FROM read_blob('{secret}')",
    "SELECT * FROM glob('{folder}/*')",
    "COPY runs TO '{folder}/out.csv'",
    "ATTACH '{folder}/other.duckdb' AS other",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET lock_configuration = false",
])
def test_a_read_connection_reaches_no_file_and_cannot_be_unlocked(tmp_path, sql):
    secret = _secret(tmp_path)
    store = make_store(tmp_path / "s.duckdb")
    with open_store(store) as st:
        with pytest.raises((duckdb.PermissionException, duckdb.InvalidInputException)):
            st.con.execute(sql.format(secret=secret, folder=secret.parent)).fetchall()
        assert len(st.runs()) == 2  # the store itself still reads
    assert not (secret.parent / "out.csv").exists() and not (secret.parent / "other.duckdb").exists()


def test_a_read_connection_replays_the_stores_write_ahead_log(tmp_path):
    """External access off still lets DuckDB read the store and replay its WAL (rows not yet checkpointed)."""
    src = make_store(tmp_path / "s.duckdb")
    con = duckdb.connect(str(src))
    con.execute("SET checkpoint_threshold = '1GB'")
    con.execute("INSERT INTO meta VALUES ('wal_probe', 'in the log')")
    copy = tmp_path / "copy.duckdb"
    shutil.copyfile(src, copy)
    shutil.copyfile(str(src) + ".wal", str(copy) + ".wal")  # a snapshot with its log, as a crash leaves it
    con.close()
    with open_store(copy) as st:
        assert st.meta()["wal_probe"] == "in the log"


def test_share_mode_refuses_the_view_store_on_the_prompts_page(tmp_path, monkeypatch):
    """The T4 input in share mode: the page says the store is refused; the server file reaches no element."""
    secret = _secret(tmp_path)
    share = tmp_path / "share"
    share.mkdir()
    _evil_prompts_view(share / "evil.duckdb", secret)
    monkeypatch.setenv("SAGO_SHARE_DIR", str(share))
    monkeypatch.delenv("SAGO_STORE", raising=False)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["store"] = "evil.duckdb"
    at.switch_page("pages/prompts.py")
    at.run()
    assert not at.exception, at.exception
    # st.error renders Markdown, so the page escapes the store's text; compare what a visitor reads.
    shown = [re.sub(r"\\(.)", r"\1", e.value) for e in at.error]
    assert any("is not a sago store (view `prompts`)" in m for m in shown), shown
    assert SECRET not in _all_text(at)


def _all_text(at) -> str:
    """Every element of the app (main and sidebar) as its protobuf text: labels, options, values, data."""
    out: list[str] = []

    def walk(node) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None:
            out.append(str(proto))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at.main)
    walk(at.sidebar)
    return "\n".join(out)


# ------------------------------------------------------------------ macros, types, other hostile catalogs
@pytest.mark.parametrize("sql, what", [
    ("CREATE MACRO count(x) AS 42", "macro `count`"),  # shadows count() in every sago query
    ("CREATE MACRO list_contains(a, b) AS true", "macro `list_contains`"),  # would defeat every filter
    ("CREATE MACRO leak() AS TABLE SELECT * FROM read_text('{secret}')", "macro `leak`"),
    ("CREATE TYPE json AS VARCHAR", "type `json`"),  # replaces the JSON type name
    ("CREATE VIEW runs_view AS SELECT * FROM runs", "view `runs_view`"),  # any view, not only a sago name
    ("CREATE SCHEMA hidden; CREATE VIEW hidden.x AS SELECT * FROM read_text('{secret}')", "view `hidden.x`"),
    ("ALTER TABLE runs RENAME TO runs_real; CREATE VIEW runs AS SELECT r.* REPLACE "
     "((SELECT string_agg(column0, ',') FROM read_csv('{secret}', header = false)) AS model) FROM runs_real r",
     "view `runs`"),
    ("CREATE VIEW prompt_scores AS SELECT * FROM read_text('{secret}')", "view `prompt_scores`"),  # a 1/2 name in v4
])
def test_views_macros_and_types_are_refused(tmp_path, sql, what):
    secret = _secret(tmp_path)
    store = make_store(tmp_path / "s.duckdb")
    _alter(store, sql.format(secret=secret))
    for read_only in (True, False):
        with pytest.raises(StoreError) as e:
            open_store(store, read_only=read_only)
        assert f"is not a sago store ({what})" in str(e.value) and SECRET not in str(e.value)


def test_a_store_that_gains_a_view_after_a_read_is_refused_on_the_next_open(tmp_path):
    """Repeated read-only opens reuse the check of an unchanged file (store.trust.file_identity); any
    write to the file is a new identity, checked again."""
    import os

    secret = _secret(tmp_path)
    store = make_store(tmp_path / "s.duckdb")
    open_store(store).close()
    open_store(store).close()  # checked once, reused
    before = os.stat(store)
    _alter(store, f"CREATE VIEW leak AS SELECT * FROM read_text('{secret}')")
    os.utime(store, ns=(before.st_atime_ns, before.st_mtime_ns))  # even with the old modification time
    with pytest.raises(StoreError, match=r"not a sago store \(view `leak`\)"):
        open_store(store)


def test_a_merge_refuses_a_shard_with_a_macro(tmp_path):
    good = make_store(tmp_path / "a.duckdb", models=("model-a",))
    bad = make_store(tmp_path / "b.duckdb", models=("model-b",))
    _alter(bad, "CREATE MACRO count(x) AS 42")
    with pytest.raises(StoreError, match=r"b\.duckdb is not a sago store \(macro `count`\)"):
        merge_stores(tmp_path / "m.duckdb", [good, bad])
    assert not (tmp_path / "m.duckdb").exists()


# ------------------------------------------------------------------ tables and columns
@pytest.mark.parametrize("sql, what", [
    ("ALTER TABLE prompts DROP COLUMN text", "table `prompts` has no column `text`"),
    ("ALTER TABLE deltas DROP COLUMN delta_norm", "table `deltas` has no column `delta_norm`"),
    ("ALTER TABLE variants ALTER strength TYPE VARCHAR", "column `variants.strength` is VARCHAR, not DOUBLE"),
    ("DROP TABLE units", "no table `units`"),
    ("ALTER TABLE prompts RENAME TO p0; CREATE TABLE prompts (prompt_id VARCHAR, dataset VARCHAR, "
     "source_id VARCHAR, text VARCHAR, reference JSON, category VARCHAR AS (upper(text))); "
     "INSERT INTO prompts (prompt_id, dataset, source_id, text, reference) "
     "SELECT prompt_id, dataset, source_id, text, reference FROM p0; DROP TABLE p0",
     "column `prompts.category` is a generated column"),
    ("CREATE SCHEMA s2; CREATE TABLE s2.runs AS SELECT * FROM runs; DROP TABLE runs", "no table `runs`"),
    ("CREATE TABLE t (x INTEGER); ALTER TABLE prompts RENAME TO p0; "
     "CREATE TABLE prompts (prompt_id VARCHAR, dataset VARCHAR, source_id VARCHAR, text VARCHAR CHECK (length(text) > 0), "
     "reference JSON, category VARCHAR, meta JSON); INSERT INTO prompts SELECT * FROM p0; DROP TABLE p0",
     "table `prompts` has a CHECK constraint"),
])
def test_a_table_that_differs_from_the_schema_is_refused(tmp_path, sql, what):
    store = make_store(tmp_path / "s.duckdb")
    _alter(store, sql)
    with pytest.raises(StoreError, match=r"is not a sago store \(" + what.replace(".", r"\.").replace("(", r"\(")
                       .replace(")", r"\)") + r"\)"):
        open_store(store)


def test_columns_a_store_adds_are_never_read(tmp_path):
    store = make_store(tmp_path / "s.duckdb")
    _alter(store, "ALTER TABLE prompts ADD COLUMN leak VARCHAR DEFAULT 'extra'; "
                  "ALTER TABLE runs ADD COLUMN leak VARCHAR DEFAULT 'extra'; "
                  "ALTER TABLE variants ADD COLUMN leak VARCHAR DEFAULT 'extra'; "
                  "ALTER TABLE responses ADD COLUMN leak VARCHAR DEFAULT 'extra'")
    with open_store(store) as st:
        assert "leak" not in st.prompts().columns and "leak" not in st.runs().columns
        assert "leak" not in st.variants().columns and "leak" not in st.responses("truthfulqa:0").columns
        assert "leak" not in st.variant_records(["truthfulqa:0/v0"]).columns
        assert list(st.prompts().columns) == ["prompt_id", "dataset", "source_id", "text", "reference", "category",
                                              "meta"]


# ------------------------------------------------------------------ the label sidecar beside a store
def test_a_label_sidecar_with_a_view_is_refused_and_a_plain_one_works(tmp_path):
    secret = _secret(tmp_path)
    store = make_store(tmp_path / "s.duckdb")
    side = tmp_path / "s.judge-labels.db"
    write_label(side, store, "r", "v", "base", 1)
    assert list(read_labels(side, store)["label"]) == [1]
    evil = tmp_path / "e.judge-labels.db"
    _alter(evil, f"CREATE VIEW judge_labels AS SELECT content AS store_name FROM read_text('{secret}')")
    for call in (lambda: read_labels(evil, store), lambda: write_label(evil, store, "r", "v", "base", 1)):
        with pytest.raises(ValueError, match=r"not a sago label file \(view `judge_labels`\)"):
            call()


@pytest.mark.parametrize("materialised", [True, False])
def test_non_finite_numbers_in_a_store_are_read_as_unavailable(tmp_path, materialised):
    """NaN / ±inf written into available Δ and Δ̃ (and so into the statistics sums) never reach a score:
    the (prompt, axis) groups holding one are left out, every other score is the clean store's."""
    import math

    from sago_engine.store import suffstats

    path = make_store(tmp_path / "nf.duckdb", n_prompts=5, n_variants=4, seed=3)
    with open_store(path) as st:
        clean = st.prompt_scores().set_index(["run_id", "prompt_id", "axis"])["s"]
        clean_q = st.delta_abs_quantiles(q=0.5).set_index("axis")["n"]
    con = duckdb.connect(str(path))
    hit = con.execute("SELECT run_id, prompt_id, axis FROM deltas WHERE available ORDER BY rowid LIMIT 3").fetchall()
    for (run, prompt, axis), v in zip(hit, ("nan", "inf", "-inf")):
        con.execute(f"UPDATE deltas SET delta = '{v}'::DOUBLE, delta_norm = '{v}'::DOUBLE WHERE rowid = "
                    "(SELECT min(rowid) FROM deltas WHERE run_id = ? AND prompt_id = ? AND axis = ? AND available)",
                    [run, prompt, axis])
    suffstats.materialise(con)
    if not materialised:
        for t in suffstats.STATS_TABLES:
            con.execute(f"DROP TABLE {t}")
    con.execute("CHECKPOINT")
    con.close()
    with open_store(path) as st:
        got = st.prompt_scores().set_index(["run_id", "prompt_id", "axis"])["s"]
        q = st.delta_abs_quantiles(q=0.5).set_index("axis")
        sgs = st.view("sgs_total")
    assert all(math.isfinite(x) for x in got) and all(math.isfinite(x) for x in sgs["sgs"])
    gone = {tuple(h) for h in hit}
    assert set(got.index) == set(clean.index) - gone
    for k in got.index:
        assert got[k] == pytest.approx(clean[k], abs=1e-12)
    assert all(math.isfinite(x) for x in q["q_abs"]) and all(math.isfinite(x) for x in q["max_abs"])
    assert int(q["n"].sum()) == int(clean_q.sum()) - 3


# ------------------------------------------------------------------ only DuckDB files, never an extension
def _sqlite_named_duckdb(path: Path) -> Path:
    import sqlite3

    con = sqlite3.connect(path)
    con.execute("CREATE TABLE prompts (text TEXT)")
    con.execute("INSERT INTO prompts VALUES ('private')")
    con.commit()
    con.close()
    return path


def test_u14_a_sqlite_file_named_duckdb_is_refused_before_duckdb_sees_it(tmp_path, monkeypatch, capsys):
    """U14: a SQLite database renamed ``shard.duckdb``; DuckDB alone would install ``sqlite_scanner``
    over HTTP (or load a file of that name from ~/.duckdb/extensions). Every way in refuses it by
    its header, naming it, without any DuckDB connection to it."""
    from precompute.__main__ import main as cli_main

    shard = _sqlite_named_duckdb(tmp_path / "shard.duckdb")
    before = shard.read_bytes()
    opened: list[str] = []
    real = duckdb.connect
    monkeypatch.setattr(duckdb, "connect", lambda *a, **k: opened.append(str(a[0]) if a else ":memory:") or real(*a, **k))
    for read_only in (True, False):
        with pytest.raises(StoreError, match=r"shard\.duckdb is not a DuckDB database file \(a SQLite database\)"):
            open_store(shard, read_only=read_only)
    with pytest.raises(StoreError, match="not a DuckDB database file"):
        merge_stores(tmp_path / "m.duckdb", [make_store(tmp_path / "a.duckdb"), shard])
    assert cli_main(["rescore", str(shard)]) != 0
    assert "not a DuckDB database file" in capsys.readouterr().err
    with pytest.raises(ValueError, match="not a DuckDB database file"):
        read_labels(shard, tmp_path / "a.duckdb")
    assert str(shard) not in opened and shard.read_bytes() == before


def test_every_connection_refuses_extension_autoinstall_and_autoload(tmp_path):
    store = make_store(tmp_path / "s.duckdb")
    for read_only in (True, False):
        with open_store(store, read_only=read_only) as st:
            got = st.con.execute("SELECT current_setting('autoinstall_known_extensions'), "
                                 "current_setting('autoload_known_extensions')").fetchone()
            assert got == (False, False)
