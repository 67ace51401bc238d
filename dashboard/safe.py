"""Store strings made inert where the dashboard shows or exports them: Markdown, Plotly text, CSV.

A store is untrusted input (a colleague's shard, a downloaded file): model, dataset and option
names, prompts, replies, reasons and meta values are whatever the file says. Each place that
interprets text gets exactly one helper here:

- ``md`` for every Markdown element (``st.markdown``, ``st.caption``, ``st.info`` / ``warning`` /
  ``error`` / ``success``, headers, expander and metric labels, ``help=`` tooltips): no image,
  link, HTML, heading, list, LaTeX or colour directive can come from the data.
- ``inert_figure`` for every Plotly figure (``dashboard.exports.chart`` applies it): Plotly
  renders a subset of HTML in names, titles, tick labels and hover text (``<a href>`` is a
  link); only attribute-free formatting tags survive.
- ``csv_bytes`` for every CSV download: spreadsheet-safe text cells (OWASP "CSV injection",
  CWE-1236), numbers left numeric, UTF-8 with a byte-order mark so Excel reads ``Δ``, ``±``, ``†``.

Text shown with ``st.text``, ``st.code``, ``st.dataframe``, ``st.html`` or in Vega-Lite charts is not
interpreted as markup but shows control and bidi characters raw (an RLO reverses what follows): it
goes through ``visible`` (``visible_frame`` for a table), the rule terminals and logs get too.
"""

from __future__ import annotations

import html
import re
import string
from typing import Any

import pandas as pd

from sago_engine.textsafe import PAGE_KEEPS, neutral

#: Every ASCII punctuation character: CommonMark lets each be backslash-escaped (spec §2.4).
_MD_PUNCT = re.compile("([" + re.escape(string.punctuation) + "])")
#: Where GFM's autolink-literal step (run on the text after escapes are resolved) would start a
#: link: "scheme://", "www." and the "@" of an e-mail address. A WORD JOINER (U+2060, zero width)
#: placed there keeps the text as it reads and makes it no URL.
_AUTOLINK = re.compile(r"(?<=:)(?=//)|(?<=\bwww)(?=\.)|(?<=@)", re.IGNORECASE)
_WORD_JOINER = "\u2060"
#: The only tags a Plotly string keeps: formatting without attributes (no link, no style).
_PLOTLY_TAG = re.compile(r"<(?:br\s*/?|/?(?:b|i|em|sub|sup|extra))>")
#: A cell a spreadsheet would read as a formula (or a DDE call) when it starts with one of these.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
#: A plain number written as text ("-0.5", "+3", "1e-3"): a spreadsheet reads it as a number, not a formula.
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def visible(text: Any) -> str:
    """``str(text)`` with control and bidi-formatting characters replaced by U+FFFD (tab, newline,
    carriage return and the line/paragraph separators kept: a page shows them as white space), so a
    string cannot hide or visually reorder the text around it. The rule is ``sago_engine.textsafe``'s,
    the one terminals and logs get."""
    return neutral(text, keep=PAGE_KEEPS)


