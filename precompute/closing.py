"""What a finished (or interrupted) run prints: per model its status, headline SGS per axis, reply
health (errors, replies cut at the reply cap, empty ones) and the command that opens the dashboard.

The numbers come from the published store (every run of a model, also what earlier sessions
stored), so a resumed run's summary covers the whole run. Store strings pass ``terminal.shown``.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pandas as pd

from precompute.terminal import shown
from sago_engine.scoring import scores as scoring
from sago_engine.scoring.cap_health import WARN_CUT_SHARE, cut_table, over_threshold
from sago_engine.types import axis_label, axis_sort_key

#: The project folder when sago runs from a clone (it holds scripts/dashboard.sh); in site-packages it does not.
_CLONE_ROOT = Path(__file__).resolve().parents[1]


def dashboard_command(store: str | Path, clone_root: Path = _CLONE_ROOT) -> str:
    """The shell command that opens the dashboard on ``store``: ``bash scripts/dashboard.sh`` from a clone
    (README, "The dashboard"), ``sago dashboard STORE`` where sago was installed with pip."""
    if (clone_root / "scripts" / "dashboard.sh").is_file():
        return f"SAGO_STORE={shlex.quote(str(store))} bash scripts/dashboard.sh"
    return f"sago dashboard {shlex.quote(str(store))}"


def _pct(n: int, total: int) -> str:
    return f"{100.0 * n / total:.0f}%" if total else "—"


def health_line(health: dict | None, cap: int | None) -> str:
    """``reply health: 84 replies, 0 errors (0%), 12 cut at the 48-token cap (14%), 0 empty`` from a
    ``Store.reply_health`` row with ``cut`` added (None: no replies stored)."""
    if health is None:
        return "  reply health: no replies stored"
    n = int(health["replies"])
    at = f" at the {cap}-token cap" if cap else " at the cap"
    return (f"  reply health: {n} replies, {int(health['errors'])} errors ({_pct(int(health['errors']), n)}), "
            f"{int(health['cut'])} cut{at} ({_pct(int(health['cut']), n)}), {int(health['empty'])} empty")


def cut_lines(table: pd.DataFrame, cap: int | None, threshold: float = WARN_CUT_SHARE) -> list[str]:
    """For one run's ``cap_health.cut_table``: the pairs both of whose replies hit the cap, and one
    warning naming each dataset above ``threshold`` of cut replies (none when no dataset is)."""
    if table.empty:
        return []
    pairs, both = int(table["pairs"].sum()), int(table["both_cut"].sum())
    out = [f"  pairs whose two replies both hit the cap: {both} of {pairs} ({_pct(both, pairs)}) — Δ-BLEU and "
           "Δ-MR's length rule compare cut text there"] if both else []
    over = [f"{shown(r.dataset, 40)} {r.cut}/{r.replies} ({_pct(r.cut, r.replies)})"
            for r in over_threshold(table, threshold).itertuples()]
    if over:
        at = f"the {cap}-token reply cap" if cap else "the reply cap"
        out.append(f"  warning: more than {threshold:.0%} of the replies stopped at {at} on {', '.join(over)}; "
                   "raise max_new_tokens (docs/CONFIG.md, \"Choosing the reply cap\")")
    return out


def sgs_line(scores: pd.DataFrame) -> str:
    """``SGS  Δ-Cos 0.012  Δ-BLEU 0.777 …  (16 prompts)`` from one run's per-prompt scores."""
    if scores.empty:
        return "  SGS: no scores yet"
    t = scoring.sgs(scores, by=("axis",))
    t = t.iloc[sorted(range(len(t)), key=lambda i: axis_sort_key(t["axis"].iloc[i]))]
    cells = "  ".join(f"{axis_label(a)} {v:.3f}" for a, v in zip(t["axis"], t["sgs"]))
    return f"  SGS  {cells}  ({int(t['n_prompts'].max())} prompts)"


def correctness_lines(corr: dict | None) -> list[str]:
    """For a run's summary ``correctness`` (an Inspect task's own scorers, ``CorrectnessResult.as_dict``):
    one line of the verdicts per dataset's scorers run, one line per scorer not run with its reason."""
    if not corr:
        return []
    by = corr.get("by_scorer") or {}
    out = []
    for dataset, names in sorted((corr.get("scorers") or {}).items()):
        gone = (corr.get("not_run") or {}).get(dataset, {})
        out += [f"  correctness of {shown(dataset, 40)}: the task's scorer {shown(n, 60)}: "
                + (", ".join(f"{k} {v}" for k, v in sorted(by.get(n, {}).items())) or "no replies")
                for n in names if n not in gone]
        out += [f"  correctness of {shown(dataset, 40)}: the task's scorer {shown(n, 60)} {shown(why, 300)}"
                for n, why in sorted(gone.items())]
    return out


def _status_line(s: dict) -> str:
    name, status = shown(s.get("model", "?"), 60), shown(s.get("status", ""), 200)
    if not s.get("pending"):
        return f"{name}: every prompt already done — nothing generated"
    secs = float(s.get("seconds", 0.0))
    n = s.get("generated") or 0
    # a slow model (a large one on CPU) makes less than a reply a second: its seconds per reply say more than "0.0/s"
    rate = ("" if secs <= 0 or not n else f", {n / secs:.1f} replies/s" if n >= secs else f", {secs / n:.1f} s per reply")
    return f"{name}: {status} — {s.get('generated', 0)} replies generated in {secs:.0f} s{rate}"


def closing_lines(store: str | Path, summaries: list[dict], caps: dict[str, int] | None = None) -> list[str]:
    """The lines printed after a run (``python -m precompute`` without ``--json``).

    Args:
        store: the published store (read-only; missing → the store lines are left out).
        summaries: ``runner.run``'s per-model summaries (run_id, model, pending, generated,
            seconds, status).
        caps: run_id → the run's reply cap in tokens (named in the health line).
    """
    from sago_engine.store import READ_ERRORS, open_store

    lines: list[str] = []
    scores = health = cut = pairs = filt = None
    if Path(store).exists():
        try:
            with open_store(store) as st:
                scores, health = st.prompt_scores(), st.reply_health()
                cut, pairs, filt = st.cut_replies(), st.cut_pairs(), st.filter_counts()
        except READ_ERRORS as e:
            lines.append(f"(the store could not be read for the summary: {shown(e, 200)})")
    for s in summaries:
        rid = s.get("run_id")
        lines.append(_status_line(s))
        lines.extend(correctness_lines(s.get("correctness")))
        if scores is None:
            continue
        lines.append(sgs_line(scores[scores["run_id"] == rid]))
        h = health[health["run_id"] == rid]
        cap = (caps or {}).get(rid)
        row = None if h.empty else {**h.iloc[0].to_dict(), "cut": int(cut.loc[cut["run_id"] == rid, "cut"].sum())}
        lines.append(health_line(row, cap))
        lines.extend(cut_lines(cut_table(cut[cut["run_id"] == rid], pairs[pairs["run_id"] == rid]), cap))
    if filt is not None and filt["variants_scored"]:
        k, n = filt["variants_rejected"], filt["variants_scored"]
        lines.append(f"semantic filter: rejected {k} of {n} scored variants" + (
            " — it rejected nothing (docs/METHOD.md, \"Semantic filter\": score = \"recall\" rejects meaning changes)"
            if not k else ""))
    lines.append(f"open the dashboard: {dashboard_command(store)}")
    return lines
