"""Links between views: a URL (one per table row) and an in-session jump that open another page on one item.

Each target page reads its choices from the URL (``dashboard.urlstate``), so a link is its query
string: the Prompts page takes ``dataset``, ``prompt`` and ``variant`` (its label), Worst cases
``rank``, ``axis`` and ``model``. The frame's own parameters (store, sidebar filters,
presentation mode, theme) travel with every link, so the target shows the same store and filters.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlencode

import streamlit as st

from sago_engine.filters import FILTER_FIELDS

#: URL parameters of the frame (app.py) that every link carries over.
FRAME_PARAMS: tuple[str, ...] = ("store", "present", "theme", *(name for name, _ in FILTER_FIELDS))
#: Target pages: (script, url path).
PROMPTS = ("pages/prompts.py", "prompts")
WORST = ("pages/worst.py", "worst")
PAIRWISE = ("pages/pairwise.py", "pairwise")
METHOD_CHOICES = ("pages/method_choices.py", "method_choices")


def frame_params() -> dict[str, list[str]]:
    """The frame's parameters of the current URL (store, filters, present, theme), as lists of values.

    ``theme`` follows the theme the page shows (``st.context.theme``; ``theme=dark``, none when light) once
    the browser has said it, so a link opens in the theme picked in the menu; before that, the URL's."""
    out = {p: st.query_params.get_all(p) for p in FRAME_PARAMS if st.query_params.get_all(p)}
    shown = st.context.theme.type
    if shown in ("dark", "light"):
        out.pop("theme", None)
        if shown == "dark":
            out["theme"] = ["dark"]
    return out


def params(page_params: Mapping[str, str]) -> dict[str, str | list[str]]:
    """The query parameters of a link: the frame's, then the target page's own (which win)."""
    out: dict[str, str | list[str]] = {k: (v if len(v) > 1 else v[0]) for k, v in frame_params().items()}
    out.update({str(k): str(v) for k, v in page_params.items()})
    return out


def href(target: tuple[str, str], page_params: Mapping[str, str]) -> str:
    """A relative URL (``./prompts?dataset=…&prompt=…``) to ``target`` (``PROMPTS``, ``WORST``, …); values URL-encoded."""
    return f"./{target[1]}?" + urlencode(params(page_params), doseq=True)


def jump(target: tuple[str, str], page_params: Mapping[str, str]) -> None:
    """Switch to ``target`` in this session with these URL parameters (``st.switch_page``); does not return."""
    st.switch_page(target[0], query_params=params(page_params))


def page_link(target: tuple[str, str], page_params: Mapping[str, str], label: str, icon: str | None = None) -> None:
    """A link button to ``target`` with these URL parameters (``st.page_link``; same session, one click)."""
    st.page_link(target[0], label=label, icon=icon, query_params=params(page_params))
