"""Cached reads of the current store for the pages: which store, ``Store`` queries, view builders over them.

Pages call the functions themselves — ``query(Store.prompt_scores, f)``,
``scored(report.score_tables, f, eps=0.05)`` — and get cached results keyed by the store's
path + mtime, the filters and the keywords. No SQL and no statistics here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from dashboard import frame, safe
from sago_engine.filters import Filters
from sago_engine.store.catalog import DEMO_STORE


def _store_errors() -> tuple[type[BaseException], ...]:
    from sago_engine.store import READ_ERRORS

    return READ_ERRORS


# ---------------------------------------------------------------- store and cached queries
def store_path() -> str:
    """The store the user picked in the sidebar (app.py), else ``$SAGO_STORE``, else the demo store.

    Share mode: only a store of the shared folder (``dashboard.access.confined_store``); a
    session value naming anything else is ignored. Nothing chosen: the landing store
    (``frame.shared_landing``), else the page asks the visitor to pick one and stops.
    """
    chosen = frame.checked_store(st.session_state.get("store_path"))
    if chosen is not None:
        return chosen
    if frame.access().shared:
        landing = frame.shared_landing(frame.access())
        if landing is None:
            n = len(frame.store_options(frame.access()))
            st.info(f"Pick a store in the sidebar (Store file): the shared folder holds {n} stores." if n else
                    "No readable store (*.duckdb) in the shared folder.")
            st.stop()
        return frame.checked_store(landing)
    return os.environ.get("SAGO_STORE") or str(DEMO_STORE)


def openable_store(path: str | None) -> str | None:
    """``path`` (a store typed in the sidebar, ``frame.typed_store``) if it opens as a sago store, else None:
    then the box's section says why (the error, naming the file once), a toast points there, and the picked
    store stays open. Call it inside that section. The check is the page's own first query (``Store.meta``,
    cached), so a good store is not opened twice."""
    if path is None:
        return None
    try:
        _cached_query(path, _mtime(path), "meta", None, ())
    except (*_store_errors(), OSError) as e:
        name = Path(path).name
        why = _file_named(str(e), path).rstrip(" .!")  # the box shows the path already: name the file once
        shown = why if why.startswith(name) else f"Cannot open {name}: {why}"
        st.error(f"{safe.md(shown)}. The picked store stays open. Correct or clear the path.")
        st.toast(frame.TYPED_PATH_TOAST)
        return None
    return path


def _mtime(path: str) -> float:
    """File mtime (part of every cache key, so a rebuilt store is re-read). Raises OSError if missing."""
    p = Path(path)
    wal = Path(path + ".wal")
    m = p.stat().st_mtime
    return max(m, wal.stat().st_mtime) if wal.exists() else m


@st.cache_data(show_spinner=False, max_entries=256)
def _cached_query(path: str, mtime: float, name: str, fkey: tuple | None, kwargs: tuple) -> Any:
    """Open the store read-only, run the ``Store`` method ``name`` (see ``query``), close it. Depends only on its arguments."""
    from sago_engine.store import open_store

    del mtime  # cache key only
    with open_store(path, read_only=True) as store:
        fn = getattr(store, name)
        if fkey is not None:
            return fn(Filters(**dict(fkey)), **dict(kwargs))
        return fn(**dict(kwargs))


def query(method: Callable, filters: Filters | None = None, **kwargs: Any) -> Any:
    """Run a ``Store`` method on the current store: ``query(Store.prompt_scores, f)``, cached by path + mtime + filters + kwargs.

    ``method`` is the function itself (``Store.<method>``), so an editor can follow the call.
    On a missing, locked or foreign store the page shows "Cannot open the store: …" and stops.
    Pass ``filters=None`` for queries that take no ``Filters`` argument. Keyword values must be hashable.
    """
    name = _store_method(method)
    path = store_path()
    try:
        return _cached_query(path, _mtime(path), name, None if filters is None else filters.key(),
                             tuple(sorted(kwargs.items())))
    except _store_errors() as e:
        _store_error(path, e)


@st.cache_data(show_spinner=False, max_entries=32)
def _cached_with_store(path: str, mtime: float, fn: str, fkey: tuple | None, kwargs: tuple) -> Any:
    """``<fn>(store, filters, **kwargs)`` on the store opened read-only (``fn`` as "module:qualname")."""
    from sago_engine.filters import Filters
    from sago_engine.store import open_store

    del mtime  # cache key only
    with open_store(path, read_only=True) as store:
        return _resolve(fn)(store, None if fkey is None else Filters(**dict(fkey)), **dict(kwargs))


def with_store(fn: Callable, filters: Filters | None = None, **kwargs: Any) -> Any:
    """Run a ``sago_engine`` function that reads several ``Store`` queries itself, ``fn(store, filters, **kwargs)``,
    cached like ``query`` (e.g. ``with_store(method_choices.collect_choices, f)``). Keyword values must be hashable."""
    path = store_path()
    try:
        return _cached_with_store(path, _mtime(path), _fn_key(fn), None if filters is None else filters.key(),
                                  tuple(sorted(kwargs.items())))
    except _store_errors() as e:
        _store_error(path, e)


@st.cache_data(show_spinner=False, max_entries=256)
def _cached_report(path: str, mtime: float, fn: str, fkey: tuple, kwargs: tuple) -> Any:
    """``<fn>(Store.prompt_scores(filters), **kwargs)``, cached like the queries (``fn`` as "module:qualname")."""
    scores = _cached_query(path, mtime, "prompt_scores", fkey, ())
    return _resolve(fn)(scores, **dict(kwargs))


def scored(fn: Callable, filters: Filters, **kwargs: Any) -> Any:
    """Apply a view builder to the filtered per-prompt scores, cached: ``scored(report.score_tables, f, eps=0.05)``.

    ``fn`` is the function itself (a module-level function of ``sago_engine``). Keyword values must be hashable.
    """
    path = store_path()
    try:
        return _cached_report(path, _mtime(path), _fn_key(fn), filters.key(), tuple(sorted(kwargs.items())))
    except _store_errors() as e:
        _store_error(path, e)


def scored_frame(fn: Callable, df: pd.DataFrame, **kwargs: Any) -> Any:
    """Apply a view builder to a (small) frame a page already has, cached by its content: ``scored_frame(report.rankings, per)``."""
    return _report_on_frame(_fn_key(fn), df, tuple(sorted(kwargs.items())))


@st.cache_data(show_spinner=False, max_entries=128)
def _report_on_frame(fn: str, df: pd.DataFrame, kwargs: tuple) -> Any:
    return _resolve(fn)(df, **dict(kwargs))


def _store_method(method: Callable) -> str:
    """The name of a ``Store`` method passed as a function; ValueError for anything else."""
    from sago_engine.store import Store

    name = getattr(method, "__name__", "")
    if getattr(Store, name, None) is not method:
        raise ValueError(f"query() takes a Store method (e.g. Store.prompt_scores), got {method!r}")
    return name


def _fn_key(fn: Callable) -> str:
    """``"module:qualname"`` of a module-level function (the cache key; resolved again by ``_resolve``)."""
    key = f"{fn.__module__}:{fn.__qualname__}"
    if _resolve(key) is not fn:
        raise ValueError(f"{fn!r} is not a module-level function")
    return key


def _resolve(key: str) -> Callable:
    import importlib

    mod, qual = key.split(":", 1)
    obj: Any = importlib.import_module(mod)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


def model_colors() -> dict[str, str]:
    """One colour per model on every page: assigned over ALL models of the store (not the filtered ones)."""
    from sago_engine.store import Store
    from sago_engine.views.palette import model_colors as _mc

    return _mc(query(Store.filter_options)["models"])


def path_free(msg: str, path: str | Path) -> str:
    """``msg`` (an error about the file ``path``) as a visitor may read it: in share mode every spelling
    of the file's server path is replaced by its name, so the page never shows where the host keeps
    files; unchanged in local mode."""
    return _file_named(msg, path) if frame.access().shared else msg


def _file_named(msg: str, path: str | Path) -> str:
    """``msg`` with every spelling of ``path`` (as given, resolved) replaced by the file's name."""
    name = Path(path).name
    for full in sorted({str(Path(path).resolve()), str(path)}, key=len, reverse=True):
        msg = msg.replace(full, name)
    return msg


