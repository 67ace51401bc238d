"""Independent recomputations for tests/browser/test_browser_downloads_pages.py: plain SQL on a store's raw rows
and numpy / pandas / scipy — never sago_engine's report, scoring, stats, pairwise or ablations.

Each function returns a frame indexed by the labels its page's file uses (model, axis, dataset, …),
so a file is compared cell by cell by label. Shapes and definitions follow SAGO (arXiv 2610.01428)
and docs/METHOD.md; tests/integration/pages/test_pages_independent.py holds the SGS / t-test / option references.
"""

from __future__ import annotations

import itertools
import json
import math

import duckdb
import numpy as np
import pandas as pd
from scipy import stats

from tests.integration.pages.test_pages_independent import AXES, _option_scores, raw_all_axes


def query(store, sql: str) -> pd.DataFrame:
    """``sql`` on ``store`` opened read-only."""
    con = duckdb.connect(str(store), read_only=True)
    try:
        return con.execute(sql).df()
    finally:
        con.close()


def rms(x) -> float:
    x = np.asarray(x, dtype=float)
    return math.sqrt(float(np.mean(np.square(x))))


def variant_label(r) -> str:
    """The page's name of a variant: "family · subtype · strength · position"."""
    return f"{r.family} · {r.subtype} · {float(r.strength):g} · {r.position}"


def kept_rows(raw: pd.DataFrame) -> pd.DataFrame:
    return raw[raw["kept"].astype(bool) & raw["available"].astype(bool) & raw["delta_norm"].notna()]


def noise_floor(store, ps: pd.DataFrame) -> pd.DataFrame:
    """Per (model, axis): sgs (mean s), floor (mean over prompts of f(i) = RMS over repeats of Δ̃), n_prompts,
    n_paired, t and p of the one-sided paired t-test of s − f > 0 (scipy.stats.ttest_1samp)."""
    nf = query(store, "SELECT r.model, n.prompt_id, n.axis, n.delta_norm FROM noise_floor n JOIN runs r USING (run_id) "
                      "WHERE n.available")
    f = nf.groupby(["model", "prompt_id", "axis"])["delta_norm"].apply(rms).rename("f").reset_index()
    m = ps.merge(f, on=["model", "prompt_id", "axis"], how="left")
    rows = []
    for (model, axis), g in m.groupby(["model", "axis"]):
        paired = g.dropna(subset=["f"])
        t = p = float("nan")
        if len(paired) > 1:
            res = stats.ttest_1samp(paired["s"] - paired["f"], 0.0, alternative="greater")
            t, p = float(res.statistic), float(res.pvalue)
        rows.append({"model": model, "axis": axis, "sgs": g["s"].mean(), "floor": paired["f"].mean(),
                     "n_prompts": len(g), "n_paired": len(paired), "t": t, "p": p})
    return pd.DataFrame(rows).set_index(["model", "axis"])


def per_token(store) -> tuple[float, pd.DataFrame]:
    """Length-normalized Δ-Prob: Δ = seq_logprob/n_tokens of the variant's reply − the base reply's, kept variants;
    R = the 95 % quantile of |Δ|; per prompt s = RMS of clip(Δ/R, −1, 1). Returns (R, per-prompt s)."""
    d = query(store, """
        SELECT r.model, p.dataset, x.prompt_id, x.seq_logprob / x.n_tokens - b.seq_logprob / b.n_tokens AS d
        FROM responses x JOIN responses b ON b.run_id = x.run_id AND b.prompt_id = x.prompt_id AND b.variant_id IS NULL
        JOIN variants v ON v.variant_id = x.variant_id JOIN prompts p ON p.prompt_id = x.prompt_id
        JOIN runs r ON r.run_id = x.run_id
        WHERE v.kept AND x.seq_logprob IS NOT NULL AND b.seq_logprob IS NOT NULL""")
    r = float(np.quantile(np.abs(d["d"]), 0.95))
    d["x"] = np.clip(d["d"] / r, -1, 1)
    return r, d.groupby(["model", "dataset", "prompt_id"])["x"].apply(rms).rename("s").reset_index()


