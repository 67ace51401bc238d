"""Breaks and repairs on Worst cases (sago_engine.views.worst.change_kind / pair_changes, the rankings' change filter):
hand-written replies classified, a store whose one prompt has a broken base reply ranked with and without repairs,
blank replies labelled, long words wrapped."""

from __future__ import annotations

import pandas as pd
import pytest

from sago_engine.store import open_store
from sago_engine.views import worst
from sago_engine.views.detail import NO_REPLY
from tests.support.factories import make_store

ANSWER = "The capital of France is Paris, on the Seine, with about two million people in the city proper."
OTHER = "Paris is the capital of France."
STUTTER = "Ellelelelelelelelelelelelelelelelelelelelelelelelelelelelelelelelelelelelelelelelelelelelelelele"
LOOP = "The Red Cross " * 12
PROMPT = "What is the capital of France?"


@pytest.mark.parametrize("base_kind,variant_kind,differs,want", [
    ("", "", True, worst.BREAK),        # an answer changed
    ("", "loop", True, worst.BREAK),    # an answer turned into no answer
    ("", "", False, ""),                # the same answer
    ("loop", "", True, worst.REPAIR),   # no answer turned into one
    ("loop", "salad", True, ""),        # no answer either way
    ("echo", "echo", False, ""),
])
def test_change_kind(base_kind, variant_kind, differs, want):
    assert worst.change_kind(base_kind, variant_kind, differs) == want


def test_pair_changes_on_hand_written_replies():
    rows = [("r", "p1", None, ANSWER), ("r", "p1", "p1/same", ANSWER), ("r", "p1", "p1/other", OTHER),
            ("r", "p1", "p1/loop", LOOP), ("r", "p2", None, STUTTER), ("r", "p2", "p2/fixed", OTHER),
            ("r", "p2", "p2/still", LOOP), ("r", "p2", "p2/error", None), ("s", "p1", "p1/other", OTHER)]
    replies = pd.DataFrame(rows, columns=["run_id", "prompt_id", "variant_id", "response"]).assign(prompt=PROMPT)
    got = worst.pair_changes(replies)
    # run s has no base reply for p1: nothing to compare, no row
    assert dict(zip(zip(got["run_id"], got["variant_id"]), got["change"])) == {
        ("r", "p1/same"): "", ("r", "p1/other"): "break", ("r", "p1/loop"): "break",
        ("r", "p2/fixed"): "repair", ("r", "p2/still"): "", ("r", "p2/error"): ""}
    assert worst.pair_changes(replies.iloc[:0]).empty


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    """model-a's base reply to truthfulqa:0 is "Ellelele…" (its variants answer); every other base reply is an answer
    that every variant changes, except v0 of each prompt, which repeats it."""
    p = make_store(tmp_path_factory.mktemp("changes") / "c.duckdb", n_prompts=3, n_variants=3, seed=11)
    with open_store(p, read_only=False) as st:
        rows = []
        for r in st.runs().itertuples():
            for v in st.variants().itertuples():
                broken = r.model == "model-a" and v.prompt_id == "truthfulqa:0"
                base = STUTTER if broken else f"An answer to {v.prompt_id} by {r.model}."
                if v.variant_id.endswith("/v0"):
                    rows.append({"response_id": f"{r.run_id}/{v.prompt_id}", "run_id": r.run_id,
                                 "prompt_id": v.prompt_id, "variant_id": None, "response": base})
                text = base if v.variant_id.endswith("/v0") and not broken else f"Another answer to {v.variant_id}."
                rows.append({"response_id": f"{r.run_id}/{v.variant_id}", "run_id": r.run_id,
                             "prompt_id": v.prompt_id, "variant_id": v.variant_id, "response": text})
        st.insert_df("responses", pd.DataFrame(rows))
    return p