def _store_error(path: str, e: BaseException) -> None:
    """Show why the store cannot be read (as text, ``safe.md``) and stop the page. In share mode the
    message names the file only, never the folder it lies in on the server."""
    msg = path_free(str(e), path)
    hint = (" It is being written by a run (DuckDB allows one writer or many readers): "
            "pick another store or reload when the run has finished.") if "lock" in msg.lower() else ""
    name = Path(path).name
    st.error(f"Cannot open the store {safe.md(name)}: {safe.md(msg)}{hint}")
    st.stop()


def provenance(key: str) -> None:
    """An expander with the run records (fingerprint, seed, R_X, encoder, versions) beside the numbers."""
    with st.expander("Provenance: runs behind these numbers"):
        from sago_engine.store import Store

        runs = query(Store.run_records)
        if frame.access().shared:  # the building machine's folders (model files, caches) stay off a shared page
            runs = runs.map(lambda v: paths_to_names(v) if isinstance(v, str) else v)
        st.dataframe(safe.visible_frame(runs), key=f"{key}_provenance", hide_index=True, width="stretch")


#: An absolute POSIX path inside a text (not the tail of a name such as ``org/model`` or a URL's ``//host``).
_ABS_PATH = re.compile(r"(?<![\w.~:/-])(?:/[^\s\"',;()\[\]{}<>/]+)+/?")


def paths_to_names(text: str) -> str:
    """``text`` with every absolute path replaced by its last part (``/srv/m/w.gguf`` → ``w.gguf``): what a
    share-mode visitor may read of a run record written on the host's machine."""
    return _ABS_PATH.sub(lambda m: Path(m.group(0).rstrip("/")).name or m.group(0), text)


def empty_stop(df: pd.DataFrame, what: str = "scores") -> None:
    """Stop the page with a warning when the current store + filters give no rows."""
    if df is None or len(df) == 0:
        st.warning(f"No {what} for the current store and filters.")
        st.stop()
