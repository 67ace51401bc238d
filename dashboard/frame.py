"""The frame every page runs inside: access mode, password, navigation, store picker.

``app.py`` calls ``navigation`` (sago's own links in the sidebar; Streamlit's automatic
list is off in ``.streamlit/config.toml``) and ``pick_store``; each page's first line is
``require_frame()``, which sends a page Streamlit ran on its own (the ``pages/`` folder's
legacy mode, before any session called ``st.navigation``) back through ``app.py``.
"""

from __future__ import annotations

import hmac
import os
from pathlib import Path

import streamlit as st

from dashboard import controls, password, safe
from dashboard.access import Access, access_from_env, confined_store, landing_store, readable_stores
from sago_engine.store.catalog import DEMO_STORE, find_stores

ROOT = Path(__file__).resolve().parent.parent
#: The browser tab's icon, served by the dashboard itself: a page's ``:material/…:`` icon as the
#: tab icon would make the browser fetch it from fonts.gstatic.com (no network at run time).
FAVICON = Path(__file__).resolve().parent / "favicon.png"
_ROUTED = "_sago_routed"

#: The views: (script, title, icon, url path). Profiles is the default page, served at "/" and at its own
#: path "/profiles" (``nav_pages``).
VIEWS = (
    ("pages/profiles.py", "Profiles", ":material/radar:", "profiles"),
    ("pages/pareto.py", "Pareto", ":material/scatter_plot:", "pareto"),
    ("pages/rankings.py", "Rankings", ":material/leaderboard:", "rankings"),
    ("pages/significance.py", "Significance", ":material/functions:", "significance"),
    ("pages/sample_size.py", "Sample size", ":material/stacked_line_chart:", "sample_size"),
    ("pages/pairwise.py", "Model vs model", ":material/compare_arrows:", "pairwise"),
    ("pages/prompts.py", "Prompts", ":material/chat:", "prompts"),
    ("pages/worst.py", "Worst cases", ":material/report:", "worst"),
    ("pages/correctness.py", "Right or wrong", ":material/fact_check:", "correctness"),
    ("pages/variants.py", "Variants", ":material/tune:", "variants"),
    ("pages/method_choices.py", "Method choices", ":material/alt_route:", "method_choices"),
    ("pages/live.py", "Live", ":material/bolt:", "live"),
    ("pages/paper_reference.py", "Paper reference", ":material/menu_book:", "paper_reference"),
)


def access() -> Access:
    """This server's access mode (from the environment scripts/dashboard.sh sets)."""
    return access_from_env()


def offered_views(acc: Access) -> list[tuple[str, str, str, str]]:
    """The ``VIEWS`` this mode offers (share mode without ``--live``: no Live page)."""
    return [v for v in VIEWS if acc.live or v[3] != "live"]


def nav_pages(acc: Access) -> list:
    """``st.Page`` objects of the views this mode offers. No icon on the page itself: Streamlit
    makes a page's ``:material/…:`` icon the browser tab's icon, fetched from fonts.gstatic.com;
    the icons go on the sidebar links (``navigation``), drawn from the bundled font."""
    default = VIEWS[0]
    pages = [st.Page(str(ROOT / path), title=title, url_path="" if path == default[0] else url,
                     default=(path == default[0]))
             for path, title, _icon, url in offered_views(acc)]
    if not acc.live:  # a link to /live says why there is no Live page here (last: no sidebar link)
        pages.append(st.Page(_live_not_offered, title="Live", url_path="live"))
    # Streamlit serves the default page at "/" only: the same script at "/profiles" too (after the default, so a
    # link to the script — st.page_link, st.switch_page — still goes to "/")
    pages.append(st.Page(str(ROOT / default[0]), title=default[1], url_path=default[3], visibility="hidden"))
    return pages


def _live_not_offered() -> None:
    st.info("The Live page is not offered on this shared dashboard: it runs a model on the host's machine, "
            "so the host starts it with `--share DIR --live` to offer it. Every other view is in the sidebar.")


def require_frame() -> None:
    """First line of every page: run only inside app.py's frame.

    On a freshly started server Streamlit runs a ``pages/`` file on its own for the first
    request of e.g. ``/pareto`` (no sidebar, no store picker, no access checks). Calling the
    public ``st.navigation`` ends that legacy mode for the process; the rerun then goes
    through app.py with the same page.
    """
    if st.session_state.pop(_ROUTED, False):
        return
    st.navigation(nav_pages(access()), position="hidden")
    st.rerun()


def navigation():
    """``st.navigation`` over this mode's views (hidden) plus sago's own links in the sidebar; returns the page."""
    acc = access()
    pages = nav_pages(acc)
    nav = st.navigation(pages, position="hidden")
    with st.sidebar:
        for p, (_path, _title, icon, _url) in zip(pages, offered_views(acc)):
            st.page_link(p, icon=icon)
    return nav


