"""Accuracy-under-rephrasing tables as the pages show them: shares as percentages, flips, McNemar p, the peers'
PDR and consistency rate — a different scale from SGS, said in every caption."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import data, exports
from sago_engine.correctness import views
from sago_engine.filters import Filters
from sago_engine.store import Store

_PERCENT = ("base_acc", "base_acc_pairs", "var_acc", "flip_rw", "flip_wr", "pdr", "consistency")
_NAMES = {"n_prompts": "prompts", "base_acc": "base acc, per prompt", "n_pairs": "pairs",
          "base_acc_pairs": "base acc, over pairs", "var_acc": "variant acc, over pairs",
          "change": "change (variant − base, pairs)", "flip_rw": "right→wrong", "flip_wr": "wrong→right",
          "mcnemar_p": "McNemar p", "pdr": "PromptBench PDR", "consistency": "SCORE consistency"}
CAPTION = ("Accuracy is a share of replies that are right (0–100 %), not an SGS: a different scale from the six axes. "
           "A pair is a variant's reply with its base reply, both decided. Base acc, per prompt: each prompt's base "
           "reply counted once; base acc and variant acc over pairs: each base reply counted once per paired variant. "
           "Change = variant acc − base acc, over pairs; PDR = 1 − variant acc / base acc, over pairs (PromptBench). "
           "Right→wrong: of the pairs whose base reply is right, the share whose variant's reply is wrong; "
           "McNemar's exact test on the two flip counts. Consistency: agreeing pairs of a prompt's verdicts "
           "(lm-eval SCORE). Undecided and unavailable replies are left out.")


def shown(acc: pd.DataFrame, keys: tuple[str, ...]) -> pd.DataFrame:
    """``compare.accuracy_table`` rows formatted for the screen (percentages, signed change, p to 3 digits)."""
    out = acc.assign(**{c: acc[c].map(lambda v: f"{v:.1%}" if v == v else "n/a") for c in _PERCENT},
                     change=acc["change"].map(lambda v: f"{v:+.1%}" if v == v else "n/a"),
                     mcnemar_p=acc["mcnemar_p"].map(lambda v: f"{v:.3g}"))
    return out[[*keys, *_NAMES]].rename(columns=_NAMES)


def table(acc: pd.DataFrame, keys: tuple[str, ...], key: str, filename: str, *, caption: bool = True) -> None:
    """The accuracy table with its CSV (numbers in their own columns) and, unless ``caption`` is False (a page
    that shows several accuracy tables captions the last one only), ``CAPTION``."""
    exports.table(acc, key, filename, show=shown(acc, keys))
    if caption:
        st.caption(CAPTION)


def section(f: Filters, keys: tuple[str, ...], key: str, filename: str, title: str) -> None:
    """A subheader and the accuracy table grouped by ``keys``, only when the store holds correctness verdicts."""
    if not data.query(Store.has_correctness):
        return
    acc = data.with_store(views.breakdown_view, f, by=keys)
    if len(acc):
        st.subheader(title)
        table(acc, keys, key, filename)


def scorer_choice(f: Filters) -> None:
    """Method choices' section: accuracy per model under each stored correctness scorer (contains / exact / F1 /
    judge), when some dataset holds two; else a line naming the command that stores them."""
    if not data.query(Store.has_correctness):
        return
    st.header("Correctness: which scorer decides right or wrong?")
    t = data.with_store(views.scorer_choice_view, f)
    if t.empty:
        st.info("Each dataset holds one scorer's verdicts. `python -m precompute rescore STORE --correctness "
                "--all-scorers` stores contains, exact and F1 side by side for the short-answer datasets.")
        return
    exports.table(t, "methods_scorers", "sago_method_correctness_scorers.csv", show=shown(t, ("scorer", "datasets",
                                                                                             "model")))
    st.caption("The same replies under each scorer (docs/METHOD.md, \"Correctness\"): contains = an accepted answer "
               "occurs in the reply (the default for sentence replies), exact = the whole reply is an answer, F1 = "
               "token overlap ≥ 0.5. " + CAPTION)
