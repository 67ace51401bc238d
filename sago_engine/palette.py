"""Colours of the dashboard: one colour per model, the same on every page; one per axis where a chart colours by axis."""

from __future__ import annotations

#: Colour-blind-safe qualitative palette (Okabe–Ito); a model keeps its colour on every page.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442", "#000000")


def model_colors(models) -> dict[str, str]:
    """Stable model → colour (hex string) map: sorted model names take ``PALETTE`` in order, cycling after 8."""
    return {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(sorted(set(models)))}


#: One colour per behavioural axis (ColorBrewer Dark2: six hues far apart, none a lighter twin of
#: another), for charts whose colour is the axis rather than the model (Sample size).
AXIS_COLORS = {"cos": "#1B9E77", "bleu": "#D95F02", "bert": "#7570B3", "prob": "#E7298A", "ent": "#66A61E",
               "mr": "#A6761D"}
