"""Import of the SAGO authors' released rows (files written by tests/support/authors_files.py in their format)."""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re

import duckdb
import pandas as pd
import pytest

from sago_engine.external import salad
from sago_engine.external.authors_format import AuthorsFormatError, discover, read_rows, row_role, select_latest
from sago_engine.external.leak import TEMPLATES, find_leak, templates_for
from sago_engine.store import open_store
from tests.support.authors_files import GEMMA_ROWS, L_TAIL, LLAMA_LENGTH_ROWS, P0, P1, SALAD, add_sago_run, make_clone
from tests.support.terminal_bytes import assert_inert


# ---------------------------------------------------------------- leak detection
@pytest.mark.parametrize("model,prompt,reply,leaked,cleaned", [
    ("G-2B", P0, "the novel Dracula?\nmodel\nBram Stoker.", "the novel Dracula?\nmodel\n", "Bram Stoker."),
    ("G-2B", P0, "user\n" + P0 + "\nmodel\nBram Stoker.", "user\n" + P0 + "\nmodel\n", "Bram Stoker."),
    ("G-2B", P0, "model\nBram Stoker.", "model\n", "Bram Stoker."),
    ("G-2B", P0, "Bram Stoker wrote it.", "", "Bram Stoker wrote it."),
    # a reply that starts like the prompt's end but without the template's closing token
    ("G-2B", P0, "Dracula? Bram Stoker.", "", "Dracula? Bram Stoker."),
    # Llama 3.2 puts the run date in its system line: a leak reaching into it is still found
    ("L3.2-3B", P0, ": December 2023\nToday Date: 16 Apr 2026\n\nuser\n\n" + P0 + L_TAIL + "Bram Stoker.",
     ": December 2023\nToday Date: 16 Apr 2026\n\nuser\n\n" + P0 + L_TAIL, "Bram Stoker."),
    ("L3.1-8B", "She felt fear.", "assistant\n\nFear is natural.", "assistant\n\n", "Fear is natural."),
    # prompts containing the word "assistant"
    ("L3.1-8B", P1, "assistant helped Sherlock Holmes?" + L_TAIL + "Dr. Watson.",
     "assistant helped Sherlock Holmes?" + L_TAIL, "Dr. Watson."),
    ("L3.1-8B", P1, "The assistant was Dr. Watson.", "", "The assistant was Dr. Watson."),
    ("L3.1-8B", "What is an assistant?", "assistant is a person who helps.", "", "assistant is a person who helps."),
    # the prompt holds the marker and its whitespace: the longest leak wins, not the first
    ("L3.1-8B", "Act as an assistant\n\nWhat is 2+2?", "assistant\n\nWhat is 2+2?" + L_TAIL + "4.",
     "assistant\n\nWhat is 2+2?" + L_TAIL, "4."),
    ("Q2.5-7B", P0, "helpful assistant.\nuser\n" + P0 + "\nassistant\nBram Stoker.",
     "helpful assistant.\nuser\n" + P0 + "\nassistant\n", "Bram Stoker."),
    ("Q3.5-9B", "Futile pursuit", "assistant\n<think>\nThe user wants", "assistant\n<think>\n", "The user wants"),
    ("Q3.5-9B", "Futile pursuit", "Here's a thinking process", "", "Here's a thinking process"),
])
def test_leak_found_and_cut(model, prompt, reply, leaked, cleaned):
    lk = find_leak(reply, prompt, templates_for(model))
    assert (lk.leaked, lk.cleaned) == (leaked, cleaned)
    assert lk.found == bool(leaked)


def test_leak_spacing_noise_and_unknown_model():
    noisy = "   Who  wrote   the novel Dracula?  "
    # the template trims the message and decoding may re-space: whitespace is ignored
    lk = find_leak("wrote the novel Dracula?\nmodel\nStoker.", noisy, templates_for("G-2B"))
    assert lk.cleaned == "Stoker."
    # an unknown model key tries every known template
    assert len(templates_for("some-new-model")) == len(TEMPLATES)
    assert find_leak("Dracula?assistant\n\nStoker.", P0, templates_for("some-new-model")).cleaned == "Stoker."
    assert find_leak(None, P0, templates_for("G-2B")).cleaned == ""


