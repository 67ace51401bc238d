"""The authors' rows aggregated the authors' way, next to what the paper published and what the leak moves.

Per model × axis, from a store written by ``import-authors``:

* ``published``: Figure 2a (open models) / Table 1 (closed, ε = 0.05) as transcribed in
  ``sago_engine.external.paper``;
* ``authors_way``: their ``sgs_core`` on their rows — s_X(i) = sqrt(mean over V of (Δ/R_X)²), no
  clipping, V = every non-baseline row of prompt i over all styles and places (Form/original left
  out), NaN-skipped per axis; TruthfulQA cut to 16 prompts common to every model (``numpy``
  ``default_rng(42).choice`` over the sorted common ids, as their step 3); total = mean over all
  prompts; ``gap`` = authors_way − published;
* ``sago_released`` / ``sago_cleaned``: sago's Δ-BLEU / Δ-BERT / Δ-MR SGS of the same pairs on the
  replies as released and with the leaked prompt tail cut, aggregated the same way;
  ``leak_effect`` = cleaned − released.

``audit_view`` adds, per model × axis, sago's own runs of the same model (e.g. of the
``paper_code`` preset): ``sago_run`` (sago's definitions as the run stored them) and ``sago_code``
(the authors' definitions: ``cos@last_layer``, ``prob@base_reply``, ``ent@base_reply``,
``mr@paper_code`` where stored, Δ-BLEU / Δ-BERT as stored; Δ/R_X unclipped), each a flat mean over
prompts, and the difference each step makes.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from sago_engine.external import paper
from sago_engine.scoring.scores import sgs_by
from sago_engine.types import AUTHORS_OPTION, AXES, DEFAULT_NORMALIZERS, axis_label

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


def _their_way(st, s: pd.DataFrame, value: str) -> pd.DataFrame:
    """Per-prompt scores (with ``authors_model``) → authors_model, axis (base name), ``value`` (the flat
    mean over prompts after the authors' TruthfulQA cut), n_prompts."""
    if s.empty:
        return pd.DataFrame(columns=["authors_model", "axis", value, "n_prompts"])
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
    return g.assign(axis=g["axis"].str.split("@").str[0]).rename(columns={"mean": value, "size": "n_prompts"})


def _scores_of(st, kind: str, axes: tuple[str, ...]) -> pd.DataFrame:
    runs = _runs(st)
    runs = runs[runs["kind"] == kind]
    s = st.prompt_scores(axes=axes)
    return s[s["run_id"].isin(runs["run_id"])].merge(runs[["run_id", "authors_model"]], on="run_id")


def authors_way(st) -> pd.DataFrame:
    """authors_model, axis, authors_way (total SGS their way), n_prompts — from the ``@authors`` axes."""
    return _their_way(st, _scores_of(st, "imported", tuple(f"{a}@{AUTHORS_OPTION}" for a in AXES)), "authors_way")


def leak_effect(st) -> pd.DataFrame:
    """authors_model, axis, sago_released, sago_cleaned, leak_effect — from the recomputed runs,
    aggregated the authors' way (``_their_way``)."""
    s = _scores_of(st, "imported+recomputed", ("bleu", "bert", "mr", "bleu@leaked", "bert@leaked", "mr@leaked"))
    leaked = s["axis"].str.endswith("@leaked")
    rel = _their_way(st, s[leaked], "sago_released").drop(columns="n_prompts")
    cln = _their_way(st, s[~leaked], "sago_cleaned").drop(columns="n_prompts")
    w = rel.merge(cln, on=["authors_model", "axis"], how="outer")
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


#: The authors' definition of each axis among sago's option axes (``audit_view``'s ``sago_code``).
CODE_AXES: dict[str, str] = {"cos": "cos@last_layer", "bleu": "bleu", "bert": "bert", "prob": "prob@base_reply",
                             "ent": "ent@base_reply", "mr": "mr@paper_code"}


def paper_model(label: str, key: str | None = None) -> str | None:
    """The paper's name of the model a sago run ran, or None: the run's model key without its
    Hub organisation (``Qwen/Qwen2.5-7B-Instruct``) or its label up to a " · " suffix
    (``"Qwen2.5-7B-Instruct · paper code"``), equal to a Figure 2a / Table 1 name up to case."""
    names = {m.lower(): m for m in paper.reported_totals()["model"].unique()}
    for cand in (str(key or "").rsplit("/", 1)[-1], str(label).split(" · ", 1)[0].rsplit("/", 1)[-1]):
        if cand.strip().lower() in names:
            return names[cand.strip().lower()]
    return None


def own_runs(st) -> pd.DataFrame:
    """sago's own runs of the paper's models: model (the paper's name), axis, sago_run (its plain
    axes), sago_code (the authors' definitions ``CODE_AXES`` where stored, Δ/R_X unclipped with the
    paper's R_X) — each a flat mean over the run's prompts; several runs of one model are pooled."""
    cols = ["model", "axis", "sago_run", "sago_code"]
    runs = st.run_origins()
    runs = runs[runs["origin"].isna()].merge(st.runs()[["run_id", "config"]], on="run_id", how="left")

    def key_of(cfg) -> str | None:
        try:
            return json.loads(cfg).get("run_model", {}).get("key") if isinstance(cfg, str) else None
        except (ValueError, AttributeError):
            return None

    runs = runs.assign(paper=[paper_model(m, key_of(c)) for m, c in zip(runs["model"], runs["config"])])
    runs = runs[runs["paper"].notna()]
    if runs.empty:
        return pd.DataFrame(columns=cols)
    plain = st.prompt_scores()
    plain = plain[plain["run_id"].isin(runs["run_id"])].merge(runs[["run_id", "paper"]], on="run_id")
    code = st.prompt_scores_rescaled(normalizers=tuple((x, DEFAULT_NORMALIZERS[a]) for a, x in CODE_AXES.items()),
                                     axes=tuple(CODE_AXES.values()), clip=False)
    code = code[code["run_id"].isin(runs["run_id"])].merge(runs[["run_id", "paper"]], on="run_id")
    back = {x: a for a, x in CODE_AXES.items()}
    a = sgs_by(plain, ["paper", "axis"], name="sago_run").set_index(["paper", "axis"])["sago_run"]
    b = sgs_by(code.assign(axis=code["axis"].map(back)), ["paper", "axis"], name="sago_code").set_index(
        ["paper", "axis"])["sago_code"]
    out = pd.concat([a, b], axis=1).reset_index().rename(columns={"paper": "model"})
    return out.reindex(columns=cols)


def audit_view(st, f=None) -> pd.DataFrame:
    """The Paper reference page's audit table: one row per (model, axis) of an imported model or a
    sago run of one of the paper's models.

    Columns: model, axis, published (Fig. 2a / Table 1), authors_way (their rows, their
    aggregation), gap (authors_way − published: the reproduction gap), sago_released (sago's text
    axes on the released replies, their aggregation), definition_step (sago_released −
    authors_way), sago_cleaned (the same with the leaked prompt tails cut), leak_effect (cleaned −
    released), sago_run / sago_code (``own_runs``), sago_gap (sago_code − published),
    reply_leak_rate, degenerate. NaN where a quantity does not exist (Δ-Cos / Δ-Prob / Δ-Ent are
    not recomputed from text; a model without a sago run). ``f`` is accepted for the page's cache
    and ignored: the audit reads every row, as the authors' aggregation does.
    """
    del f
    t = audit_table(st) if not _runs(st).empty else pd.DataFrame(columns=["model", "axis"])
    t["axis"] = t["axis"].astype(str)
    own = own_runs(st)
    t = t.merge(own, on=["model", "axis"], how="outer")
    pub = paper.reported_totals()[["model", "axis", "sgs"]].rename(columns={"sgs": "_pub"})
    t = t.merge(pub, on=["model", "axis"], how="left")
    t["published"] = t["published"].fillna(t["_pub"]) if "published" in t else t["_pub"]
    for c in ("authors_way", "gap", "sago_released", "sago_cleaned", "leak_effect", "reply_leak_rate", "degenerate"):
        if c not in t:
            t[c] = np.nan
    t["definition_step"] = t["sago_released"] - t["authors_way"]
    t["sago_gap"] = t["sago_code"] - t["published"]
    t = t[t["axis"].isin(list(AXES))]
    t["axis_label"] = t["axis"].map(axis_label)
    t["axis"] = pd.Categorical(t["axis"], categories=list(AXES), ordered=True)
    cols = ["model", "axis", "axis_label", "published", "authors_way", "gap", "sago_released", "definition_step",
            "sago_cleaned", "leak_effect", "sago_run", "sago_code", "sago_gap", "reply_leak_rate", "degenerate"]
    return t.sort_values(["model", "axis"]).reindex(columns=cols).reset_index(drop=True)


#: Why a cell of ``audit_view`` is empty, per column (the page shows it in the cell).
AUDIT_MISSING: dict[str, str] = {
    "published": "not in the paper",
    "authors_way": "no imported rows",
    "gap": "no imported rows",
    "sago_released": "not recomputable from text",
    "definition_step": "not recomputable from text",
    "sago_cleaned": "not recomputable from text",
    "leak_effect": "not recomputable from text",
    "sago_run": "no sago run of this model",
    "sago_code": "no sago run / option not stored",
    "sago_gap": "no sago run / option not stored",
}
