"""``python -m precompute rescore STORE --correctness``: a correctness verdict for every stored reply
(base, variants, base repeats), nothing generated (the LLM-judge scorer asks its own model, only
when chosen). Verdicts go to the ``correctness`` table, one row per (run, reply, scorer)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from sago_engine.correctness import inspect_scorers as isc
from sago_engine.correctness import scorers as sc
from sago_engine.correctness.judge import JUDGE_SCORER_VERSION, JudgeCase, judge_correctness
from sago_engine.datasets import DatasetError, load_dataset
from sago_engine.store import open_store
from sago_engine.store.reads.correctness import CORRECTNESS_COLUMNS

#: The short-answer scorers ``all_short=True`` stores side by side (Method choices compares them).
SHORT_ANSWER_SCORERS = ("contains", "exact", "f1")


@dataclass
class CorrectnessResult:
    """What a correctness rescore did to one run."""

    run_id: str
    model: str
    scorers: dict[str, list[str]] = field(default_factory=dict)
    """dataset → the scorers applied."""
    verdicts: dict[str, int] = field(default_factory=dict)
    """verdict → rows written (over every scorer)."""
    rows_written: int = 0
    prompt_meta_filled: int = 0
    not_run: dict[str, dict[str, str]] = field(default_factory=dict)
    """dataset → {scorer → why it was not run}: an Inspect task's scorer that needs a model, the network
    or the task's own code (its replies stored ``unavailable`` with that reason)."""

    by_scorer: dict[str, dict[str, int]] = field(default_factory=dict)
    """scorer → verdict → rows written."""

    def as_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "model": self.model, "correctness": {
            "scorers": self.scorers, "verdicts": self.verdicts, "by_scorer": self.by_scorer,
            "rows_written": self.rows_written, "prompt_meta_filled": self.prompt_meta_filled, "not_run": self.not_run}}

    def count(self, rows: pd.DataFrame) -> None:
        """Set ``verdicts`` and ``by_scorer`` from the rows written."""
        self.verdicts = {k: int(v) for k, v in rows["verdict"].value_counts().sort_index().items()}
        self.by_scorer = {str(name): {k: int(v) for k, v in g["verdict"].value_counts().sort_index().items()}
                          for name, g in rows.groupby("scorer", sort=True)}

    def add_inspect(self, dataset: str, replies: pd.DataFrame, scorers: list[isc.InspectScorer]) -> list[pd.DataFrame]:
        """Score ``replies`` of ``dataset`` under its Inspect task's scorers; record them (and those not run)."""
        self.scorers[dataset] = [s.name for s in scorers]
        gone = {s.name: s.reason for s in scorers if s.reason}
        if gone:
            self.not_run[dataset] = gone
        return [isc.score_rows(replies, s) for s in scorers]


def declared_scorers(config: dict | None) -> dict[str, str]:
    """The ``[data] correctness`` table of a run's stored config (dataset → scorer); {} when absent."""
    data = (config or {}).get("data") or {}
    dec = data.get("correctness") or {}
    return {str(k): str(v) for k, v in dec.items()} if isinstance(dec, dict) else {}


def _incorrect(meta_json: Any) -> Any:
    if not isinstance(meta_json, str) or not meta_json:
        return None
    meta = json.loads(meta_json)
    return meta.get("incorrect_answers") if isinstance(meta, dict) else None


def score_rows(replies: pd.DataFrame, scorer: str, judge_backend=None) -> pd.DataFrame:
    """``correctness`` rows of ``replies`` (``Store.replies_to_score`` columns) under one scorer.

    Args:
        replies: the replies to score; scorer: an offline scorer name (``scorers.SCORERS``) or
            ``"judge"`` (then ``judge_backend`` grades them, one batched call).
    Returns:
        A frame with ``CORRECTNESS_COLUMNS``, one row per reply, in order.
    Raises:
        ValueError: ``judge`` without a backend, or an unknown scorer.
    """
    replies = replies.astype(object).where(replies.notna(), None)  # SQL NULL → None, never NaN
    if scorer == "judge":
        if judge_backend is None:
            raise ValueError("the judge scorer needs a judge model (--judge-model)")
        cases = [JudgeCase(r.question, r.reference, r.response, r.error) for r in replies.itertuples()]
        verdicts, version = judge_correctness(judge_backend, cases), JUDGE_SCORER_VERSION
    else:
        verdicts = [sc.score(scorer, r.response, r.reference, _incorrect(r.prompt_meta), r.error)
                    for r in replies.itertuples()]
        version = sc.SCORER_VERSIONS[scorer]
    out = replies[["run_id", "response_id", "prompt_id", "variant_id", "repeat"]].copy()
    out["scorer"], out["scorer_version"] = scorer, version
    out["verdict"] = [v.verdict for v in verdicts]
    out["score"] = [v.score for v in verdicts]
    out["reason"] = [v.reason for v in verdicts]
    out["raw"] = [v.raw for v in verdicts]
    return out[list(CORRECTNESS_COLUMNS)]


