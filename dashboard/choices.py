"""The Method choices of the current store, summarised once for the pages that show them (Method choices,
Paper reference), and the conclusions of the summary pages that depend on them (``sago_engine.views.assumptions``).
Calls ``sago_engine`` through the cached readers of ``dashboard.data``; no SQL and no statistics here."""

from __future__ import annotations

from collections.abc import Sequence

from dashboard import data
from sago_engine.filters import Filters
from sago_engine.scoring.scores import MAIN_EPSILON
from sago_engine.store.catalog import DEMO_STORE
from sago_engine.views import assumptions
from sago_engine.views import method_choices as mc

#: The bundled store holding a reply-length-cap pair (two runs differing only in max_new_tokens).
CAP_STORE = DEMO_STORE.parent / mc.CAP_STORE_NAME
#: Bootstrap resamples for views that read point SGS only (the Paper reference page's statement).
POINT_ONLY_RESAMPLES = 20


def cap_store_hint() -> str | None:
    """The reply-length-cap store a visitor can pick in the sidebar, for the Method choices hint:
    the bundled one in local mode; in share mode only one inside the shared folder (else None,
    so the page never points to a store the picker does not offer)."""
    from dashboard import frame

    acc = frame.access()
    if acc.free_paths:
        return str(CAP_STORE)
    shared = acc.share_dir / mc.CAP_STORE_NAME
    return str(shared) if shared.is_file() else None


def summaries(f: Filters, eps: float = MAIN_EPSILON, n_resamples: int = 1000,
              q: float = 0.95) -> list[tuple[mc.Choice, dict | None]]:
    """Each choice of the current store (``method_choices.collect_choices``) with its ``choice_summary``
    (None for a choice without two options), cached by store, filters and arguments."""
    out = []
    for ch in data.with_store(mc.collect_choices, f, q=float(q), cap_store=cap_store_hint()):
        summ = None
        if ch.available:
            summ = data.scored_frame(mc.choice_summary, ch.scores, axes=tuple(ch.axes), reference=ch.reference,
                                     eps=float(eps), n_resamples=int(n_resamples), seed=0)
        out.append((ch, summ))
    return out


def assumption_statements(f: Filters, kinds: Sequence[str], axes: Sequence[str] | None = None,
                          eps: float = MAIN_EPSILON, per_dataset: bool = False, correction: str = "none",
                          dataset: str | None = None, q: float = 0.95) -> list[str]:
    """Sentences naming the open method choices under which a page's rankings (``assumptions.RANKING``) or
    verdicts (``assumptions.VERDICT``) change, on ``axes`` (None: all) and ``dataset`` (None: every row).

    Plain text with store names (escape for Markdown: ``dashboard.prose.assumptions_note``); empty when
    no option the store holds changes them.
    """
    chs = data.with_store(mc.collect_choices, f, q=float(q), cap_store=cap_store_hint())
    table = data.scored_frame(assumptions.sensitivity, assumptions.choice_frame(chs), eps=float(eps),
                              per_dataset=bool(per_dataset), correction=str(correction))
    return assumptions.statements(table, kinds=tuple(kinds), axes=None if axes is None else tuple(axes),
                                  dataset=dataset, eps=float(eps))