def wilcoxon_pairs(ps: pd.DataFrame) -> pd.DataFrame:
    """Every pair model_a < model_b per axis on their shared prompts: sgs_a, sgs_b, diff = mean(s_a − s_b),
    n_prompts, n_zero, r_plus / r_minus (signed-rank sums), the two-sided Wilcoxon p (Pratt's zeros) and
    p_mean, the two-sided sign-flip p of Σ d with every sign assignment of the non-zero d enumerated."""
    rows = []
    models = sorted(ps["model"].unique())
    for axis, g in ps.groupby("axis"):
        w = g.pivot_table(index=["dataset", "prompt_id"], columns="model", values="s")
        for i, a in enumerate(models):
            for b in models[i + 1:]:
                if a not in w or b not in w:
                    continue
                both = w[[a, b]].dropna()
                d = (both[a] - both[b]).to_numpy()
                ranks = stats.rankdata(np.abs(d))
                res = stats.wilcoxon(d, zero_method="pratt", alternative="two-sided")
                nz = d[np.abs(d) > 1e-12]
                flips = np.array(list(itertools.product((-1.0, 1.0), repeat=len(nz)))) @ nz
                p_mean = float(np.mean(np.abs(flips) >= abs(nz.sum()) - 1e-9)) if len(nz) else 1.0
                rows.append({"axis": axis, "model_a": a, "model_b": b, "n_prompts": len(d), "sgs_a": both[a].mean(),
                             "sgs_b": both[b].mean(), "diff": d.mean(), "n_zero": int((d == 0).sum()),
                             "r_plus": ranks[d > 0].sum(), "r_minus": ranks[d < 0].sum(), "p": float(res.pvalue),
                             "p_mean": p_mean, "n_nonzero": len(nz)})
    return pd.DataFrame(rows).set_index(["axis", "model_a", "model_b"])


def worst_prompts(raw: pd.DataFrame, replies: pd.DataFrame, axis: str) -> pd.DataFrame:
    """Prompts of every model by s_X(i) on ``axis``, largest first: s, n_variants, the worst variant (largest |Δ̃|)
    and its Δ̃, n_different (variants whose reply text differs from the base reply)."""
    ok = kept_rows(raw)
    ok = ok[ok["axis"] == axis].merge(replies, on=["model", "prompt_id", "variant_id"], how="left")
    rows = []
    for (m, pid), g in ok.groupby(["model", "prompt_id"]):
        w = g.loc[g["delta_norm"].abs().idxmax()]
        rows.append({"model": m, "prompt_id": pid, "s": rms(g["delta_norm"]), "n_variants": len(g),
                     "variant_id": w["variant_id"], "delta_norm": w["delta_norm"], "label": variant_label(w),
                     "n_different": int((g["reply"] != g["base_reply"]).sum())})
    return pd.DataFrame(rows).sort_values("s", ascending=False).reset_index(drop=True)


