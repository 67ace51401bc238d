"""Model against model: paired differences of per-prompt scores, a bootstrap CI and an exact paired test.

SAGO (arXiv 2610.01428) tests each model against ε only; a meeting also asks whether model A is
more stable than model B. Both models answered the same prompts, so the comparison is paired:
d(i) = s_X^A(i) − s_X^B(i) over the prompts both have a score for. Per pair of models, axis and
scope (all datasets, or one dataset): the mean paired difference (= SGS_A − SGS_B on the shared
prompts) with a bootstrap CI over prompts, and a two-sided paired sign-flip test
(``signflip``: on the mean difference by default, Wilcoxon's signed-rank statistic with
Pratt's zeros as the other choice; exact at the pages' n, Monte Carlo with its error above),
adjusted over the table's tests by ``stats.adjust_pvalues`` (none / Holm / BH).
docs/METHOD.md, "Model against model", says why these tests. Pure functions over
``Store.prompt_scores`` frames; nothing here touches the store or Streamlit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats as sps

from sago_engine.scoring import signflip, stats
from sago_engine.scoring.scores import marker, sgs_by, sgs_of
from sago_engine.seeds import derive_seed
from sago_engine.types import axis_label, axis_sort_key

#: Level at which a pair is called different (on the adjusted p).
ALPHA = 0.05
#: Tag of the seeds of the paired bootstraps (``seeds.derive_seed``).
SEED_TAG = "sago pairwise v1"
#: Bootstrap resamples of a comparison's CI by default: the Monte Carlo error of its call on 0 is then
#: ±0.0011 at the 2.5 % tail, so few calls sit in the borderline band (``stats.bootstrap_mean_ci_call``).
PAIR_RESAMPLES = 20_000
#: The paired tests a page can use: key → how sentences and captions name it.
TESTS = {"mean": "paired sign-flip permutation test on the mean difference",
         "signed_rank": "Wilcoxon signed-rank test (Pratt's zeros)"}
#: The default test: it tests the mean difference, the effect the pages report (docs/METHOD.md).
DEFAULT_TEST = "mean"
#: The test, as the pages name it (the default one).
TEST_NAME = TESTS[DEFAULT_TEST]

VERDICT_A, VERDICT_B, VERDICT_NONE, VERDICT_MIXED, VERDICT_NA = "a", "b", "none", "mixed", "n/a"

COLUMNS = ["axis", "axis_label", "dataset", "model_a", "model_b", "n_prompts", "sgs_a", "sgs_b", "diff", "ci_low",
           "ci_high", "ci_status", "ci_call", "n_zero", "r_plus", "r_minus", "p", "method", "mc_se", "test", "p_adj",
           "correction", "marker", "verdict", "better"]


def pair_seed(seed: int, axis: str, dataset: str | None, model_a: str, model_b: str) -> int:
    """The bootstrap seed of one comparison: ``derive_seed(SEED_TAG, seed, axis, dataset or "*", a, b)``.

    A pair's interval does not change when other models, axes or datasets are filtered in or out.
    """
    return derive_seed(SEED_TAG, int(seed), str(axis), "*" if dataset is None else str(dataset), str(model_a),
                       str(model_b))


def test_label(test: str) -> str:
    """How the pages name ``test`` (a key of ``TESTS``); raises ValueError naming the valid keys otherwise."""
    if test not in TESTS:
        raise ValueError(f"unknown paired test {test!r}; valid: {', '.join(TESTS)}")
    return TESTS[test]


def paired_test(d, test: str = DEFAULT_TEST, rng: np.random.Generator | None = None) -> dict:
    """Two-sided paired test of H0: the differences ``d`` are symmetric about 0 (the models are exchangeable).

    ``test="mean"``: the sign-flip permutation test on Σ d (``signflip.mean_flip_test``: exact up
    to 34 non-zero d, seeded Monte Carlo with its error above); ``test="signed_rank"``: Wilcoxon's
    signed-rank test with Pratt's zeros, exact at every n the pages use
    (``signflip.signed_rank_flip_test``).

    Args:
        d: ``signflip.paired_differences`` output, shape (n,) (zeros and ties already decided).
        rng: generator of a Monte Carlo null (seeded per comparison by the caller).
    Returns:
        dict with n, n_zero, r_plus (Σ rank of positive d), r_minus (of negative d), p, method
        (how the null was computed), mc_se (Monte Carlo standard error of p, 0 when exact).
        n < 2 → p NaN (method ``"too few prompts"``); every d = 0 → p = 1 (``"no difference"``).
    """
    test_label(test)
    x = np.asarray(d, dtype=np.float64)
    x = x[~np.isnan(x)]
    res = (signflip.mean_flip_test if test == "mean" else signflip.signed_rank_flip_test)(x, rng)
    out = {"n": res.n, "n_zero": res.n_zero, "r_plus": float("nan"), "r_minus": float("nan"), "p": res.p,
           "method": res.method, "mc_se": res.mc_se}
    if len(x) >= 2:
        ranks = sps.rankdata(np.abs(x))
        out["r_plus"], out["r_minus"] = float(ranks[x > 0].sum()), float(ranks[x < 0].sum())
    return out


def signed_rank_test(d) -> dict:
    """``paired_test(d, "signed_rank")`` on raw differences (zeros and ties decided by ``signflip``)."""
    x = np.asarray(d, dtype=np.float64)
    x = x[~np.isnan(x)]
    return paired_test(signflip.paired_differences(x, np.zeros_like(x)), "signed_rank")


def _verdict(diff: float, r_plus: float, r_minus: float, p_adj: float, alpha: float, test: str = DEFAULT_TEST) -> str:
    """Which model is more stable: ``"a"`` / ``"b"`` when p_adj < alpha, in the direction of the mean
    difference; under the signed-rank test ``"mixed"`` when the mean and the rank sums disagree;
    ``"none"``; ``"n/a"`` (no test)."""
    if not np.isfinite(p_adj):
        return VERDICT_NA
    if p_adj >= alpha:
        return VERDICT_NONE
    mean_sign = np.sign(diff)
    if mean_sign == 0 or (test == "signed_rank" and mean_sign != np.sign(r_plus - r_minus)):
        return VERDICT_MIXED
    return VERDICT_A if mean_sign < 0 else VERDICT_B  # lower score = more stable


def paired_table(scores: pd.DataFrame, per_dataset: bool = False, correction: str = "none",
                 n_resamples: int = PAIR_RESAMPLES, level: float = 0.95, seed: int = 0, alpha: float = ALPHA,
                 test: str = DEFAULT_TEST) -> pd.DataFrame:
    """Every pair of models per axis (and dataset): paired difference, bootstrap CI, paired test.

    Args:
        scores: per-prompt scores (``Store.prompt_scores``: model, dataset, prompt_id, axis, s).
        per_dataset: one comparison per dataset (the prompts of that dataset) instead of one over
            all prompts (paired on (dataset, prompt_id); every prompt weighs the same).
        correction: ``"none"`` | ``"holm"`` | ``"bh"`` over every row of the table (the family:
            pairs × axes, × datasets when ``per_dataset``); ``stats.adjust_pvalues``.
        n_resamples, level: the studentized bootstrap of the mean difference over the shared prompts
            (``stats.bootstrap_mean_ci_call``), seeded per comparison by ``pair_seed``.
        alpha: level of the verdict on the adjusted p.
        test: a key of ``TESTS`` (``paired_test``); its Monte Carlo null, where it needs one, is
            seeded per comparison too.
    Returns:
        ``COLUMNS``: axis, axis_label, dataset (None over all datasets), model_a < model_b
        (sorted names), n_prompts (shared prompts), sgs_a, sgs_b (mean s on them), diff
        (mean of s_a − s_b; negative = a more stable), ci_low, ci_high, ci_status (``ok`` |
        ``no variation`` | ``too few prompts``), ci_call (``stats.bootstrap_mean_ci_call``: ``excludes 0``
        | ``includes 0`` | ``borderline``), n_zero (prompts with d = 0 after
        ``signflip.paired_differences``), r_plus, r_minus (signed-rank sums), p (raw,
        two-sided), method (how the null was computed), mc_se, test (``TESTS[test]``), p_adj,
        correction, marker (of p_adj), verdict (``"a"`` | ``"b"`` | ``"none"`` | ``"mixed"`` |
        ``"n/a"``), better (the more stable model's name, or ""). Sorted by axis (paper's
        order), dataset, model_a, model_b.
    """
    name = test_label(test)
    rows = []
    keys = ["axis", "dataset"] if per_dataset else ["axis"]
    for key, grp in scores.groupby(keys, sort=True, observed=True):
        key = key if isinstance(key, tuple) else (key,)
        axis, dataset = key[0], (key[1] if per_dataset else None)
        w = grp.pivot_table(index=["dataset", "prompt_id"], columns="model", values="s", aggfunc="mean")
        models = sorted(w.columns)
        for i, a in enumerate(models):
            for b in models[i + 1:]:
                both = w[[a, b]].dropna()
                d = signflip.paired_differences(both[a].to_numpy(), both[b].to_numpy())
                pseed = pair_seed(seed, axis, dataset, a, b)
                m, lo, hi, ci_status, ci_call = stats.bootstrap_mean_ci_call(d, n_resamples, level,
                                                                              np.random.default_rng(pseed))
                t = paired_test(d, test, np.random.default_rng([pseed, 1]))
                rows.append({"axis": axis, "axis_label": axis_label(axis), "dataset": dataset, "model_a": a,
                             "model_b": b, "n_prompts": len(d), "sgs_a": sgs_of(both[a]),
                             "sgs_b": sgs_of(both[b]), "diff": m, "ci_low": lo,
                             "ci_high": hi, "ci_status": ci_status, "ci_call": ci_call, "n_zero": t["n_zero"],
                             "r_plus": t["r_plus"], "r_minus": t["r_minus"], "p": t["p"], "method": t["method"], "mc_se": t["mc_se"],
                             "test": name})
    out = pd.DataFrame(rows, columns=COLUMNS[:20])
    out["p_adj"] = stats.adjust_pvalues(out["p"].to_numpy(dtype=float), correction) if len(out) else []
    out["correction"] = correction
    out["marker"] = [marker(p) for p in out["p_adj"]]
    out["verdict"] = [_verdict(d, rp, rm, p, alpha, test) for d, rp, rm, p in
                      zip(out["diff"], out["r_plus"], out["r_minus"], out["p_adj"])]
    out["better"] = [a if v == VERDICT_A else (b if v == VERDICT_B else "") for a, b, v in
                     zip(out["model_a"], out["model_b"], out["verdict"])]
    if len(out):
        out = out.assign(_o=out["axis"].map(axis_sort_key)).sort_values(
            ["_o", "dataset", "model_a", "model_b"], na_position="first").drop(columns="_o")
    return out[COLUMNS].reset_index(drop=True)


# ====================================================================== the matrix and the sentences
def matrix_cells(table: pd.DataFrame, axis: str, dataset: str | None = None) -> pd.DataFrame:
    """The pairwise matrix of one axis and scope: one cell per ordered pair (row model, column model).

    Args:
        table: ``paired_table``; dataset None = the all-datasets rows.
    Returns:
        row, col, diff (SGS_row − SGS_col on the shared prompts; the lower triangle is the
        upper one negated), ci_low, ci_high (of that difference), p, p_adj, marker, called
        (verdict is a or b), row_better (the row model is the more stable one), n_prompts, label
        (``"−0.041†"`` / ``"p = 0.003"`` on two lines; ``"n/a"`` without a test). The diagonal is
        absent. Models in sorted order.
    """
    t = table[(table["axis"] == axis) & (table["dataset"].isna() if dataset is None else table["dataset"] == dataset)]
    cells = []
    for r in t.itertuples(index=False):
        for row, col, sign in ((r.model_a, r.model_b, 1.0), (r.model_b, r.model_a, -1.0)):
            lo, hi = (r.ci_low, r.ci_high) if sign > 0 else (-r.ci_high, -r.ci_low)
            called = r.verdict in (VERDICT_A, VERDICT_B)
            row_better = called and (r.better == row)
            label = "n/a" if not np.isfinite(r.p_adj) else f"{sign * r.diff:+#.3g}{r.marker}\n{format_p(r.p_adj)}"
            cells.append({"row": row, "col": col, "diff": sign * r.diff, "ci_low": lo, "ci_high": hi, "p": r.p,
                          "p_adj": r.p_adj, "marker": r.marker, "called": called, "row_better": row_better,
                          "n_prompts": r.n_prompts, "label": label.replace("-", "−")})
    return pd.DataFrame(cells, columns=["row", "col", "diff", "ci_low", "ci_high", "p", "p_adj", "marker", "called",
                                        "row_better", "n_prompts", "label"])


def format_p(p: float) -> str:
    """``"p < 0.001"``, ``"p = 0.012"`` (two significant digits), ``"p = 1"``; ``"p n/a"`` for NaN."""
    if p is None or not np.isfinite(p):
        return "p n/a"
    if p < 0.001:
        return "p < 0.001"
    return f"p = {p:.2g}"


_ADJ = {"none": "", "holm": ", Holm-adjusted", "bh": ", BH-adjusted"}


def pair_sentence(row, first: str | None = None) -> str:
    """One plain-English sentence for one comparison (a row of ``paired_table``), naming its test.

    "A is more stable than B on Δ-BLEU (paired sign-flip permutation test on the mean difference:
    p = 0.003, Holm-adjusted; SGS 0.412 vs 0.455 on 96 shared prompts, difference −0.043 [95% CI
    −0.061, −0.026])." or "A and B are not distinguishable on … (<test>: p = …; …)". ``first``: the
    model named first when the pair is not distinguishable (default model_a). A pair the test does
    not call whose bootstrap CI excludes 0 says so, and why the two can disagree. The test is the
    row's ``test`` (``TEST_NAME`` when the row has none). Names appear as given (render as text).
    """
    a, b = str(row["model_a"]), str(row["model_b"])
    where = f" on {row['axis_label']}" + ("" if row.get("dataset") is None or pd.isna(row.get("dataset"))
                                          else f" in {row['dataset']}")
    test = str(row.get("test") or TEST_NAME)
    if row["verdict"] == VERDICT_NA:
        return f"{a} and {b} cannot be compared{where}: fewer than 2 shared prompts."
    sa, sb, d, lo, hi = row["sgs_a"], row["sgs_b"], row["diff"], row["ci_low"], row["ci_high"]
    called = row["verdict"] in (VERDICT_A, VERDICT_B)
    lead = str(row["better"]) if called else (first if first in (a, b) else a)
    if lead == b:  # name the better (or the requested) model first: the difference is lead − other
        a, b, sa, sb, d, lo, hi = b, a, sb, sa, -d, -hi, -lo
    ptxt = format_p(row["p_adj"]) + _ADJ.get(str(row["correction"]), "")
    ci = "" if not np.isfinite(lo) else f" [95% CI {lo:+#.3g}, {hi:+#.3g}]"
    numbers = (f"SGS {sa:#.3g} vs {sb:#.3g} on {int(row['n_prompts'])} shared prompts, difference {d:+#.3g}{ci}"
               ).replace("-", "−")
    if row["verdict"] in (VERDICT_A, VERDICT_B):
        return f"{a} is more stable than {b}{where} ({test}: {ptxt}; {numbers})."
    if row["verdict"] == VERDICT_MIXED:
        return (f"{a} and {b} are not distinguishable{where}: the {test} ({ptxt}) and the mean "
                f"difference point opposite ways ({numbers}).")
    if row.get("ci_call") == stats.CALL_BORDERLINE:
        return (f"{a} and {b} are not distinguishable{where} ({test}: {ptxt}; {numbers}); whether the bootstrap CI "
                "excludes 0 is borderline: its end lies within the resampling error of 0.")
    if np.isfinite(lo) and (lo > 0 or hi < 0):  # the CI of the mean excludes 0, the test does not call it
        why = ("the test asks whether one model is more stable across the shared prompts, the CI is of the mean, "
               "which a few large differences move (and it is not adjusted for multiple comparisons)"
               if test == TESTS["signed_rank"] else
               "both speak of the mean, so the call is borderline (the CI is not adjusted for multiple comparisons)")
        return (f"{a} and {b} are not distinguishable{where} by the {test} ({ptxt}), though the bootstrap CI "
                f"of the mean difference excludes 0 ({numbers}): {why}.")
    return f"{a} and {b} are not distinguishable{where} ({test}: {ptxt}; {numbers})."


def leader_sentences(scores: pd.DataFrame, per_dataset: bool = False, correction: str = "none",
                     n_resamples: int = PAIR_RESAMPLES, seed: int = 0, alpha: float = ALPHA,
                     test: str = DEFAULT_TEST) -> pd.DataFrame:
    """Per axis (and dataset): is the most stable model distinguishable from the runner-up?

    The leader and runner-up are the two lowest SGS (mean s over the scope's prompts) among the
    models with scores; their comparison is the row of ``paired_table(scores, per_dataset,
    correction, …, test=test)`` (so the correction's family is that whole table).
    Returns axis, axis_label, dataset, leader, runner_up, verdict, p_adj, sentence — one row per
    axis (× dataset) with at least two models, in the paper's axis order.
    """
    cols = ["axis", "axis_label", "dataset", "leader", "runner_up", "verdict", "p_adj", "sentence"]
    table = paired_table(scores, per_dataset, correction, n_resamples, seed=seed, alpha=alpha, test=test)
    keys = ["axis", "dataset"] if per_dataset else ["axis"]
    sgs = sgs_by(scores, [*keys, "model"], name="s")
    rows = []
    for key, g in sgs.groupby(keys, sort=True, observed=True):
        key = key if isinstance(key, tuple) else (key,)
        if len(g) < 2:
            continue
        g = g.sort_values(["s", "model"])
        lead, second = str(g["model"].iloc[0]), str(g["model"].iloc[1])
        a, b = sorted((lead, second))
        sel = (table["axis"] == key[0]) & (table["model_a"] == a) & (table["model_b"] == b)
        sel &= (table["dataset"] == key[1]) if per_dataset else table["dataset"].isna()
        r = table[sel].iloc[0]
        rows.append({"axis": key[0], "axis_label": axis_label(key[0]), "dataset": key[1] if per_dataset else None,
                     "leader": lead, "runner_up": second, "verdict": r["verdict"], "p_adj": r["p_adj"],
                     "sentence": pair_sentence(r, first=lead)})
    out = pd.DataFrame(rows, columns=cols)
    if len(out):
        out = out.assign(_o=out["axis"].map(axis_sort_key)).sort_values(["dataset", "_o"], na_position="first").drop(
            columns="_o")
    return out.reset_index(drop=True)


# ====================================================================== the paired test of Model vs model
def tests_compared(scores: pd.DataFrame, correction: str = "holm", n_resamples: int = 1000,
                seed: int = 0) -> pd.DataFrame:
    """Model vs model under each paired test (``TESTS``): the rows whose verdict differs.

    Both ``pairwise.paired_table`` families (all datasets, and per dataset) are computed under the
    default test and under each other one, with the same ``correction``.

    Args:
        scores: per-prompt scores (``Store.prompt_scores``).
    Returns:
        scope ("all datasets" | "per dataset"), axis_label, dataset, model_a, model_b, diff, and per
        test ``p_adj_<key>``, ``verdict_<key>`` (a / b / none / mixed / n/a) — only rows where some
        verdict differs from the default test's; empty (with those columns) when none does.
    """
    keys = ["axis", "dataset", "model_a", "model_b"]
    cols = ["scope", "axis_label", "dataset", "model_a", "model_b", "diff"]
    cols += [f"{c}_{t}" for t in TESTS for c in ("p_adj", "verdict")]
    frames = []
    for per_dataset in (False, True):
        merged = None
        for t in TESTS:
            tab = paired_table(scores, per_dataset, correction, n_resamples, seed=seed, test=t)
            part = tab[[*keys, "axis_label", "diff", "p_adj", "verdict"]].rename(
                columns={"p_adj": f"p_adj_{t}", "verdict": f"verdict_{t}"})
            merged = part if merged is None else merged.merge(part.drop(columns=["axis_label", "diff"]), on=keys,
                                                              how="outer")
        if merged is None or merged.empty:
            continue
        base = merged[f"verdict_{DEFAULT_TEST}"]
        differs = np.zeros(len(merged), dtype=bool)
        for t in TESTS:
            differs |= (merged[f"verdict_{t}"] != base).to_numpy()
        frames.append(merged[differs].assign(scope="per dataset" if per_dataset else "all datasets"))
    if not frames:
        return pd.DataFrame(columns=cols)
    return pd.concat(frames, ignore_index=True)[cols]
