"""Noise floor: how much a model's replies move when the *same* prompt is asked again.

API models are not deterministic at temperature 0 (and some are sampled by default), so part
of every Δ between a base reply and a variant reply is the provider's own noise. sago asks the
base prompt k times (``base_repeats``; default 2 for API models, 1 for greedy local ones) and
computes each axis's Δ between the first base reply and repeat r = 1..k−1 with the same axis
functions as the variants (SAGO, arXiv 2610.01428 §Axes; normalised by the same R_X). The
floor of a prompt is the RMS of those normalised Δ (the same statistic as s_X(i), with repeats
in place of variants); the floor of a model × axis is its mean over prompts, next to the SGS.

The test against the floor asks whether the instability is above what repeating the same
prompt gives: a one-sided paired t-test over prompts of H0: E[s_X(i) − f_X(i)] ≤ 0
(``scoring.ttest_greater`` on the differences), beside the paper's test against ε.
Δ-MR has no floor (a repeat has no register or attribute to mirror).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sago_engine.axes import delta_fn
from sago_engine.axis_spec import AXIS_SPECS
from sago_engine.measure.pipeline import _unavailable_reason
from sago_engine.measure.reply_flags import reply_flags
from sago_engine.scoring.scores import marker, normalize, scores_from_stats, sgs_of, sufficient_stats, ttest_greater
from sago_engine.seeds import stable_hash
from sago_engine.types import AXES, GenerationResult

__all__ = ["FLOOR_COLUMNS", "REPEAT_COLUMNS", "RepeatUnit", "floor_rows", "floor_table", "repeat_response_id"]

REPEAT_COLUMNS = ["response_id", "run_id", "prompt_id", "repeat", "response", "n_tokens", "seq_logprob", "mean_entropy",
                  "finish_reason", "latency_s", "error", "flags"]
FLOOR_COLUMNS = ["run_id", "dataset", "prompt_id", "repeat", "axis", "delta", "delta_norm", "available", "reason"]
#: The reason of an axis that needs a variant (``AxisSpec.needs_variant``: Δ-MR) on a repeat.
_NO_FLOOR = "a repeat of the base prompt has no register or attribute to mirror"


def repeat_response_id(run_id: str, prompt_id: str, repeat: int) -> str:
    """Key of repeat ``repeat`` (≥ 1) of a base prompt; never equal to ``pipeline.response_id``'s
    base key (which hashes ``"<base>"`` in the variant slot)."""
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1 (0 is the base row of responses), got {repeat}")
    return stable_hash(run_id, prompt_id, f"<base#{int(repeat)}>", length=20)


@dataclass
class RepeatUnit:
    """One base prompt's first reply and its repeats (repeat r = index + 1)."""

    prompt_id: str
    dataset: str
    base: GenerationResult
    repeats: Sequence[GenerationResult]


