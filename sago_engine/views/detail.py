"""Chart and table data for one prompt's detail view: variant labels, Δ̃ heatmap cells, responses side by side.

SAGO (arXiv 2610.01428) §Notation: Δ̃X(i, v) per variant v of prompt i and axis X. Pure
functions over the frames of ``Store.prompt_detail``; an unavailable axis stays NaN (shown as
n/a), never 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sago_engine.types import axis_label, axis_sort_key, spec_of
from sago_engine.variants.noop import is_noop

BASE_LABEL = "base prompt"
#: What a missing value says on the Prompts page (never ``nan`` / ``None``).
NO_REPLY = "(no reply: this model has no response for it in the store)"
SURFACE_EXEMPT = "not scored: surface noise is exempt"
NOT_SCORED = "not scored"
UNAVAILABLE = "axis unavailable"


def semantic_score_text(family: str, score) -> str:
    """The semantic score (BERTScore-F1 vs the base prompt) as shown: ``"0.934"``, or why there is none.

    Surface-noise variants are exempt from the semantic filter (SAGO §Variants: typos and
    casing are not meaning changes), so they carry no score: ``SURFACE_EXEMPT``. Any other
    missing score reads ``NOT_SCORED``.
    """
    if score is None or (isinstance(score, float) and np.isnan(score)) or pd.isna(score):
        return SURFACE_EXEMPT if family == "surface_noise" else NOT_SCORED
    return f"{float(score):.3f}"


#: Columns of the Prompts page's variant table.
VARIANT_TABLE = ["label", "family", "subtype", "strength", "position", "semantic_score", "kept", "text"]


def variant_numbers(variants: pd.DataFrame) -> pd.DataFrame:
    """The Prompts page's variant table as numbers (its CSV): ``VARIANT_TABLE``, semantic_score a float
    (BERTScore-F1 vs the base prompt, full precision; NaN where there is none)."""
    return labelled_variants(variants)[VARIANT_TABLE].copy()


def variant_rows(variants: pd.DataFrame) -> pd.DataFrame:
    """The Prompts page's variant table as shown: ``variant_numbers`` with the semantic score as text (why missing)."""
    v = variant_numbers(variants)
    v["semantic_score"] = [semantic_score_text(f, x) for f, x in zip(v["family"], v["semantic_score"])]
    return v


def unavailable_text(reason) -> str:
    """``"axis unavailable: <reason>"`` for a Δ̃ cell a model cannot measure (reason as stored, if any);
    ``"skipped, no-op: …"`` for a variant that was not run because it does not vary (``noop``)."""
    r = None if reason is None or pd.isna(reason) else str(reason).strip()
    if is_noop(r):
        return f"skipped, {r}"
    return f"{UNAVAILABLE}: {r}" if r else f"{UNAVAILABLE}: not measured by this backend"


def variant_label(family: str, subtype: str, strength: float, position: str) -> str:
    """``"social_register · politeness · -3 · PREFIX"`` — the (F, u, s, p) tuple in one line."""
    return f"{family} · {subtype} · {float(strength):g} · {position}"


def numbered_label(label: str, k: int) -> str:
    """The ``k``-th (1-based) variant of a prompt with this (F, u, s, p) label: ``label``, then ``label #2``, …"""
    return label if int(k) == 1 else f"{label} #{int(k)}"


def labelled_variants(variants: pd.DataFrame) -> pd.DataFrame:
    """``variants`` plus a unique ``label`` column (a ``#k`` suffix where two variants share (F, u, s, p))."""
    v = variants.copy()
    base = [variant_label(*t) for t in zip(v["family"], v["subtype"], v["strength"], v["position"])]
    seen: dict[str, int] = {}
    labels = []
    for b in base:
        seen[b] = seen.get(b, 0) + 1
        labels.append(numbered_label(b, seen[b]))
    v["label"] = labels
    return v


def heatmap_frame(detail: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Δ̃ per (model, variant, axis) for the heatmap, in variant order then the paper's axis order.

    Args:
        detail: ``Store.prompt_detail(f, prompt_id=…)``.
    Returns:
        model, variant_id, label, order (variant rank), axis (store name), axis_label
        (Δ-Cos …), delta (signed Δ, raw units), unit (of delta: ``AxisSpec.unit``), delta_norm (Δ̃ ∈ [−1, 1]; NaN where
        unavailable), available, reason, value (the cell's text: ``"+0.12"``, ``"-0.003"``, ``"0"``, or
        ``"n/a"``), why (empty, or ``"axis unavailable: …"``).
    """
    cols = ["model", "variant_id", "label", "order", "axis", "axis_label", "delta", "unit", "delta_norm", "available",
            "reason", "value", "why"]
    v = labelled_variants(detail["variants"])
    d = detail["deltas"]
    if v.empty or d.empty:
        return pd.DataFrame(columns=cols)
    v = v.assign(order=np.arange(len(v)))[["variant_id", "label", "order"]]
    out = d.merge(v, on="variant_id", how="inner")
    out["axis_label"] = out["axis"].map(axis_label)
    out["unit"] = out["axis"].map(lambda a: spec_of(a).unit)
    out["delta_norm"] = out["delta_norm"].where(out["available"].astype(bool))
    out["_a"] = out["axis"].map(axis_sort_key)
    out = out.sort_values(["model", "order", "_a"]).reset_index(drop=True)
    ok = out["available"].astype(bool)
    out["value"] = [_cell_text(x) if a else "n/a" for a, x in zip(ok, out["delta_norm"])]
    out["why"] = ["" if a else unavailable_text(r) for a, r in zip(ok, out["reason"])]
    return out[cols]


def _cell_text(x: float) -> str:
    """Δ̃ as a heatmap label: ``"0"`` below 5e-4, three decimals below 0.005 (never ``"-0.00"``), else two."""
    if x != x:
        return "n/a"
    if abs(x) < 5e-4:
        return "0"
    return f"{x:+.3f}" if abs(x) < 0.005 else f"{x:+.2f}"


def responses_side_by_side(detail: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per (base prompt, then each variant), one column per model with its response text.

    Returns columns ``variant`` (label; ``"base prompt"`` first), ``variant_id`` (None for the
    base) and one column per model (sorted); a missing response reads ``NO_REPLY`` (text, so
    pandas never turns it into ``nan``).
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
        out[m] = pd.Series([_reply(by_vid.get(vid)) for vid in out["variant_id"]], dtype=object)
    return out


def _reply(text) -> str:
    return NO_REPLY if text is None or (not isinstance(text, str) and pd.isna(text)) else str(text)
