"""Worst cases (Store.prompt_ranking / variant_ranking / reply_pairs, sago_engine.views.worst): ranks equal the scores the
store computes, the reply filters and the search select what they say, the search string is data, never SQL."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sago_engine.filters import Filters
from sago_engine.store import open_store
from sago_engine.store.reads.worst import MAX_ROWS, MAX_SEARCH
from sago_engine.views import worst
from sago_engine.views.detail import labelled_variants
from tests.support.factories import make_store

KNOWN = "The capital is Paris, 100%_sure"


def _add_replies(path):
    """Base and variant replies for every run and prompt: variant v0 repeats the base reply, the others differ;
    one reply holds ``KNOWN``; one pair has a rendered request; prompt truthfulqa:1 gets a second v1-like variant."""
    with open_store(path, read_only=False) as st:
        runs = st.runs()
        extra = st.variants(prompt_id="truthfulqa:1")
        dup = extra[extra["variant_id"] == "truthfulqa:1/v1"].assign(variant_id="truthfulqa:1/v1b", text="Q dup")
        st.insert_df("variants", dup[["variant_id", "prompt_id", "family", "subtype", "strength", "position", "text",
                                      "seed", "kept", "semantic_score", "passes_filter"]])
        var = st.variants()
        rows, deltas = [], []
        for r in runs.itertuples():
            for pid in sorted(var["prompt_id"].unique()):
                base = f"Answer to {pid} from {r.model}."
                rows.append({"response_id": f"{r.run_id}/{pid}", "run_id": r.run_id, "prompt_id": pid,
                             "variant_id": None, "response": base, "n_tokens": 7, "latency_s": 0.5})
                for v in var[var["prompt_id"] == pid].itertuples():
                    text = base if v.variant_id.endswith("/v0") else f"Other answer to {v.variant_id}."
                    if v.variant_id == "nq_open:2/v2" and r.model == "model-b":
                        text = KNOWN
                    rows.append({"response_id": f"{r.run_id}/{v.variant_id}", "run_id": r.run_id, "prompt_id": pid,
                                 "variant_id": v.variant_id, "response": text, "n_tokens": 9, "latency_s": 0.25,
                                 "request": "<|user|>Q<|assistant|>" if v.variant_id == "nq_open:2/v2" else None})
                    if v.variant_id == "truthfulqa:1/v1b":
                        for a in ("cos", "bleu", "bert", "prob", "ent", "mr"):
                            deltas.append((r.run_id, "truthfulqa", pid, v.variant_id, a, -0.3, -0.3, True, None, None))
        st.insert_df("responses", pd.DataFrame(rows))
        st.insert_df("deltas", pd.DataFrame(deltas, columns=["run_id", "dataset", "prompt_id", "variant_id", "axis",
                                                             "delta", "delta_norm", "available", "reason", "detector"]))
    return path


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    p = tmp_path_factory.mktemp("worst") / "w.duckdb"
    return _add_replies(make_store(p, n_prompts=4, n_variants=3, seed=5))


def test_prompt_ranking_is_the_stores_own_scores_in_order(store_path):
    f = Filters(models=("model-a",))  # truthfulqa:1 has 4 variants (ranked 4th by mean, 3rd by sum), the others 3
    with open_store(store_path) as st:
        got = worst.worst_cases(st, f, axis="bleu", by="prompt", limit=10)
        ps = st.prompt_scores(f)
    ref = ps[ps["axis"] == "bleu"].sort_values("s", ascending=False)
    assert list(got["prompt_id"]) == list(ref["prompt_id"])
    np.testing.assert_allclose(got["score"], ref["s"], rtol=1e-12)
    assert (got["rank"] == np.arange(1, len(got) + 1)).all() and set(got["model"]) == {"model-a"}
    # each prompt row shows its worst variant: the largest |Δ̃| among its variants
    with open_store(store_path) as st:
        d = st.deltas()
    d = d[(d["axis"] == "bleu") & (d["model"] == "model-a")]
    for r in got.itertuples():
        mine = d[d["prompt_id"] == r.prompt_id]
        assert abs(r.delta_norm) == pytest.approx(mine["delta_norm"].abs().max())


def test_variant_ranking_orders_by_delta(store_path):
    with open_store(store_path) as st:
        for order, key in (("abs", lambda x: -abs(x)), ("neg", lambda x: x), ("pos", lambda x: -x)):
            got = worst.worst_cases(st, Filters(models=("model-b",)), axis="prob", by="variant", order=order, limit=40)
            vals = list(got["score"])
            assert vals == sorted(vals, key=key) and len(got) == 25  # 8 prompts × 3 variants + the duplicate
            assert got["s"].isna().all()


def test_reply_filters(store_path):
    with open_store(store_path) as st:
        diff = worst.worst_cases(st, None, axis="bleu", by="variant", replies="different", limit=MAX_ROWS)
        same = worst.worst_cases(st, None, axis="bleu", by="variant", replies="unchanged", limit=MAX_ROWS)
        allv = worst.worst_cases(st, None, axis="bleu", by="variant", limit=MAX_ROWS)
        pdiff = worst.worst_cases(st, None, axis="bleu", by="prompt", replies="different", limit=MAX_ROWS)
        psame = worst.worst_cases(st, None, axis="bleu", by="prompt", replies="unchanged", limit=MAX_ROWS)
    assert len(diff) + len(same) == len(allv) > 0
    assert (diff["base_reply"] != diff["variant_reply"]).all() and diff["differs"].all()
    assert (same["base_reply"] == same["variant_reply"]).all() and same["variant_id"].str.endswith("/v0").all()
    assert len(pdiff) == 16 and psame.empty  # every prompt has a differing reply (v1, v2)
    assert (pdiff["n_different"] == pdiff["n_variants"] - 1).all()


def test_search_finds_a_known_reply_and_is_never_sql(store_path):
    with open_store(store_path) as st:
        hit = worst.worst_cases(st, None, axis="bleu", by="variant", search="  paris, 100%_SURE ", limit=10)
        assert list(hit["variant_reply"]) == [KNOWN] and hit["model"].iloc[0] == "model-b"
        assert worst.worst_cases(st, None, axis="bleu", by="variant", search="100%sure", limit=10).empty  # % is a %
        assert worst.worst_cases(st, None, axis="bleu", by="variant", search="Paris_ 1", limit=10).empty  # _ is a _
        prompt_hit = worst.worst_cases(st, None, axis="bleu", by="prompt", search="paris", limit=10)
        assert list(prompt_hit["prompt_id"]) == ["nq_open:2"] and list(prompt_hit["model"]) == ["model-b"]
        assert prompt_hit["n_variants"].iloc[0] == 3  # the score still uses every variant of the prompt
        for hostile in ("'; DROP TABLE deltas; --", "%' OR 1=1 --", "\\", "x" * 10_000):
            assert worst.worst_cases(st, None, axis="bleu", by="variant", search=hostile, limit=5).empty
        assert st.counts()["deltas"] > 0
    assert len("x" * 10_000) > MAX_SEARCH


def test_texts_request_tokens_and_labels(store_path):
    with open_store(store_path) as st:
        got = worst.worst_cases(st, None, axis="bleu", by="variant", search=KNOWN, limit=1).iloc[0]
        assert got["variant_request"] == "<|user|>Q<|assistant|>" and got["base_request"] is None
        assert worst.request_text(got["base_request"]) == worst.NOT_RECORDED
        assert (got["base_tokens"], got["variant_tokens"], got["variant_latency_s"]) == (7, 9, 0.25)
        dup = worst.worst_cases(st, Filters(datasets=("truthfulqa",)), axis="bleu", by="variant", limit=MAX_ROWS)
        detail = st.prompt_detail(Filters(datasets=("truthfulqa",)), prompt_id="truthfulqa:1")
    # a variant's label is the one the Prompts page gives it (a second variant of one (F, u, s, p) is "#2")
    page = dict(zip(*[labelled_variants(detail["variants"])[c] for c in ("variant_id", "label")]))
    mine = dup[dup["prompt_id"] == "truthfulqa:1"]
    assert {v: page[v] for v in mine["variant_id"]} == dict(zip(mine["variant_id"], mine["label"]))
    assert any(lab.endswith(" #2") for lab in mine["label"])
    assert worst.prompts_link(mine.iloc[0]) == {"dataset": "truthfulqa", "prompt": "truthfulqa:1",
                                                "variant": mine.iloc[0]["label"]}
    html = worst.reply_diff_html("a <b> c", "a <i> c")
    assert "&lt;" in html and "<del" in html and "<ins" in html and "<i>" not in html and "<b>" not in html


def test_store_without_request_column_reads_not_recorded(store_path, tmp_path):
    import shutil

    import duckdb

    old = tmp_path / "old.duckdb"
    shutil.copy(store_path, old)
    con = duckdb.connect(str(old))
    con.execute("ALTER TABLE responses DROP COLUMN request")
    con.close()
    with open_store(old) as st:
        got = worst.worst_cases(st, None, axis="bleu", by="variant", search=KNOWN, limit=1)
    assert got["variant_request"].iloc[0] is None


def test_bad_arguments_raise(store_path):
    with open_store(store_path) as st:
        for kw in ({"limit": 0}, {"limit": MAX_ROWS + 1}, {"axis": "nope"}, {"by": "model"}, {"replies": "some"},
                   {"by": "variant", "order": "up"}):
            with pytest.raises(ValueError):
                worst.worst_cases(st, None, **{"axis": "bleu", **kw})


def test_grouped_reply_diff_keeps_both_texts_and_reads_as_runs():
    from sago_engine.views.textdiff import diff_segments

    base = "The capital of France is Paris.\n\nWhat is the capital of France?"
    var = "I'm not sure if it's a city or a country.\n\nWhat is the capital of Spain?"
    g = worst.grouped_segments(diff_segments(base, var))
    assert "".join(t for o, t in g if o != "insert") == base and "".join(t for o, t in g if o != "delete") == var
    assert g[:2] == [("delete", "The capital of France is Paris"), ("insert", "I'm not sure if it's a city or a country")]
    assert g[2:] == [("equal", ".\n\nWhat is the capital of "), ("delete", "France"), ("insert", "Spain"),
                     ("equal", "?")]  # shared words stay shared
    assert not any(a[0] == b[0] for a, b in zip(g, g[1:]))  # no two neighbours of one kind


# ---------------------------------------------------------------- one folding for both sides (U7)
FOLD_TEXTS = {"truthfulqa:0": "Is İstanbul the largest city?", "truthfulqa:1": "ΕΛΛΑΔΟΣ: what is its capital?",
              "truthfulqa:2": "Order a cafe\u0301 au lait, Straße 5"}


@pytest.fixture(scope="module")
def fold_store(tmp_path_factory):
    p = make_store(tmp_path_factory.mktemp("fold") / "f.duckdb", models=("model-a",), n_prompts=3, seed=3)
    import duckdb

    con = duckdb.connect(str(p))
    for pid, text in FOLD_TEXTS.items():
        con.execute("UPDATE prompts SET text = ? WHERE prompt_id = ?", [text, pid])
    con.close()
    return p


@pytest.mark.parametrize("pid, needle", [
    # text copied from the page finds itself
    ("truthfulqa:0", "İstanbul"), ("truthfulqa:1", "ΕΛΛΑΔΟΣ"), ("truthfulqa:2", "cafe\u0301"),
    # and the same words typed another way: lower case, final sigma, composed é, ß as ss
    ("truthfulqa:0", "istanbul"), ("truthfulqa:1", "ελλαδος"), ("truthfulqa:1", "Ελλάδος".replace("ά", "α")),
    ("truthfulqa:2", "CAFÉ"), ("truthfulqa:2", "strasse"),
])
def test_u7_search_folds_case_and_normalises_both_sides_the_same_way(fold_store, pid, needle):
    with open_store(fold_store) as st:
        for by in ("prompt", "variant"):
            hit = worst.worst_cases(st, None, axis="bleu", by=by, search=needle, limit=50)
            assert set(hit["prompt_id"]) == {pid}, (by, needle)


def test_u7_every_substring_of_a_stored_text_finds_it(fold_store):
    """Any piece of a prompt a reader can select and paste finds that prompt (whole graphemes)."""
    with open_store(fold_store) as st:
        for pid, text in FOLD_TEXTS.items():
            words = text.split()
            for i in range(len(words)):
                needle = " ".join(words[i:i + 2])
                hit = worst.worst_cases(st, None, axis="bleu", by="prompt", search=needle, limit=50)
                assert pid in set(hit["prompt_id"]), needle


def test_ties_share_a_rank_and_say_how_many(store_path, tmp_path):
    """Equal scores (to 12 digits: -(0.1 + 0.2) and -0.3 are one tie) share their rank, n_tied counts the whole
    selection, and the rank is 1 + the rows strictly ahead, recomputed here from every row."""
    import shutil

    import duckdb

    p = tmp_path / "ties.duckdb"
    shutil.copy(store_path, p)
    con = duckdb.connect(str(p))
    ids = [r[0] for r in con.execute("""SELECT variant_id FROM deltas d JOIN runs r USING (run_id)
        WHERE r.model = 'model-a' AND axis = 'bleu' AND available ORDER BY variant_id LIMIT 3""").fetchall()]
    for vid, x in zip(ids, (-(0.1 + 0.2), -0.3, -0.3)):
        con.execute("""UPDATE deltas SET delta_norm = ? WHERE axis = 'bleu' AND variant_id = ?
                       AND run_id IN (SELECT run_id FROM runs WHERE model = 'model-a')""", [x, vid])
    con.close()
    f = Filters(models=("model-a",))
    with open_store(p) as st:
        full = st.variant_ranking(f, axis="bleu", order="neg", limit=MAX_ROWS)
        rows = worst.worst_cases(st, f, axis="bleu", by="variant", order="neg", limit=3)
    key = full["delta_norm"].round(12)
    assert (full["tie_rank"] == [1 + int((key < k).sum()) for k in key]).all()
    assert (full["n_tied"] == [int((key == k).sum()) for k in key]).all()
    tied = full[full["variant_id"].isin(ids)]
    assert tied["tie_rank"].nunique() == 1 and (tied["n_tied"] >= 3).all()
    assert rows["rank"].tolist() == full["tie_rank"].head(3).tolist()
    assert rows["n_tied"].tolist() == full["n_tied"].head(3).tolist()
    note = worst.tie_note(rows.assign(n_tied=[3, 3, 3], rank=[1, 1, 1], score=[-0.3] * 3))
    assert note.startswith("Ties (score equal to 12 significant digits) share a rank — rank 1: 3 rows at -0.3.")
    assert worst.tie_note(rows.assign(n_tied=1)) == ""
    with open_store(p) as st:
        pr = st.prompt_ranking(f, axis="bleu", limit=MAX_ROWS)
    pkey = (pr["sum_sq"] / pr["n"]).round(12)
    assert (pr["tie_rank"] == [1 + int((pkey > k).sum()) for k in pkey]).all()
