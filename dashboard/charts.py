"""Chart specifications the pages render (Altair / Plotly), built from sago_engine's view data.

Kept out of the page scripts so a test can build the very chart a page shows (e.g. to export it
at the paper's scale). No numbers are computed here.
"""

from __future__ import annotations

from typing import Sequence

import altair as alt
import pandas as pd
import plotly.graph_objects as go

from sago_engine.types import AXES, axes_shown, axis_label


def delta_heatmap(heat: pd.DataFrame, columns: int = 2) -> alt.FacetChart:
    """The Prompts page's Δ̃ heatmap: one panel per model, variants × axes, cells labelled with ``value``.

    Args:
        heat: ``sago_engine.detail.heatmap_frame`` (model, label, order, axis, axis_label, delta_norm,
            delta, value, why).
        columns: panels per row (at most the number of models).
    """
    plot = heat[["model", "label", "order", "axis_label", "delta_norm", "delta", "value", "why"]].copy()
    axis_order = [axis_label(a) for a in axes_shown(heat["axis"])]
    base = alt.Chart(plot).encode(
        x=alt.X("axis_label:N", sort=axis_order, title=None, axis=alt.Axis(orient="top", labelAngle=-40, labelOverlap=False)),
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
        facet=alt.Facet("model:N", title=None), columns=min(n_models, columns)).resolve_axis(x="independent")
    # every panel names its axes at its top: a tall panel (110 variants ≈ 2,200 px) is read from the top


def option_intervals(table: pd.DataFrame, options: list[str], height: int = 60) -> alt.FacetChart:
    """The Method choices page's chart: SGS per model under each option with its bootstrap CI, one panel per axis.

    Args:
        table: ``sago_engine.method_choices.option_sgs`` (option, model, axis_label, sgs, lo, hi, marker, p).
        options: the options in legend order (the reference first).
        height: pixels per model row within a panel.
    """
    plot = table[["option", "model", "axis_label", "sgs", "lo", "hi", "marker", "p", "n_prompts"]].copy()
    base = alt.Chart().encode(
        y=alt.Y("model:N", title=None, axis=alt.Axis(labelLimit=320)),
        yOffset=alt.YOffset("option:N", sort=options),
        color=alt.Color("option:N", sort=options, title="option", scale=alt.Scale(scheme="tableau10"),
                        legend=alt.Legend(orient="bottom")),
        tooltip=["model", "option", "axis_label", alt.Tooltip("sgs:Q", format=".4f"),
                 alt.Tooltip("lo:Q", format=".4f", title="95% CI low"), alt.Tooltip("hi:Q", format=".4f",
                                                                                 title="95% CI high"),
                 alt.Tooltip("p:Q", format=".2e", title="p (H0: E[s] ≤ ε)"), "marker", "n_prompts"])
    rule = base.mark_rule(strokeWidth=2).encode(x=alt.X("lo:Q", title="SGS (95% CI)"), x2="hi:Q")
    point = base.mark_circle(size=90).encode(x="sgs:Q")
    n_models = max(1, plot["model"].nunique())
    return alt.layer(rule, point, data=plot).properties(height=height * n_models, width=420).facet(
        row=alt.Row("axis_label:N", title=None, sort=[axis_label(a) for a in axes_shown(())]))


def radar_trace(values: Sequence[float | None], spokes: Sequence[str], name: str, **style) -> go.Scatterpolar:
    """One closed line of a radar (Plotly): ``values`` per spoke, NaN / None drawn as a gap (n/a, never 0).

    Args:
        values: one value per spoke, in ``spokes`` order.
        spokes: the spokes' labels.
        name: the legend entry.
        style: further ``go.Scatterpolar`` settings (mode, line, legendgroup, text, …); per-point
            lists such as ``text`` are given per spoke and closed here too.
    """
    r = [None if v is None or v != v else float(v) for v in values]
    closed = {k: list(v) + [v[0]] for k, v in style.items() if k in ("text", "hovertext") and isinstance(v, list)}
    return go.Scatterpolar(r=r + r[:1], theta=list(spokes) + list(spokes[:1]), name=name, connectgaps=False,
                           **{**style, **closed})


def live_radar(profile: pd.DataFrame, store: pd.DataFrame | None = None, model: str = "",
               height: int = 460) -> go.Figure:
    """The Live page's radar: this prompt's s_X per axis, and dashed the model's SGS_X from the store.

    Args:
        profile: ``live.prompt_profile`` (axis, axis_label, s, n_variants; six rows).
        store: ``live.store_profile`` of the model (axis, axis_label, sgs), or None.
        model: the model's name (legend).
        height: pixels.
    """
    spokes = [axis_label(a) for a in AXES]
    s = profile.set_index("axis")["s"]
    fig = go.Figure(radar_trace([s.get(a) for a in AXES], spokes, "this prompt: s_X", mode="lines+markers",
                                line={"color": "#D55E00", "width": 3}))
    if store is not None:
        g = store.set_index("axis")["sgs"]
        fig.add_trace(radar_trace([g.get(a) for a in AXES], spokes, f"{model}: SGS_X (store)", mode="lines+markers",
                                  line={"color": "#0072B2", "dash": "dash"}))
    fig.update_layout(polar={"radialaxis": {"range": [0, 1], "title": {"text": "s_X"}}}, height=height,
                      legend={"orientation": "h"}, margin={"t": 30})
    return fig
