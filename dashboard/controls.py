"""The sidebar's and pages' shared controls: filters, the multiple-comparison control, presentation mode."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st

from dashboard import urlstate
from sago_engine.filters import FILTER_FIELDS, Filters


def current_filters() -> Filters:
    """The Filters chosen in the sidebar (set by app.py through ``sidebar_filters``)."""
    f = st.session_state.get("sago_filters")
    return f if isinstance(f, Filters) else Filters()


def sidebar_filters(options: dict[str, list]) -> Filters:
    """Sidebar multiselects (keys ``filter_<field>``) for models, datasets, F, u, s, p → ``Filters``.

    An empty multiselect means "all" (``None``). Selections no longer offered by the current
    store are dropped. The result is also kept in ``st.session_state["sago_filters"]``.
    """
    chosen: dict[str, tuple | None] = {}
    box = st.sidebar.expander("Filters", expanded=not presentation_on())
    with box:
        st.caption("Empty = all. Every page honours these filters.")
        for name, label in FILTER_FIELDS:
            opts = list(options.get(name, []))
            key = f"filter_{name}"
            urlstate.restore(name, key, "floatlist" if name == "strengths" else "list", choices=opts)
            if key in st.session_state:  # keep only values this store offers
                st.session_state[key] = [v for v in st.session_state[key] if v in opts]
            fmt = (lambda v: f"{v:g}") if name == "strengths" else str
            sel = st.multiselect(label, opts, key=key, placeholder="all", format_func=fmt)
            chosen[name] = tuple(sel) if sel else None
    f = Filters(**chosen)
    st.session_state["sago_filters"] = f
    return f


# ---------------------------------------------------------------- presentation mode
#: Presentation mode's page style (a constant: no data in it): large text and captions, a narrow top margin,
#: the chart the full width. Chart fonts are set on the figures themselves (``charts.present_plotly`` /
#: ``present_altair``), heights by ``chart_height``.
_PRESENTATION_CSS = """
<style>
html, body, [data-testid="stAppViewContainer"] { font-size: 20px; }
[data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li,
[data-testid="stCaptionContainer"] { font-size: 1.15rem; }
h1 { font-size: 1.9rem !important; padding: 0 0 0.2rem 0 !important; line-height: 1.2 !important; }
h2, h3 { font-size: 1.6rem !important; }
.block-container, [data-testid="stMainBlockContainer"] { max-width: 100% !important; padding-top: 3.5rem !important;
  padding-left: 2rem !important; padding-right: 2rem !important; }
[data-testid="stMainBlockContainer"] [data-testid="stVerticalBlock"] { gap: 0.6rem; }
[data-testid="stExpander"] summary { padding-top: 0.35rem; padding-bottom: 0.35rem; }
[data-testid="stElementContainer"]:has(h1) + [data-testid="stElementContainer"] [data-testid="stCaptionContainer"] {
  font-size: 0.95rem !important; display: -webkit-box; -webkit-line-clamp: 2; -webkit-box-orient: vertical;
  overflow: hidden; }
</style>
"""
#: Chart height (px) in presentation mode: below the title, the page's lead (two lines) and the closed
#: "Chart settings", the whole chart fits one 1280×720 screen.
PRESENTATION_CHART_HEIGHT = 440
_TRUE = ("1", "true", "yes", "on")


def presentation_on() -> bool:
    """Whether presentation mode is on (the sidebar toggle ``app_presentation``)."""
    return bool(st.session_state.get("app_presentation", False))


def presentation_requested() -> bool:
    """Whether this run will be in presentation mode, before the toggle is drawn (app.py's
    ``st.set_page_config`` collapses the sidebar then): the toggle's value, else the link's ``present=1``."""
    if "app_presentation" in st.session_state:
        return presentation_on()
    return str(st.query_params.get("present", "")).strip().lower() in _TRUE


@contextmanager
def page_controls() -> Iterator[None]:
    """Where a page draws its chart settings: in place, or in presentation mode inside a closed
    "Chart settings" expander, so the chart comes first on the screen."""
    if presentation_on():
        with st.expander("Chart settings", expanded=False, icon=":material/tune:"):
            yield
    else:
        with st.container():
            yield


def presentation_mode() -> bool:
    """Sidebar toggle for meetings: sidebar collapsed (app.py), large fonts on the page and in the charts,
    page controls in a closed expander (``page_controls``), one chart per screen (``chart_height``).

    The injected CSS is a constant (it contains no data). Returns whether the mode is on.
    """
    urlstate.restore("present", "app_presentation", "bool")  # a meeting link: …/pareto?present=1
    on = st.sidebar.toggle("Presentation mode", key="app_presentation",
                           help="Large fonts, controls collapsed, one chart per screen.")
    if on:
        st.html(_PRESENTATION_CSS)
    return on


def chart_height(default: int = 480, chrome: int = 0) -> int:
    """Chart height in pixels: ``PRESENTATION_CHART_HEIGHT`` less ``chrome`` in presentation mode (one chart
    per screen), else ``default``. ``chrome``: the pixels a chart draws beyond its ``height`` (an Altair
    chart's title, axes and legend when only its width fits the page)."""
    return PRESENTATION_CHART_HEIGHT - chrome if presentation_on() else default


def chart_first():
    """Where a page's main chart goes when it is drawn below tables or text: called right after the page's
    controls, it returns an empty container in presentation mode (the chart then opens the page: the first
    screen shows it whole), else None (``chart_place`` draws the chart where the page calls it)."""
    return st.container() if presentation_on() else None


def chart_place(first) -> st.delta_generator.DeltaGenerator:
    """The container to draw the main chart in: ``first`` (``chart_first``) when there is one, else here."""
    return first if first is not None else st.container()


def no_chart_note(why: str) -> None:
    """Presentation mode, on a page whose first screen has no chart: a line saying why (key
    ``presentation_no_chart``). Nothing outside presentation mode."""
    if presentation_on():
        with st.container(key="presentation_no_chart"):
            st.caption(f"No chart on this screen: {why}")


# ---------------------------------------------------------------- the viewer's theme
#: Streamlit's frontend keeps the theme picked in its menu (⋮) in the browser's localStorage under a key of the
#: page's path at load (``stActiveTheme-<path>-v2``, Streamlit 1.67), so a full load of another path opened in
#: the system's theme. The URL carries the theme instead (``theme=dark``). This constant script (no data in it),
#: drawn once per session (``keep_theme``): when the link's theme differs from the page's background, stores the
#: link's under this path's key and reloads once (a guard stops a second reload within 20 s); then, twice a
#: second, writes the theme shown into the address bar (``theme=dark``; none when light), so a theme picked in
#: the menu is in the URL at once — for a reload, a copied link, and the next run's links (``links``).
_THEME_JS = """<script>
(() => {
  const app = () => document.querySelector(".stApp");
  const shown = () => {
    const rgb = (getComputedStyle(app()).backgroundColor.match(/[\\d.]+/g) || [255, 255, 255]).map(Number);
    return 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2] < 128 ? "dark" : "light";
  };
  const want = new URLSearchParams(window.location.search).get("theme");
  if (app() && (want === "dark" || want === "light") && shown() !== want) {
    const guard = "sago-theme-reload:" + window.location.pathname;
    if (Date.now() - Number(sessionStorage.getItem(guard) || 0) > 20000) {
      sessionStorage.setItem(guard, String(Date.now()));
      localStorage.setItem("stActiveTheme-" + window.location.pathname + "-v2",
                           JSON.stringify(want === "dark" ? "Dark" : "Light"));
      window.location.reload();
      return;
    }
  }
  if (window.sagoThemeWatch) return;
  window.sagoThemeWatch = setInterval(() => {
    if (!app()) return;
    const url = new URL(window.location.href);
    const now = shown(), has = url.searchParams.get("theme");
    if (now === "dark" ? has === "dark" : has === null) return;
    if (now === "dark") url.searchParams.set("theme", "dark"); else url.searchParams.delete("theme");
    window.history.replaceState(window.history.state, "", url);
  }, 500);
})();
</script>"""


def keep_theme() -> None:
    """The viewer's theme in the URL, so a reload or a copied link opens in it: on a session's first run, draws
    ``_THEME_JS`` (which opens a link's ``theme`` and keeps the URL's ``theme`` equal to the theme shown). Call it
    in the sidebar, after its last element (the script takes no room on the page), and on the password page
    (``frame.password_gate``: a reload after the password would ask for it again)."""
    if not st.session_state.get("_sago_theme_seen"):
        st.session_state["_sago_theme_seen"] = True
        st.html(_THEME_JS, unsafe_allow_javascript=True)


# ---------------------------------------------------------------- statistics controls
def correction_control(key: str) -> str:
    """Multiple-comparison control (none / Holm / BH), shared by every page through ``sago_correction``.

    Each page renders its own selectbox (key ``<page>_correction``); a change is copied to the
    page-independent ``st.session_state["sago_correction"]`` so markers on Profiles / Pareto follow
    the choice made on Significance. Returns "none" | "holm" | "bh".
    """
    from sago_engine.scoring.stats import CORRECTION_LABELS, CORRECTIONS

    wkey = f"{key}_correction"
    urlstate.restore("correction", wkey, "str", choices=CORRECTIONS,
                     default=st.session_state.get("sago_correction", "none"))

    def _sync() -> None:
        st.session_state["sago_correction"] = st.session_state[wkey]

    return st.selectbox("Multiple-comparison control", list(CORRECTIONS), key=wkey, on_change=_sync,
                        format_func=CORRECTION_LABELS.get,
                        help="Adjusts p over every test the table shows (models × axes [× datasets]). "
                             "Markers follow the adjusted p; raw p stays in the tables.")


def current_correction() -> str:
    """The multiple-comparison control last chosen on a page with the control (``sago_correction``), for a
    page that shows no control of its own; "none" when nothing was chosen."""
    from sago_engine.scoring.stats import CORRECTIONS

    v = st.session_state.get("sago_correction", "none")
    return v if v in CORRECTIONS else "none"


def scope_title(scope: str, f: Filters) -> str:
    """A scope as a chart's title names it: "Total (all datasets)" becomes "Total (a, b)" when the
    sidebar filter keeps only some datasets, so a slide never claims more data than it shows."""
    if scope.startswith("Total") and f.datasets:
        return f"Total ({', '.join(f.datasets)})"
    return scope
