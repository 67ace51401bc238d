"""Labels are not keys: two runs with one label are refused or disambiguated where they enter a
store (merge) and where a store is read (open), so pages pair, pool and aggregate per run (U9)."""

from __future__ import annotations

import duckdb
import pytest

from precompute.__main__ import main as cli_main
from sago_engine.scoring.pairwise import paired_table
from sago_engine.store import StoreError, merge_stores, open_store
from sago_engine.store.runlabels import unique_labels
from sago_engine.views.report import significance_table
from tests.support.factories import make_store


def _relabel(path, run_id: str, label: str) -> None:
    con = duckdb.connect(str(path))
    con.execute("UPDATE runs SET model = ? WHERE run_id = ?", [label, run_id])
    con.close()


def _two_stores(tmp_path):
    """Store A holds model-a and model-b; store B another run (other settings) labelled model-a too."""
    a = make_store(tmp_path / "a.duckdb", models=("model-a", "model-b"), seed=1)
    b = make_store(tmp_path / "b.duckdb", models=("model-z",), seed=2, model_scale={"model-z": 3.0})
    _relabel(b, "run-model-z", "model-a")
    return a, b


def test_u9_merge_refuses_a_label_two_runs_carry(tmp_path, capsys):
    """U9: ``precompute merge`` of two stores whose runs carry the same label: refused, naming the
    label, both runs and their inputs and the fix; nothing written."""
    a, b = _two_stores(tmp_path)
    with pytest.raises(StoreError, match=r"'model-a': runs run-model-a \(in .*a\.duckdb\); run-model-z "
                                         r"\(in .*b\.duckdb\).*--relabel-repeated"):
        merge_stores(tmp_path / "m.duckdb", [a, b])
    assert not (tmp_path / "m.duckdb").exists()
    assert cli_main(["merge", "--out", str(tmp_path / "m.duckdb"), str(a), str(b)]) == 2
    assert "label(s) name more than one run" in capsys.readouterr().err
    # the same run in two shards is one run: not a repeated label
    merge_stores(tmp_path / "same.duckdb", [a, a])


def test_merge_relabel_repeated_keeps_every_run_apart(tmp_path):
    a, b = _two_stores(tmp_path)
    merge_stores(tmp_path / "m.duckdb", [a, b], relabel_repeated=True)
    with open_store(tmp_path / "m.duckdb") as st:
        labels = dict(st.runs()[["run_id", "model"]].itertuples(index=False))
        assert st.relabelled == {}
    assert labels == {"run-model-a": "model-a [run-model-a]", "run-model-b": "model-b",
                      "run-model-z": "model-a [run-model-z]"}


def test_u9_a_store_with_a_repeated_label_is_read_per_run(tmp_path):
    """U9 at open: a store (written before this check, or by a rerun under other settings) whose
    two runs share a label. Model vs model pairs them as two models and SGS pools 8 prompts per run,
    never 16 from two runs; the file is unchanged."""
    path = make_store(tmp_path / "s.duckdb", models=("model-a", "model-b", "model-c"), n_prompts=4,
                      model_scale={"model-c": 4.0})
    _relabel(path, "run-model-c", "model-a")
    before = path.read_bytes()
    with open_store(path) as st:
        assert st.relabelled == {"run-model-a": "model-a [run-model-a]", "run-model-c": "model-a [run-model-c]"}
        runs = st.runs()
        scores = st.prompt_scores()
        assert sorted(runs["model"]) == ["model-a [run-model-a]", "model-a [run-model-c]", "model-b"]
        assert set(st.deltas()["model"]) == set(runs["model"])
    assert path.read_bytes() == before
    sig = significance_table(scores, 0.05)
    assert set(sig["n_prompts"]) == {8}  # 2 datasets × 4 prompts per run
    pairs = paired_table(scores, n_resamples=50)
    assert len(pairs[["model_a", "model_b"]].drop_duplicates()) == 3  # three runs, three pairs
    assert (pairs["n_prompts"] == 8).all()
    with open_store(path, read_only=False) as st:  # a writable open writes the file's own labels
        assert sorted(st.con.execute("SELECT model FROM runs").fetchall()) == [("model-a",), ("model-a",),
                                                                              ("model-b",)]


def test_unique_labels_never_collide_even_with_a_hostile_label():
    rows = [("r1", "m"), ("r2", "m"), ("r3", "m [r1]"), ("r4", "x")]
    got = unique_labels(rows)
    assert len(set(got.values())) == 4 and got["r4"] == "x" and got["r3"] == "m [r1]"
    assert got["r1"] != "m [r1]" and got["r1"].startswith("m [r1]")
    rows = [(f"run-{i:02d}", "same") for i in range(12)]
    assert len(set(unique_labels(rows).values())) == 12


def test_an_import_never_adds_a_second_run_under_a_label_the_store_has(tmp_path, capsys):
    """import-authors with another selection (``--all-runs``: another run id) into a store that
    holds the first import: the same labels for other runs, refused with the fix; the store keeps
    only its first runs."""
    from sago_engine.external.importer import import_authors
    from tests.support.authors_files import make_clone

    root, out = make_clone(tmp_path / "clone"), tmp_path / "a.duckdb"
    import_authors(root, out, models=["G-2B"], recompute=False)
    with open_store(out) as st:
        before = sorted(st.runs()["run_id"])
    with pytest.raises(StoreError, match=r"already holds run .* labelled .*authors' rows.*Import into a new --store"):
        import_authors(root, out, models=["G-2B"], all_runs=True, recompute=False)
    assert cli_main(["import-authors", str(root), "--store", str(out), "--model", "G-2B", "--all-runs",
                     "--no-recompute"]) == 2
    assert "labelled" in capsys.readouterr().err
    with open_store(out) as st:
        assert sorted(st.runs()["run_id"]) == before