def mean_abs(ok: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per ``by``: n, mean |Δ̃|, se_abs (std of |Δ̃|, ddof 1, / √n), rms, mean signed Δ̃."""
    g = ok.assign(a=ok["delta_norm"].abs()).groupby(by)
    out = pd.DataFrame({"n": g.size(), "mean_abs": g["a"].mean(), "rms": g["delta_norm"].apply(rms),
                        "mean_signed": g["delta_norm"].mean()})
    out["se_abs"] = g["a"].std(ddof=1) / np.sqrt(out["n"])
    return out


def tone(ok: pd.DataFrame) -> pd.DataFrame:
    """Per (model, axis): mean |Δ̃| of negative vs polite social-register variants and the one-sided Welch test."""
    t = ok.assign(tone=[json.loads(m if isinstance(m, str) else "{}").get("tone") for m in ok["meta"]], a=ok["delta_norm"].abs())
    t = t[(t["family"] == "social_register") & t["tone"].isin(["negative", "polite"])]
    rows = []
    for (m, axis), g in t.groupby(["model", "axis"]):
        neg, pol = g[g["tone"] == "negative"]["a"], g[g["tone"] == "polite"]["a"]
        res = stats.ttest_ind(neg, pol, equal_var=False, alternative="greater")
        rows.append({"model": m, "axis": axis, "n_negative": len(neg), "mean_negative": neg.mean(),
                     "std_negative": neg.std(ddof=1), "n_polite": len(pol), "mean_polite": pol.mean(),
                     "std_polite": pol.std(ddof=1), "diff": neg.mean() - pol.mean(), "t": res.statistic,
                     "p": res.pvalue})
    return pd.DataFrame(rows).set_index(["model", "axis"])


def length_factor(ok: pd.DataFrame) -> pd.DataFrame:
    """Per (model, axis, target_ratio): s_i = RMS of Δ̃ over prompt i's length variants of that ratio; n_prompts,
    mean and std (ddof 1) of s_i over prompts."""
    ln = ok[(ok["family"] == "structural") & (ok["subtype"] == "length")]
    ln = ln.assign(target_ratio=[float(json.loads(m)["target_ratio"]) for m in ln["meta"]])
    s = ln.groupby(["model", "axis", "target_ratio", "prompt_id"])["delta_norm"].apply(rms)
    g = s.groupby(level=[0, 1, 2])
    return pd.DataFrame({"n_prompts": g.size(), "mean_instability": g.mean(), "std_instability": g.std(ddof=1)})


def semantic(variants: pd.DataFrame, threshold: float) -> tuple[dict, pd.DataFrame]:
    """The semantic-score histogram {(family, "kept"/"rejected", bin_start): count} (40 bins on [0, 1]) and the
    per-family audit: n, n_scored, n_kept, n_rejected, n_below (scores ≤ threshold), min, p05, median, max."""
    hist: dict = {}
    for r in variants.dropna(subset=["semantic_score"]).itertuples(index=False):
        k = (r.family, "kept" if r.kept else "rejected", round(min(int(r.semantic_score * 40), 39) / 40, 9))
        hist[k] = hist.get(k, 0) + 1
    rows = []
    for fam, g in variants.groupby("family"):
        s = g["semantic_score"].dropna().to_numpy(float)
        spread = ({"min": s.min(), "p05": np.quantile(s, 0.05), "median": np.median(s), "max": s.max()} if len(s)
                  else dict.fromkeys(("min", "p05", "median", "max"), float("nan")))
        rows.append({"family": fam, "n": len(g), "n_scored": len(s), "n_kept": int(g["kept"].sum()),
                     "n_rejected": int((~g["kept"].astype(bool)).sum()), "n_below": int((s <= threshold).sum()),
                     **spread})
    return hist, pd.DataFrame(rows).set_index("family")


def kendall(x, y) -> tuple[float, float, int]:
    """Kendall's τ-b, its exact two-sided p (scipy) and the number of discordant pairs."""
    res = stats.kendalltau(x, y, variant="b", method="exact")
    n = len(x)
    flips = sum((x[j] - x[k]) * (y[j] - y[k]) < 0 for j in range(n) for k in range(j + 1, n))
    return float(res.statistic), float(res.pvalue), flips


def scale_distance(median: float, lo: float, hi: float) -> tuple[float, str]:
    """Orders of magnitude (log10) a median SGS lies outside the published range [lo, hi]; 0 inside."""
    if median > hi:
        return math.log10(median / hi), "above"
    if median < lo:
        return math.log10(lo / median), "below"
    return 0.0, "inside"


def replies(store) -> pd.DataFrame:
    """Per (model, prompt, variant): the variant's reply and the base prompt's reply (SQL on ``responses``)."""
    return query(store, """
        SELECT r.model, x.prompt_id, x.variant_id, x.response AS reply, b.response AS base_reply
        FROM responses x JOIN runs r USING (run_id)
        JOIN responses b ON b.run_id = x.run_id AND b.prompt_id = x.prompt_id AND b.variant_id IS NULL
        WHERE x.variant_id IS NOT NULL""")


#: The five open method choices with options in the store: (options, axes each option changes).
CHOICES = ((("default", "user_last", "user_mean"), ("cos",)), (("default", "rescaled"), ("bert",)),
           (("paper R_X", "data-driven R_X"), tuple(AXES)), (("clipped Δ̃", "unclipped Δ̃"), tuple(AXES)),
           (("per sequence", "per token"), ("prob",)))
#: Figure 2a of arXiv 2610.01428 as published: total SGS of the eight open models (Δ-Cos … Δ-MR).
PAPER_FIG2A = {
    "Llama-3.2-3B-Instruct": (0.12, 0.61, 0.09, 0.04, 0.01, 0.35),
    "Llama-3.1-8B-Instruct": (0.27, 0.63, 0.08, 0.04, 0.01, 0.57),
    "Gemma-2B-IT": (0.07, 0.64, 0.10, 0.06, 0.01, 0.32),
    "Gemma-7B-IT": (0.13, 0.62, 0.08, 0.07, 0.01, 0.55),
    "Gemma-4-E4B-IT": (0.10, 0.84, 0.18, 0.05, 0.01, 0.38),
    "Qwen2.5-1.5B-Instruct": (0.05, 0.73, 0.11, 0.03, 0.01, 0.34),
    "Qwen2.5-7B-Instruct": (0.28, 0.67, 0.09, 0.07, 0.01, 0.59),
    "Qwen3.5-9B": (0.06, 0.52, 0.08, 0.09, 0.01, 0.44),
}


def choice_scores(store, ps: pd.DataFrame) -> list[dict]:
    """Per choice: {(option, axis): {model: per-prompt s}}, from the raw rows (tests/integration/pages/test_pages_independent.py)."""
    opt = _option_scores(raw_all_axes(store))
    tok = per_token(store)[1]
    prob = ps[ps["axis"] == "prob"]
    out = []
    for (options, axes), key in zip(CHOICES, ("cos", "bert", "rx", "clip", "prob")):
        sc = {}
        for o in options:
            for a in axes:
                ps = {"per sequence": prob, "per token": tok}.get(o) if key == "prob" else opt[(key, o, a)]
                sc[(o, a)] = {m: g["s"].to_numpy(float) for m, g in ps.groupby("model")}
        out.append(sc)
    return out
