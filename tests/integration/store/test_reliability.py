"""Reliability: shards + merge = one run, readers during a write, SIGKILL + resume, foreign stores refused."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from precompute.__main__ import main as cli_main
from precompute.config import load_config
from precompute.runner import run, work_path
from sago_engine.store import StoreError, merge_stores, open_store, table_fingerprints
from tests.integration.precompute.test_runner import TINY, _cfg

ROOT = Path(__file__).resolve().parents[3]


def _fp(path):
    return table_fingerprints(path)


def test_shards_merge_identical_to_single_run(tmp_path):
    cfg = load_config(_cfg(tmp_path))
    run(cfg, progress=False)
    single = _fp(cfg.store)
    parts = []
    for k in (1, 2):
        p = tmp_path / f"shard{k}.duckdb"
        assert cli_main(["--config", str(_cfg(tmp_path)), "--store", str(p), "--shard", f"{k}/2", "--no-progress"]) == 0
        parts.append(p)
    # each shard alone holds only part of the units
    with open_store(parts[0]) as a, open_store(parts[1]) as b:
        assert 0 < a.counts()["units"] < 4 and a.counts()["units"] + b.counts()["units"] == 4
    merged = tmp_path / "merged.duckdb"
    assert cli_main(["merge", "--out", str(merged), *map(str, parts)]) == 0
    assert _fp(merged) == single
    with open_store(merged) as st:
        assert set(st.runs()["status"]) == {"complete"}
    # nothing is overwritten unasked
    assert cli_main(["merge", "--out", str(merged), *map(str, parts)]) == 2
    with pytest.raises(FileExistsError):
        merge_stores(merged, parts)


def test_reader_opens_published_snapshot_during_a_run(tmp_path):
    cfg = load_config(_cfg(tmp_path))
    seen = []

    def factory(spec):
        from sago_engine.backends import get_backend

        b = get_backend(spec)
        orig = b.generate

        def generate(prompts, max_new_tokens):
            if Path(cfg.store).exists():  # a reader, while the runner holds its working copy open
                with open_store(cfg.store, read_only=True) as st:
                    c = st.counts()
                    seen.append((c["units"], c["responses"], st.meta().get("progress")))
            return orig(prompts, max_new_tokens)

        b.generate = generate
        return b

    run(cfg, progress=False, backend_factory=factory, publish_every_s=0.0)
    assert seen, "the published store never existed during the run"
    # snapshots are consistent: every published unit has its base + 5 variant responses
    for units, responses, progress in seen:
        assert responses == units * 6 and progress
    assert [u for u, _, _ in seen] == sorted(u for u, _, _ in seen)
    assert not work_path(cfg.store).exists()
    with open_store(cfg.store) as st:
        assert st.meta()["status"] == "complete" and st.counts()["units"] == 4


def test_foreign_store_is_refused_and_untouched(tmp_path):
    foreign = tmp_path / "s.duckdb"
    con = duckdb.connect(str(foreign))
    con.execute("CREATE TABLE invoices (id INTEGER)")
    con.execute("INSERT INTO invoices VALUES (1)")
    con.close()
    before = foreign.read_bytes()
    cfg = load_config(_cfg(tmp_path))
    with pytest.raises(StoreError, match="not a sago store"):
        run(cfg, progress=False)
    assert foreign.read_bytes() == before and not work_path(foreign).exists()


def test_older_schema_is_refused_with_versions(tmp_path):
    cfg = load_config(_cfg(tmp_path))
    run(cfg, progress=False)
    con = duckdb.connect(cfg.store)
    con.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(StoreError, match=r"schema version 0.*versions 1, 2"):
        open_store(cfg.store)
    assert cli_main(["--config", str(_cfg(tmp_path)), "--no-progress"]) == 2


def test_hostile_dataset_fails_cleanly_before_any_model(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    (data / "truthfulqa.jsonl").write_text('{"id": "1", "prompt": "ok?"}\n{"id": "2", "prompt": \n')
    (data / "alpaca.jsonl").write_text('{"id": "1", "prompt": "fine"}\n')
    conf = tmp_path / "c.toml"
    conf.write_text(TINY.format(store=tmp_path / "s.duckdb", data=data))
    assert cli_main(["--config", str(conf), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "truthfulqa.jsonl:2" in err and "broken JSON" in err
    assert not (tmp_path / "s.duckdb").exists()
    assert not work_path(tmp_path / "s.duckdb").exists()  # no stale working copy to "resume"
    assert cli_main(["--config", str(conf), "--plan"]) == 2  # --plan reports it cleanly too
    assert "broken JSON" in capsys.readouterr().err


def test_odd_text_runs_end_to_end(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    odd = ["مرحبا، ما هي عاصمة أستراليا؟", "שלום 👋🏽 what is 東京?", "'; DROP TABLE prompts; --",
           "<script>alert(1)</script> What is HTML?"]
    import json

    (data / "truthfulqa.jsonl").write_text("".join(json.dumps({"id": str(i), "prompt": t}, ensure_ascii=False) + "\n"
                                                   for i, t in enumerate(odd)))
    (data / "alpaca.jsonl").write_text('{"id": "1", "prompt": "Say hi."}\n')
    conf = tmp_path / "c.toml"
    conf.write_text(TINY.format(store=tmp_path / "s.duckdb", data=data).replace("n_prompts = 2", "n_prompts = 4"))
    cfg = load_config(conf)
    run(cfg, progress=False)
    with open_store(cfg.store) as st:
        texts = set(st.prompts()["text"])
        assert set(odd) <= texts
        assert st.counts()["units"] == 5


def test_snapshot_caption_says_how_fresh():
    from sago_engine.store.catalog import snapshot_caption

    assert "in progress (12/96 generations)" in snapshot_caption(
        {"published_at": "2026-11-29T10:00:00", "status": "running", "progress": "12/96"})
    assert snapshot_caption({"published_at": "2026-11-29T10:00:00", "status": "complete"}).startswith("Complete store")
    assert "no timestamp" in snapshot_caption({})