# ---------------------------------------------------------------- token salad
def test_salad_rule():
    assert salad.score(SALAD).salad
    eng = salad.score("For individuals with arthritis, it is essential to choose exercises that are gentle.")
    assert not eng.salad and eng.scripts == 1 and eng.known_share > 0.9
    assert not salad.is_salad('"Futile pursuit" translates to "徒劳的追求" in Chinese and means a wasted effort.')
    assert not salad.is_salad("")


# ---------------------------------------------------------------- files and runs
def test_discover_latest_run_and_roles(tmp_path):
    srcs = discover(make_clone(tmp_path))
    rels = [s.rel for s in srcs]
    assert not any("trash" in r for r in rels)
    assert not any(r.endswith("G-2B_results.csv") for r in rels)  # the combined file of that run is read
    closed = [s for s in srcs if s.kind == "closed"]
    assert [(s.style, s.dataset) for s in closed] == [("politeness", "alpaca")]
    pairs = [(s, m) for s in srcs for m in dict.fromkeys(read_rows(s)["model"])]
    sel = select_latest(pairs)
    chosen = {(s.style, s.dataset, m): s.run for s, m in sel.chosen}
    assert chosen[("spacing", "alpaca", "G-2B")] == "run_multi_alpaca_20260102_000000"
    assert [x["path"] for x in sel.superseded] == [
        "results/spacing/run_multi_alpaca_20260101_000000/full_results_all_models.csv"]
    assert len(select_latest(pairs, all_runs=True).chosen) == len(pairs)
    r = row_role("politeness", "-10", "suffix")
    assert (r.spec.position, r.meta["register"], r.role) == ("SUFFIX", "rude", "variant")
    assert row_role("length_variation", "1.0", "global").role == "baseline"
    assert row_role("inter_vs_imper", "original", "global").role == "excluded"
    with pytest.raises(AuthorsFormatError):
        row_role("spacing", "lots", "prefix")


def test_unreadable_or_foreign_file_is_an_error(tmp_path):
    root = make_clone(tmp_path)
    bad = root / "results/spacing/run_multi_alpaca_20260105_000000/full_results_all_models.csv"
    bad.parent.mkdir(parents=True)
    bad.write_text("model,prompt_id\nG-2B,0\n")
    out = tmp_path / "out.duckdb"
    from sago_engine.external.importer import import_authors

    with pytest.raises(AuthorsFormatError, match="missing column"):
        import_authors(root, out, recompute=False)
    assert not out.exists()  # nothing written
    with pytest.raises(FileNotFoundError):
        import_authors(tmp_path / "nowhere", out, recompute=False)


