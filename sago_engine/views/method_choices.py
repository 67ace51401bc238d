"""Choices the paper leaves open, made explicit: SGS, markers, model rankings and the paper's claims per option.

SAGO (arXiv 2610.01428) fixes the formulas but not every measurement choice: where and over which
layers Δ-Cos reads the activations, the encoder and scale of Δ-BERT, the normalizers R_X, whether
Δ-Prob is per sequence or per token, the reply length cap. sago records each choice as an option
and shows how much the results move between options:

* **option axes** — a run may store a variant of an axis as extra ``deltas`` rows named
  ``<base>@<option>`` (``cos@user_last``, ``bert@rescaled``, …). Option ``default`` is the plain
  axis; option ``o`` is the same six axes with ``<base>`` replaced by ``<base>@o``;
* **R_X** — the paper's constants vs R_X taken from the data (``stats.data_driven_normalizers``);
* **clipping** — Δ̃ = clip(Δ/R_X, −1, 1) (the paper's text) vs Δ/R_X unclipped (the SAGO authors'
  code, ``utils/sgs_core.py``), both under the paper's R_X;
* **Δ-Prob** — per sequence (the paper) vs per token (``report.per_token_scores``);
* **reply length cap** — two runs of one model that differ only in ``max_new_tokens``.

Everything is computed by the functions the other pages use: intervals by
``report.sgs_ci_table`` (one-sided t-test + ``stats.bootstrap_sgs``), reversals by
``report.reversal_table`` (``stats.reversal_probabilities``). Rank agreement between options is
Kendall's τ-b (``rankcorr.kendall_tau``): with the handful of models a store holds (2–11),
τ counts concordant vs discordant model pairs — "how many pairs of models swap order" — and
handles ties. Its p-value is scipy's exact one when no SGS is tied; with ties (scipy would fall
back to the normal approximation, anti-conservative at these sizes) it is a permutation p, exact
over all orders up to 8 models and seeded Monte-Carlo above; each row names its method. Spearman's
ρ weighs large rank moves more and is less readable at these sizes. Pure functions; the only store access
is ``collect_choices`` (through ``Store`` methods, no SQL here).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sago_engine.axis_spec import AXIS_SPECS, OPTION_AXIS_SPECS
from sago_engine.external import degenerate, paper
from sago_engine.scoring import rankcorr, runpairs
from sago_engine.scoring.scores import MAIN_EPSILON
from sago_engine.types import AXES, AXIS_LABELS, DEFAULT_NORMALIZERS, OPTION_SEP, option_of
from sago_engine.views import report
from sago_engine.views.choice_scores import (  # noqa: F401  (re-exported: the page and tests read them here)
    ALL_PROMPTS,
    ANSWERS_ONLY,
    CLIPPED,
    DEFAULT_OPTION,
    SCORE_COLS,
    UNCLIPPED,
    _plain,
    axis_option_scores,
    clip_option_scores,
    normalizer_option_scores,
    option_axes,
    per_token_option_scores,
    reference_option_scores,
)

if TYPE_CHECKING:
    from sago_engine.filters import Filters
    from sago_engine.store import Store

#: Fewest models a rank correlation is computed for.
MIN_MODELS_RANK = 3
#: SGS below this is treated as this when measuring distance to the paper's scale (log scale: 0 has none).
SCALE_FLOOR = 1e-4
#: Significance levels of the claims: (a) "above ε" at p < 0.05, (b) "p < 0.001" (SAGO §Significance).
ALPHA_ABOVE, ALPHA_STRICT = 0.05, 0.001
#: Where the bundled store of the reply-length-cap choice is looked for (relative to the repository).
CAP_STORE_NAME = "sago_ablation_cap.duckdb"

CLAIM_A = "(a) every model is above ε on some axis"
CLAIM_B = "(b) Δ-BLEU and Δ-MR at p < 0.001 for every model"
CLAIM_C = "(c) rankings reverse across datasets"


@dataclass
class Choice:
    """One open choice of the method with the per-prompt scores of each of its options.

    ``scores``: option, model, dataset, prompt_id, axis, s — every option holds the full set of
    axes the store has, with this choice applied; ``axes``: the axes the choice changes;
    ``reference``: the option the others are compared with (the paper's, or the stored default);
    ``notes``: option → one line on what it is; ``missing``: why the store has no options for it
    and how to get them ("" when it has them).
    """

    key: str
    title: str
    axes: tuple[str, ...]
    reference: str
    options: tuple[str, ...] = ()
    scores: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=["option", "model", "dataset", "prompt_id", "axis", "s"]))
    notes: dict[str, str] = field(default_factory=dict)
    missing: str = ""

    @property
    def available(self) -> bool:
        """True when at least two options have scores."""
        return not self.missing and self.scores["option"].nunique() >= 2


# ====================================================================== reply length cap: pairs of runs
def cap_pairs(settings: pd.DataFrame) -> pd.DataFrame:
    """Pairs of runs that differ only in the reply length cap ``max_new_tokens`` (and their label).

    ``runpairs.cap_pairs`` (the one definition of "differ only in the cap") with the pair's name
    in ``model`` (the model key both runs ran).

    Args:
        settings: ``Store.run_settings`` (run_id, model, decoding, config, … as JSON text).
    Returns:
        model, run_short, run_long, model_short, model_long, cap_short, cap_long — one row per
        pair, the shorter cap first; empty with those columns when there is none.
    """
    pairs = runpairs.cap_pairs(settings)
    return pairs.rename(columns={"model_key": "model"})[
        ["model", "run_short", "run_long", "model_short", "model_long", "cap_short", "cap_long"]]


def cap_option_label(cap: int) -> str:
    """Option name of a reply length cap: ``"max_new_tokens = 48"``."""
    return f"max_new_tokens = {int(cap)}"


def cap_option_scores(scores: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """Scores of each pair's two runs as two options of one model (the pair's common name).

    Args:
        scores: ``Store.prompt_scores`` (with run_id); option axes are dropped.
        pairs: ``cap_pairs``. A run in several pairs appears once per pair.
    """
    plain = _plain(scores)
    frames = []
    for p in pairs.itertuples(index=False):
        for run, cap in ((p.run_short, p.cap_short), (p.run_long, p.cap_long)):
            frames.append(plain[plain["run_id"] == run].assign(model=p.model, option=cap_option_label(cap)))
    if not frames:
        return pd.DataFrame(columns=SCORE_COLS)
    return pd.concat(frames, ignore_index=True)[SCORE_COLS]


# ====================================================================== collect every choice of a store
def _how_to_store(base: str) -> str:
    """How a run stores the option axes of ``base`` (``OPTION_AXIS_SPECS``): by default or when listed."""
    specs = [sp for sp in OPTION_AXIS_SPECS.values() if sp.base == base]
    always = [sp.name for sp in specs if not sp.opt_in]
    listed = [sp.name for sp in specs if sp.opt_in]
    parts = []
    if always:
        hidden = any(not sp.stored_without_hidden_states for sp in specs if not sp.opt_in)
        parts.append(f"A run writes {', '.join(always)} by default ([run] axis_options)"
                     + ("; API runs cannot (no hidden states)." if hidden else "."))
    if listed:
        parts.append(f"A run writes {', '.join(listed)} only when its [run] axis_options lists them.")
    return " ".join(parts) or "sago computes no option of this axis."


def _option_note(name: str) -> str:
    """What an option axis is, from its ``OptionAxisSpec`` (an option sago does not compute: its name)."""
    spec = OPTION_AXIS_SPECS.get(name)
    return f"stored as axis {name}" if spec is None else f"stored as axis {name}: {spec.definition}"


def collect_choices(store: Store, f: Filters | None = None, q: float = 0.95,
                    cap_store: str | os.PathLike | None = None) -> list[Choice]:
    """Every open choice this store can show, each with its options' per-prompt scores.

    Args:
        store: an open ``Store`` (read-only is enough).
        f: the dashboard's filters (apply to every option).
        q: quantile of |Δ| for the data-driven R_X and the per-token R (the Significance page's default).
        cap_store: path of the bundled reply-length-cap store, named in the hint when this store has
            no cap pair (None: not mentioned).
    Returns:
        Choices in page order: one per option-axis base (Δ-Cos and Δ-BERT first, always listed,
        with ``missing`` set when the store has no such option axes), R_X, clipping, Δ-Prob,
        references (prompts with a degenerate base reply left out), reply length cap. A choice without two options has ``missing`` saying why and how to get them.
    """
    # an axis whose base is not one of the six (a foreign or damaged store) has no choice to compare
    names = [a for a in store.axis_names() if str(a).split(OPTION_SEP, 1)[0] in AXES]
    plain_axes = tuple(a for a in names if option_of(a) is None)
    opts = option_axes(names)
    out: list[Choice] = []
    titles = {"cos": "token position and layers", "bert": "encoder and scale",
              "prob": "the model's own reply vs the base reply", "ent": "the model's own reply vs the base reply",
              "mr": "the paper's rules vs the authors' code"}
    how = ("This store has no {label} option axes ({base}@<option> rows of the deltas table). {which} "
           "The rows sit beside the paper's {label} and change no other page.")
    for base in dict.fromkeys(["cos", "bert", *opts["base"]]):
        label = AXIS_LABELS.get(base, base)
        o = tuple(opts.loc[opts["base"] == base, "option"])
        ch = Choice(key=f"axis:{base}", title=f"{label}: {titles.get(base, 'options')}", axes=(base,),
                    reference=DEFAULT_OPTION, options=(DEFAULT_OPTION, *o))
        if not o:
            ch.missing = how.format(label=label, base=base, which=_how_to_store(base))
        else:
            sc = store.prompt_scores(f, axes=tuple(plain_axes) + tuple(f"{base}{OPTION_SEP}{x}" for x in o))
            ch.scores = axis_option_scores(sc, base, o)
            ch.notes = {DEFAULT_OPTION: f"{label} as the run computed it (the paper's definition)",
                        **{x: _option_note(f"{base}{OPTION_SEP}{x}") for x in o}}
        out.append(ch)
    scores = store.prompt_scores(f, axes=plain_axes)

    quant = store.delta_abs_quantiles(f, q=float(q))
    rx = report.data_driven_normalizers(quant, paper=DEFAULT_NORMALIZERS)
    ch = Choice(key="rx", title="R_X: the paper's normalizers vs data-driven", axes=tuple(a for a in AXES if a in plain_axes),
                reference="paper R_X", options=("paper R_X", "data-driven R_X"))
    if len(rx) and len(scores):
        data_sc = store.prompt_scores_rescaled(f, normalizers=tuple(zip(rx["axis"], rx["r_data"])))
        ch.scores = normalizer_option_scores(scores, data_sc)
        ch.notes = {"paper R_X": "R_X = " + ", ".join(f"{AXIS_LABELS.get(a, a)} {DEFAULT_NORMALIZERS[a]:g}" for a in AXES),
                    "data-driven R_X": f"R_X = the {q:.0%} quantile of |Δ| per axis: " + ", ".join(
                        f"{AXIS_LABELS.get(a, a)} {v:.4g}" for a, v in zip(rx["axis"], rx["r_data"]))
                    + ". " + report.rx_pooling(quant)}
    else:
        ch.missing = "No deltas for the current filter."
    out.append(ch)

    ch = Choice(key="clip", title="Δ̃: clipped to [−1, 1] vs unclipped",
                axes=tuple(a for a in AXES if a in plain_axes), reference=CLIPPED, options=(CLIPPED, UNCLIPPED))
    paper_rx = tuple((a, DEFAULT_NORMALIZERS[a]) for a in AXES if a in plain_axes)
    if len(scores):
        ch.scores = clip_option_scores(store.prompt_scores_rescaled(f, normalizers=paper_rx),
                                       store.prompt_scores_rescaled(f, normalizers=paper_rx, clip=False))
        ch.notes = {CLIPPED: "Δ̃ = clip(Δ / R_X, −1, 1), the paper's R_X (the paper's text)",
                    UNCLIPPED: "Δ̃ = Δ / R_X, not clipped, the paper's R_X (the authors' code)"}
    else:
        ch.missing = "No deltas for the current filter."
    out.append(ch)

    ch = Choice(key="prob", title=f"{AXIS_SPECS['prob'].label}: per sequence vs per token", axes=("prob",),
                reference="per sequence", options=("per sequence", "per token"))
    sc, r = per_token_option_scores(scores, store.per_token_logprob_deltas(f), q=q)
    if sc["option"].nunique() < 2:
        ch.missing = ("No sequence log-probs stored for the current filter (closed models do not expose them; "
                      "local runs store them in responses.seq_logprob).")
    else:
        ch.scores = sc
        ch.notes = {"per sequence": f"Δ of the summed log-prob, R = {AXIS_SPECS['prob'].normalizer:g} (the paper)",
                    "per token": f"Δ of log-prob / n_tokens, R = {r:.4g} (the {q:.0%} quantile of |Δ per token|)"}
    out.append(ch)

    flags = degenerate.reply_flags(store.reply_texts(f, base_only=True))
    n_bad = flags[flags["kind"] != ""].groupby("model").size()
    ch = Choice(key="references", title="References: every base reply vs base replies that are answers",
                axes=tuple(a for a in AXES if a in plain_axes), reference=ALL_PROMPTS,
                options=(ALL_PROMPTS, ANSWERS_ONLY))
    if n_bad.empty or not len(scores):
        ch.missing = ("No base reply in the current filter is a repetition loop, an echo of the prompt or token "
                      "salad (sago_engine.external.degenerate), so every reference is an answer.")
    else:
        ch.scores = reference_option_scores(scores, flags)
        ch.notes = {ALL_PROMPTS: "s_X(i) of every prompt, whatever the base reply",
                    ANSWERS_ONLY: "without the prompts whose base reply (that model's) is degenerate: "
                                  + ", ".join(f"{m} {int(k)}" for m, k in n_bad.items())}
    out.append(ch)

    pairs = cap_pairs(store.run_settings())
    ch = Choice(key="cap", title="Reply length cap: max_new_tokens", axes=tuple(a for a in AXES if a in plain_axes),
                reference="")
    if pairs.empty:
        where = (f" The bundled store {os.path.basename(str(cap_store))} holds such a pair: pick it in the sidebar."
                 if cap_store is not None and os.path.exists(cap_store) else "")
        ch.missing = ("This store has no two runs of one model that differ only in the reply cap (and the model "
                      "label). Give a config two [[models]] entries of the same key with different label and "
                      "max_new_tokens, as precompute/configs/ablation_cap.toml does." + where)
    else:
        ch.scores = cap_option_scores(scores, pairs)
        caps = sorted({int(c) for c in pairs["cap_short"]} | {int(c) for c in pairs["cap_long"]})
        ch.options = tuple(cap_option_label(c) for c in caps)
        ch.reference = ch.options[0]
        ch.notes = {f"{p.model}": f"runs {p.model_short} (cap {p.cap_short}) and {p.model_long} (cap {p.cap_long})"
                    for p in pairs.itertuples(index=False)}
    out.append(ch)
    return out


# ====================================================================== per-choice summaries
def option_sgs(opt_scores: pd.DataFrame, axes: Sequence[str], eps: float = MAIN_EPSILON, n_resamples: int = 1000,
               seed: int = 0) -> pd.DataFrame:
    """SGS per option × model × axis (``axes`` only) with the t-test at ε and a studentized-bootstrap CI.

    ``report.sgs_ci_table`` per option (raw p; B = ``n_resamples``, ``seed``). Returns option,
    model, axis, axis_label, sgs, lo, hi, n_prompts, p, marker, status, ci_cell.
    """
    cols = ["option", "model", "axis", "axis_label", "sgs", "lo", "hi", "n_prompts", "p", "marker", "status", "ci_cell"]
    frames = []
    for o, g in opt_scores[opt_scores["axis"].isin(list(axes))].groupby("option", sort=False):
        t = report.sgs_ci_table(g, eps, n_resamples=n_resamples, seed=seed)
        frames.append(t.assign(option=o, axis_label=t["axis"].map(lambda a: AXIS_LABELS.get(a, a))))
    if not frames:
        return pd.DataFrame(columns=cols)
    return pd.concat(frames, ignore_index=True)[cols]


def _discordant(x: np.ndarray, y: np.ndarray) -> int:
    n = len(x)
    return int(sum(1 for i in range(n) for j in range(i + 1, n) if (x[i] - x[j]) * (y[i] - y[j]) < 0))


def rank_agreement(table: pd.DataFrame, reference: str) -> pd.DataFrame:
    """How the models' order on each axis under each option compares with the ``reference`` option.

    Args:
        table: ``option_sgs`` (option, model, axis, sgs).
        reference: the option compared against.
    Returns:
        option, axis, axis_label, n_models (with SGS under both), n_discordant (pairs of models
        whose order flips), tau (Kendall's τ-b; 1 = same order, −1 = reversed), p (two-sided,
        H0: τ = 0), p_method (how p was computed: ``rankcorr.METHOD_*``; "" when τ is NaN),
        reason (why τ is NaN: fewer than ``MIN_MODELS_RANK`` models, or every model has the same
        SGS under one option).
    """
    cols = ["option", "axis", "axis_label", "n_models", "n_discordant", "tau", "p", "p_method", "reason"]
    rows = []
    ref = table[table["option"] == reference]
    for (o, a), g in table[table["option"] != reference].groupby(["option", "axis"], sort=False):
        m = g[["model", "sgs"]].merge(ref.loc[ref["axis"] == a, ["model", "sgs"]], on="model",
                                      suffixes=("", "_ref")).dropna()
        x, y = m["sgs_ref"].to_numpy(float), m["sgs"].to_numpy(float)
        n = len(m)
        tau = p = float("nan")
        method = ""
        if n < MIN_MODELS_RANK:
            reason = f"{n} model(s) with SGS under both options; a rank correlation needs at least {MIN_MODELS_RANK}"
        elif np.ptp(x) == 0 or np.ptp(y) == 0:
            reason = "every model has the same SGS under one of the options (no order to compare)"
        else:
            res = rankcorr.kendall_tau(x, y, seed_parts=("rank_agreement", o, a))
            tau, p, method, reason = res.tau, res.p, res.method, ""
        rows.append({"option": o, "axis": a, "axis_label": AXIS_LABELS.get(a, a), "n_models": n,
                     "n_discordant": _discordant(x, y), "tau": tau, "p": p, "p_method": method,
                     "reason": reason})
    return pd.DataFrame(rows, columns=cols)


def claims(opt_scores: pd.DataFrame, axes: Sequence[str], eps: float = MAIN_EPSILON, n_resamples: int = 1000,
           seed: int = 0) -> pd.DataFrame:
    """Which of the paper's claims hold under each option.

    (a) every model is above ε on some axis: each model has an axis with one-sided p < 0.05
    (``report.significance_table``, raw p, all axes of the option); (b) Δ-BLEU and Δ-MR at
    p < 0.001 for every model that has them; (c) rankings reverse across datasets: at least one
    pair of models on one of ``axes`` (the axes the choice changes) has a bootstrap reversal
    probability ≥ 0.95 (``report.reversal_table``, as on the Rankings page).

    Returns option, claim, holds (True / False / None = cannot be tested here), detail.
    """
    rows = []
    for o, g in opt_scores.groupby("option", sort=False):
        sig = report.significance_table(g, eps)
        per_model = sig.groupby("model")["p"].min()
        above = per_model < ALPHA_ABOVE
        miss = sorted(per_model.index[~above])
        rows.append({"option": o, "claim": CLAIM_A, "holds": bool(above.all()) if len(above) else None,
                     "detail": f"{int(above.sum())}/{len(above)} models above ε = {eps:g} on some axis"
                               + (f"; not: {', '.join(miss)}" if miss else "")})
        parts, ok, tested = [], True, False
        for a in ("bleu", "mr"):
            s = sig[sig["axis"] == a]
            if s.empty:
                parts.append(f"{AXIS_LABELS[a]} n/a")
                continue
            tested = True
            k = int((s["p"] < ALPHA_STRICT).sum())
            ok &= k == len(s)
            parts.append(f"{AXIS_LABELS[a]} {k}/{len(s)}")
        rows.append({"option": o, "claim": CLAIM_B, "holds": bool(ok) if tested else None,
                     "detail": "models at p < 0.001: " + ", ".join(parts)})
        sub = g[g["axis"].isin(list(axes))]
        if sub["model"].nunique() < 2 or sub["dataset"].nunique() < 2:
            rows.append({"option": o, "claim": CLAIM_C, "holds": None,
                         "detail": "needs two models and two datasets"})
        else:
            rv = report.reversal_table(sub, n_resamples=n_resamples, seed=seed)
            called, flips = int(rv["reversal"].astype(bool).sum()), int(rv["observed_flip"].astype(bool).sum())
            on = ", ".join(AXIS_LABELS.get(a, a) for a in axes)
            rows.append({"option": o, "claim": CLAIM_C, "holds": called > 0,
                         "detail": f"{called} reversal(s) with P ≥ {report.REVERSAL_THRESHOLD:g}, {flips} order "
                                   f"flip(s) in the point estimates, on {on}"})
    return pd.DataFrame(rows, columns=["option", "claim", "holds", "detail"])


def paper_scale(table: pd.DataFrame, axes: Sequence[str]) -> pd.DataFrame:
    """How far each option's SGS is from the scale the paper published (Figure 2a, its eight open models).

    For option o and axis X: the median over models of SGS (``option_sgs``) against the range
    [min, max] of the paper's open models on X. distance = 0 inside the range, else
    |log10(median / nearest end)| — orders of magnitude outside (SGS below ``SCALE_FLOOR`` counts
    as ``SCALE_FLOOR``). Returns option, axis, axis_label, median_sgs, paper_lo, paper_hi,
    distance, direction ("inside" | "below" | "above"); axes without a paper value are left out.
    """
    ref = paper.figure_2a().groupby("axis")["sgs"].agg(["min", "max"])
    rows = []
    for (o, a), g in table[table["axis"].isin(list(axes))].dropna(subset=["sgs"]).groupby(["option", "axis"], sort=False):
        if a not in ref.index:
            continue
        lo, hi = float(ref.loc[a, "min"]), float(ref.loc[a, "max"])
        med = float(np.median(g["sgs"].to_numpy(float)))
        v = max(med, SCALE_FLOOR)
        if v < lo:
            d, where = math.log10(lo / v), "below"
        elif v > hi:
            d, where = math.log10(v / hi), "above"
        else:
            d, where = 0.0, "inside"
        rows.append({"option": o, "axis": a, "axis_label": AXIS_LABELS.get(a, a), "median_sgs": med, "paper_lo": lo,
                     "paper_hi": hi, "distance": d, "direction": where})
    return pd.DataFrame(rows, columns=["option", "axis", "axis_label", "median_sgs", "paper_lo", "paper_hi",
                                       "distance", "direction"])


def closest_options(scale: pd.DataFrame) -> pd.DataFrame:
    """Per option: mean ``paper_scale`` distance over its axes, and whether it is the closest (ties all closest).

    Returns option, distance (mean, orders of magnitude), n_axes, closest (bool), sorted by distance.
    """
    if scale.empty:
        return pd.DataFrame(columns=["option", "distance", "n_axes", "closest"])
    g = scale.groupby("option", sort=False).agg(distance=("distance", "mean"), n_axes=("axis", "size")).reset_index()
    best = g["distance"].min()
    g["closest"] = np.isclose(g["distance"], best, rtol=0, atol=1e-12)
    return g.sort_values(["distance", "option"]).reset_index(drop=True)


def choice_summary(opt_scores: pd.DataFrame, axes: tuple[str, ...], reference: str, eps: float = MAIN_EPSILON,
                   n_resamples: int = 1000, seed: int = 0) -> dict[str, pd.DataFrame]:
    """Everything the Method choices page shows for one choice.

    Returns ``{"sgs": option_sgs, "ranks": rank_agreement, "claims": claims, "scale": paper_scale,
    "closest": closest_options}`` (``sgs`` and ``scale`` over ``axes``; claims (a) and (b) over all axes).
    """
    sgs_t = option_sgs(opt_scores, axes, eps, n_resamples, seed)
    scale = paper_scale(sgs_t, axes)
    return {"sgs": sgs_t, "ranks": rank_agreement(sgs_t, reference),
            "claims": claims(opt_scores, axes, eps, n_resamples, seed), "scale": scale,
            "closest": closest_options(scale)}


def closest_statement(title: str, closest: pd.DataFrame, scale: pd.DataFrame) -> str:
    """One sentence: which option(s) of a choice come closest to the paper's published scale, and how far.

    Args:
        title: the choice's title.
        closest / scale: ``choice_summary``'s ``"closest"`` and ``"scale"``.
    """
    if closest.empty:
        return f"{title}: no option has an axis the paper published."
    best = closest[closest["closest"]]
    names = ", ".join(f"'{o}'" for o in best["option"])
    d = float(best["distance"].iloc[0])
    far = "inside the paper's range on every axis it changes" if d == 0 else (
        f"{d:.2f} orders of magnitude (×{10 ** d:.1f}) from the paper's range on average")
    others = closest[~closest["closest"]]
    rest = "; ".join(f"'{r.option}' {r.distance:.2f}" for r in others.itertuples(index=False))
    return f"{title}: {names} come{'s' if len(best) == 1 else ''} closest — {far}" + (f" (others: {rest})." if rest else ".")


# ====================================================================== wide tables for the page
def option_wide(table: pd.DataFrame, options: Sequence[str]) -> pd.DataFrame:
    """``option_sgs`` as model × axis rows with one column per option: "SGS [lo, hi] marker" (n/a when missing)."""
    if table.empty:
        return pd.DataFrame(columns=["model", "axis_label", *options])
    w = table.pivot_table(index=["model", "axis_label"], columns="option", values="ci_cell", aggfunc="first")
    w = w.reindex(columns=[o for o in options if o in w.columns]).astype(object).fillna("n/a")
    w.columns.name = None
    return w.reset_index()


def claims_wide(table: pd.DataFrame, options: Sequence[str]) -> pd.DataFrame:
    """``claims`` as claim rows × option columns: "holds" / "fails" / "n/a", each followed by its detail."""
    if table.empty:
        return pd.DataFrame(columns=["claim", *options])
    word = {True: "holds", False: "fails"}
    t = table.assign(cell=[f"{word.get(h, 'n/a') if h is not None else 'n/a'} — {d}"
                           for h, d in zip(table["holds"], table["detail"])])
    w = t.pivot_table(index="claim", columns="option", values="cell", aggfunc="first")
    w = w.reindex(index=[c for c in (CLAIM_A, CLAIM_B, CLAIM_C) if c in w.index],
                  columns=[o for o in options if o in w.columns])
    w.columns.name = None
    return w.reset_index()