def fill_prompt_meta(store, data_dir: str | Path) -> int:
    """Fill the NULL ``prompts.meta`` of a store from ``<data_dir>/<dataset>.jsonl``, only where the
    file holds the same source id with the same prompt text. Returns the prompts filled."""
    todo = store.prompts_without_meta()
    rows = []
    for dataset, g in todo.groupby("dataset", sort=True):
        path = Path(data_dir) / f"{dataset}.jsonl"
        if not path.is_file():
            continue
        try:
            by_id = {p.source_id: p for p in load_dataset(path, dataset=str(dataset))}
        except DatasetError:
            continue
        for r in g.itertuples():
            p = by_id.get(r.source_id)
            if p is not None and p.text == r.text and p.meta is not None:
                rows.append({"prompt_id": r.prompt_id, "meta": json.dumps(p.meta, ensure_ascii=False)})
    return store.set_prompt_meta(pd.DataFrame(rows, columns=["prompt_id", "meta"]))


def rescore_correctness(path: str | Path, *, run_id: str | None = None, overrides: dict[str, str] | None = None,
                        all_short: bool = False, data_dir: str | Path = "data/datasets",
                        judge_factory: Callable[[], Any] | None = None) -> list[CorrectnessResult]:
    """Score every stored reply of a store's runs for correctness and store the verdicts.

    Each dataset's scorer: ``overrides`` (dataset → scorer, the CLI's ``--scorer``), else the run's
    ``[data] correctness`` declaration, else the scorers of the Inspect task it came from
    (``inspect_scorers``; those that cannot run offline stored "not run" with the reason), else
    ``scorers.DEFAULT_SCORERS``, else ``none``. With
    ``all_short``, the datasets whose scorer is a short-answer one get all of
    ``SHORT_ANSWER_SCORERS`` stored. A second rescore writes the same rows (``INSERT OR REPLACE``).

    Args:
        path: the store (opened writable; migrated to schema 5 on open).
        run_id: one run (default: every run).
        data_dir: folder of the dataset files ``prompts.meta`` is filled from (TruthfulQA's incorrect answers).
        judge_factory: builds the judge backend, called once, only when a dataset's scorer is ``judge``.
    Returns:
        One ``CorrectnessResult`` per run.
    Raises:
        FileNotFoundError / StoreError: no such store, not a sago store, no such run.
        ValueError: an unknown scorer name; ``judge`` without ``judge_factory``.
    """
    for name in (overrides or {}).values():
        if name not in sc.SCORER_NAMES:
            raise ValueError(f"unknown correctness scorer {name!r}; valid: {', '.join(sc.SCORER_NAMES)}")
    judge = None
    with open_store(path, read_only=False) as st:
        filled = fill_prompt_meta(st, data_dir)
        run_ids = [run_id] if run_id else st.runs()["run_id"].tolist()
        results = []
        try:
            for rid in run_ids:
                rec = st.run_record(rid)
                declared = {**declared_scorers(rec.get("config")), **(overrides or {})}
                replies = st.replies_to_score([rid])
                res = CorrectnessResult(rid, rec["model"], prompt_meta_filled=filled)
                tasks = isc.task_scorers((rec.get("config") or {}).get("data_sources"))
                frames = []
                for dataset, g in replies.groupby("dataset", sort=True):
                    if str(dataset) not in declared and tasks.get(str(dataset)):
                        frames += res.add_inspect(str(dataset), g, tasks[str(dataset)])
                        continue
                    name = sc.scorer_for(str(dataset), declared)
                    if name not in sc.SCORER_NAMES:
                        raise ValueError(f"run {rid}: unknown correctness scorer {name!r} for dataset {dataset}; "
                                         f"valid: {', '.join(sc.SCORER_NAMES)}")
                    names = list(SHORT_ANSWER_SCORERS) if all_short and name in SHORT_ANSWER_SCORERS else [name]
                    if name == "judge" and judge is None:
                        if judge_factory is None:
                            raise ValueError("the judge scorer needs a judge model (--judge-model)")
                        judge = judge_factory()
                    res.scorers[str(dataset)] = names
                    frames += [score_rows(g, n, judge) for n in names]
                rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=CORRECTNESS_COLUMNS)
                with st.transaction():
                    res.rows_written = st.write_correctness(rows)
                    st._note_rescore([rid], dt.datetime.now(dt.UTC).replace(tzinfo=None).isoformat(timespec="seconds"),
                                     {"correctness": res.scorers, "rows": res.rows_written})
                res.count(rows)
                results.append(res)
        finally:
            if judge is not None:
                judge.close()
    return results


def inspect_correctness(store, run_id: str) -> CorrectnessResult | None:
    """Verdicts of a run's Inspect-task datasets under their tasks' own scorers, written to ``store``
    (the runner calls it when a run ends). None when the run read no Inspect task, or the run's
    config declares every such dataset's scorer (``[data] correctness``: ``rescore --correctness``
    applies it).

    Returns:
        The ``CorrectnessResult`` (``scorers``, ``not_run``, ``verdicts``, ``rows_written``).
    """
    rec = store.run_record(run_id)
    declared = declared_scorers(rec.get("config"))
    tasks = {d: s for d, s in isc.task_scorers((rec.get("config") or {}).get("data_sources")).items()
             if d not in declared and s}
    if not tasks:
        return None
    res = CorrectnessResult(run_id, rec["model"])
    replies = store.replies_to_score([run_id])
    frames = [f for d, g in replies.groupby("dataset", sort=True) if str(d) in tasks
              for f in res.add_inspect(str(d), g, tasks[str(d)])]
    if not frames:
        return res
    rows = pd.concat(frames, ignore_index=True)
    with store.transaction():
        res.rows_written = store.write_correctness(rows)
    res.count(rows)
    return res
