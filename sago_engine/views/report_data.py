"""The numbers of a report you can send (``sago report STORE --json/--html``): SGS per model × axis with
its bootstrap CI and test against ε, model-vs-model comparisons, the worst prompts with both replies
and the run signatures — all from the engine's own tables (``report.sgs_ci_table``,
``pairwise.paired_table``, ``worst.worst_cases``), with the dashboard's defaults; nothing new is
computed here. The result is plain JSON (``REPORT_SCHEMA``; NaN → null), in a stable order, so two
reports can be diffed line by line.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from sago_engine import __version__
from sago_engine.scoring import pairwise
from sago_engine.scoring.scores import MAIN_EPSILON
from sago_engine.store import Store
from sago_engine.types import AXES, axis_label
from sago_engine.views import report, worst

#: The schema name and version written into every report (docs/REPORT.md describes its fields).
REPORT_SCHEMA = "sago-report/1"

#: Fields of each table, in order (docs/REPORT.md).
SGS_FIELDS = ("model", "axis", "axis_label", "sgs", "std", "n_prompts", "lo", "hi", "ci_status", "t", "p", "p_adj",
              "marker", "verdict")
PAIR_FIELDS = ("axis", "axis_label", "model_a", "model_b", "n_prompts", "sgs_a", "sgs_b", "diff", "ci_low", "ci_high",
               "ci_status", "p", "p_adj", "marker", "verdict", "better")
WORST_FIELDS = ("axis", "axis_label", "rank", "model", "dataset", "prompt_id", "label", "s", "delta_norm",
                "n_variants", "n_different", "prompt_text", "variant_text", "base_reply", "variant_reply")
RUN_FIELDS = ("run_id", "model", "backend", "status", "fingerprint", "model_source", "weights_sha256", "dtype",
              "device", "seed", "started_at", "finished_at")


def _plain(v: Any) -> Any:
    """A JSON value: NaN/inf → None, numpy scalars → Python, timestamps → ISO text."""
    if v is None:
        return None
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        v = v.item()
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, pd.Timestamp) or hasattr(v, "isoformat"):
        return v.isoformat()
    return v


def _records(df: pd.DataFrame, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{f: _plain(r.get(f)) for f in fields} for r in df.to_dict("records")]


def sgs_verdict(marker: str, p_adj: float | None) -> str:
    """The test's verdict in words from its marker (``scoring.marker`` of the adjusted p): ``"above ε"``
    (H0: E[s] ≤ ε rejected at 0.05), ``"not above ε"``, or ``"n/a"`` (no test)."""
    if p_adj is None or not math.isfinite(p_adj):
        return "n/a"
    return "above ε" if marker else "not above ε"


def _runs(store: Store) -> list[dict[str, Any]]:
    runs = store.runs()
    out = _records(runs, tuple(f for f in RUN_FIELDS if f in runs.columns))
    for rec, (_, row) in zip(out, runs.iterrows()):
        try:
            cfg = json.loads(row.get("config") or "null")
        except (TypeError, ValueError):
            cfg = None
        rec["data_sources"] = cfg.get("data_sources") if isinstance(cfg, dict) else None
    return out


def report_numbers(store: Store, *, eps: float = MAIN_EPSILON, correction: str = "none", n_resamples: int = 1000,
                   seed: int = 0, worst_per_axis: int = 3) -> dict[str, Any]:
    """Every number of the report, as JSON-ready data.

    Args:
        store: an open ``Store`` (read-only is enough).
        eps, correction, n_resamples, seed: as the Profiles and Model-vs-model pages (ε = 0.05, no
            correction, 1,000 percentile-bootstrap resamples, seed 0).
        worst_per_axis: prompts listed per axis (``worst.worst_cases``, ranked by s_X(i) over all models).
    Returns:
        ``{"schema", "sago_version", "settings", "runs", "sgs", "pairwise", "worst"}``: ``sgs`` rows
        ``SGS_FIELDS`` (model × axis; lo/hi the 95 % CI; verdict ``sgs_verdict``), ``pairwise`` rows
        ``PAIR_FIELDS`` (diff = mean of s_a − s_b over shared prompts, negative = a more stable),
        ``worst`` rows ``WORST_FIELDS`` (texts as stored), ``runs`` rows ``RUN_FIELDS`` plus
        ``data_sources``. Axes in the paper's order, models by name.
    """
    scores = store.prompt_scores()
    sgs = report.sgs_ci_table(scores, eps=eps, correction=correction, n_resamples=n_resamples, seed=seed) \
        if len(scores) else pd.DataFrame(columns=list(SGS_FIELDS))
    if len(sgs):
        sgs = report.axis_order(sgs.assign(axis_label=sgs["axis"].map(axis_label), ci_status=sgs["status"]))
        sgs["verdict"] = [sgs_verdict(m, p) for m, p in zip(sgs["marker"], sgs["p_adj"])]
    pairs = pairwise.paired_table(scores, correction=correction, n_resamples=n_resamples, seed=seed) \
        if len(scores) else pd.DataFrame(columns=list(PAIR_FIELDS))
    worst_rows = []
    for axis in [a for a in AXES if len(scores) and a in set(scores["axis"])]:
        w = worst.worst_cases(store, axis=axis, by="prompt", limit=worst_per_axis)
        worst_rows += _records(w.assign(axis=axis, axis_label=axis_label(axis)), WORST_FIELDS)
    return {"schema": REPORT_SCHEMA, "sago_version": __version__,
            "settings": {"eps": eps, "alpha": pairwise.ALPHA, "correction": correction, "n_resamples": n_resamples,
                         "seed": seed, "ci_level": 0.95, "worst_per_axis": worst_per_axis},
            "runs": _runs(store), "sgs": _records(sgs, SGS_FIELDS), "pairwise": _records(pairs, PAIR_FIELDS),
            "worst": worst_rows}
