"""Audit of the Δ-MR mirroring judge: agreement with the offline heuristic and with the user's own labels.

SAGO (arXiv 2610.01428) §Axes decides social-register mirroring with an LLM judge and reports that
10% of the judge calls were checked by hand. sago stores every judge answer next to the offline
heuristic's verdict (``mirroring_verdicts``); this module measures how often they agree. Agreement
is Cohen's κ (chance-corrected) and the 2×2 confusion table, both from scikit-learn
(``sklearn.metrics.cohen_kappa_score`` / ``confusion_matrix``). Pure functions over the frame
``Store.mirroring_examples`` returns; nothing here touches the store or Streamlit.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sago_engine.seeds import stable_hash

#: Share of judge calls the paper checked by hand (SAGO §Axes): the size of the audit sample.
AUDIT_SHARE = 0.10
#: Tag hashed with each call's key to order the audit sample (``seeds.stable_hash``).
AUDIT_SEED = "sago judge audit v1"
#: Verdict codes: 1 = the reply mirrors the variant's register ("YES"), 0 = it does not ("NO").
YES, NO = 1, 0
KEY = ("run_id", "variant_id", "response_of")


def agreement(a, b, names: tuple[str, str] = ("a", "b")) -> dict:
    """Cohen's κ and the 2×2 confusion table of two raters' 0/1 verdicts on the same items.

    Args:
        a, b: equal-length sequences of 0/1 (NaN / None items are dropped pairwise).
        names: row and column titles of the confusion table.
    Returns:
        ``{"n", "agree" (share of equal verdicts, in [0, 1]), "kappa" (in [−1, 1]), "reason"
        (why κ is NaN, else ""), "confusion"}``; confusion is a 2×2 DataFrame of counts, rows
        ``<names[0]> YES/NO``, columns ``<names[1]> YES/NO`` (sklearn ``confusion_matrix`` with
        labels [1, 0]). κ is NaN with a reason for no items, or when both raters gave the same
        single answer throughout (chance agreement is 1: κ = 0/0).
    Raises:
        ValueError: a verdict is not 0 or 1, or the lengths differ.
    Source: Cohen (1960); ``sklearn.metrics.cohen_kappa_score``.
    """
    from sklearn.metrics import cohen_kappa_score, confusion_matrix

    x = pd.to_numeric(pd.Series(list(a), dtype=object), errors="coerce")
    y = pd.to_numeric(pd.Series(list(b), dtype=object), errors="coerce")
    if len(x) != len(y):
        raise ValueError(f"raters have {len(x)} and {len(y)} verdicts")
    ok = x.notna() & y.notna()
    x, y = x[ok].astype(int).to_numpy(), y[ok].astype(int).to_numpy()
    if not (np.isin(x, (0, 1)).all() and np.isin(y, (0, 1)).all()):
        raise ValueError("verdicts must be 0 or 1")
    rows = [f"{names[0]} YES", f"{names[0]} NO"]
    cols = [f"{names[1]} YES", f"{names[1]} NO"]
    n = len(x)
    if n == 0:
        return {"n": 0, "agree": float("nan"), "kappa": float("nan"), "reason": "no items rated by both",
                "confusion": pd.DataFrame(np.zeros((2, 2), dtype=int), index=rows, columns=cols)}
    cm = confusion_matrix(x, y, labels=[YES, NO])
    agree = float(np.mean(x == y))
    p_yes_x, p_yes_y = float(np.mean(x == YES)), float(np.mean(y == YES))
    chance = p_yes_x * p_yes_y + (1 - p_yes_x) * (1 - p_yes_y)
    if chance >= 1.0:
        kappa, reason = float("nan"), "both raters gave one and the same answer to every item (κ = 0/0)"
    else:
        kappa, reason = float(cohen_kappa_score(x, y, labels=[YES, NO])), ""
    return {"n": n, "agree": agree, "kappa": kappa, "reason": reason,
            "confusion": pd.DataFrame(cm, index=rows, columns=cols)}


def judged(examples: pd.DataFrame) -> pd.DataFrame:
    """The calls where the judge gave a usable verdict (``verdict`` not NULL)."""
    return examples[examples["verdict"].notna()]


def judge_vs_heuristic(examples: pd.DataFrame) -> dict:
    """Agreement of the LLM judge with the offline heuristic over all usable judge calls.

    Args:
        examples: ``Store.mirroring_examples`` (verdict 1/0/NULL, heuristic_verdict 1/0, model, …).
    Returns:
        ``agreement(judge, heuristic)`` plus ``n_calls`` (all rows), ``n_unusable`` (no usable
        judge answer: unparsed or an error) and ``per_model`` (model, n, agree, kappa, reason).
    """
    j = judged(examples)
    out = agreement(j["verdict"], j["heuristic_verdict"], ("judge", "heuristic"))
    per = []
    for m, g in j.groupby("model", sort=True):
        r = agreement(g["verdict"], g["heuristic_verdict"])
        per.append({"model": m, "n": r["n"], "agree": r["agree"], "kappa": r["kappa"], "reason": r["reason"]})
    out["per_model"] = pd.DataFrame(per, columns=["model", "n", "agree", "kappa", "reason"])
    out["n_calls"] = int(len(examples))
    out["n_unusable"] = int(len(examples) - len(j))
    return out


def disagreements(examples: pd.DataFrame) -> pd.DataFrame:
    """Usable judge calls whose verdict differs from the heuristic's, with the texts to read them by.

    Returns model, dataset, subtype, strength, response_of, variant_prompt, response, raw (the
    judge's answer), verdict, heuristic_verdict, run_id, variant_id — in the input's order.
    """
    j = judged(examples)
    d = j[j["verdict"].astype(int) != j["heuristic_verdict"].astype(int)]
    return d[["model", "dataset", "subtype", "strength", "response_of", "variant_prompt", "response", "raw",
              "verdict", "heuristic_verdict", "run_id", "variant_id"]].reset_index(drop=True)


def audit_sample(examples: pd.DataFrame, share: float = AUDIT_SHARE, seed: str = AUDIT_SEED) -> pd.DataFrame:
    """A seeded sample of ⌈share · n⌉ of the n usable judge calls, for hand checking (the paper checked 10%).

    Each call is ordered by ``seeds.stable_hash(seed, run_id, variant_id, response_of)`` and the
    first ⌈share · n⌉ are taken: the same store gives the same sample on every machine, and a
    call keeps its place when other calls are added. Returns the sampled rows (all columns) with
    ``order`` (0 = first to label), sorted by it.
    Raises ValueError unless 0 < share ≤ 1.
    """
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], got {share}")
    j = judged(examples)
    if j.empty:
        return j.assign(order=pd.Series(dtype="int64"))
    keys = [stable_hash(seed, str(r), str(v), str(o)) for r, v, o in zip(j["run_id"], j["variant_id"], j["response_of"])]
    k = int(math.ceil(share * len(j)))
    out = j.assign(_h=keys).sort_values("_h").head(k).drop(columns="_h")
    return out.assign(order=np.arange(len(out))).reset_index(drop=True)


def label_agreement(examples: pd.DataFrame, labels: pd.DataFrame) -> dict:
    """The user's hand labels against the judge and against the heuristic.

    Args:
        examples: ``Store.mirroring_examples``.
        labels: ``store.labels.read_labels`` (run_id, variant_id, response_of, label).
    Returns:
        ``{"n_labelled", "vs_judge": agreement(user, judge), "vs_heuristic": agreement(user,
        heuristic)}``; a label whose call is not in ``examples`` is ignored, and calls without a
        usable judge verdict count only against the heuristic.
    """
    m = examples.merge(labels[list(KEY) + ["label"]], on=list(KEY), how="inner")
    return {"n_labelled": int(len(m)),
            "vs_judge": agreement(m["label"], m["verdict"], ("you", "judge")),
            "vs_heuristic": agreement(m["label"], m["heuristic_verdict"], ("you", "heuristic"))}
