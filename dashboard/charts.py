"""Chart specifications the pages render (Altair / Plotly), built from sago_engine's view data.

Kept out of the page scripts so a test can build the very chart a page shows (e.g. to export it
at the paper's scale). No numbers are computed here.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd
import plotly.graph_objects as go

from sago_engine.types import AXES, axes_shown, axis_label

#: Name of the Prompts heatmap's click selection (fields model, label: the clicked cell's variant).
HEATMAP_SELECTION = "cell"

#: Font sizes (px) of chart text on screen and in presentation mode: label = tick and legend labels,
#: title = axis and legend titles, heading = the chart's title and facet headers.
FONTS = {False: {"label": 12, "title": 13, "heading": 15}, True: {"label": 18, "title": 20, "heading": 24}}
#: Colour of marks that must read on a light and a dark page alike (mid grey: the frontier line, n/a cells' text).
NEUTRAL = "#8c8c8c"


def fonts(present: bool = False) -> dict[str, int]:
    """``FONTS`` for presentation mode (``present=True``) or the screen."""
    return dict(FONTS[bool(present)])


def present_plotly(fig: go.Figure) -> go.Figure:
    """A copy of ``fig`` with presentation-mode fonts (``FONTS[True]``) on ticks, axis titles, legend, title,
    polar axes and colour bars. Sizes are set explicitly, so Streamlit's theme does not shrink them."""
    f = fonts(True)
    out = go.Figure(fig)
    out.update_layout(font={"size": f["label"]}, legend={"font": {"size": f["label"]},
                                                          "title": {"font": {"size": f["title"]}}},
                      title={"font": {"size": f["heading"]}})
    out.update_xaxes(tickfont={"size": f["label"]}, title={"font": {"size": f["title"]}})
    out.update_yaxes(tickfont={"size": f["label"]}, title={"font": {"size": f["title"]}})
    out.update_polars(radialaxis={"tickfont": {"size": f["label"]}, "title": {"font": {"size": f["title"]}},
                                  "nticks": 6},  # fewer, larger ticks: they do not crowd the centre
                      angularaxis={"tickfont": {"size": f["title"]}})
    out.update_traces(selector={"type": "heatmap"}, colorbar={"tickfont": {"size": f["label"]}})
    return out


def present_altair(chart):
    """``chart`` with presentation-mode fonts (``FONTS[True]``) on axes, legends, titles and facet headers
    (a top-level ``configure``; label overlap is resolved by each chart's own row step)."""
    f = fonts(True)
    return (chart.configure_axis(labelFontSize=f["label"], titleFontSize=f["title"], labelLimit=360,
                                 labelFlush=False)
            .configure_legend(labelFontSize=f["label"], titleFontSize=f["title"], labelLimit=480)
            .configure_title(fontSize=f["heading"])
            .configure_header(labelFontSize=f["title"], titleFontSize=f["heading"]))


