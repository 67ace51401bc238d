"""Replies that are not answers (sago_engine.external.degenerate): loops, echoes and salad by hand-made replies,
counted per model, left out as a Method choice, and read from a store with the text each reply answers."""

from __future__ import annotations

import pandas as pd
import pytest

from sago_engine.external import degenerate as dg
from sago_engine.filters import Filters
from sago_engine.store import open_store
from sago_engine.views import method_choices as mc
from tests.support.authors_files import SALAD
from tests.support.factories import make_store

PROMPT = "What are the three primary colors?"
#: replies of the demo store's gemma-3-270m and smollm2-135m (shortened where the cap cut them)
LOOP_ECHO = "\n\nWhat are the three primary colors?\n\nWhat are the three primary colors?\n\nWhat are the three primary"
LOOP_CYCLE = ("The capital of France is Paris.\n\nWhat is the capital of France?\n\nThe capital of France is Paris.\n\n"
              "What is the capital of France?\n\nThe capital of France is Paris.")
RED_CROSS = "The Red Cross " * 12
ANSWER = ("The three primary colors are red, yellow and blue. Mixing two of them gives a secondary color: orange, "
          "green or purple.")
QUOTING = "What are the three primary colors? In painting they are red, yellow and blue; in light, red, green, blue."


def test_repeat_share_by_hand():
    # "a b c d a b c d a b": 4-grams abcd bcda cdab dabc abcd bcda cdab → 7 grams, 4 distinct, 3 repeat an earlier one
    assert dg.repeat_share("a b c d a b c d a b") == pytest.approx(3 / 7)
    assert dg.repeat_share("only three words") == 0.0


@pytest.mark.parametrize("reply,prompt,kind", [
    (LOOP_ECHO, PROMPT, "loop"),  # the prompt four times: a loop first
    (LOOP_CYCLE, "What is the capital of France?", "loop"),
    (RED_CROSS, "Which organisation won the Nobel Peace Prize three times?", "loop"),
    ("What are the three primary colors?\nWhat are the three primary colors?", PROMPT, "echo"),  # too short to loop
    ("What are the three primary colors?", PROMPT, "echo"),  # the prompt as the whole reply
    (SALAD, PROMPT, "salad"),
    (ANSWER, PROMPT, ""),
    (QUOTING, PROMPT, ""),  # quotes the request once, then answers
    (None, PROMPT, ""),
    ("Ell" + "el" * 40, PROMPT, "loop"),  # smollm2's base reply on the demo store: one word that stutters
    ("The answer is: 1" + "0" * 42, PROMPT, "loop"),
    ("Haha, hahaha! It is red, yellow and blue.", PROMPT, ""),  # a short stutter in an answer
    ("The year 1000000 and the key ABABABAB.", PROMPT, ""),
])
def test_reply_kind(reply, prompt, kind):
    assert dg.reply_kind(reply, prompt) == kind


def test_stutter_share_by_hand():
    # "Ellelelele": "le" × 4 from index 1 is 8 characters, under STUTTER_MIN_CHARS; × 8 it is 16 of 17
    assert dg.stutter_share("Ellelelele") == 0.0
    assert dg.stutter_share("E" + "le" * 8) == pytest.approx(16 / 17)
    assert dg.stutter_share(None) == 0.0 and dg.stutter_share("") == 0.0


def test_counts_per_model_and_role():
    replies = pd.DataFrame({
        "model": ["g", "g", "g", "s", "s"], "variant_id": [None, "v1", None, None, "v1"],
        "response": [LOOP_ECHO, RED_CROSS, ANSWER, ANSWER, SALAD], "prompt": [PROMPT] * 5})
    flagged = dg.reply_flags(replies)
    assert list(flagged["flag"]) == ["degenerate:loop", "degenerate:loop", "", "", "degenerate:salad"]
    c = dg.degenerate_counts(flagged).set_index(["model", "role"])
    assert c.loc[("g", "base"), ["replies", "degenerate", "loop"]].tolist() == [2, 1, 1]
    assert c.loc[("g", "variant"), "degenerate"] == 1 and c.loc[("s", "base"), "degenerate"] == 0
    assert c.loc[("s", "variant"), "salad"] == 1


def test_method_choice_leaves_out_prompts_whose_base_reply_is_no_answer():
    scores = pd.DataFrame({"run_id": ["r1"] * 3 + ["r2"] * 3, "model": ["g"] * 3 + ["q"] * 3, "dataset": "d",
                           "prompt_id": ["p1", "p2", "p3"] * 2, "axis": "bleu", "s": [0.9, 0.1, 0.2, 0.3, 0.4, 0.5]})
    flags = pd.DataFrame({"run_id": ["r1", "r1", "r1", "r2", "r2", "r2"], "prompt_id": ["p1", "p2", "p3"] * 2,
                          "kind": ["loop", "", "", "", "echo", ""]})
    out = mc.reference_option_scores(scores, flags)
    kept = out[out["option"] == mc.ANSWERS_ONLY]
    assert sorted(zip(kept["model"], kept["prompt_id"])) == [("g", "p2"), ("g", "p3"), ("q", "p1"), ("q", "p3")]
    assert len(out[out["option"] == mc.ALL_PROMPTS]) == 6
    sgs = kept.groupby("model")["s"].mean()
    assert sgs["g"] == pytest.approx(0.15) and sgs["q"] == pytest.approx(0.4)  # g's order moves: 0.4 → 0.15


def test_store_reply_texts_pairs_each_reply_with_what_it_answers(tmp_path):
    p = make_store(tmp_path / "r.duckdb", n_prompts=2, n_variants=2, seed=3)
    with open_store(p, read_only=False) as st:
        runs, var, prm = st.runs(), st.variants(), st.prompts()
        rows = []
        for r in runs.itertuples():
            for q in prm.itertuples():
                rows.append({"response_id": f"{r.run_id}/{q.prompt_id}", "run_id": r.run_id, "prompt_id": q.prompt_id,
                             "variant_id": None, "response": f"{q.text} {q.text}"})
                for v in var[var["prompt_id"] == q.prompt_id].itertuples():
                    rows.append({"response_id": f"{r.run_id}/{v.variant_id}", "run_id": r.run_id,
                                 "prompt_id": q.prompt_id, "variant_id": v.variant_id, "response": "An answer."})
        st.insert_df("responses", pd.DataFrame(rows))
    with open_store(p) as st:
        allr = st.reply_texts()
        base = st.reply_texts(base_only=True)
        one = st.reply_texts(Filters(models=(runs["model"].iloc[0],), datasets=(prm["dataset"].iloc[0],)))
    assert len(allr) == len(rows) and base["variant_id"].isna().all() and len(base) == len(runs) * len(prm)
    merged = allr.merge(var[["variant_id", "text"]], on="variant_id", how="left")
    assert (merged.loc[merged["variant_id"].notna(), "prompt"] == merged.loc[merged["variant_id"].notna(), "text"]).all()
    b = base.merge(prm[["prompt_id", "text"]], on="prompt_id")
    assert (b["prompt"] == b["text"]).all()
    assert set(one["model"]) == {runs["model"].iloc[0]} and set(one["dataset"]) == {prm["dataset"].iloc[0]}
    kinds = dg.reply_flags(base)["kind"]
    assert set(kinds) <= {"echo", "loop"} and (kinds != "").all()  # every base reply restates its prompt twice