def mark_routed() -> None:
    """Called by app.py right before ``nav.run()``: the page that follows runs inside the frame."""
    st.session_state[_ROUTED] = True


def password_gate() -> None:
    """Share mode with ``sago_password`` in Streamlit secrets: ask for it once per session, else stop.

    Fails closed (``dashboard.password``): a secrets file that exists but cannot be read, or a
    ``sago_password`` that is not a non-empty string, shows "cannot read the meeting password
    from …" and stops before anything else is drawn.
    """
    acc = access()
    if not acc.shared or st.session_state.get("_sago_authed"):
        return
    from streamlit import config

    files = list(config.get_option("secrets.files"))
    try:
        pw = password.meeting_password(files)
    except password.PasswordError as e:
        st.error(f"This shared dashboard is closed: {e}. The host must fix the file and reload.")
        st.stop()
    if pw is None:
        password.log_no_password(files)
        return
    # the gate's runs resolve the linked page too (never drawn): a run without ``st.navigation`` tells
    # the browser it is on the default page, so a password typed while the first run is still under
    # way reran Profiles and a link to /pairwise lost its view
    st.navigation(nav_pages(acc), position="hidden")
    controls.keep_theme()  # a link's theme switches the page before the password, not by a reload after it
    typed = st.text_input("Password", type="password", key="app_password")
    if typed and hmac.compare_digest(typed.encode("utf-8"), str(pw).encode("utf-8")):
        st.session_state["_sago_authed"] = True
        st.session_state.pop("app_password", None)
        st.rerun()
    if typed:
        st.error("Wrong password.")
    st.stop()


def store_options(acc: Access) -> list[str]:
    """Stores offered in the sidebar: share mode — file names of the readable stores in the shared folder,
    the landing store (``shared_landing``) first; local — paths: the launch store, the bundled ones and
    the Live page's saved probes (``live_save.default_user_store``) when that file exists."""
    if acc.shared:
        names = [p.name for p in readable_stores(acc.share_dir)]
        pre = shared_landing(acc)
        if pre is not None:
            names = list(dict.fromkeys([pre, *names]))
        return names
    opts = [str(p) for p in find_stores(DEMO_STORE.parent)] or [str(DEMO_STORE)]
    if os.environ.get("SAGO_STORE"):  # a store chosen at launch: SAGO_STORE=/path/run.duckdb
        opts = list(dict.fromkeys([os.environ["SAGO_STORE"], *opts]))
    from sago_engine.live.save import default_user_store

    probes = default_user_store()  # the Live page's "Save to store" file, once a probe was saved
    if probes.is_file():
        opts = list(dict.fromkeys([*opts, str(probes)]))
    return opts


def shared_landing(acc: Access) -> str | None:
    """Share mode: the file name of the store visitors land on (``access.landing_store``: the host's
    ``$SAGO_STORE``, else the demo, else the folder's only store), or None (the visitor picks one)."""
    if not acc.shared:
        return None
    p = landing_store(acc.share_dir, os.environ.get("SAGO_STORE"))
    return None if p is None else p.name


def store_tokens(options: list[str]) -> dict[str, str]:
    """What the store picker and a link carry for each offered store (``store_options``): token → store.

    A token is the store's file name, or — for a second store of the same name — its path relative
    to the project folder; never an absolute server path, so a link made in local mode names no
    folder of this machine, and a link's ``store`` can only pick one of the offered stores. In
    share mode the options are already file names of the shared folder.
    """
    out: dict[str, str] = {}
    for opt in options:
        p = Path(opt)
        token = p.name
        if token in out:
            try:
                token = str(p.resolve().relative_to(ROOT))
            except ValueError:
                token = f"{p.name} ({len(out) + 1})"
        out.setdefault(token, opt)
    return out


#: The toast when the typed store path cannot be opened (the box's section says why; it may be below the fold).
TYPED_PATH_TOAST = "The typed store path cannot be opened: the sidebar says why."


def typed_store(typed: str) -> str | None:
    """The path typed in the sidebar's "path to another store" box (local mode), or None when the box is
    empty or names no file (or a folder) — then the box's section says so, a toast points there, and the
    picked store stays open. Call it inside that section."""
    path = typed.strip()
    if not path:
        return None
    where = Path(path).expanduser()
    if not where.is_file():
        what = "is a folder, not a store file" if where.is_dir() else "names no file"
        st.error(f"{safe.md(path)} {what}: the picked store stays open. Correct or clear the path.")
        st.toast(TYPED_PATH_TOAST)
        return None
    return str(Path(path).expanduser())


def checked_store(choice: str | None) -> str | None:
    """The store path a choice (session, widget or URL value) may open in this mode, else None.

    Local mode: any non-empty path. Share mode: only a store of the shared folder
    (``access.confined_store``).
    """
    acc = access()
    if not choice or not str(choice).strip():
        return None
    if acc.shared:
        p = confined_store(choice, acc.share_dir)
        return None if p is None else str(p)
    return str(choice).strip()