def delta_heatmap(heat: pd.DataFrame, columns: int = 2, label_size: int = FONTS[False]["label"]) -> alt.FacetChart:
    """The Prompts page's Δ̃ heatmap: one panel per model, variants × axes, cells labelled with ``value``.

    A click on a cell selects it (selection ``HEATMAP_SELECTION``: the cell's model and variant label).

    Args:
        heat: ``sago_engine.views.detail.heatmap_frame`` (model, label, order, axis, axis_label, delta_norm,
            delta, unit, value, why).
        columns: panels per row (at most the number of models).
        label_size: font size (px) of the axis labels (``fonts(present)["label"]``): each row is 1.7× as
            tall, so every variant's label is drawn (none dropped as overlapping).
    """
    plot = heat[["model", "label", "order", "axis_label", "delta_norm", "delta", "unit", "value", "why"]].copy()
    axis_order = [axis_label(a) for a in axes_shown(heat["axis"])]
    base = alt.Chart(plot).encode(
        x=alt.X("axis_label:N", sort=axis_order, title=None,
                axis=alt.Axis(orient="top", labelAngle=-40, labelOverlap=False, labelFontSize=label_size)),
        # no axis title: Vega places it from label widths measured before the page's font loads, so it can
        # land on the labels; the page's heading names the rows (variants, F · u · s · p)
        y=alt.Y("label:N", sort=alt.EncodingSortField("order"), title=None,
                axis=alt.Axis(labelLimit=int(27 * label_size), labelOverlap=False, labelFlush=False,
                              labelBaseline="middle", labelFontSize=label_size)),
        tooltip=[alt.Tooltip("model:N"), alt.Tooltip("label:N", title="variant"),
                 alt.Tooltip("axis_label:N", title="axis"), alt.Tooltip("value:N", title="Δ̃"),
                 alt.Tooltip("delta:Q", title="Δ (raw)", format=".4g"), alt.Tooltip("unit:N", title="unit of Δ"),
                 alt.Tooltip("why:N", title="n/a because")],
    )
    rect = base.mark_rect(stroke="white").encode(
        color=alt.Color("delta_norm:Q", title="Δ̃", scale=alt.Scale(scheme="redblue", domain=[-1, 1]))).add_params(
        alt.selection_point(name=HEATMAP_SELECTION, fields=["model", "label"], on="click"))
    # n/a cells (no Δ̃): a grey rect of their own (Vega-Lite drops a mark whose colour field is null)
    na = base.transform_filter("!isValid(datum.delta_norm)").mark_rect(stroke="white", color=NEUTRAL)
    # cell text set per cell (white on strong colours, dark on pale ones and on grey n/a), whatever the page's theme
    text = base.mark_text(fontSize=max(10, label_size - 2)).encode(
        text="value:N", color=alt.condition("abs(datum.delta_norm) > 0.6", alt.value("#ffffff"), alt.value("#111111")))
    n_models = max(1, plot["model"].nunique())
    step = max(20, round(1.7 * label_size))
    return alt.layer(rect, na, text, data=plot).properties(width=alt.Step(max(44, round(step * 1.8))), height=alt.Step(step)).facet(
        facet=alt.Facet("model:N", title=None), columns=min(n_models, columns)).resolve_axis(x="independent").properties(
        padding={"left": 3 * label_size, "top": 5, "right": 5, "bottom": 5})  # room for labels measured too narrow
    # every panel names its axes at its top: a tall panel (110 variants ≈ 2,200 px) is read from the top


