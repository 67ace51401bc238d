"""A small store with references and hand-written replies whose correctness is known, for the
correctness tests (rescore, comparisons, the quadrant page). ``expected_verdicts`` says by hand what
each reply's default-scorer verdict is, so tests compare against it, never against the module."""

from __future__ import annotations

import json

import pandas as pd

from sago_engine.store import open_store
from tests.support.factories import make_store

MODELS = ("model-a", "model-b")
DATASETS = ("truthfulqa", "nq_open", "alpaca")
N_PROMPTS, N_VARIANTS = 4, 3

#: nq_open:i → accepted answers
NQ_REFS = {0: ["Paris"], 1: ["1998", "in 1996"], 2: ["Andrew Johnson", "Johnson"], 3: ["ten"]}
#: truthfulqa:i → (correct answers, incorrect answers); meta sits in the dataset file only (filled by the rescore)
TQA = {i: ([f"Nothing happens in case {i}"], [f"You will die in case {i}"]) for i in range(N_PROMPTS)}
#: (model, dataset, prompt index, variant index or None for the base) → reply, verdict under the default
#: scorer; replies not listed are right on the base and right on every variant
WRONG_NQ = "I do not know, maybe London."


def reply(model: str, dataset: str, i: int, j: int | None) -> tuple[str, str | None, str]:
    """(reply text, error, expected verdict) of one reply, by hand.

    model-a: on nq_open right everywhere except prompt 1 (base right, variants 0 and 1 wrong: two
    right→wrong flips) and prompt 3 (base wrong, variant 2 right: one wrong→right flip); on
    truthfulqa prompt 0's variant 0 names an incorrect answer, prompt 1 says neither, prompt 2's
    base is an empty reply (unavailable). model-b: nq_open base wrong on prompts 0 and 1, every
    variant right; variant 1 of prompt 2 an error (unavailable).
    """
    if dataset == "alpaca":
        return f"Here is a poem {i}.", None, "unavailable"
    if dataset == "nq_open":
        good = f"The answer is {NQ_REFS[i][0]}."
        if model == "model-a":
            if i == 1 and j in (0, 1):
                return WRONG_NQ, None, "wrong"
            if i == 3 and j != 2:
                return WRONG_NQ, None, "wrong"
            return good, None, "correct"
        if j is None and i in (0, 1):
            return WRONG_NQ, None, "wrong"
        if i == 2 and j == 1:
            return "", "timeout", "unavailable"
        return good, None, "correct"
    right, wrong = TQA[i][0][0], TQA[i][1][0]
    if model == "model-a" and i == 0 and j == 0:
        return f"{wrong}.", None, "wrong"
    if model == "model-a" and i == 1:
        return "I have no comment.", None, "undecided"
    if model == "model-a" and i == 2 and j is None:
        return "   ", None, "unavailable"
    return f"{right}.", None, "correct"


def expected_verdicts() -> pd.DataFrame:
    """One row per reply (base, variants, and one base repeat of model-a on nq_open:0): run_id,
    prompt_id, variant_id, repeat, response, error, verdict (the default scorer's, by hand)."""
    rows = []
    for m in MODELS:
        for d in DATASETS:
            for i in range(N_PROMPTS):
                for j in (None, *range(N_VARIANTS)):
                    text, err, verdict = reply(m, d, i, j)
                    pid = f"{d}:{i}"
                    rows.append({"run_id": f"run-{m}", "prompt_id": pid, "variant_id": None if j is None else f"{pid}/v{j}",
                                 "repeat": None, "response": text, "error": err, "verdict": verdict,
                                 "response_id": f"{m}|{pid}|{'base' if j is None else j}"})
    rows.append({"run_id": "run-model-a", "prompt_id": "nq_open:0", "variant_id": None, "repeat": 1,
                 "response": WRONG_NQ, "error": None, "verdict": "wrong", "response_id": "model-a|nq_open:0|rep1"})
    return pd.DataFrame(rows)


def write_dataset_files(folder) -> None:
    """The truthfulqa.jsonl the rescore fills ``prompts.meta`` from (prompt texts as ``make_store`` writes them)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "truthfulqa.jsonl", "w", encoding="utf-8") as fh:
        for i, (good, bad) in TQA.items():
            fh.write(json.dumps({"id": str(i), "prompt": f"Question {i} of truthfulqa?", "reference": good,
                                 "meta": {"incorrect_answers": bad}}) + "\n")


def build(path, run_fields: dict | None = None):
    """``make_store`` with references, the replies of ``expected_verdicts`` and one base repeat."""
    make_store(path, models=MODELS, datasets=DATASETS, n_prompts=N_PROMPTS, n_variants=N_VARIANTS, seed=3,
               run_fields=run_fields)
    exp = expected_verdicts()
    refs = {f"nq_open:{i}": r for i, r in NQ_REFS.items()}
    refs.update({f"truthfulqa:{i}": good for i, (good, _) in TQA.items()})
    refs.update({f"alpaca:{i}": f"A poem about case {i}." for i in range(N_PROMPTS)})
    with open_store(path, read_only=False) as st:
        for pid, ref in refs.items():
            st.con.execute("UPDATE prompts SET reference = ? WHERE prompt_id = ?", [json.dumps(ref), pid])
        resp = exp[exp["repeat"].isna()][["response_id", "run_id", "prompt_id", "variant_id", "response", "error"]]
        st.insert_df("responses", resp.reset_index(drop=True))
        rep = exp[exp["repeat"].notna()][["response_id", "run_id", "prompt_id", "repeat", "response", "error"]]
        st.insert_df("base_repeats", rep.astype({"repeat": int}).reset_index(drop=True))
    return path