# ---------------------------------------------------------------- import
def _csv_rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_import_round_trips_every_column_and_keeps_values_apart(tmp_path):
    from sago_engine.external.importer import import_authors

    root = make_clone(tmp_path)
    out = tmp_path / "out.duckdb"
    summary = import_authors(root, out, recompute=False)
    assert set(summary["models"]) == {"G-2B", "L3.1-8B", "G4-E4B", "gpt-5.4"}
    with open_store(out) as st:
        runs = st.run_origins()
        assert set(runs["backend"]) == {"imported"}
        rec = runs[runs["model"] == "Gemma-2B-IT · authors' rows"].iloc[0]
        o = rec["origin"]
        path = "results/spacing/run_multi_alpaca_20260102_000000/full_results_all_models.csv"
        assert (o["kind"], o["source"]) == ("imported", path)
        assert o["sources"][0]["sha256"] == hashlib.sha256((root / path).read_bytes()).hexdigest()
        assert o["superseded"][0]["replaced_by"] == path
        assert set(o["definitions"]) == {f"{a}@authors" for a in ("cos", "bleu", "bert", "prob", "ent", "mr")}
        assert o["leaks"]["base_leaked_rows"] == 2 and o["leaks"]["variant_leaked_rows"] == 2
        # every column of every row, as text, exactly
        got = st.imported_rows(rec["run_id"])
        want = _csv_rows(root / path)
        assert [r for r in got["columns"]] == want
        assert list(got["row_index"]) == list(range(len(want)))
        # the authors' values under their own axis names: Δ as released, Δ̃ = Δ / R, not clipped
        d = st.deltas(kept_only=False, run_ids=[rec["run_id"]], axes=("prob@authors", "bleu@authors", "mr@authors"))
        vals = {(r.variant_id, r.axis): (r.delta, r.delta_norm) for r in d.itertuples()}
        row = want[1]
        vid = got.iloc[1]["variant_id"]
        assert vals[(vid, "prob@authors")] == (float(row["delta_log_prob"]), float(row["delta_log_prob"]) / 250.0)
        assert vals[(vid, "prob@authors")][1] < -1.0  # -312.5 / 250: no clipping
        assert vals[(vid, "bleu@authors")][0] == float(row["delta_bleu"])
        # none of it reaches the plain axes every page reads
        assert st.prompt_scores().empty
        assert not st.prompt_scores(axes=("bleu@authors",)).empty
        # replies: cleaned in response, as released in raw_response (only where a leak was cut)
        resp = st.responses(got.iloc[1]["prompt_id"])
        resp = resp[resp["run_id"] == rec["run_id"]]
        base = resp[resp["variant_id"].isna()].iloc[0]
        assert base["response"] == "Bram Stoker wrote Dracula in 1897."
        assert base["raw_response"] == GEMMA_ROWS[0]["response_orig"]
        clean = st.responses(got.iloc[2]["prompt_id"])
        assert clean[clean["run_id"] == rec["run_id"]]["raw_response"].isna().all()
        # the older column layout round-trips too, and the baseline rows are stored but not scored
        llama = runs[runs["model"] == "Llama-3.1-8B-Instruct · authors' rows"].iloc[0]
        lrows = st.imported_rows(llama["run_id"])
        assert [r for r in lrows["columns"]] == [{k: v for k, v in r.items()} for r in LLAMA_LENGTH_ROWS]
        v = st.variants(lrows.iloc[0]["prompt_id"])
        assert sorted(zip(v["strength"], v["kept"])) == [(0.25, True), (1.0, False)]
        assert v[~v["kept"]]["skip_reason"].iloc[0].startswith("the authors' baseline row")
    # importing again adds nothing
    before = duckdb.connect(str(out), read_only=True).execute("SELECT count(*) FROM deltas").fetchall()
    import_authors(root, out, recompute=False)
    assert duckdb.connect(str(out), read_only=True).execute("SELECT count(*) FROM deltas").fetchall() == before


def test_recomputed_run_and_degenerate_model(tmp_path):
    from sago_engine.axes import bleu
    from sago_engine.external.importer import import_authors

    root = make_clone(tmp_path)
    out = tmp_path / "out.duckdb"
    summary = import_authors(root, out, models=["G-2B", "G4-E4B"])
    assert summary["models"]["G4-E4B"]["degenerate"]["flagged"] is True
    assert summary["models"]["G-2B"]["degenerate"]["flagged"] is False
    with open_store(out) as st:
        runs = st.run_origins()
        rec = runs[runs["model"] == "Gemma-2B-IT · authors' replies, sago axes"].iloc[0]
        assert rec["origin"]["kind"] == "imported+recomputed"
        assert rec["origin"]["of_run"] in set(runs["run_id"])
        d = st.deltas(run_ids=[rec["run_id"]], axes=("bleu", "bleu@leaked", "cos"))
        rows = st.imported_rows(rec["origin"]["of_run"])
        vid = rows.iloc[1]["variant_id"]
        got = {r.axis: r.delta for r in d[d["variant_id"] == vid].itertuples()}
        base_clean, var_clean = "Bram Stoker wrote Dracula in 1897.", "Dracula   was   written by Bram Stoker."
        assert got["bleu"] == pytest.approx(bleu(var_clean, base_clean) - 100.0, abs=1e-9)
        assert got["bleu@leaked"] == pytest.approx(
            bleu(GEMMA_ROWS[1]["response_pert"], GEMMA_ROWS[1]["response_orig"]) - 100.0, abs=1e-9)
        assert got["bleu"] != got["bleu@leaked"]
        cos = d[(d["variant_id"] == vid) & (d["axis"] == "cos")].iloc[0]
        assert not cos["available"] and cos["reason"].startswith("not recomputed")
        bad = runs[runs["model"] == "Gemma-4-E4B-IT · authors' replies, sago axes"].iloc[0]
        dd = st.deltas(run_ids=[bad["run_id"]], axes=("bleu", "bert", "mr"))
        assert len(dd) and not dd["available"].any() and dd["reason"].str.startswith("degenerate pair").all()


