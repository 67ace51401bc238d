"""The authors' rows aggregated the authors' way, next to what the paper published and what the leak moves.

Per model × axis, from a store written by ``import-authors``:

* ``published``: Figure 2a (open models) / Table 1 (closed, ε = 0.05) as transcribed in
  ``sago_engine.paper``;
* ``authors_way``: their ``sgs_core`` on their rows — s_X(i) = sqrt(mean over V of (Δ/R_X)²), no
  clipping, V = every non-baseline row of prompt i over all styles and places (Form/original left
  out), NaN-skipped per axis; TruthfulQA cut to 16 prompts common to every model (``numpy``
  ``default_rng(42).choice`` over the sorted common ids, as their step 3); total = mean over all
  prompts; ``gap`` = authors_way − published;
* ``sago_released`` / ``sago_cleaned``: sago's Δ-BLEU / Δ-BERT / Δ-MR SGS of the same pairs on the
  replies as released and with the leaked prompt tail cut; ``leak_effect`` = cleaned − released.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sago_engine import paper
from sago_engine.types import AUTHORS_OPTION, AXES

TRUTHFULQA = "truthfulqa"
TRUTHFULQA_N = 16
SUBSAMPLE_SEED = 42


def truthfulqa_subsample(ids_per_model: dict[str, set[int]], n: int = TRUTHFULQA_N,
                         seed: int = SUBSAMPLE_SEED) -> dict[str, set[int]]:
    """The TruthfulQA prompt ids each model keeps under the authors' step 3: n ids drawn (without
    replacement, ``default_rng(seed)``) from the ids every model has; when fewer than n are common,
    all common ids plus, per model in name order, draws from its own other ids up to n."""
    rng = np.random.default_rng(seed)
    if not ids_per_model:
        return {}
    common = sorted(set.intersection(*ids_per_model.values()))
    if len(common) >= n:
        chosen = set(int(x) for x in rng.choice(common, size=n, replace=False))
        return {m: chosen for m in ids_per_model}
    out = {}
    for m in sorted(ids_per_model):
        pool = sorted(ids_per_model[m] - set(common))
        take = min(n - len(common), len(pool))
        extra = set(int(x) for x in rng.choice(pool, size=take, replace=False)) if take > 0 else set()
        out[m] = set(common) | extra
    return out


def _runs(st) -> pd.DataFrame:
    o = st.run_origins()
    o = o[o["origin"].map(lambda x: isinstance(x, dict))]
    return o.assign(kind=o["origin"].map(lambda x: x.get("kind")), authors_model=o["origin"].map(
        lambda x: x.get("authors_model")))


def authors_way(st) -> pd.DataFrame:
    """authors_model, axis, authors_way (total SGS their way), n_prompts — from the ``@authors`` axes."""
    runs = _runs(st)
    runs = runs[runs["kind"] == "imported"]
    axes = tuple(f"{a}@{AUTHORS_OPTION}" for a in AXES)
    s = st.prompt_scores(axes=axes)
    s = s[s["run_id"].isin(runs["run_id"])].merge(runs[["run_id", "authors_model"]], on="run_id")
    src = st.prompts()[["prompt_id", "source_id"]]
    s = s.merge(src, on="prompt_id", how="left")
    tqa = s[s["dataset"] == TRUTHFULQA]
    if len(tqa):
        keep = truthfulqa_subsample({m: set(int(x) for x in g["source_id"]) for m, g in tqa.groupby("authors_model")})
        ok = s["dataset"] != TRUTHFULQA
        ok |= [d == TRUTHFULQA and int(i) in keep.get(m, set())
               for d, i, m in zip(s["dataset"], s["source_id"], s["authors_model"])]
        s = s[ok]
    g = s.groupby(["authors_model", "axis"])["s"].agg(["mean", "size"]).reset_index()
    return g.assign(axis=g["axis"].str.split("@").str[0]).rename(columns={"mean": "authors_way", "size": "n_prompts"})


def leak_effect(st) -> pd.DataFrame:
    """authors_model, axis, sago_released, sago_cleaned, leak_effect — from the recomputed runs."""
    runs = _runs(st)
    runs = runs[runs["kind"] == "imported+recomputed"]
    s = st.prompt_scores(axes=("bleu", "bert", "mr", "bleu@leaked", "bert@leaked", "mr@leaked"))
    s = s[s["run_id"].isin(runs["run_id"])].merge(runs[["run_id", "authors_model"]], on="run_id")
    s = s.assign(side=np.where(s["axis"].str.endswith("@leaked"), "sago_released", "sago_cleaned"),
                 axis=s["axis"].str.split("@").str[0])
    w = s.groupby(["authors_model", "axis", "side"])["s"].mean().unstack("side").reset_index()
    for c in ("sago_released", "sago_cleaned"):
        if c not in w:
            w[c] = np.nan
    return w.assign(leak_effect=w["sago_cleaned"] - w["sago_released"])


def audit_table(st) -> pd.DataFrame:
    """One row per (model, axis): published, authors_way, gap, sago_released, sago_cleaned,
    leak_effect, reply_leak_rate, degenerate (flag) — NaN where a quantity does not exist."""
    from sago_engine.external.authors_format import MODELS

    a = authors_way(st)
    lk = leak_effect(st)
    t = a.merge(lk, on=["authors_model", "axis"], how="outer")
    t["model"] = t["authors_model"].map(lambda m: MODELS.get(m, m))
    pub = paper.reported_totals()[["model", "axis", "sgs"]].rename(columns={"sgs": "published"})
    t = t.merge(pub, on=["model", "axis"], how="left")
    t["gap"] = t["authors_way"] - t["published"]
    runs = _runs(st)
    first = runs[runs["kind"] == "imported"].drop_duplicates("authors_model").set_index("authors_model")["origin"]
    t["reply_leak_rate"] = t["authors_model"].map(lambda m: first[m]["leaks"]["reply_leak_rate"] if m in first else None)
    t["degenerate"] = t["authors_model"].map(lambda m: bool(first[m]["degenerate"]["flagged"]) if m in first else None)
    t["axis"] = pd.Categorical(t["axis"], categories=list(AXES), ordered=True)
    cols = ["model", "axis", "published", "authors_way", "gap", "sago_released", "sago_cleaned", "leak_effect",
            "reply_leak_rate", "degenerate", "n_prompts"]
    return t.sort_values(["model", "axis"]).reindex(columns=cols).reset_index(drop=True)
