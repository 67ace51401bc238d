"""Flags of one stored reply (``responses.flags`` / ``base_repeats.flags``, schema v5): facts about the
reply that its text alone does not show, written when the reply is stored.

``hit_cap``: the reply stopped at the reply cap (``max_new_tokens``) instead of ending on its own —
a local model emitted no EOS within the cap, an API answered with its length finish reason. Its
text is cut, so the axes that read reply text (Δ-BLEU, Δ-BERT, Δ-MR's length rule) compare cut
text; a pair whose two replies both hit the cap has the same length by construction.
"""

from __future__ import annotations

import math

from sago_engine.types import GenerationResult

#: The reply stopped at max_new_tokens (finish reason "length", no error).
HIT_CAP = "hit_cap"


def stopped_at_cap(finish_reason: object, error: object = None) -> bool:
    """Whether a reply with this finish reason and error stopped at the reply cap: no error (None or NaN,
    as a store read gives it) and finish reason ``"length"``. The one rule behind ``hit_cap`` and the pages' marks."""
    no_error = error is None or (isinstance(error, float) and math.isnan(error))
    return finish_reason == "length" and no_error


def hit_cap(r: GenerationResult) -> bool:
    """Whether ``r`` stopped at the reply cap: no error and finish reason ``"length"``."""
    return stopped_at_cap(r.finish_reason, r.error)


def reply_flags(r: GenerationResult) -> list[str] | None:
    """The flags of ``r`` as stored (a list of flag names): what was normalised in its text at the
    boundary (``GenerationResult.flags``, e.g. ``surrogates_replaced``) and ``hit_cap``; None when it has none."""
    flags = [*r.flags, *([HIT_CAP] if hit_cap(r) else [])]
    return flags or None
