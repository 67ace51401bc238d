"""Colours of the dashboard: one colour per model, the same on every page; one per axis where a chart colours by axis."""

from __future__ import annotations

from sago_engine.axis_spec import AXIS_SPECS

#: Colour-blind-safe qualitative palette (Okabe–Ito); a model keeps its colour on every page.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442", "#000000")


def model_colors(models) -> dict[str, str]:
    """Stable model → colour (hex string) map: sorted model names take ``PALETTE`` in order, cycling after 8."""
    return {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(sorted(set(models)))}


#: Axis → its colour (``AxisSpec.color``), for charts whose colour is the axis rather than the model (Sample size).
AXIS_COLORS: dict[str, str] = {name: spec.color for name, spec in AXIS_SPECS.items()}
