"""What a headless page run (Streamlit AppTest) hands to Markdown, and what that Markdown renders to.

``markdown_texts(at)`` collects every string the browser renders as Markdown: the bodies of
markdown / caption / alert / heading / toast elements, expander and metric labels, widget labels
and ``help=`` tooltips, radio options, ``st.table`` cells and column names. ``active_html(text)`` renders one of them with a
CommonMark renderer (markdown-it-py, raw HTML on) and returns the active tags it produced
(``<img>``, ``<a>``, ``<script>``, any raw HTML tag), so a test can assert that a store string
stayed text.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

import pandas as pd
from markdown_it import MarkdownIt

_MD = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
#: Tags in rendered Markdown that a store string must never produce.
_ACTIVE = re.compile(r"<(img|a|script|iframe|svg|object|embed|link|style|video|audio|source|input|form)\b", re.I)
#: What GFM's autolink-literal step (remark-gfm, run on text nodes after parsing) turns into links.
_AUTOLINK = (re.compile(r"(https?://|www(?=\.))([-.\w]+)", re.I), re.compile(r"[-.\w+]+@[-\w]+(?:\.[-\w]+)+"))
#: Proto fields that the frontend renders as Markdown, per element type (AppTest node .type).
_MD_FIELDS = {"markdown": ("body",), "caption": ("body",), "latex": (), "alert": ("body",), "error": ("body",),
              "warning": ("body",), "info": ("body",), "success": ("body",), "heading": ("body",),
              "title": ("body",), "header": ("body",), "subheader": ("body",), "toast": ("body",),
              "metric": ("label", "help"), "expandable": ("label",), "expander": ("label",), "tab": ("label",)}


def walk(node) -> Iterator:
    """Every node under ``node`` (an AppTest tree or block), depth first."""
    yield node
    children = getattr(node, "children", None) or {}
    for child in children.values():
        yield from walk(child)


def markdown_texts(at) -> list[tuple[str, str]]:
    """(element type, text) for every string of the last run that the frontend renders as Markdown."""
    out: list[tuple[str, str]] = []
    for node in walk(at._tree):
        proto = getattr(node, "proto", None)
        if proto is None:
            continue
        kind = getattr(node, "type", "")
        for f in _MD_FIELDS.get(kind, ()):
            v = getattr(proto, f, "")
            if isinstance(v, str) and v:
                out.append((kind, v))
        if kind not in _MD_FIELDS:  # widgets: label and help are Markdown; radio options too
            for f in ("label", "help"):
                v = getattr(proto, f, None) if hasattr(proto, f) else None
                if isinstance(v, str) and v:
                    out.append((f"{kind}.{f}", v))
            if kind == "radio":
                out.extend((f"{kind}.option", str(o)) for o in getattr(proto, "options", ()))
        if kind == "table":  # st.table: each column name and text cell is Markdown
            df = node.value
            out.extend(("table.column", str(c)) for c in df.columns)
            out.extend(("table.cell", v) for v in df.to_numpy().ravel() if isinstance(v, str))
    return out


def active_html(text: str) -> list[str]:
    """The active tags (``_ACTIVE``) a CommonMark renderer makes of ``text``, plus "autolink" for each
    bare URL or e-mail address in its text that GFM would make a link of."""
    rendered = _MD.render(text)
    plain = html.unescape(re.sub(r"<[^>]+>", " ", rendered))
    return _ACTIVE.findall(rendered) + ["autolink" for rx in _AUTOLINK for _ in rx.finditer(plain)]


def shown(markdown: str) -> str:
    """The text a reader sees when ``markdown`` is rendered (CommonMark, tags dropped, entities decoded)."""
    return html.unescape(re.sub(r"<[^>]+>", "", _MD.render(markdown))).strip()


def offending(at, needle: str | None = None) -> list[tuple[str, str, list[str]]]:
    """Markdown strings of the run whose rendering holds an active tag (optionally: only those holding ``needle``)."""
    bad = []
    for kind, text in markdown_texts(at):
        if needle is not None and needle not in text:
            continue
        tags = active_html(text)
        if tags:
            bad.append((kind, text[:300], tags))
    return bad


def all_tables(at) -> list:
    """Every table of an AppTest run as a reader sees it: the ``st.dataframe`` values, then the static
    ``st.table`` ones (``exports.table(..., wrap=True)``), whose names and text cells are Markdown-escaped
    with wrap points (U+200B) by ``safe.md_frame`` — rendered back to plain text here."""
    out = [el.value for el in at.dataframe]
    for el in at.table:
        df = el.value.copy()
        df.columns = [shown(str(c)).replace("\u200b", "") for c in df.columns]
        for c in df.columns:
            if df[c].dtype == object or pd.api.types.is_string_dtype(df[c]):
                df[c] = [shown(v).replace("\u200b", "") if isinstance(v, str) else v for v in df[c]]
        out.append(df)
    return out
