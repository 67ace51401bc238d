"""Pareto: SGS on two axes per model (default Δ-BLEU × Δ-MR), the Ideal point (0, 0), the Pareto frontier."""

import plotly.graph_objects as go
import streamlit as st

from dashboard import charts, choices, controls, data, exports, frame, prose, safe, urlstate
from sago_engine.external import paper
from sago_engine.scoring.scores import MAIN_EPSILON
from sago_engine.store import Store
from sago_engine.types import AXES, AXIS_LABELS
from sago_engine.views import assumptions, report

frame.require_frame()

f = controls.current_filters()
st.title("Pareto: stability on two axes")
st.caption("SGS per model on two axes at once (lower = more stable on both; SAGO, arXiv 2610.01428). "
           f"Markers: one-sided t-test against ε = {MAIN_EPSILON}: * p<0.05, ** p<0.01, † p<0.001 "
           "(adjusted p when a multiple-comparison control is chosen).")
scores = data.query(Store.prompt_scores, f)
data.empty_stop(scores, "deltas")
datasets = sorted(scores["dataset"].unique())

urlstate.restore("x", "pareto_x", choices=AXES, default="bleu")
urlstate.restore("y", "pareto_y", choices=AXES, default="mr")
urlstate.restore("scope", "pareto_scope", choices=["Total (all datasets)", *datasets])
urlstate.restore("bars", "pareto_bars", choices=["95% bootstrap CI", "± std", "none"])
urlstate.restore("paper", "pareto_paper", "bool")
urlstate.restore("zoom", "pareto_zoom", "bool")
with controls.page_controls():
    c1, c2, c3 = st.columns(3)
    with c1:
        x_axis = st.selectbox("x axis", AXES, key="pareto_x", format_func=AXIS_LABELS.get)
    with c2:
        y_axis = st.selectbox("y axis", AXES, key="pareto_y", format_func=AXIS_LABELS.get)
    with c3:
        which = st.selectbox("Scope", ["Total (all datasets)", *datasets], key="pareto_scope")
    c4, c5, c6 = st.columns(3)
    with c4:
        bars = st.radio("Error bars", ["95% bootstrap CI", "± std", "none"], key="pareto_bars", horizontal=True,
                        help="CI: studentized bootstrap (bootstrap-t) over prompts (B = 1000, seed 0).")
    with c6:
        correction = controls.correction_control("pareto")
    with c5:
        overlay = st.toggle("Overlay the paper's values", key="pareto_paper",
                            help="Values reported in arXiv 2610.01428: published totals (Figure 2a; Table 1 has std and "
                                 "markers), a separate labelled trace.")
        zoom = st.toggle("Zoom to the models", key="pareto_zoom",
                         help="Axes span the plotted points and their error bars instead of starting at the Ideal (0, 0): "
                              "models with close scores become distinguishable; the star may then lie outside the view.")

urlstate.publish()
if which.startswith("Total"):
    total = data.scored(report.sgs_ci_table, f, eps=MAIN_EPSILON, correction=correction)
else:
    per = data.scored(report.sgs_ci_table, f, eps=MAIN_EPSILON, correction=correction, per_dataset=True)
    total = per[per["dataset"] == which]
pts = data.scored_frame(report.pareto_points, total, x_axis=x_axis, y_axis=y_axis)
front = data.scored_frame(report.pareto_frontier, pts)
xl, yl = f"SGS {AXIS_LABELS[x_axis]}", f"SGS {AXIS_LABELS[y_axis]}"
colors = data.model_colors()
missing = sorted(set(scores["model"]) - set(pts["model"]))

fig = go.Figure()


def _err(p, c):
    if bars == "± std":
        return {"type": "data", "array": [p[f"{c}_std"]], "visible": True}
    if bars.startswith("95%"):
        return {"type": "data", "symmetric": False, "array": [max(0.0, p[f"{c}_hi"] - p[c])],
                "arrayminus": [max(0.0, p[c] - p[f"{c}_lo"])], "visible": True}
    return {"type": "data", "array": [0.0], "visible": False}


for _, p in pts.iterrows():
    fig.add_trace(go.Scatter(
        x=[float(p["x"])], y=[float(p["y"])], mode="markers", name=p["model"],
        marker={"size": 14, "color": colors.get(p["model"], "#444")},
        error_x=_err(p, "x"), error_y=_err(p, "y"),
        hovertemplate=f"<b>{p['model']}</b><br>{xl}: {p['x_cell']}<br>{yl}: {p['y_cell']}<extra></extra>"))
