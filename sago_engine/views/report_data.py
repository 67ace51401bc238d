"""The numbers of a report you can send (``sago report STORE --json/--html``): SGS per model × axis with
its bootstrap CI and test against ε, the same per dataset, the noise floor per model × axis (where the
store has base repeats), model-vs-model comparisons, the worst prompts with both replies and the run
signatures — all from the engine's own tables (``report.sgs_ci_table``, ``noise_floor.floor_table``,
``pairwise.paired_table``, ``worst.worst_cases``; for sampled runs ``views.sampling.separation_view``), with the dashboard's defaults; nothing new is
computed here. The result is plain JSON (``REPORT_SCHEMA``; NaN → null), in a stable order, so two
reports can be diffed line by line.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from sago_engine import __version__
from sago_engine.measure.noise_floor import floor_table
from sago_engine.scoring import pairwise
from sago_engine.scoring.scores import MAIN_EPSILON
from sago_engine.store import Store
from sago_engine.types import AXES, axis_label
from sago_engine.views import report, worst
from sago_engine.views.sampling import separation_view

#: The schema name and version written into every report (docs/REPORT.md describes its fields).
REPORT_SCHEMA = "sago-report/1"

#: Fields of each table, in order (docs/REPORT.md).
SGS_FIELDS = ("model", "axis", "axis_label", "sgs", "std", "n_prompts", "lo", "hi", "ci_status", "t", "p", "p_adj",
              "marker", "verdict")
DATASET_FIELDS = ("model", "dataset", "axis", "axis_label", "sgs", "n_prompts", "lo", "hi", "ci_status", "p_adj", "marker",
                  "verdict")
FLOOR_FIELDS = ("model", "axis", "axis_label", "sgs", "floor", "n_prompts", "n_paired", "t", "p", "marker",
                "above_floor")
PAIR_FIELDS = ("axis", "axis_label", "model_a", "model_b", "n_prompts", "sgs_a", "sgs_b", "diff", "ci_low", "ci_high",
               "ci_status", "p", "p_adj", "marker", "verdict", "better")
WORST_FIELDS = ("axis", "axis_label", "rank", "model", "dataset", "prompt_id", "label", "s", "delta_norm",
                "n_variants", "n_different", "prompt_text", "variant_text", "base_reply", "variant_reply")
SAMPLING_FIELDS = ("model", "axis", "axis_label", "n_prompts", "floor", "move", "share", "share_lo", "share_hi",
                   "n_exceeds", "n_exceeds_bh", "p", "method")
PASS_K_FIELDS = ("model", "prompts", "with_majority", "pass_k_dice", "pass_k_rephrased")
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


def _sgs_rows(scores: pd.DataFrame, *, per_dataset: bool, **kw) -> pd.DataFrame:
    """``report.sgs_ci_table`` (overall or per dataset) with axis labels, the CI status and the verdict."""
    fields = DATASET_FIELDS if per_dataset else SGS_FIELDS
    if scores.empty:
        return pd.DataFrame(columns=list(fields))
    t = report.sgs_ci_table(scores, per_dataset=per_dataset, **kw)
    t = report.axis_order(t.assign(axis_label=t["axis"].map(axis_label), ci_status=t["status"]))
    t["verdict"] = [sgs_verdict(m, p) for m, p in zip(t["marker"], t["p_adj"])]
    return t


def _floor_rows(scores: pd.DataFrame, floor: pd.DataFrame) -> list[dict[str, Any]]:
    """``noise_floor.floor_table`` per model × axis (paper's axis order) as records; [] without base repeats."""
    if scores.empty or floor.empty:
        return []
    t = floor_table(scores, floor)
    return _records(report.axis_order(t.assign(axis_label=t["axis"].map(axis_label))), FLOOR_FIELDS)


def report_numbers(store: Store, *, eps: float = MAIN_EPSILON, correction: str = "none", n_resamples: int = 1000,
                   seed: int = 0, worst_per_axis: int = 3) -> dict[str, Any]:
    """Every number of the report, as JSON-ready data.

    Args:
        store: an open ``Store`` (read-only is enough).
        eps, correction, n_resamples, seed: as the Profiles and Model-vs-model pages (ε = 0.05, no
            correction, 1,000 percentile-bootstrap resamples, seed 0).
        worst_per_axis: prompts listed per axis (``worst.worst_cases``, ranked by s_X(i) over all models).
    Returns:
        ``{"schema", "sago_version", "settings", "runs", "sgs", "sgs_by_dataset", "noise_floor", "pairwise",
        "worst", "sampling", "pass_k"}``: ``sgs`` rows ``SGS_FIELDS`` (model × axis; lo/hi the 95 % CI; verdict ``sgs_verdict``),
        ``sgs_by_dataset`` rows ``DATASET_FIELDS`` (model × dataset × axis, the same test and CI within
        the dataset), ``noise_floor`` rows ``FLOOR_FIELDS`` (model × axis, ``floor_table``; floor null
        for a model without repeats; [] when the store has no base repeats), ``pairwise`` rows
        ``PAIR_FIELDS`` (diff = mean of s_a − s_b over shared prompts, negative = a more stable),
        ``sampling`` rows ``SAMPLING_FIELDS`` (a sampled run's model × axis: the share of its movement due
        to rephrasing rather than sampling with its CI, and on how many prompts rephrasing exceeds the
        dice; ``views.sampling.separation_view``, the Significance page's numbers; [] without sampled
        runs), ``pass_k`` rows ``PASS_K_FIELDS`` (per sampled model),
        ``worst`` rows ``WORST_FIELDS`` (texts as stored), ``runs`` rows ``RUN_FIELDS`` plus
        ``data_sources``. Axes in the paper's order, models by name.
    """
    scores = store.prompt_scores()
    sgs, by_dataset = (_sgs_rows(scores, per_dataset=d, eps=eps, correction=correction, n_resamples=n_resamples,
                                 seed=seed) for d in (False, True))
    floor = _floor_rows(scores, store.noise_floor())
    pairs = pairwise.paired_table(scores, correction=correction, n_resamples=n_resamples, seed=seed) \
        if len(scores) else pd.DataFrame(columns=list(PAIR_FIELDS))
    sampled = separation_view(store, None, n_resamples=n_resamples, seed=seed)
    worst_rows = []
    for axis in [a for a in AXES if len(scores) and a in set(scores["axis"])]:
        w = worst.worst_cases(store, axis=axis, by="prompt", limit=worst_per_axis)
        worst_rows += _records(w.assign(axis=axis, axis_label=axis_label(axis)), WORST_FIELDS)
    return {"schema": REPORT_SCHEMA, "sago_version": __version__,
            "settings": {"eps": eps, "alpha": pairwise.ALPHA, "correction": correction, "n_resamples": n_resamples,
                         "seed": seed, "ci_level": 0.95, "worst_per_axis": worst_per_axis},
            "runs": _runs(store), "sgs": _records(sgs, SGS_FIELDS), "sgs_by_dataset": _records(by_dataset, DATASET_FIELDS),
            "noise_floor": floor, "pairwise": _records(pairs, PAIR_FIELDS), "worst": worst_rows,
            "sampling": _records(sampled["models"], SAMPLING_FIELDS), "pass_k": _records(sampled["pass_k"], PASS_K_FIELDS)}