def option_intervals(table: pd.DataFrame, options: list[str], height: int = 60) -> alt.FacetChart:
    """The Method choices page's chart: SGS per model under each option with its bootstrap CI, one panel per axis.

    Args:
        table: ``sago_engine.views.method_choices.option_sgs`` (option, model, axis_label, sgs, lo, hi, marker, p).
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


def pairwise_matrix(cells: pd.DataFrame, models: list[str], title: str, height: int | None = None):
    """The Model vs model page's matrix (Plotly): row model − column model on one axis and scope.

    Args:
        cells: ``sago_engine.scoring.pairwise.matrix_cells`` (row, col, diff, ci_low, ci_high, p, p_adj,
            marker, called, row_better, n_prompts, label).
        models: row / column order.
        title: the chart's title.
    A cell is coloured by the difference where the pair is called different (blue: the row model
    is more stable, red: less stable), light grey where it is not distinguishable; its text is
    the difference with its marker and the adjusted p. The diagonal is empty.
    """
    import html

    import numpy as np
    import plotly.graph_objects as go

    k = len(models)
    idx = {m: i for i, m in enumerate(models)}
    called = cells[cells["called"].astype(bool)]
    top = float(called["diff"].abs().max()) if len(called) else 1.0
    # three layers: not distinguishable (grey), called pale and called strong (text colour set per layer:
    # Streamlit's theme overrides Plotly's automatic contrast)
    layers = {"grey": np.full((k, k), np.nan), "pale": np.full((k, k), np.nan), "strong": np.full((k, k), np.nan)}
    text = {n: [["" for _ in models] for _ in models] for n in layers}
    hover = [["" for _ in models] for _ in models]
    for c in cells.itertuples(index=False):
        i, j = idx[c.row], idx[c.col]
        layer = "grey" if not c.called else ("strong" if abs(c.diff) > 0.45 * top else "pale")
        layers[layer][i, j] = 0.0 if layer == "grey" else c.diff
        text[layer][i][j] = c.label.replace("\n", "<br>")
        ci = "" if not np.isfinite(c.ci_low) else f"<br>95% CI [{c.ci_low:+.3g}, {c.ci_high:+.3g}]"
        r, col = html.escape(str(c.row)), html.escape(str(c.col))  # names are data: plotly reads tags in hover text
        hover[i][j] = (f"{r} − {col}: {c.diff:+.3g}{ci}<br>p = {c.p:.3g} (raw), {c.p_adj:.3g} (adjusted)"
                       f"<br>{c.n_prompts} shared prompts" if np.isfinite(c.p_adj) else f"{r} vs {col}: n/a")
    common = {"x": models, "y": models, "xgap": 3, "ygap": 3, "texttemplate": "%{text}", "customdata": hover,
              "hovertemplate": "%{customdata}<extra></extra>", "hoverongaps": False}
    scale = {"colorscale": "RdBu_r", "zmid": 0, "zmin": -top, "zmax": top}
    fig = go.Figure()
    fig.add_trace(go.Heatmap(z=layers["grey"], colorscale=[[0, "#dcdcdc"], [1, "#dcdcdc"]], showscale=False,
                             name="not distinguishable", text=text["grey"], textfont={"size": 14, "color": "#111111"},
                             **common))
    fig.add_trace(go.Heatmap(z=layers["pale"], name="different", text=text["pale"], showscale=False,
                             textfont={"size": 14, "color": "#111111"}, **scale, **common))
    fig.add_trace(go.Heatmap(z=layers["strong"], name="different", text=text["strong"],
                             textfont={"size": 14, "color": "#ffffff"}, **scale, **common,
                             colorbar={"title": {"text": "row − column"}, "tickformat": "+.2g"}))
    fig.update_layout(title={"text": title}, height=height or max(360, 130 + 100 * k),
                      margin={"l": 10, "r": 10, "t": 90, "b": 10},
                      xaxis={"side": "top", "tickangle": 0, "automargin": True, "tickfont": {"size": 13}},
                      yaxis={"autorange": "reversed", "automargin": True, "tickfont": {"size": 13}})
    return fig


def polar_layout(radialaxis: dict) -> dict:
    """Plotly ``layout.polar`` for a radar that reads on a light and a dark page: a transparent polar area
    (Plotly's default light-blue disc turns the dark theme's light tick labels unreadable) with mid-grey grid
    lines; ``radialaxis`` (range, title, …) is kept."""
    grid = {"gridcolor": "rgba(140,140,140,0.45)", "linecolor": NEUTRAL}
    return {"bgcolor": "rgba(0,0,0,0)", "radialaxis": {**grid, **radialaxis}, "angularaxis": dict(grid)}


#: The Pareto chart's Ideal point (0, 0): a gold star with a dark outline, visible on light and dark pages.
IDEAL_MARKER = {"symbol": "star", "size": 20, "color": "#F2C14E", "line": {"width": 1.5, "color": "#3b3b3b"}}


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
    # no radial title (it is drawn across the tick labels); the title names the scale, the scale sits
    # between the first two spokes, and the polar area is transparent for the dark theme
    fig.update_layout(polar=polar_layout({"range": [0, 1], "angle": 30}), height=height,
                      title={"text": "s_X per axis (0 = stable, 1 = maximal change)"},
                      legend={"orientation": "h"}, margin={"t": 60})
    return fig


def quadrant_chart(points: pd.DataFrame, threshold: float, x_title: str, y_title: str, colors: dict[str, str],
                   height: int = 520, quadrants: Sequence[str] = (), binary: bool = False) -> go.Figure:
    """The Right-or-wrong page's quadrant chart (Plotly): one dot per (model, prompt) at (s_X(i), ``y``).

    Args:
        points: ``sago_engine.correctness.views.quadrant_view``'s points (model, prompt_id, s, y, quadrant).
        threshold: the s_X(i) split (a dashed vertical line); the right / wrong split is y = 0.5.
        x_title, y_title: axis titles; colors: model → colour; quadrants: the four names, placed
            in the corners (top left, bottom left, top right, bottom right); binary: y is a right / wrong
            verdict (ticks "wrong" at 0 and "right" at 1), else a share (0 to 1).
    """
    import html

    fig = go.Figure()
    for model, g in points.groupby("model", sort=True):
        fig.add_trace(go.Scatter(
            x=g["s"].tolist(), y=g["y"].tolist(), mode="markers", name=str(model),
            marker={"size": 10, "color": colors.get(model, NEUTRAL), "opacity": 0.8, "line": {"width": 0.5}},
            customdata=[[html.escape(str(p)), q] for p, q in zip(g["prompt_id"], g["quadrant"])],
            hovertemplate=f"<b>{html.escape(str(model))}</b><br>%{{customdata[0]}}<br>s = %{{x:.3f}}"
                          "<br>%{customdata[1]}<extra></extra>"))
    xmax = max([float(points["s"].max()) if len(points) else 0.0, threshold, 0.05]) * 1.1
    fig.add_vline(x=threshold, line={"dash": "dash", "color": NEUTRAL, "width": 2})
    fig.add_hline(y=0.5, line={"dash": "dot", "color": NEUTRAL, "width": 1})
    corners = ((0.0, 1.18, "left"), (0.0, -0.18, "left"), (xmax, 1.18, "right"), (xmax, -0.18, "right"))
    for name, (x, y, align) in zip(quadrants, corners):
        fig.add_annotation(x=x, y=y, text=f"<b>{name}</b>", showarrow=False, xanchor=align, font={"color": NEUTRAL})
    fig.update_layout(xaxis_title=x_title, yaxis_title=y_title, height=height, legend_title_text="model",
                      xaxis={"range": [-0.02 * xmax, xmax]}, margin={"t": 30},
                      yaxis={"range": [-0.25, 1.25], **({"tickvals": [0, 1], "ticktext": ["wrong", "right"]}
                                                         if binary else {"tickvals": [0, 0.25, 0.5, 0.75, 1]})})
    return fig


def noise_vs_rephrasing(points: pd.DataFrame, colors: dict[str, str], height: int = 460) -> go.Figure:
    """One dot per (model, prompt) at (floor f(i), movement m(i)) of one axis, with the diagonal m = f.

    Args:
        points: ``sago_engine.views.sampling.separation_view``'s ``prompts`` rows of one axis (model,
            prompt_id, floor, move, p); colors: model → colour. A dot above the diagonal moved more
            under rephrasing than under the dice; a filled dot's exact test has p < 0.05 (``exceeds``).
    """
    import html

    fig = go.Figure()
    for model, g in points.groupby("model", sort=True):
        for hit, part in g.groupby("exceeds", sort=True):
            fig.add_trace(go.Scatter(
                x=part["floor"].tolist(), y=part["move"].tolist(), mode="markers",
                name=f"{model}{' (p < 0.05)' if hit else ''}",
                marker={"size": 10, "color": colors.get(model, NEUTRAL), "opacity": 0.85,
                        "symbol": "circle" if hit else "circle-open", "line": {"width": 1.5}},
                customdata=[[html.escape(str(p)), float(q)] for p, q in zip(part["prompt_id"], part["p"])],
                hovertemplate=f"<b>{html.escape(str(model))}</b><br>%{{customdata[0]}}<br>dice = %{{x:.3f}}"
                              "<br>rephrasing + dice = %{y:.3f}<br>p = %{customdata[1]:.3g}<extra></extra>"))
    top = max([float(points[["floor", "move"]].max().max()) if len(points) else 0.0, 0.01]) * 1.1
    fig.add_trace(go.Scatter(x=[0, top], y=[0, top], mode="lines", name="rephrasing = dice",
                             line={"dash": "dash", "color": NEUTRAL, "width": 2}, hoverinfo="skip"))
    fig.update_layout(xaxis_title="sampling noise: RMS Δ̃ between base samples (the dice)",
                      yaxis_title="RMS Δ̃ of variant samples (rephrasing + dice)", height=height,
                      legend_title_text="model", margin={"t": 30},
                      xaxis={"range": [0, top]}, yaxis={"range": [0, top], "scaleanchor": "x"})
    return fig
