"""Chart and table data for one prompt's detail view: variant labels, Δ̃ heatmap cells, responses side by side.

SAGO (arXiv 2610.01428) §Notation: Δ̃X(i, v) per variant v of prompt i and axis X. Pure
functions over the frames of ``Store.prompt_detail``; an unavailable axis stays NaN (shown as
n/a), never 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sago_engine.types import AXES, AXIS_LABELS

BASE_LABEL = "base prompt"


def variant_label(family: str, subtype: str, strength: float, position: str) -> str:
    """``"social_register · politeness · -3 · PREFIX"`` — the (F, u, s, p) tuple in one line."""
    return f"{family} · {subtype} · {float(strength):g} · {position}"


def labelled_variants(variants: pd.DataFrame) -> pd.DataFrame:
    """``variants`` plus a unique ``label`` column (a ``#k`` suffix where two variants share (F, u, s, p))."""
    v = variants.copy()
    base = [variant_label(*t) for t in zip(v["family"], v["subtype"], v["strength"], v["position"])]
    seen: dict[str, int] = {}
    labels = []
    for b in base:
        seen[b] = seen.get(b, 0) + 1
        labels.append(b if seen[b] == 1 else f"{b} #{seen[b]}")
    v["label"] = labels
    return v


def heatmap_frame(detail: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Δ̃ per (model, variant, axis) for the heatmap, in variant order then the paper's axis order.

    Args:
        detail: ``Store.prompt_detail(f, prompt_id=…)``.
    Returns:
        model, variant_id, label, order (variant rank), axis (store name), axis_label
        (Δ-Cos …), delta (signed Δ, raw units), delta_norm (Δ̃ ∈ [−1, 1]; NaN where
        unavailable), available, reason.
    """
    cols = ["model", "variant_id", "label", "order", "axis", "axis_label", "delta", "delta_norm", "available",
            "reason"]
    v = labelled_variants(detail["variants"])
    d = detail["deltas"]
    if v.empty or d.empty:
        return pd.DataFrame(columns=cols)
    v = v.assign(order=np.arange(len(v)))[["variant_id", "label", "order"]]
    out = d.merge(v, on="variant_id", how="inner")
    out["axis_label"] = out["axis"].map(AXIS_LABELS)
    out["delta_norm"] = out["delta_norm"].where(out["available"].astype(bool))
    out["_a"] = out["axis"].map({a: i for i, a in enumerate(AXES)})
    out = out.sort_values(["model", "order", "_a"]).reset_index(drop=True)
    return out[cols]


def responses_side_by_side(detail: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per (base prompt, then each variant), one column per model with its response text.

    Returns columns ``variant`` (label; ``"base prompt"`` first), ``variant_id`` (None for the
    base) and one column per model (sorted); a missing response is None.
    """
    v = labelled_variants(detail["variants"])
    r = detail["responses"]
    models = sorted(r["model"].unique()) if not r.empty else []
    rows = [{"variant": BASE_LABEL, "variant_id": None}] + \
        [{"variant": lab, "variant_id": vid} for lab, vid in zip(v["label"], v["variant_id"])]
    out = pd.DataFrame(rows, columns=["variant", "variant_id"])
    for m in models:
        rm = r[r["model"] == m]
        by_vid = dict(zip(rm["variant_id"].where(rm["variant_id"].notna(), None), rm["response"]))
        out[m] = [by_vid.get(vid) for vid in out["variant_id"]]
    return out