def floor_rows(run_id: str, units: Sequence[RepeatUnit], normalizers: Mapping[str, float],
               capabilities: frozenset[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Repeat responses and their Δ against the base reply, per axis (one batched BERTScore call).

    Args:
        run_id: the run; units: base replies with their repeats; normalizers: R_X per axis;
            capabilities: the backend's white-box axes (subset of {"cos","prob","ent"}).
    Returns:
        (repeats, floor): ``base_repeats`` rows (``REPEAT_COLUMNS``) and ``noise_floor`` rows
        (``FLOOR_COLUMNS``; len(AXES) per repeat). An axis that cannot be measured (an error,
        a reply with no visible text because the token budget ran out, a missing capability,
        Δ-MR always) has NULL delta, ``available`` False and a reason — never 0.
    Source: SAGO (arXiv 2610.01428) §Axes (same Δ definitions as the variants).
    """
    measured = [a for a in AXES if not AXIS_SPECS[a].needs_variant]  # Δ-MR needs a variant: no floor
    reps = [r for u in units for r in u.repeats]
    bases = [u.base for u in units for _ in u.repeats]
    raw_all = {a: delta_fn(a)(reps, bases) for a in measured}  # one batched BERTScore call
    rep_rows, rows, k = [], [], 0
    for u in units:
        n = len(u.repeats)
        if not n:
            continue
        raw = {a: v[k: k + n] for a, v in raw_all.items()}
        k += n
        for j, r in enumerate(u.repeats):
            rep = j + 1
            rep_rows.append({"response_id": repeat_response_id(run_id, u.prompt_id, rep), "run_id": run_id,
                             "prompt_id": u.prompt_id, "repeat": rep, "response": r.text, "n_tokens": int(r.n_tokens),
                             "seq_logprob": r.seq_logprob, "mean_entropy": r.mean_entropy,
                             "finish_reason": r.finish_reason, "latency_s": float(r.latency_s), "error": r.error,
                             "flags": reply_flags(r)})
            for axis in AXES:
                reason = _NO_FLOOR if axis not in raw else _unavailable_reason(axis, capabilities, u.base, r)
                d = float(raw[axis][j]) if axis in raw else float("nan")
                if reason is None and np.isfinite(d):
                    rows.append((run_id, u.dataset, u.prompt_id, rep, axis, d, float(normalize(d, normalizers[axis])),
                                 True, None))
                else:
                    rows.append((run_id, u.dataset, u.prompt_id, rep, axis, None, None, False, reason or "not computed"))
    return pd.DataFrame(rep_rows, columns=REPEAT_COLUMNS), pd.DataFrame(rows, columns=FLOOR_COLUMNS)


def floor_table(scores: pd.DataFrame, floor: pd.DataFrame, by: Sequence[str] = ("model", "axis"),
                alpha: float = 0.05) -> pd.DataFrame:
    """SGS beside its noise floor and the test against the floor, per model × axis.

    Args:
        scores: per-prompt scores with columns ``by`` + ``prompt_id``, ``s`` (e.g.
            ``Store.prompt_scores``).
        floor: ``Store.noise_floor`` rows (model, prompt_id, repeat, axis, delta_norm, available).
        by: grouping (must include ``axis``).
        alpha: level for ``above_floor``.
    Returns:
        One row per group with scores: ``by`` + sgs (mean s over prompts), floor (mean over
        prompts of f(i) = RMS over repeats of the normalised Δ; NaN without repeats), n_prompts,
        n_paired (prompts with both), t, p (one-sided paired t-test of s − f > 0), marker,
        above_floor (p < alpha). Groups without a floor keep floor/t/p NaN.
    Source: scoring.ttest_greater (scipy.stats.ttest_1samp, alternative="greater") on s − f.
    """
    by = list(by)
    cols = [*by, "sgs", "floor", "n_prompts", "n_paired", "t", "p", "marker", "above_floor"]
    if scores.empty:
        return pd.DataFrame(columns=cols)
    f = floor[floor["available"].astype(bool)] if len(floor) else floor
    if len(f):
        st = sufficient_stats(f, "delta_norm", (*by, "prompt_id"))  # f(i): the RMS over repeats
        fp = scores_from_stats(st, keep=(*by, "prompt_id")).rename(columns={"s": "f"})[[*by, "prompt_id", "f"]]
    else:
        fp = pd.DataFrame(columns=[*by, "prompt_id", "f"])
    m = scores[[*by, "prompt_id", "s"]].merge(fp, on=[*by, "prompt_id"], how="left")
    out = []
    for key, g in m.groupby(by, sort=True, observed=True):
        key = key if isinstance(key, tuple) else (key,)
        paired = g.dropna(subset=["f"])
        t = p = float("nan")
        if len(paired):
            t, p = ttest_greater(paired["s"].to_numpy(float) - paired["f"].to_numpy(float), 0.0)
        out.append({**dict(zip(by, key)), "sgs": sgs_of(g["s"]),
                    "floor": sgs_of(paired["f"]),
                    "n_prompts": int(len(g)), "n_paired": int(len(paired)), "t": t, "p": p, "marker": marker(p),
                    "above_floor": bool(np.isfinite(p) and p < alpha)})
    return pd.DataFrame(out, columns=cols)


def reply_health_table(health: pd.DataFrame) -> pd.DataFrame:
    """Per model: replies that are not answers, as counts and shares (for display beside SGS).

    Args:
        health: ``Store.reply_health()`` rows (one per run).
    Returns:
        One row per model: model, replies, errors, empty, budget_spent (empty because the token
        budget went to hidden reasoning), refused, judge_unparsed (judge answers without an
        unambiguous YES/NO, which fell back to the heuristic), invalid_logprobs (replies whose
        server log-probs were set aside: their Δ-Prob / Δ-Ent are n/a), and ``not_answers_pct`` =
        100 · (errors + empty + refused) / replies (the three are disjoint).
    """
    cols = ["model", "replies", "errors", "empty", "budget_spent", "refused", "judge_unparsed", "invalid_logprobs",
            "not_answers_pct"]
    if health is None or health.empty:
        return pd.DataFrame(columns=cols)
    num = ["replies", "errors", "empty", "budget_spent", "refused", "judge_unparsed", "invalid_logprobs"]
    g = health.groupby("model", sort=True)[num].sum().reset_index()
    g["not_answers_pct"] = (100.0 * (g["errors"] + g["empty"] + g["refused"]) / g["replies"].clip(lower=1)).round(1)
    return g[cols]
