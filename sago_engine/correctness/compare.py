"""What users compare about correctness under rephrasing (pure functions over frames, no store).

The input is ``Store.correctness_frame`` restricted to one scorer per dataset (``one_scorer``):
one row per reply with ``verdict``. Only ``correct`` / ``wrong`` verdicts are counted; ``undecided``
and ``unavailable`` replies are left out of every rate (and counted apart), never scored as wrong.
A *pair* is a kept variant's reply with its base reply, both decided. Sources: McNemar (1947)
via the exact binomial test (``scipy.stats.binomtest``); PromptBench's performance drop rate
(Zhu et al. 2023, §3.2: PDR = 1 − A(attacked) / A(clean)); SCORE's consistency rate (Nalbandyan
et al. 2025; lm-eval ``score`` tasks, ``calculate_consistency_rate``: agreeing pairs of a
question's predictions over all pairs, pooled); AUROC as the Mann–Whitney U / (n₁·n₀).
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
from scipy import stats as sps

from sago_engine.correctness.inspect_scorers import OFFLINE as INSPECT_OFFLINE
from sago_engine.correctness.inspect_scorers import PREFIX as INSPECT_PREFIX
from sago_engine.correctness.scorers import CORRECT, SCORERS, WRONG, scorer_for
from sago_engine.seeds import derive_seed

#: Per-variant grouping columns a comparison may break down by (besides model and dataset).
CELL_COLUMNS = ("family", "subtype", "strength", "position")
#: Flips at or below this count make an AUROC "too few flips to tell".
MIN_FLIPS = 5


def one_scorer(frame: pd.DataFrame, choice: dict[str, str] | None = None) -> pd.DataFrame:
    """Rows of one scorer per dataset: ``choice`` (dataset → scorer), else the dataset's default
    (``scorers.scorer_for``) when stored, else its stored scorer first by name; the LLM judge is
    used only when chosen (or the only one stored)."""
    if frame.empty:
        return frame
    keep = [g[g["scorer"] == pick_scorer(str(d), set(g["scorer"]), choice)]
            for d, g in frame.groupby("dataset", sort=True)]
    return pd.concat(keep).sort_index()


def pick_scorer(dataset: str, have: set[str], choice: dict[str, str] | None = None) -> str:
    """The scorer read for ``dataset`` among the stored ones ``have`` (non-empty): ``choice``'s, else the
    default (``scorers.scorer_for``), else the first offline scorer by name (sago's, or an Inspect task's
    that sago runs), else the first by name."""
    ordered = sorted(have)
    want = (choice or {}).get(dataset) or scorer_for(dataset)
    if want in have:
        return want
    return next((s for s in ordered if s in SCORERS or runs_offline(s)), ordered[0])


def runs_offline(scorer: str) -> bool:
    """Whether ``scorer`` is an Inspect task's scorer sago runs (``inspect:match``, ``inspect:f1#2``)."""
    name = scorer.removeprefix(INSPECT_PREFIX)
    return scorer.startswith(INSPECT_PREFIX) and name.split("#", 1)[0] in INSPECT_OFFLINE


def chosen_scorers(stored: pd.DataFrame, choice: dict[str, str] | None = None) -> dict[str, str]:
    """dataset → ``pick_scorer`` over ``Store.correctness_scorers`` rows (dataset, scorer, …)."""
    return {str(d): pick_scorer(str(d), set(g["scorer"]), choice) for d, g in stored.groupby("dataset", sort=True)}


def _not_repeat(frame: pd.DataFrame) -> pd.Series:
    """True for the rows that are not a base repeat (a frame without ``repeat`` has none)."""
    return frame["repeat"].isna() if "repeat" in frame.columns else pd.Series(True, index=frame.index)


def pairs(frame: pd.DataFrame) -> pd.DataFrame:
    """Each kept variant reply beside its base reply, both decided.

    Args:
        frame: one scorer per dataset (``one_scorer``), base rows with NULL variant_id.
    Returns:
        Columns: run_id, model, dataset, prompt_id, variant_id, family, subtype, strength,
        position, base_ok, var_ok (bools). Empty with those columns when nothing pairs.
    """
    cols = ["run_id", "model", "dataset", "prompt_id", "variant_id", *CELL_COLUMNS, "base_ok", "var_ok"]
    dec = frame[frame["verdict"].isin((CORRECT, WRONG)) & _not_repeat(frame)]
    base = dec[dec["variant_id"].isna()][["run_id", "prompt_id", "verdict"]].rename(columns={"verdict": "b"})
    var = dec[dec["variant_id"].notna() & (dec["kept"].fillna(False).astype(bool))]
    out = var.merge(base, on=["run_id", "prompt_id"], how="inner")
    if out.empty:
        return pd.DataFrame(columns=cols)
    out["base_ok"] = out["b"] == CORRECT
    out["var_ok"] = out["verdict"] == CORRECT
    return out[cols].reset_index(drop=True)