def visible_frame(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` whose text cells (and text column names) are ``visible``: for ``st.dataframe``,
    which shows a cell's characters raw. Numbers, None and other values are left as they are."""
    out = df.copy()
    out.columns = [visible(c) if isinstance(c, str) else c for c in out.columns]
    for i, dt in enumerate(out.dtypes):
        if pd.api.types.is_object_dtype(dt) or pd.api.types.is_string_dtype(dt):
            out.iloc[:, i] = out.iloc[:, i].map(lambda v: visible(v) if isinstance(v, str) else v)
    return out


def md_frame(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` for ``st.table``, which reads each text cell and column name as Markdown: text cells
    and names through ``md``; each ``_`` of a name is followed by a ZERO WIDTH SPACE (U+200B), so a long
    snake_case header can wrap there. Numbers, None and other values are left as they are."""
    out = df.copy()
    out.columns = [md(c).replace("\\_", "\\_\u200b") if isinstance(c, str) else c for c in out.columns]
    for i, dt in enumerate(out.dtypes):
        if pd.api.types.is_object_dtype(dt) or pd.api.types.is_string_dtype(dt):
            out.iloc[:, i] = out.iloc[:, i].map(lambda v: md(v) if isinstance(v, str) else v)
    return out


def md(text: Any) -> str:
    """``text`` (any value; ``str()`` of it) for a Markdown element, shown literally.

    Backslash-escapes every ASCII punctuation character (CommonMark §2.4; this also disables
    Streamlit's ``$…$`` LaTeX and ``:color[…]`` directives, whose syntax is made of punctuation),
    puts a zero-width WORD JOINER where a bare URL or e-mail address would become a link (GFM
    autolinks are found in the text after the escapes are resolved), and replaces control/bidi
    characters (``visible``). Use it on every store-derived value placed in Markdown; keep the
    page's own Markdown outside the call.
    """
    return _MD_PUNCT.sub(r"\\\1", _AUTOLINK.sub(_WORD_JOINER, visible(text)))


def plotly_text(text: str) -> str:
    """A string for a Plotly figure: ``&``, ``<``, ``>`` escaped except the attribute-free tags
    ``<br>``, ``<b>``, ``<i>``, ``<em>``, ``<sub>``, ``<sup>``, ``<extra>`` (and their closing
    tags), so a figure's own formatting works and no link (``<a href>``) or styled span can
    come from the data. Plotly decodes the entities back to the characters when it draws."""
    s = visible(text)
    out, pos = [], 0
    for m in _PLOTLY_TAG.finditer(s):
        out.append(html.escape(s[pos:m.start()], quote=False))
        out.append(m.group(0))
        pos = m.end()
    out.append(html.escape(s[pos:], quote=False))
    return "".join(out)


def _inert(value: Any) -> Any:
    """``plotly_text`` applied to every string inside ``value`` (dicts, lists, object arrays)."""
    import numpy as np

    if isinstance(value, str):
        return plotly_text(value)
    if isinstance(value, dict):
        return {k: (v if k == "template" else _inert(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_inert(v) for v in value]
    if isinstance(value, np.ndarray) and value.dtype == object:
        return np.array([_inert(v) for v in value.ravel()], dtype=object).reshape(value.shape)
    return value


def inert_figure(fig):
    """A copy of a Plotly figure whose every string (trace names, text, hover text and templates,
    categories, titles, annotations, tick labels; the layout template aside) went through
    ``plotly_text``. Apply once, to the finished figure (``dashboard.exports.chart`` does)."""
    import plotly.graph_objects as go

    d = fig.to_dict()
    return go.Figure({"data": _inert(d.get("data", [])), "layout": _inert(d.get("layout", {}))})


def inert_altair(chart):
    """A copy of an Altair chart whose every data frame (the top level's, each layer's, concat part's
    and facet spec's) went through ``visible_frame``: Vega-Lite draws labels' characters raw."""
    out = chart.copy(deep=False)
    if isinstance(getattr(out, "data", None), pd.DataFrame):
        out.data = visible_frame(out.data)
    for part in ("layer", "hconcat", "vconcat", "concat"):
        subs = getattr(out, part, None)
        if isinstance(subs, list):
            setattr(out, part, [inert_altair(c) for c in subs])
    spec = getattr(out, "spec", None)
    if spec is not None and hasattr(spec, "copy") and not isinstance(spec, (str, dict)):
        out.spec = inert_altair(spec)
    return out


def csv_cell(value: Any) -> Any:
    """A text cell that a spreadsheet would run as a formula (starts with ``= + - @``, tab or CR)
    prefixed with ``'``; a plain number written as text ("-0.5"), and any non-string, unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_START) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def csv_bytes(df: pd.DataFrame) -> bytes:
    """``df`` as CSV bytes for a download: UTF-8 with a byte-order mark (``utf-8-sig``), no index,
    CRLF row ends (RFC 4180), so a field holding a bare carriage return is quoted and cannot end its row.

    Text columns (object / string / categorical dtype) and the header go through ``csv_cell``;
    numeric and boolean columns are written as pandas writes them (a negative number is never
    quoted or prefixed). The frame itself is not modified.
    """
    out = df.copy()
    for i in range(out.shape[1]):  # by position: a frame may repeat a column name
        s = out.iloc[:, i]
        if isinstance(s.dtype, pd.CategoricalDtype) or pd.api.types.is_object_dtype(s) \
                or pd.api.types.is_string_dtype(s):
            out.isetitem(i, s.astype(object).map(csv_cell))
    header = [csv_cell(str(c)) for c in out.columns]
    return out.to_csv(index=False, header=header, lineterminator="\r\n").encode("utf-8-sig")
