"""The store schema as one declared list of versions (``schema.VERSIONS``): what follows from it, and an
older store migrating by walking it."""

import duckdb

from sago_engine.store import open_store, schema, suffstats


def test_versions_are_declared_once_and_everything_follows_from_them():
    assert [v.version for v in schema.VERSIONS] == list(range(2, schema.SCHEMA_VERSION + 1))
    assert schema.SCHEMA_VERSION == 5 and schema.READABLE_VERSIONS == (1, 2, 3, 4, 5)
    assert schema.EXTRA_TABLES == ("mirroring_verdicts", "templates", "run_usage", "api_responses", "base_repeats",
                                   "noise_floor", "imported_rows", "correctness", "samples", "sample_deltas")
    # the steps in the order migrations always ran them (v3's statistics are built before v4 and v5)
    assert schema._MIGRATIONS == (schema._EXTRA_DDL, schema._TOKEN_IDS_DDL, schema._DROP_VIEWS, schema._FIDELITY_DDL,
                                  suffstats.STATS_DDL, suffstats.materialise, schema._V4_DDL, schema._V5_DDL)
    assert all(v.what for v in schema.VERSIONS)


def _columns(path, table):
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()}
    finally:
        con.close()


def test_a_version_4_store_migrates_to_the_last_version(tmp_path):
    path = tmp_path / "v4.duckdb"
    with open_store(path, read_only=False, create=True) as st:
        st.con.execute("DROP TABLE correctness; DROP TABLE samples; ALTER TABLE responses DROP COLUMN flags; "
                       "ALTER TABLE base_repeats DROP COLUMN flags; ALTER TABLE prompts DROP COLUMN meta; "
                       "ALTER TABLE mirroring_verdicts DROP COLUMN flags; "
                       "UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    before = path.read_bytes()
    with open_store(path) as st:  # read-only: readable as it is, left untouched
        assert int(st.meta()["schema_version"]) == 4
    assert path.read_bytes() == before and "flags" not in _columns(path, "responses")
    with open_store(path, read_only=False) as st:
        assert int(st.meta()["schema_version"]) == schema.SCHEMA_VERSION
        assert all(schema.has_table(st.con, t) for t in schema.EXTRA_TABLES)
    assert "flags" in _columns(path, "responses") and "meta" in _columns(path, "prompts")