if len(front) > 0:
    fig.add_trace(go.Scatter(x=front["x"].tolist(), y=front["y"].tolist(), mode="lines+markers", name="Pareto frontier",
                             line={"shape": "hv", "color": charts.NEUTRAL, "width": 2}, hoverinfo="skip",
                             marker={"symbol": "circle-open", "size": 24, "color": charts.NEUTRAL, "line": {"width": 2}}))
fig.add_trace(go.Scatter(x=[0], y=[0], mode="markers+text", name="Ideal (0, 0)", text=["Ideal"],
                         textposition="top right", marker=charts.IDEAL_MARKER,
                         hovertemplate="Ideal point (0, 0)<extra></extra>"))
if overlay:
    rep = paper.reported_totals().set_index(["model", "axis"])
    models = [m for m in dict.fromkeys(rep.index.get_level_values(0)) if (m, x_axis) in rep.index and (m, y_axis) in rep.index]

    def _cell(m, a):
        r = rep.loc[(m, a)]
        return f"{r['sgs']:.3f}" + ("" if r["std"] != r["std"] else f"±{r['std']:.2f}") + str(r["marker"])

    if models:
        fig.add_trace(go.Scatter(
            x=[float(rep.loc[(m, x_axis), "sgs"]) for m in models], y=[float(rep.loc[(m, y_axis), "sgs"]) for m in models],
            mode="markers+text", text=models, textposition="bottom center",
            textfont={"size": 9, "color": "#777"}, name=paper.PAPER_SOURCE[0].upper() + paper.PAPER_SOURCE[1:],
            marker={"symbol": "diamond-open", "size": 11, "color": "#777", "line": {"width": 1.5}},
            hovertext=[f"<b>{m}</b> ({paper.PAPER_SOURCE})<br>{xl}: {_cell(m, x_axis)}<br>{yl}: {_cell(m, y_axis)}"
                       for m in models], hoverinfo="text", meta={"source": paper.PAPER_SOURCE}))
xs = [t for tr in fig.data for t in (tr.x or ()) if t is not None]
ys = [t for tr in fig.data for t in (tr.y or ()) if t is not None]
xmax, ymax = max(xs + [0.05]) * 1.15, max(ys + [0.05]) * 1.15
xrange, yrange = [-0.04 * xmax, xmax], [-0.04 * ymax, ymax]
if zoom and len(pts):
    xrange, yrange = report.zoom_range(pts, "x"), report.zoom_range(pts, "y")
fig.update_layout(xaxis_title=xl, yaxis_title=yl, height=controls.chart_height(560), legend_title_text="model",
                  xaxis={"range": xrange}, yaxis={"range": yrange},
                  title={"text": f"{yl} vs {xl} — {controls.scope_title(which, f)}"}, margin={"t": 60})
exports.chart(fig, "pareto_scatter",
             "Each dot is a model; down and left = more stable on both axes. The star is the Ideal (0, 0); the "
             "line joins models no other model beats on both axes (the Pareto frontier)."
             + (" Zoomed to the models: the axes do not start at 0." if zoom else ""), data=pts)
prose.assumptions_note(choices.assumption_statements(
    f, (assumptions.RANKING, assumptions.VERDICT), axes=(x_axis, y_axis), per_dataset=not which.startswith("Total"),
    correction=correction, dataset=None if which.startswith("Total") else which), "pareto_assumptions")
if missing:
    st.info(f"Not plotted (an axis is unavailable, n/a): {safe.md(', '.join(missing))}.")
if x_axis == y_axis:
    st.warning("x and y are the same axis: pick two different axes.")

st.subheader("Points and frontier")
show = pts.assign(on_frontier=pts["model"].isin(front["model"]),
                  x_ci=[f"[{a:.3f}, {b:.3f}]" for a, b in zip(pts["x_lo"], pts["x_hi"])],
                  y_ci=[f"[{a:.3f}, {b:.3f}]" for a, b in zip(pts["y_lo"], pts["y_hi"])])
show = show[["model", "x_cell", "x_ci", "y_cell", "y_ci", "on_frontier"]]
xh, yh = (f"x: {xl}", f"y: {yl}") if xl == yl else (xl, yl)  # column names stay unique on one axis
show.columns = ["model", xh, f"{xh} 95% CI", yh, f"{yh} 95% CI", "on Pareto frontier"]
numbers = pts.drop(columns=[c for c in pts.columns if c.endswith("_cell")]).assign(
    x_axis=x_axis, y_axis=y_axis, on_frontier=pts["model"].isin(front["model"]))
exports.table(numbers, "pareto_table", "sago_pareto.csv", show=show)
data.provenance("pareto")
