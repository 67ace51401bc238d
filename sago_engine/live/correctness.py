"""Live: the correctness of a probe's replies when the typed prompt comes with a reference answer.

Optional: without a reference the Live page shows stability only. The verdicts are the stored runs'
offline scorers (``sago_engine.correctness.scorers``; "contains" by default, as for the bundled
short-answer datasets, because replies are sentences, not bare answers). Never folded into a score.
"""

from __future__ import annotations

import pandas as pd

from sago_engine.correctness.scorers import SCORERS, Verdict, score

#: Scorers a typed reference can use (the judge needs a second model; TruthfulQA needs incorrect answers).
LIVE_SCORERS: tuple[str, ...] = tuple(s for s in ("contains", "exact", "f1") if s in SCORERS)

#: Separator of several accepted answers typed in one box.
ANSWER_SEP = "|"


def typed_reference(text: str | None) -> list[str]:
    """The accepted answers typed in the Live page's reference box: split at ``ANSWER_SEP``, each
    stripped, blanks dropped (``"Canberra | canberra "`` → ``["Canberra", "canberra"]``); [] for none."""
    return [a.strip() for a in (text or "").split(ANSWER_SEP) if a.strip()]


def probe_correctness(responses: pd.DataFrame, reference: list[str], scorer: str = "contains"
                      ) -> tuple[Verdict | None, pd.DataFrame]:
    """The verdict on the base reply and on every variant reply measured so far.

    Args:
        responses: a probe's ``responses`` rows (``ProbeResult.rows.responses``): variant_id (None
            for the base reply), response, error.
        reference: the accepted answers (``typed_reference``); [] → every verdict unavailable.
        scorer: one of ``LIVE_SCORERS``.
    Returns:
        (the base reply's ``Verdict`` or None before it exists, a frame variant_id, verdict, reason
        with one row per measured variant). An error or an empty reply is "unavailable" with its
        reason, never "wrong".
    Raises:
        ValueError: a scorer outside ``LIVE_SCORERS``.
    """
    if scorer not in LIVE_SCORERS:
        raise ValueError(f"unknown Live correctness scorer {scorer!r}; valid: {', '.join(LIVE_SCORERS)}")
    base, rows = None, []
    for r in responses.itertuples(index=False):
        err = r.error if isinstance(r.error, str) and r.error else None
        v = score(scorer, r.response, reference, error=err)
        if r.variant_id is None or r.variant_id != r.variant_id:
            base = v
        else:
            rows.append({"variant_id": r.variant_id, "verdict": v.verdict, "reason": v.reason})
    return base, pd.DataFrame(rows, columns=["variant_id", "verdict", "reason"])
