"""The Method choices of the current store, summarised once for the pages that show them (Method choices,
Paper reference). Calls ``sago_engine.method_choices`` through the cached readers of ``dashboard.data``;
no SQL and no statistics here."""

from __future__ import annotations

from sago_engine import method_choices as mc
from sago_engine.filters import Filters
from sago_engine.scoring import MAIN_EPSILON
from sago_engine.store_catalog import DEMO_STORE

from dashboard import data

#: The bundled store holding a reply-length-cap pair (two runs differing only in max_new_tokens).
CAP_STORE = DEMO_STORE.parent / mc.CAP_STORE_NAME
#: Bootstrap resamples for views that read point SGS only (the Paper reference page's statement).
POINT_ONLY_RESAMPLES = 20


def summaries(f: Filters, eps: float = MAIN_EPSILON, n_resamples: int = 1000,
              q: float = 0.95) -> list[tuple[mc.Choice, dict | None]]:
    """Each choice of the current store (``method_choices.collect_choices``) with its ``choice_summary``
    (None for a choice without two options), cached by store, filters and arguments."""
    out = []
    for ch in data.with_store(mc.collect_choices, f, q=float(q), cap_store=str(CAP_STORE)):
        summ = None
        if ch.available:
            summ = data.scored_frame(mc.choice_summary, ch.scores, axes=tuple(ch.axes), reference=ch.reference,
                                     eps=float(eps), n_resamples=int(n_resamples), seed=0)
        out.append((ch, summ))
    return out