def test_rankings_keep_breaks_or_repairs_before_the_limit(store_path):
    with open_store(store_path) as st:
        allp = worst.worst_cases(st, None, axis="bleu", by="prompt", limit=50)
        breaks = worst.worst_cases(st, None, axis="bleu", by="prompt", change="breaks", limit=50)
        repairs = worst.worst_cases(st, None, axis="bleu", by="prompt", change="repairs", limit=1)
        vrep = worst.worst_cases(st, None, axis="bleu", by="variant", change="repairs", limit=50)
        vbrk = worst.worst_cases(st, None, axis="bleu", by="variant", change="breaks", limit=50)
        vall = worst.worst_cases(st, None, axis="bleu", by="variant", limit=50)
        with pytest.raises(ValueError, match="unknown change filter"):
            worst.worst_cases(st, None, axis="bleu", change="fixes")
    broken = ("model-a", "truthfulqa:0")
    keys = list(zip(allp["model"], allp["prompt_id"]))
    assert len(allp) == 12 and broken in keys
    assert allp.set_index(["model", "prompt_id"]).loc[broken, "change"] == "repair"
    assert broken not in set(zip(breaks["model"], breaks["prompt_id"])) and len(breaks) == 11
    assert (breaks["change"] == "break").all() and list(breaks["rank"]) == list(range(1, 12))
    # the one repair, whatever its place in the whole ranking, with rank 1 among repairs
    assert list(zip(repairs["model"], repairs["prompt_id"])) == [broken] and list(repairs["rank"]) == [1]
    assert repairs["base_kind"].iloc[0] == "loop"
    assert set(vrep["variant_id"]) == {f"{broken[1]}/v{j}" for j in range(3)} and (vrep["model"] == "model-a").all()
    # variants that repeat an answer are neither: left out of breaks, kept under "all"
    assert len(vbrk) + len(vrep) + (vall["change"] == "").sum() == len(vall) == 36
    assert not vbrk["variant_id"].str.endswith("/v0").any()


def test_blank_replies_are_labelled_and_long_words_wrap():
    assert worst.reply_text("") == worst.EMPTY_REPLY == worst.reply_text(" \t\n")
    assert worst.reply_text(None) == NO_REPLY and worst.reply_text("ok") == "ok"
    assert worst.EMPTY_REPLY in worst.reply_diff_html("", "  ")
    assert worst.EMPTY_REPLY not in worst.reply_diff_html("", "x")
    assert "overflow-wrap:anywhere" in worst.reply_diff_html("a", "b")


def _finish(base, variant, base_error=None, variant_error=None):
    return {"base_finish": base, "variant_finish": variant, "base_error": base_error, "variant_error": variant_error}


def test_replies_cut_at_the_cap_are_named_and_two_cut_replies_are_warned_about():
    both = _finish("length", "length")
    assert worst.cut_cell(both) == "both"
    assert "Both replies stopped at the reply cap" in worst.cut_note(both)
    assert "Δ-MR's length rule compares two replies cut to the same number of tokens" in worst.cut_note(both)
    assert worst.cut_cell(_finish("length", "stop")) == "base"
    assert worst.cut_note(_finish("stop", "length")).startswith("The variant reply stopped at the reply cap")
    # an error is no cut reply (as responses.flags' hit_cap); a store read gives NaN for "no error"
    assert worst.cut_cell(_finish("length", "length", variant_error="timeout")) == "base"
    assert worst.cut_cell(_finish("length", "length", float("nan"), float("nan"))) == "both"
    assert worst.cut_cell(_finish("stop", None)) == worst.cut_note(_finish("stop", None)) == ""


def test_worst_cases_page_marks_pairs_whose_two_replies_were_cut(tiny_store):
    """tiny-random at a 6-token cap: its replies stop at the cap, so the worst rows say so (column and warning)."""
    from tests.support.apptest import open_page
    from tests.support.rendered import all_tables

    at = open_page(tiny_store, "worst")
    assert not at.exception, at.exception
    table = next(t for t in all_tables(at) if "cut" in t.columns)
    assert (table["cut"] == "both").any(), table["cut"].tolist()
    assert any("Both replies stopped at the reply cap" in w.value for w in at.warning)