def test_cli_import_authors(tmp_path, capsys):
    from precompute.__main__ import main

    root = make_clone(tmp_path)
    out = tmp_path / "cli.duckdb"
    assert main(["import-authors", str(root), "--store", str(out), "--model", "gpt-5.4", "--no-recompute"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert list(printed["models"]) == ["gpt-5.4"]
    assert main(["import-authors", str(tmp_path / "missing"), "--store", str(out)]) == 2
    assert "no results/ folder" in capsys.readouterr().err


def test_v4_store_without_imported_rows_gets_it(tmp_path):
    p = tmp_path / "s.duckdb"
    open_store(p, read_only=False, create=True).close()
    con = duckdb.connect(str(p))
    con.execute("DROP TABLE imported_rows")
    con.close()
    with open_store(p) as st:
        assert st.imported_rows().empty  # read-only: read as it is
    with open_store(p, read_only=False) as st:
        assert st._has_table("imported_rows")


def test_audit_aggregates_the_authors_way(tmp_path):
    from sago_engine.external.audit import audit_table, truthfulqa_subsample
    from sago_engine.external.importer import import_authors

    root = make_clone(tmp_path)
    out = tmp_path / "out.duckdb"
    import_authors(root, out, models=["G-2B"])
    with open_store(out) as st:
        t = audit_table(st).set_index("axis")
    # V of prompt 0: Δ-BLEU -87.5, Δ-Prob -312.5; prompt 1: 0 and -4.25 (hand-computed RMS, not clipped)
    assert t.loc["bleu", "authors_way"] == pytest.approx((87.5 / 100 + 0.0) / 2)
    assert t.loc["prob", "authors_way"] == pytest.approx((312.5 / 250 + 4.25 / 250) / 2)
    assert t.loc["bleu", "published"] == 0.64 and t.loc["bleu", "gap"] == pytest.approx(0.4375 - 0.64)
    assert t.loc["bleu", "leak_effect"] == pytest.approx(t.loc["bleu", "sago_cleaned"] - t.loc["bleu", "sago_released"])
    assert t.loc["bleu", "reply_leak_rate"] == 0.5
    # step 3 of the authors' sgs_core: 16 common TruthfulQA ids drawn with default_rng(42)
    ids = {"a": set(range(128)), "b": set(range(128))}
    keep = truthfulqa_subsample(ids)
    assert keep["a"] == keep["b"] and len(keep["a"]) == 16
    assert keep["a"] == set(int(x) for x in __import__("numpy").random.default_rng(42).choice(list(range(128)), 16,
                                                                                                 replace=False))


def test_audit_view_published_authors_leak_and_sago(tmp_path):
    """The Paper reference page's audit table on the importer's store plus a sago run, by hand."""
    from sago_engine.axes import bleu
    from sago_engine.external.audit import AUDIT_MISSING, audit_view, own_runs, paper_model
    from sago_engine.external.importer import import_authors

    assert paper_model("Gemma-2B-IT · paper code") == paper_model("x", "google/gemma-2b-it") == "Gemma-2B-IT"
    assert paper_model("my-model", "org/other") is None
    root = make_clone(tmp_path)
    out = tmp_path / "out.duckdb"
    import_authors(root, out, models=["G-2B"])
    add_sago_run(out)
    with open_store(out) as st:
        t = audit_view(st).set_index(["model", "axis"])
        assert own_runs(st)["model"].unique().tolist() == ["Gemma-2B-IT"]
    g = t.loc["Gemma-2B-IT"]
    assert set(AUDIT_MISSING) <= set(t.columns)
    # published and the authors' rows their way (as test_audit_aggregates_the_authors_way)
    assert g.loc["bleu", "published"] == 0.64 and g.loc["bleu", "authors_way"] == pytest.approx(0.4375)
    assert g.loc["bleu", "gap"] == pytest.approx(0.4375 - 0.64)
    # sago's Δ-BLEU of the released replies: prompt 0's variant against its base, prompt 1 identical (0)
    released = abs(bleu(GEMMA_ROWS[1]["response_pert"], GEMMA_ROWS[1]["response_orig"]) - 100) / 100 / 2
    cleaned = abs(bleu("Dracula   was   written by Bram Stoker.", "Bram Stoker wrote Dracula in 1897.") - 100) / 100 / 2
    assert g.loc["bleu", "sago_released"] == pytest.approx(released, abs=1e-9)
    assert g.loc["bleu", "definition_step"] == pytest.approx(released - 0.4375, abs=1e-9)
    assert g.loc["bleu", "sago_cleaned"] == pytest.approx(cleaned, abs=1e-9)
    assert g.loc["bleu", "leak_effect"] == pytest.approx(cleaned - released, abs=1e-9)
    # the sago run: prompt 0 has Δ-BLEU −50, −30 (s = sqrt((0.25 + 0.09)/2)), prompt 1 −20 (0.2)
    assert g.loc["bleu", "sago_run"] == pytest.approx((math.sqrt(0.17) + 0.2) / 2)
    assert g.loc["bleu", "sago_code"] == pytest.approx((math.sqrt(0.17) + 0.2) / 2)
    # Δ-Prob: sago's own reply 0.4, 0.2; the base reply (authors' definition) 2.0 unclipped, 0.5
    assert g.loc["prob", "sago_run"] == pytest.approx(0.3)
    assert g.loc["prob", "sago_code"] == pytest.approx(1.25)
    assert g.loc["prob", "sago_gap"] == pytest.approx(1.25 - 0.06)
    assert g.loc["cos", "sago_code"] == pytest.approx((0.25 + 0.15) / 2)  # cos@last_layer / R = 2
    assert g.loc["cos", "sago_run"] == pytest.approx((0.1 + 0.05) / 2)
    assert pd.isna(g.loc["cos", "sago_released"])  # not recomputable from text
    assert pd.isna(g.loc["mr", "sago_code"])  # mr@paper_code not stored for this run


# ---------------------------------------------------------------- a clone is untrusted input
CLOSED = "results/closed_models/run_gpt_5_4_alpaca_politeness_20260425_192102/full_results_all_models.csv"
PRIVATE = "PRIVATE-text-outside-the-clone-5d1e"


def _private_csv(path):
    from tests.support.authors_files import GPT_ROWS, NEW, write_csv

    return write_csv(path, NEW, [dict(r, response_orig=PRIVATE) for r in GPT_ROWS])


def test_u1_a_link_out_of_the_clone_is_refused_and_nothing_is_written(tmp_path):
    """U1: a results file that is a relative symlink to a CSV outside the clone."""
    from precompute.__main__ import main
    from sago_engine.external.importer import import_authors

    root = make_clone(tmp_path / "clone")
    _private_csv(tmp_path / "private.csv")
    link = root / CLOSED
    link.unlink()
    link.symlink_to("../../../../private.csv")
    assert PRIVATE in link.read_text()  # the link works: an importer that follows it reads the private text
    out = tmp_path / "out.duckdb"
    with pytest.raises(AuthorsFormatError, match=r"closed_models/.*full_results_all_models\.csv.*outside"):
        import_authors(root, out, recompute=False)
    assert not out.exists()
    assert main(["import-authors", str(root), "--store", str(out), "--no-recompute"]) == 2
    assert not out.exists()


def test_u1_a_folder_link_out_of_the_clone_is_refused_and_a_link_inside_is_read(tmp_path):
    from sago_engine.external.importer import import_authors

    root = make_clone(tmp_path / "clone")
    outside = tmp_path / "elsewhere/run_gpt_5_4_alpaca_politeness_20260426_000000"
    _private_csv(outside / "full_results_all_models.csv")
    (root / "results/closed_models/run_gpt_5_4_alpaca_politeness_20260426_000000").symlink_to(outside)
    with pytest.raises(AuthorsFormatError, match="run_gpt_5_4_alpaca_politeness_20260426_000000.*outside"):
        discover(root)
    (root / "results/closed_models/run_gpt_5_4_alpaca_politeness_20260426_000000").unlink()
    # a link whose target stays inside the clone is an ordinary file of it
    inside = root / "results/closed_models/run_gpt_5_4_alpaca_politeness_20260427_000000"
    inside.mkdir()
    (inside / "full_results_all_models.csv").symlink_to(root / CLOSED)
    summary = import_authors(root, tmp_path / "ok.duckdb", models=["gpt-5.4"], recompute=False)
    assert summary["models"]["gpt-5.4"]["rows"] == 2


def test_u2_the_hash_is_of_the_bytes_that_were_parsed(tmp_path, monkeypatch):
    """U2: the CSV is rewritten (a ``git pull``) after it was parsed and before it is hashed."""
    from sago_engine.external import importer

    root = make_clone(tmp_path)
    path = root / CLOSED
    imported = path.read_bytes()
    parse = importer.read_rows

    def parse_then_pull(src, *a, **k):
        got = parse(src, *a, **k)
        if src.path.name == path.name and "closed_models" in str(src.path):
            path.write_bytes(imported.replace(b"Bram Stoker.", b"Someone else."))
        return got

    monkeypatch.setattr(importer, "read_rows", parse_then_pull)
    out = tmp_path / "out.duckdb"
    importer.import_authors(root, out, models=["gpt-5.4"], recompute=False)
    with open_store(out) as st:
        runs = st.run_origins()
        src = runs.iloc[0]["origin"]["sources"][0]
        assert src["sha256"] == hashlib.sha256(imported).hexdigest()
        rows = st.imported_rows(runs.iloc[0]["run_id"])
        assert rows["columns"].iloc[0]["response_orig"] == "Bram Stoker."


def _swallowing_csv(path):
    """U6: a 4-row CSV whose row 2 ends with ``"0.0`` and row 3 with ``0.0"``."""
    from tests.support.authors_files import GPT_ROWS, NEW, write_csv

    rows = [dict(GPT_ROWS[0], prompt_id=str(i)) for i in range(2)] + [dict(GPT_ROWS[1], prompt_id=str(i))
                                                                        for i in range(2)]
    write_csv(path, NEW, rows)
    lines = path.read_text().split("\n")  # header, rows 1-4 on lines 2-5
    lines[2] = lines[2][: -len("0.0")] + '"0.0'
    lines[3] = lines[3] + '"'
    path.write_text("\n".join(lines))
    return path


def test_u6_an_unbalanced_quote_that_swallows_a_row_is_refused_naming_file_and_line(tmp_path):
    from sago_engine.external.importer import import_authors

    root = make_clone(tmp_path)
    _swallowing_csv(root / CLOSED)
    out = tmp_path / "out.duckdb"
    with pytest.raises(AuthorsFormatError, match=rf"{CLOSED}:3: "):
        import_authors(root, out, recompute=False)
    assert not out.exists()


@pytest.mark.parametrize("edit, line, why", [
    (lambda row: row.replace("gpt-5.4,", 'gpt-5.4,"', 1), 3, "quote is never closed"),  # the file ends inside a cell
    (lambda row: row.rsplit(",", 1)[0], 3, "20 cells, the header has 21"),
    (lambda row: row + ",extra", 3, "22 cells, the header has 21"),
    (lambda row: row.replace(",-58.0,", ",a lot,"), 3, "column delta_bleu holds 'a lot', not a number"),
    (lambda row: row.replace(",-10,", ",loud,"), 3, "politeness strength 'loud' is not a finite number"),
    (lambda row: row.replace(",suffix,", ",middle,"), 3, "unknown place 'middle'"),
])
def test_u6_every_format_error_names_the_file_and_its_line(tmp_path, edit, line, why):
    root = make_clone(tmp_path)
    path = root / CLOSED
    lines = path.read_text().split("\n")
    lines[line - 1] = edit(lines[line - 1])
    path.write_text("\n".join(lines))
    src = next(s for s in discover(root) if s.rel == CLOSED)
    with pytest.raises(AuthorsFormatError, match=rf"^{CLOSED}:{line}: .*{re.escape(why)}"):
        read_rows(src)


def test_multi_line_replies_commas_bom_crlf_and_nul_still_import(tmp_path):
    """What the authors' files legitimately hold is read as before: a reply over several lines (one
    listing many things with commas), a byte-order mark, CRLF row ends, a NUL byte in a reply."""
    from tests.support.authors_files import GPT_ROWS, NEW, write_csv

    root = make_clone(tmp_path)
    listing = "Here:\n" + ", ".join(f"item {i}" for i in range(30)) + "\nDone."
    write_csv(root / CLOSED, NEW, [dict(GPT_ROWS[0], response_orig=listing),
                                   dict(GPT_ROWS[1], response_pert="Bram\x00 Stoker.")])
    data = (root / CLOSED).read_bytes()
    for variant in (data, b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n")):
        (root / CLOSED).write_bytes(variant)
        src = next(s for s in discover(root) if s.rel == CLOSED)
        df = read_rows(src)
        assert list(df.columns) == NEW and len(df) == 2
        assert df["response_orig"].iloc[0].replace("\r\n", "\n") == listing
        assert df["response_pert"].iloc[1] == "Bram\x00 Stoker."
        assert df.attrs["lines"] == [2, 5] and df.attrs["sha256"] == hashlib.sha256(variant).hexdigest()


def test_numbers_out_of_bounds_are_counted_and_shown_never_stored(tmp_path, capsys):
    from precompute.__main__ import main
    from tests.support.authors_files import GPT_ROWS, NEW, write_csv

    root = make_clone(tmp_path)
    write_csv(root / CLOSED, NEW, [GPT_ROWS[0], dict(GPT_ROWS[1], delta_bleu="1e308", delta_bertscore_response="inf")])
    out = tmp_path / "out.duckdb"
    assert main(["import-authors", str(root), "--store", str(out), "--model", "gpt-5.4", "--no-recompute"]) == 0
    err = capsys.readouterr().err
    assert "2 value(s) refused" in err
    with open_store(out) as st:
        d = st.deltas(kept_only=False, axes=("bleu@authors", "bert@authors"))
        bad = d[d["delta"].isna() & ~d["available"]]
        assert len(bad) == 2 and bad["reason"].str.contains("not a finite number within").all()
        assert st.run_origins().iloc[0]["origin"]["refused_values"]["count"] == 2


def test_u3_terminal_escapes_in_a_cell_never_reach_the_terminal(tmp_path, capfdbinary):
    """U3: a ``model`` cell that forges a green line and sets the window title (--report prints it)."""
    from precompute.__main__ import main
    from tests.support.authors_files import GPT_ROWS, NEW, write_csv

    forged = "gpt-5.4\x1b[2K\r\x1b[32mgpt-5.4: 0 rows, all checks passed\x1b[0m\x1b]0;title\x07"
    root = make_clone(tmp_path)
    write_csv(root / CLOSED, NEW, [dict(r, model=forged) for r in GPT_ROWS])
    out = tmp_path / "out.duckdb"
    assert main(["import-authors", str(root), "--store", str(out), "--no-recompute", "--report"]) == 0
    got = capfdbinary.readouterr()
    assert b"all checks passed" in got.err  # the cell is shown, made inert
    assert_inert(got.out + got.err)


def test_a_repeated_row_is_counted_and_shown_never_merged_silently(tmp_path, capsys):
    """Two rows of one variant (same prompt, place, strength and varied prompt): the store keeps
    one scored row per variant, so the first is scored, both are kept as released, and the repeat
    is named by file and line."""
    from precompute.__main__ import main
    from tests.support.authors_files import GPT_ROWS, NEW, write_csv

    root = make_clone(tmp_path)
    write_csv(root / CLOSED, NEW, [GPT_ROWS[0], GPT_ROWS[1],
                                   dict(GPT_ROWS[1], response_pert="A different reply.", delta_bleu="-12.0")])
    out = tmp_path / "out.duckdb"
    assert main(["import-authors", str(root), "--store", str(out), "--model", "gpt-5.4", "--no-recompute"]) == 0
    got = capsys.readouterr()
    assert "1 repeated row(s)" in got.err
    rep = json.loads(got.out)["models"]["gpt-5.4"]["repeated_rows"]
    assert rep["count"] == 1 and rep["examples"] == [{"row": f"{CLOSED}:4", "first": f"{CLOSED}:3"}]
    with open_store(out) as st:
        rid = st.run_origins().iloc[0]["run_id"]
        assert len(st.imported_rows(rid)) == 3
        d = st.deltas(kept_only=False, run_ids=[rid], axes=("bleu@authors",))
        assert sorted(d["delta"]) == [-58.0, 0.0]  # the first row's value, not the repeat's


def test_folders_outside_the_authors_layout_are_listed_never_passed_over_silently(tmp_path, capsys):
    from precompute.__main__ import main
    from tests.support.authors_files import GPT_ROWS, NEW, write_csv

    root = make_clone(tmp_path)
    write_csv(root / "results/spacing/run_multi_alpaca_latest/full_results_all_models.csv", NEW, GPT_ROWS)
    write_csv(root / "results/tone/run_multi_alpaca_20260101_000000/full_results_all_models.csv", NEW, GPT_ROWS)
    (root / "results/spacing/run_multi_alpaca_20260109_000000").mkdir()
    out = tmp_path / "out.duckdb"
    assert main(["import-authors", str(root), "--store", str(out), "--model", "gpt-5.4", "--no-recompute"]) == 0
    got = capsys.readouterr()
    passed = {p["path"]: p["reason"] for p in json.loads(got.out)["passed_over"]}
    assert passed == {
        "results/spacing/run_multi_alpaca_latest": "not a run folder of the authors' layout (run_multi_<dataset>_"
                                                   "<YYYYMMDD>_<HHMMSS>)",
        "results/tone": "not a style the importer knows (politeness, spacing, punctuation, letter_case, "
                        "length_variation, inter_vs_imper, closed_models)",
        "results/spacing/run_multi_alpaca_20260109_000000": "no results file (full_results_all_models.csv or "
                                                            "*_results.csv)"}
    assert "3 folder(s) passed over" in got.err


def test_a_dangling_link_or_a_fifo_is_named_never_read_blocking(tmp_path):
    import os

    root = make_clone(tmp_path)
    (root / CLOSED).unlink()
    (root / CLOSED).symlink_to(root / "results/nothing-here.csv")  # inside the clone, no such file
    src = next(s for s in discover(root) if s.rel == CLOSED)
    with pytest.raises(AuthorsFormatError, match=rf"^{CLOSED}: cannot be read"):
        read_rows(src)
    (root / CLOSED).unlink()
    os.mkfifo(root / CLOSED)  # a read would wait forever for a writer
    src = next(s for s in discover(root) if s.rel == CLOSED)
    with pytest.raises(AuthorsFormatError, match=rf"^{CLOSED}: not a regular file"):
        read_rows(src)