def mcnemar_p(right_to_wrong: int, wrong_to_right: int) -> float:
    """Two-sided exact McNemar p-value: the discordant pairs as Binomial(b + c, ½); 1.0 with none.

    Source: McNemar (1947); exact form ``scipy.stats.binomtest(b, b + c, 0.5)``.
    """
    n = int(right_to_wrong) + int(wrong_to_right)
    return 1.0 if n == 0 else float(sps.binomtest(int(right_to_wrong), n, 0.5).pvalue)


def consistency_rate(groups: list[list]) -> float:
    """SCORE's consistency rate: over every question, the share of pairs of its predictions that
    are equal, pooled (agreeing pairs / all pairs); NaN when no question has two predictions.

    Source: Nalbandyan et al. 2025 (SCORE); lm-eval ``tasks/score`` ``calculate_consistency_rate``.
    """
    agree = total = 0
    for g in groups:
        for a, b in combinations(g, 2):
            agree += int(a == b)
            total += 1
    return agree / total if total else float("nan")


def accuracy_table(frame: pd.DataFrame, by: tuple[str, ...] = ("model", "dataset")) -> pd.DataFrame:
    """Accuracy on base prompts and on variants, the paired change, flips and the peers' numbers.

    Args:
        frame: one scorer per dataset (``one_scorer``).
        by: grouping columns: ``model``, ``dataset`` and any of ``CELL_COLUMNS``.
    Returns:
        One row per group: ``by`` columns, n_prompts (base prompts with a decided verdict that
        have a pair), base_acc (their accuracy, each prompt counted once), n_pairs, base_acc_pairs
        (base accuracy over the pairs: each base verdict counted once per paired variant), var_acc
        (accuracy of the paired variant replies), change (var_acc − base_acc_pairs, in accuracy
        points ∈ [−1, 1]),
        right_to_wrong / wrong_to_right (pair counts), flip_rw (right→wrong / pairs with a right
        base), flip_wr (wrong→right / pairs with a wrong base), mcnemar_p (exact, two-sided),
        pdr (PromptBench: 1 − var_acc / base_acc_pairs; NaN when that is 0),
        consistency (SCORE's rate over each prompt's decided base and paired variant verdicts),
        n_undecided (kept variant replies of the group left out as undecided). NaN where a rate has
        no denominator.
    change and pdr use one population, the pairs, so each follows from base_acc_pairs and var_acc;
    base_acc differs from base_acc_pairs when prompts have different numbers of pairs.
    Caveat: McNemar treats the (prompt, variant) pairs as independent; the variants of one
    prompt share its base reply, so the p-value is optimistic when a prompt has many variants.
    """
    p = pairs(frame)
    und = frame[(frame["verdict"] == "undecided") & frame["variant_id"].notna() & frame["kept"].fillna(False).astype(bool)]
    und_n = und.groupby(list(by), dropna=False).size().to_dict()
    rows = []
    for key, g in p.groupby(list(by), sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        rw = int((g["base_ok"] & ~g["var_ok"]).sum())
        wr = int((~g["base_ok"] & g["var_ok"]).sum())
        n_right, n_wrong = int(g["base_ok"].sum()), int((~g["base_ok"]).sum())
        prompts = g.drop_duplicates(["run_id", "prompt_id"])
        base_pairs = float(g["base_ok"].mean())
        var_acc = float(g["var_ok"].mean())
        # SCORE's rate over each prompt's base verdict and its paired variants' verdicts: with k of n right,
        # the agreeing pairs are C(k, 2) + C(n − k, 2) of C(n, 2)
        per = g.groupby(["run_id", "prompt_id"]).agg(n=("var_ok", "size"), k=("var_ok", "sum"), b=("base_ok", "first"))
        n, k = per["n"].to_numpy() + 1, per["k"].to_numpy() + per["b"].to_numpy().astype(int)
        cr = float((k * (k - 1) + (n - k) * (n - k - 1)).sum() / (n * (n - 1)).sum())
        rows.append({**dict(zip(by, key)), "n_prompts": len(prompts), "base_acc": float(prompts["base_ok"].mean()),
                     "n_pairs": len(g), "base_acc_pairs": base_pairs, "var_acc": var_acc,
                     "change": var_acc - base_pairs,
                     "right_to_wrong": rw, "wrong_to_right": wr,
                     "flip_rw": rw / n_right if n_right else float("nan"),
                     "flip_wr": wr / n_wrong if n_wrong else float("nan"),
                     "mcnemar_p": mcnemar_p(rw, wr),
                     "pdr": 1 - var_acc / base_pairs if base_pairs > 0 else float("nan"),
                     "consistency": cr, "n_undecided": int(und_n.get(key if len(by) > 1 else key[0], 0))})
    cols = [*by, "n_prompts", "base_acc", "n_pairs", "base_acc_pairs", "var_acc", "change", "right_to_wrong", "wrong_to_right",
            "flip_rw", "flip_wr", "mcnemar_p", "pdr", "consistency", "n_undecided"]
    return pd.DataFrame(rows, columns=cols)


def model_vs_model(frame: pd.DataFrame) -> pd.DataFrame:
    """A paired test of every two models on the replies both decided (same prompt, same variant or
    both the base): exact McNemar on the discordant replies.

    Returns:
        Columns: model_a, model_b, n (shared decided replies), acc_a, acc_b, a_only (a right, b
        wrong), b_only, p (two-sided exact McNemar); one row per unordered pair, sorted.
    """
    cols = ["model_a", "model_b", "n", "acc_a", "acc_b", "a_only", "b_only", "p"]
    dec = frame[frame["verdict"].isin((CORRECT, WRONG)) & _not_repeat(frame)].copy()
    dec["item"] = dec["prompt_id"] + "|" + dec["variant_id"].fillna("<base>")
    dec["ok"] = dec["verdict"] == CORRECT
    wide = dec.drop_duplicates(["model", "item"]).pivot(index="item", columns="model", values="ok")
    rows = []
    for a, b in combinations(sorted(wide.columns), 2):
        both = wide[[a, b]].dropna().astype(bool)
        ao, bo = int((both[a] & ~both[b]).sum()), int((~both[a] & both[b]).sum())
        rows.append({"model_a": a, "model_b": b, "n": len(both),
                     "acc_a": float(both[a].mean()) if len(both) else float("nan"),
                     "acc_b": float(both[b].mean()) if len(both) else float("nan"),
                     "a_only": ao, "b_only": bo, "p": mcnemar_p(ao, bo)})
    return pd.DataFrame(rows, columns=cols)


def prompt_outcomes(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (run, model, dataset, prompt): base_ok (bool), var_acc (accuracy of its decided kept variant
    replies), n_pairs, flipped (any pair whose verdict differs from the base's), acc_change (var_acc −
    base_ok, ∈ [−1, 1]). Only prompts with a decided base and at least one pair."""
    p = pairs(frame)
    cols = ["run_id", "model", "dataset", "prompt_id", "base_ok", "var_acc", "n_pairs", "flipped", "acc_change"]
    if p.empty:
        return pd.DataFrame(columns=cols)
    g = p.groupby(["run_id", "model", "dataset", "prompt_id"], sort=True)
    out = g.agg(base_ok=("base_ok", "first"), var_acc=("var_ok", "mean"), n_pairs=("var_ok", "size")).reset_index()
    out["flipped"] = g.apply(lambda x: bool((x["var_ok"] != x["base_ok"]).any()), include_groups=False).to_numpy()
    out["acc_change"] = out["var_acc"] - out["base_ok"].astype(float)
    return out[cols]


def auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve of ``scores`` for the positive ``labels`` (bools): U / (n₁·n₀) with
    mid-ranks for ties (0.5: no separation; 1: every positive scores above every negative); NaN
    without both classes. Source: Mann–Whitney U; Hanley & McNeil (1982)."""
    s, y = np.asarray(scores, float), np.asarray(labels, bool)
    n1, n0 = int(y.sum()), int((~y).sum())
    if n1 == 0 or n0 == 0:
        return float("nan")
    ranks = sps.rankdata(s)
    u = ranks[y].sum() - n1 * (n1 + 1) / 2
    return float(u / (n1 * n0))


def bootstrap_auroc_ci(scores: np.ndarray, labels: np.ndarray, n_boot: int = 1000, level: float = 0.95,
                       seed_key: str = "auroc") -> tuple[float, float]:
    """Percentile bootstrap CI of ``auroc`` over prompts resampled with replacement (resamples with
    one class only are skipped); seeded by ``seeds.derive_seed(seed_key)``. (NaN, NaN) without both classes."""
    s, y = np.asarray(scores, float), np.asarray(labels, bool)
    if y.all() or not y.any():
        return float("nan"), float("nan")
    rng = np.random.default_rng(derive_seed(seed_key))
    vals = []
    for _ in range(int(n_boot)):
        idx = rng.integers(0, len(s), len(s))
        a = auroc(s[idx], y[idx])
        if not np.isnan(a):
            vals.append(a)
    lo, hi = np.quantile(vals, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def instability_predicts(outcomes: pd.DataFrame, prompt_scores: pd.DataFrame, n_boot: int = 1000) -> pd.DataFrame:
    """Does s_X(i) tell the prompts whose correctness flips from those whose does not? Per model × axis.

    Args:
        outcomes: ``prompt_outcomes``; prompt_scores: per-prompt s_X(i) (run_id, model, prompt_id,
            axis, s — ``Store.prompt_scores``).
    Returns:
        Columns: model, axis, n_prompts, n_flipped, auroc, ci_low, ci_high (95 % percentile
        bootstrap over prompts, seeded by model and axis), spearman (ρ of acc_change with s),
        spearman_p, verdict: ``"too few flips"`` (fewer than ``MIN_FLIPS`` flipped or non-flipped
        prompts), ``"predicts flips"`` (CI above 0.5), ``"predicts stability"`` (CI below 0.5, i.e. the
        more unstable prompts flip less), or ``"predicts nothing"`` (the CI holds 0.5).
    Source: SAGO's thesis that instability is hidden by accuracy, tested per model and axis.
    """
    cols = ["model", "axis", "n_prompts", "n_flipped", "auroc", "ci_low", "ci_high", "spearman", "spearman_p",
            "verdict"]
    m = outcomes.merge(prompt_scores[["run_id", "prompt_id", "axis", "s"]], on=["run_id", "prompt_id"])
    rows = []
    for (model, axis), g in m.groupby(["model", "axis"], sort=True):
        y, s = g["flipped"].to_numpy(bool), g["s"].to_numpy(float)
        a = auroc(s, y)
        lo, hi = bootstrap_auroc_ci(s, y, n_boot, seed_key=f"auroc|{model}|{axis}")
        if len(g) > 2 and np.ptp(s) > 0 and np.ptp(g["acc_change"].to_numpy(float)) > 0:
            rho, rp = sps.spearmanr(g["acc_change"], s)
        else:
            rho, rp = float("nan"), float("nan")
        nf = int(y.sum())
        if min(nf, len(y) - nf) < MIN_FLIPS:
            verdict = "too few flips"
        elif lo > 0.5:
            verdict = "predicts flips"
        elif hi < 0.5:
            verdict = "predicts stability"
        else:
            verdict = "predicts nothing"
        rows.append({"model": model, "axis": axis, "n_prompts": len(g), "n_flipped": nf, "auroc": a, "ci_low": lo,
                     "ci_high": hi, "spearman": float(rho), "spearman_p": float(rp), "verdict": verdict})
    return pd.DataFrame(rows, columns=cols)


#: The four quadrants, in reading order.
QUADRANTS = ("stable and right", "stable but wrong", "unstable but right", "unstable and wrong")


def quadrants(outcomes: pd.DataFrame, prompt_scores: pd.DataFrame, axis: str, *, threshold: float | None = None,
              by: str = "base") -> tuple[pd.DataFrame, pd.DataFrame, float]:
    """Each prompt placed by correctness against s_X(i) on one axis, and the counts per quadrant per model.

    Args:
        outcomes: ``prompt_outcomes``; prompt_scores: per-prompt s_X(i) (run_id, prompt_id, axis, s).
        axis: the axis X; threshold: s_X(i) above it is "unstable" (default: the median s_X(i) of
            the axis over every model's prompts shown); by: ``"base"`` (right = the base reply is
            correct) or ``"variants"`` (right = at least half the variant replies are correct).
    Returns:
        (points, counts, threshold). points: one row per (model, prompt): run_id, model, dataset,
        prompt_id, s, base_ok, var_acc, right, unstable, quadrant. counts: model and one column
        per ``QUADRANTS`` entry (ints) and n; sorted by model.
    Raises:
        ValueError: ``by`` not "base" or "variants".
    """
    if by not in ("base", "variants"):
        raise ValueError(f"by must be 'base' or 'variants', got {by!r}")
    ps = prompt_scores[prompt_scores["axis"] == axis][["run_id", "prompt_id", "s"]]
    pts = outcomes.merge(ps, on=["run_id", "prompt_id"], how="inner")
    thr = float(pts["s"].median()) if threshold is None and len(pts) else float(threshold or 0.0)
    pts["right"] = pts["base_ok"].astype(bool) if by == "base" else pts["var_acc"] >= 0.5
    pts["unstable"] = pts["s"] > thr
    pts["quadrant"] = [QUADRANTS[2 * int(u) + int(not r)] for u, r in zip(pts["unstable"], pts["right"])]
    counts = (pts.groupby("model")["quadrant"].value_counts().unstack(fill_value=0)
              .reindex(columns=list(QUADRANTS), fill_value=0).reset_index())
    counts.columns.name = None
    counts["n"] = counts[list(QUADRANTS)].sum(axis=1)
    cols = ["run_id", "model", "dataset", "prompt_id", "s", "base_ok", "var_acc", "right", "unstable", "quadrant"]
    return pts[cols].sort_values(["model", "prompt_id"]).reset_index(drop=True), counts, thr
