"""Which headline conclusions depend on an open choice of the method, named next to the claim.

The Method choices page (``method_choices``) shows every open choice in full: Δ-Cos's token
position and layers, Δ-BERT's encoder and scale, R_X from the paper or from the data, Δ-Prob per
sequence or per token, the reply length cap. The summary pages state conclusions — "model A is
the most stable on Δ-Cos", "model B is above ε on Δ-BLEU" — that rest on the stored default of
each choice. Here each such conclusion is recomputed under every other option the store holds:

* **ranking** — the order of the models by SGS on an axis (per dataset, or pooled). It changes
  when at least one pair of models swaps order (strictly: a tie on either side is not a swap),
  the pairs Kendall's τ counts as discordant (``method_choices.rank_agreement``);
* **verdict** — the one-sided t-test of H0: E[s] ≤ ε (SAGO §Significance) at α = 0.05 on the
  (adjusted) p of ``report.significance_table``. It changes when a model × axis (× dataset) is
  above ε under one option and not under the other.

Only the axes a choice changes are compared (an option of Δ-Cos leaves Δ-BLEU as it is).
Pure functions over ``method_choices.Choice`` scores; no store access, no Streamlit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pandas as pd

from sago_engine.scoring.scores import MAIN_EPSILON
from sago_engine.types import AXIS_LABELS
from sago_engine.views import report

#: α of the verdict "above ε" (the Significance page's * marker).
ALPHA = 0.05
#: Kinds of conclusion checked.
RANKING, VERDICT = "ranking", "verdict"
#: At most this many models / pairs are named in one sentence (then "and k more").
MAX_NAMED = 3

_FRAME_COLS = ["choice", "title", "reference", "changes", "option", "model", "dataset", "prompt_id", "axis", "s"]
_COLS = ["choice", "title", "option", "reference", "kind", "axis", "axis_label", "dataset", "changed", "detail"]


def choice_frame(choices: Iterable) -> pd.DataFrame:
    """The per-prompt scores of every available choice, stacked into one frame.

    Args:
        choices: ``method_choices.collect_choices`` (``Choice`` objects; those without two options
            are skipped).
    Returns:
        choice (key), title, reference (the option the others are compared with), changes (the
        axes the choice changes, comma-joined), option, model, dataset, prompt_id, axis, s.
    """
    frames = []
    for ch in choices:
        if not ch.available or not ch.reference:
            continue
        sc = ch.scores[ch.scores["axis"].isin(list(ch.axes))]
        frames.append(sc.assign(choice=ch.key, title=ch.title, reference=ch.reference, changes=",".join(ch.axes)))
    if not frames:
        return pd.DataFrame(columns=_FRAME_COLS)
    return pd.concat(frames, ignore_index=True)[_FRAME_COLS]


def _names(items: Sequence[str]) -> str:
    shown = list(items)[:MAX_NAMED]
    more = len(items) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _swaps(ref: pd.Series, opt: pd.Series) -> list[tuple[str, str]]:
    """Pairs (a, b) of models with a ahead of b (lower SGS) under ``ref`` and behind it under ``opt``."""
    models = sorted(set(ref.index) & set(opt.index))
    out = []
    for i, a in enumerate(models):
        for b in models[i + 1:]:
            dr, do = ref[a] - ref[b], opt[a] - opt[b]
            if dr * do < 0:
                out.append((a, b) if dr < 0 else (b, a))
    return out


def sensitivity(frame: pd.DataFrame, eps: float = MAIN_EPSILON, per_dataset: bool = False,
                correction: str = "none") -> pd.DataFrame:
    """Rankings and verdicts that change between a choice's reference option and another option.

    Args:
        frame: ``choice_frame``.
        eps: ε of the verdict (SGS units, ≥ 0).
        per_dataset: one ranking / test per dataset (the Rankings page, a Profiles dataset scope)
            instead of pooling every prompt.
        correction: "none" | "holm" | "bh", applied per option over the tests of the axes compared
            (``report.significance_table``).
    Returns:
        One row per changed conclusion: choice, title, option, reference, kind (``RANKING`` |
        ``VERDICT``), axis, axis_label, dataset ("" when pooled), changed (the swapped pairs
        "a > b" — a ahead under the reference — or the models whose verdict flips, comma-joined),
        detail (one clause, plain text). Empty with those columns when nothing changes.
    """
    rows = []
    by = ["axis", "dataset"] if per_dataset else ["axis"]
    for key, g in frame.groupby("choice", sort=False):
        title, reference = g["title"].iloc[0], g["reference"].iloc[0]
        sig = {o: report.significance_table(s, float(eps), per_dataset=per_dataset, correction=correction)
               for o, s in g.groupby("option", sort=False)}
        if reference not in sig:
            continue
        ref = sig[reference].dropna(subset=["sgs"])
        for o, t in sig.items():
            if o == reference:
                continue
            t = t.dropna(subset=["sgs"])
            for grp, r in ref.groupby(by, sort=False):
                a = grp[0] if isinstance(grp, tuple) else grp
                d = grp[1] if per_dataset else ""
                sel = (t["axis"] == a) & ((t["dataset"] == d) if per_dataset else True)
                u = t[sel]
                base = {"choice": key, "title": title, "option": o, "reference": reference, "axis": a,
                        "axis_label": AXIS_LABELS.get(a, a), "dataset": d}
                swaps = _swaps(r.set_index("model")["sgs"], u.set_index("model")["sgs"])
                if swaps:
                    top_r = r.sort_values(["sgs", "model"])["model"].iloc[0]
                    common = u[u["model"].isin(r["model"])]
                    top_o = common.sort_values(["sgs", "model"])["model"].iloc[0] if len(common) else top_r
                    n = f"{len(swaps)} pair{'s' if len(swaps) > 1 else ''} of models swap{'' if len(swaps) > 1 else 's'} order"
                    rows.append({**base, "kind": RANKING, "changed": ", ".join(f"{x} > {y}" for x, y in swaps),
                                 "detail": (f"{top_o} is the most stable instead of {top_r}; {n}" if top_o != top_r
                                            else f"{n} ({_names([f'{x} and {y}' for x, y in swaps])})")})
                m = r.set_index("model")["p_adj"].lt(ALPHA).to_frame("ref").join(
                    u.set_index("model")["p_adj"].lt(ALPHA).to_frame("opt"), how="inner")
                flips = m[m["ref"] != m["opt"]]
                if len(flips):
                    up = sorted(flips.index[flips["opt"]])
                    down = sorted(flips.index[~flips["opt"]])
                    parts = ([f"{_names(up)} {'are' if len(up) > 1 else 'is'} then above ε"] if up else []) + (
                        [f"{_names(down)} {'are' if len(down) > 1 else 'is'} then not above ε"] if down else [])
                    rows.append({**base, "kind": VERDICT, "changed": ", ".join(sorted(flips.index)),
                                 "detail": "; ".join(parts)})
    return pd.DataFrame(rows, columns=_COLS)


def statements(table: pd.DataFrame, kinds: Sequence[str] = (RANKING, VERDICT), axes: Sequence[str] | None = None,
               dataset: str | None = None, eps: float = MAIN_EPSILON) -> list[str]:
    """Sentences for a page: one per choice × kind × axis × outcome among ``sensitivity`` rows.

    Options of one choice with the same outcome share a sentence; per-dataset rows are summed up
    as the datasets where the outcome changes.

    Args:
        table: ``sensitivity``.
        kinds: the conclusions the page states (``RANKING``, ``VERDICT``).
        axes: only these axes (None: all).
        dataset: only this dataset (None: every row).
        eps: ε named in verdict sentences.
    Returns:
        Plain-text sentences, e.g. "Δ-Cos ranking depends on Δ-Cos: token position and layers —
        under user_last, user_mean (instead of default): b is the most stable instead of a; 2
        pairs of models swap order." Empty when nothing changes. Model, dataset and option names
        come from the store: escape them for Markdown.
    """
    t = table[table["kind"].isin(list(kinds))]
    if axes is not None:
        t = t[t["axis"].isin(list(axes))]
    if dataset is not None:
        t = t[t["dataset"] == dataset]
    out = []
    for (_c, kind, _a), g in t.groupby(["choice", "kind", "axis"], sort=False):
        outcome: dict[str, list[str]] = {}
        for o, h in g.groupby("option", sort=False):
            if (h["dataset"] != "").any():
                ds = sorted(h["dataset"])
                key = f"the {kind} changes on {len(ds)} dataset{'s' if len(ds) > 1 else ''} ({_names(ds)})"
            else:
                key = h["detail"].iloc[0]
            outcome.setdefault(key, []).append(str(o))
        what = "ranking" if kind == RANKING else f"verdict at ε = {eps:g}"
        for key, opts in outcome.items():
            out.append(f"{g['axis_label'].iloc[0]} {what} depends on {g['title'].iloc[0]} — under {_names(opts)} "
                       f"(instead of {g['reference'].iloc[0]}): {key}.")
    return out
