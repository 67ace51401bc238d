"""``sago report STORE --html OUT.html --json OUT.json``: a result you can send.

The HTML is one self-contained file: the tables of ``sago_engine.views.report_data.report_numbers`` and two
charts as inline SVG (Altair → vl-convert, rendered here, offline), no script at all, every store
string made inert (control and bidi characters as U+FFFD, ``sago_engine.textsafe``), escaped
(``html.escape``) and cut at ``MAX_TEXT`` characters, and a Content-Security-Policy
that forbids any fetch, so a store's text can neither run nor call out. The JSON holds the same
numbers (docs/REPORT.md).
"""

from __future__ import annotations

import argparse
import html
import json
import sys
from pathlib import Path
from typing import Any

from sago_engine.textsafe import PAGE_KEEPS, neutral

#: Characters of a store text (prompt, variant, reply) shown in the HTML; the rest is counted.
MAX_TEXT = 2000

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'none'; base-uri 'none'"

STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#222;line-height:1.4}
table{border-collapse:collapse;margin:.5rem 0 1.5rem;font-size:.9rem}
th,td{border:1px solid #ccc;padding:.25rem .5rem;text-align:left;vertical-align:top;unicode-bidi:isolate}
td.num{text-align:right;font-variant-numeric:tabular-nums}
pre{white-space:pre-wrap;word-break:break-word;margin:0;max-width:30rem;unicode-bidi:isolate}
.note{color:#555;font-size:.9rem}
"""


def esc(value: Any) -> str:
    """A store value as HTML text: control and bidi characters as U+FFFD (``textsafe.neutral``, the
    page rule), escaped (quotes too), None as "—", long text cut at ``MAX_TEXT``."""
    if value is None:
        return "—"
    text = neutral(value, PAGE_KEEPS)
    if len(text) > MAX_TEXT:
        text = f"{text[:MAX_TEXT]} … ({len(text) - MAX_TEXT:,} more characters)"
    return html.escape(text, quote=True)


def num(value: Any, digits: int = 3) -> str:
    """A number with ``digits`` decimals, ``n/a`` for a missing one (the JSON's null)."""
    return "n/a" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else esc(value)


def format_p(p: float) -> str:
    """A p-value as the Model-vs-model page writes it (``pairwise.format_p``)."""
    from sago_engine.scoring.pairwise import format_p as fmt

    return fmt(p)


def _table(rows: list[dict], cols: list[tuple[str, str]], pre: tuple[str, ...] = (), p_key: str = "p_adj") -> str:
    """An HTML table of ``rows`` (columns ``cols``: key, label): numbers to 3 decimals, ``pre`` keys as
    preformatted text, the p-value in column ``p_adj`` read from ``p_key``."""
    head = "".join(f"<th>{esc(label)}</th>" for _, label in cols)
    body = []
    for r in rows:
        cells = []
        for key, _ in cols:
            v = r.get(key)
            if key in pre:
                cells.append(f"<td><pre>{esc(v)}</pre></td>")
            elif key == "p_adj":
                v = r.get(p_key)
                cells.append(f'<td class="num">{"n/a" if v is None else esc(format_p(v))}</td>')
            elif isinstance(v, float) or (v is None and key not in pre):
                cells.append(f'<td class="num">{num(v)}</td>')
            else:
                cells.append(f"<td>{esc(v)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


#: Characters of a name (model, pair) on a chart axis.
MAX_LABEL = 60


def chart_label(text: Any) -> str:
    """A store string as a chart label: control, bidi and surrogate characters (tab and newline too)
    as U+FFFD (``textsafe.neutral``; vl-convert aborts the process on some control characters), cut
    at ``MAX_LABEL`` characters."""
    clean = neutral(text, keep="")
    return clean if len(clean) <= MAX_LABEL else clean[: MAX_LABEL - 1] + "…"


def _svg(chart) -> str:
    """An Altair chart as SVG markup (vl-convert, offline); the XML prolog dropped for inline use."""
    import vl_convert as vlc

    svg = vlc.vegalite_to_svg(chart.to_json())
    return svg[svg.index("<svg"):]


def sgs_chart(rows: list[dict]) -> str:
    """SGS per model (dot) with its 95 % CI (bar), one panel per axis, as inline SVG ('' without rows)."""
    import altair as alt
    import pandas as pd

    df = pd.DataFrame([{**r, "model": chart_label(r["model"]), "axis_label": chart_label(r["axis_label"])}
                       for r in rows if r["sgs"] is not None])
    if df.empty:
        return ""
    base = alt.Chart(df).encode(y=alt.Y("model:N", title=None))
    layer = alt.layer(base.mark_rule().encode(x=alt.X("lo:Q", title="SGS (lower = more stable)"), x2="hi:Q"),
                      base.mark_point(filled=True, size=50).encode(x="sgs:Q"))
    return _svg(layer.properties(width=140).facet(column=_panels(df)))


def _panels(df):
    """One panel per axis, in the rows' (the paper's) order."""
    import altair as alt

    return alt.Column("axis_label:N", title=None, sort=list(dict.fromkeys(df["axis_label"])))


def pair_chart(rows: list[dict]) -> str:
    """Paired differences s_a − s_b with 95 % CI per pair, one panel per axis ('' without rows)."""
    import altair as alt
    import pandas as pd

    df = pd.DataFrame([{**r, "pair": chart_label(f"{r['model_a']} − {r['model_b']}"), "axis_label": chart_label(r["axis_label"])}
                       for r in rows
                       if r["diff"] is not None and r["ci_low"] is not None])
    if df.empty:
        return ""
    base = alt.Chart(df).encode(y=alt.Y("pair:N", title=None))
    layer = alt.layer(base.mark_rule().encode(x=alt.X("ci_low:Q", title="mean difference (negative: first more stable)"),
                                              x2="ci_high:Q"),
                      base.mark_point(filled=True, size=50).encode(x="diff:Q"),
                      base.mark_rule(strokeDash=[3, 3], color="#888").encode(x=alt.datum(0)))
    return _svg(layer.properties(width=140).facet(column=_panels(df)))


def _ci_cell(r: dict) -> str:
    """``0.123 [0.101, 0.145] *`` (SGS, its CI, the test's marker) as escaped HTML; ``n/a`` without a number."""
    if r.get("sgs") is None:
        return "n/a"
    ci = "" if r.get("lo") is None or r.get("hi") is None else f" [{num(r['lo'])}, {num(r['hi'])}]"
    return f"{num(r['sgs'])}{ci}" + (f" {esc(r['marker'])}" if r.get("marker") else "")


def dataset_table(rows: list[dict]) -> str:
    """SGS per model × dataset (rows) × axis (columns, the rows' order), each cell ``_ci_cell``; '' without rows."""
    if not rows:
        return ""
    axes = list(dict.fromkeys(r["axis_label"] for r in rows))
    cells: dict[tuple, dict[str, str]] = {}
    for r in rows:
        cells.setdefault((r["model"], r["dataset"]), {})[r["axis_label"]] = _ci_cell(r)
    head = "".join(f"<th>{esc(c)}</th>" for c in ("model", "dataset", *axes))
    body = "".join(f"<tr><td>{esc(m)}</td><td>{esc(d)}</td>"
                   + "".join(f'<td class="num">{c.get(a, "—")}</td>' for a in axes) + "</tr>"
                   for (m, d), c in cells.items())
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


#: What the report says where the store has no base repeats.
NO_FLOOR = ("No noise floor measured: the store has no base repeats (a model's base_repeats ≥ 2 asks each base "
            "prompt again, and the Δ between those replies is the floor).")


def floor_section(rows: list[dict]) -> list[str]:
    """The noise-floor table (model × axis: SGS, floor, prompts with both, p of s − floor > 0) or ``NO_FLOOR``."""
    if not rows:
        return [f"<p>{esc(NO_FLOOR)}</p>"]
    shown = [{**r, "floor": r["floor"] if r["floor"] is not None else "not measured",
              "above_floor": "n/a" if r["p"] is None else "yes" if r["above_floor"] else "no"} for r in rows]
    return [_table(shown, [("model", "model"), ("axis_label", "axis"), ("sgs", "SGS"), ("floor", "noise floor"),
                           ("n_paired", "prompts with repeats"), ("p_adj", "p (s − floor > 0)"), ("marker", "marker"),
                           ("above_floor", "above the floor")], p_key="p"),
            "<p class=\"note\">Noise floor: the same axes between repeats of the base prompt (RMS over repeats per "
            "prompt, mean over prompts); p: one-sided paired t-test of s_X(i) − floor_X(i) &gt; 0 over the prompts "
            "with repeats. \"not measured\": that model has no repeats.</p>"]


def sampling_section(rows: list[dict], pass_k: list[dict]) -> list[str]:
    """The sampled runs' table (model × axis: floor, movement, the share due to rephrasing [CI], prompts where
    rephrasing exceeds the dice, p) and pass^k; nothing for a store without sampled runs."""
    if not rows:
        return []
    shown = [{**r, "share_ci": "n/a" if r["share_lo"] is None else f"[{num(r['share_lo'])}, {num(r['share_hi'])}]",
              "exceeds": f"{r['n_exceeds']} of {r['n_prompts']} ({r['n_exceeds_bh']} after BH)"} for r in rows]
    out = ["<h2>Rephrasing or the dice? (sampled runs)</h2>",
           _table(shown, [("model", "model"), ("axis_label", "axis"), ("floor", "dice (floor)"),
                          ("move", "rephrasing + dice"), ("share", "share due to rephrasing"),
                          ("share_ci", "95 % CI"), ("exceeds", "prompts: rephrasing > dice"), ("p_adj", "p")],
                  p_key="p"),
           "<p class=\"note\">Per prompt: the dice = RMS Δ̃ of the base samples against base sample 0; rephrasing + "
           "dice = RMS Δ̃ of the variant samples against it. Share = 1 − Σ floor² / Σ movement² over prompts "
           "(percentile bootstrap CI); prompts: per-prompt permutation test p &lt; 0.05 (and after "
           "Benjamini–Hochberg); p: sign-flip test of movement − floor &gt; 0 over prompts.</p>"]
    if pass_k:
        out.append(_table(pass_k, [("model", "model"), ("prompts", "prompts"), ("with_majority", "with a majority"),
                                   ("pass_k_dice", "pass^k, dice"), ("pass_k_rephrased", "pass^k, rephrased")]))
    return out


def render_html(numbers: dict[str, Any], title: str) -> str:
    """The report as one HTML document (no script, no external resource; see the module doc)."""
    s = numbers["settings"]
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
             f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
             f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>",
             f"<h1>sago report: {esc(title)}</h1>",
             f"<p class=\"note\">SGS per axis (lower = more stable), mean of the per-prompt scores s_X(i); "
             f"{int(s['ci_level'] * 100)} % percentile bootstrap CI over prompts ({s['n_resamples']} resamples, seed "
             f"{s['seed']}); one-sided t-test of E[s] &gt; ε = {s['eps']} (correction: {esc(s['correction'])}; "
             f"† p&lt;0.001, ** p&lt;0.01, * p&lt;0.05). Written by sago {esc(numbers['sago_version'])}; the same "
             f"numbers: sago report --json ({esc(numbers['schema'])}).</p>",
             "<h2>SGS per model × axis</h2>", sgs_chart(numbers["sgs"]),
             _table(numbers["sgs"], [("model", "model"), ("axis_label", "axis"), ("sgs", "SGS"), ("lo", "CI low"),
                                     ("hi", "CI high"), ("n_prompts", "prompts"), ("p_adj", "p"),
                                     ("marker", "marker"), ("verdict", "vs ε")]),
             "<h2>SGS per dataset</h2>", dataset_table(numbers.get("sgs_by_dataset") or []),
             "<p class=\"note\">Each cell: SGS over the dataset's prompts [95 % CI] and the marker of the same test "
             "against ε within the dataset.</p>",
             "<h2>Noise floor</h2>", *floor_section(numbers.get("noise_floor") or []),
             *sampling_section(numbers.get("sampling") or [], numbers.get("pass_k") or []),
             "<h2>Model vs model</h2>"]
    if numbers["pairwise"]:
        parts += [pair_chart(numbers["pairwise"]),
                  _table(numbers["pairwise"], [("axis_label", "axis"), ("model_a", "model a"), ("model_b", "model b"),
                                               ("n_prompts", "shared prompts"), ("diff", "s_a − s_b"),
                                               ("ci_low", "CI low"), ("ci_high", "CI high"), ("p_adj", "p"),
                                               ("verdict", "verdict"), ("better", "more stable")]),
                  "<p class=\"note\">Paired over shared prompts: bootstrap CI of the mean difference and a "
                  "Wilcoxon signed-rank test; verdict a / b names the more stable model, none = no difference "
                  "shown, mixed = mean and ranks disagree.</p>"]
    else:
        parts.append("<p>One model only: nothing to compare.</p>")
    parts.append(f"<h2>Worst prompts ({s['worst_per_axis']} per axis)</h2>")
    parts.append(_table(numbers["worst"], [("axis_label", "axis"), ("rank", "rank"), ("model", "model"),
                                           ("dataset", "dataset"), ("s", "s_X(i)"), ("label", "worst variant"),
                                           ("prompt_text", "prompt"), ("variant_text", "variant"),
                                           ("base_reply", "reply to the prompt"), ("variant_reply", "reply to the variant")],
                        pre=("prompt_text", "variant_text", "base_reply", "variant_reply")))
    parts.append("<h2>Runs</h2>")
    parts.append(_table(numbers["runs"], [("model", "model"), ("run_id", "run"), ("status", "status"),
                                          ("backend", "backend"), ("fingerprint", "signature"),
                                          ("weights_sha256", "weights sha256"), ("seed", "seed"),
                                          ("finished_at", "finished")]))
    parts.append("</body></html>")
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    """``report STORE [--html OUT.html] [--json OUT.json]``; exit 0, or 2 with the reason (no store, no output)."""
    ap = argparse.ArgumentParser(prog="sago report", description="Write a store's headline numbers as one "
                                 "self-contained HTML file (charts inline, no network, no script) and/or JSON.")
    ap.add_argument("store", help="a DuckDB store written by sago")
    ap.add_argument("--html", metavar="OUT.html", help="the HTML report to write")
    ap.add_argument("--json", metavar="OUT.json", help="the same numbers as JSON (docs/REPORT.md)")
    ap.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000, as the dashboard)")
    ap.add_argument("--worst", type=int, default=3, help="worst prompts per axis (default 3)")
    args = ap.parse_args(argv)
    if not (args.html or args.json):
        ap.error("give --html OUT.html and/or --json OUT.json")
    from sago_engine.store import StoreError, open_store
    from sago_engine.views.report_data import report_numbers

    if not Path(args.store).is_file():
        print(f"error: {args.store}: no such store file", file=sys.stderr)
        return 2
    try:
        with open_store(args.store, read_only=True) as st:
            numbers = report_numbers(st, n_resamples=args.resamples, worst_per_axis=args.worst)
    except StoreError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        Path(args.json).write_text(json.dumps(numbers, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    if args.html:
        Path(args.html).write_text(render_html(numbers, Path(args.store).name), encoding="utf-8")
    print(json.dumps({"store": args.store, "html": args.html, "json": args.json, "models": len({r["model"] for r in numbers["runs"]}),
                      "sgs_rows": len(numbers["sgs"]), "pairs": len(numbers["pairwise"])}))
    return 0
