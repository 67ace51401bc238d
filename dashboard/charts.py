"""Chart specifications the pages render (Altair / Plotly), built from sago_engine's view data.

Kept out of the page scripts so a test can build the very chart a page shows (e.g. to export it
at the paper's scale). No numbers are computed here.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from sago_engine.types import axes_shown, axis_label


def delta_heatmap(heat: pd.DataFrame, columns: int = 2) -> alt.FacetChart:
    """The Prompts page's Δ̃ heatmap: one panel per model, variants × axes, cells labelled with ``value``.

    Args:
        heat: ``sago_engine.detail.heatmap_frame`` (model, label, order, axis_label, delta_norm,
            delta, value, why).
        columns: panels per row (at most the number of models).
    """
    plot = heat[["model", "label", "order", "axis_label", "delta_norm", "delta", "value", "why"]].copy()
    axis_order = [axis_label(a) for a in axes_shown(heat["axis"])]
    base = alt.Chart(plot).encode(
        x=alt.X("axis_label:N", sort=axis_order, title="axis"),
        y=alt.Y("label:N", sort=alt.EncodingSortField("order"), title="variant (F · u · s · p)",
                axis=alt.Axis(labelLimit=320)),
        tooltip=[alt.Tooltip("model:N"), alt.Tooltip("label:N", title="variant"),
                 alt.Tooltip("axis_label:N", title="axis"), alt.Tooltip("value:N", title="Δ̃"),
                 alt.Tooltip("delta:Q", title="Δ (raw)", format=".4g"), alt.Tooltip("why:N", title="n/a because")],
    )
    rect = base.mark_rect(stroke="white").encode(
        color=alt.condition("isValid(datum.delta_norm)",
                            alt.Color("delta_norm:Q", title="Δ̃", scale=alt.Scale(scheme="redblue", domain=[-1, 1])),
                            alt.value("#d9d9d9")))
    text = base.mark_text(fontSize=10).encode(text="value:N")
    n_models = max(1, plot["model"].nunique())
    return alt.layer(rect, text, data=plot).properties(width=alt.Step(44), height=alt.Step(20)).facet(
        facet=alt.Facet("model:N", title=None), columns=min(n_models, columns))
