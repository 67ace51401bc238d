"""``python -m precompute import-authors DIR --store OUT.duckdb``: the SAGO authors' released rows as runs.

Per model, two runs with ``backend = "imported"`` and an ``origin`` record (schema v4):

* ``<model> · authors' rows`` — origin kind ``imported``: their six deltas as ``<axis>@authors``,
  the replies with the leaked prompt tail cut (``responses.response``) and as released
  (``responses.raw_response``), every column of every row (``imported_rows``);
* ``<model> · authors' replies, sago axes`` — origin kind ``imported+recomputed``: sago's
  Δ-BLEU / Δ-BERT / Δ-MR of the same pairs on the cleaned replies (plain axes) and on the released
  ones (``<axis>@leaked``).

Both origins name every source file (path relative to DIR, sha256, rows), the files passed over
(an older run of the same cell), the axis definitions, the leak counts and the degenerate-model
flag. All writes go through ``sago_engine.store``; nothing of DIR is copied anywhere else.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from pathlib import Path

import pandas as pd

from sago_engine.external import rows as R
from sago_engine.external.authors_format import (
    AUTHORS_DEFINITIONS,
    AUTHORS_NORMALIZERS,
    MODELS,
    SourceFile,
    discover,
    read_rows,
    select_latest,
)
from sago_engine.external.leak import templates_for
from sago_engine.measure.storerows import run_record, unit_rows, utc_now
from sago_engine.scoring.scores import resolve_normalizers
from sago_engine.seeds import stable_hash

SELECTION_TEXT = {False: "latest run per (style, dataset, model) by the run folder's timestamp",
                  True: "every run folder (as the authors' aggregate_results.py concatenates them)"}

#: The authors' generation settings (their config.yaml; recorded as facts of the source, not measured here).
AUTHORS_DECODING = {"greedy": True, "max_new_tokens": 100, "dtype": "float16", "batching": "left-padded batches",
                    "reply_slicing": "each row cut at its own prompt length (leaks the last pad-count prompt tokens)",
                    "source": "the authors' config.yaml and results"}

RECOMPUTED_DEFINITIONS = {
    "bleu": "sago Δ-BLEU (sacrebleu sentence BLEU, exp smoothing, effective order, tokenizer by script) "
            "on the cleaned replies",
    "bert": "sago Δ-BERT (bert-score F1, MiniLM-L6, unpadded) on the cleaned replies",
    "mr": "sago Δ-MR = m(y^v, v) - m(y, v) (rules; lexicon heuristic for politeness) on the cleaned replies",
    "bleu@leaked": "sago Δ-BLEU on the replies as released (leaked prompt tails kept)",
    "bert@leaked": "sago Δ-BERT on the replies as released",
    "mr@leaked": "sago Δ-MR on the replies as released",
}


def _digest(sources: Iterable[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for rel, sha in sorted(sources):
        h.update(f"{rel}\0{sha}\n".encode())
    return h.hexdigest()


def _run(run_id: str, label: str, kind: str, caps: list[str], normalizers: dict, origin: dict, root: Path) -> dict:
    now = utc_now()
    rec = run_record(run_id=run_id, model=label, backend="imported", info={"source": root.name},
                     dtype="float16" if kind == "open" else None, device="", decoding=AUTHORS_DECODING, seed=42,
                     normalizers=normalizers, semantic_filter={"applied": False, "note": "the authors apply none"},
                     capabilities=caps, config={"source": "import-authors", "selection": origin["selection"]},
                     started_at=now, finished_at=now, status="complete")
    rec["origin"] = origin
    return rec


def plan(root: str | Path, models: Iterable[str] | None = None, all_runs: bool = False,
         passed_over: list[dict] | None = None):
    """The files to import and how they were chosen: (selection, {path: rows frame}). Each file is
    read once (``read_rows``); its frame's ``attrs["sha256"]`` is the hash of the bytes parsed.
    ``passed_over`` receives the folders not read (``discover``).

    Raises:
        FileNotFoundError: DIR has no ``results/`` folder or no results file at all.
        AuthorsFormatError: a file that is not in the authors' format, or a link out of DIR.
    """
    sources = discover(root, passed_over)
    if not sources:
        raise FileNotFoundError(f"{root}: no results files (results/<style>/run_multi_*/ or results/closed_models/)")
    frames = {s.rel: read_rows(s) for s in sources}
    wanted = set(models) if models else None
    pairs = [(s, m) for s in sources for m in dict.fromkeys(frames[s.rel]["model"])
             if wanted is None or m in wanted]
    return select_latest(pairs, all_runs=all_runs), frames


def import_authors(root: str | Path, store_path: str | Path, *, models: Iterable[str] | None = None,
                   all_runs: bool = False, recompute: bool = True,
                   log: Callable[[str], None] = lambda s: None) -> dict:
    """Import the authors' released rows under ``root`` into the store ``store_path`` (created if new).

    Args:
        root: a clone of ``Styled-Prompts-Shifted-Behavior-v2`` (or its ``results/`` folder).
        models: the authors' model keys to import (e.g. ``["L3.1-8B"]``); None = every model found.
        all_runs: import every run of a cell instead of the latest.
        recompute: also write the recomputed run (sago's text axes; MiniLM on CPU).
        log: receives one progress line per model.
    Returns:
        summary: {"store", "selection", "models": {key: {"runs", "rows", "leaks", "degenerate", "refused_values",
        "repeated_rows"}}, "superseded", "passed_over"}.
    Raises:
        FileNotFoundError, AuthorsFormatError (nothing is written then), StoreError.
    """
    from sago_engine.store import open_store, runlabels

    root = Path(root)
    passed_over: list[dict] = []
    sel, frames = plan(root, models, all_runs, passed_over)
    if passed_over:
        log(f"{len(passed_over)} folder(s) passed over (not in the authors' layout), e.g. {passed_over[0]['path']}: "
            f"{passed_over[0]['reason']}; every one is listed in the summary (passed_over)")
    shas = {s.rel: frames[s.rel].attrs["sha256"] for s, _ in sel.chosen}
    by_model: dict[str, list[tuple[SourceFile, pd.DataFrame]]] = {}
    for src, model in sel.chosen:
        df = frames[src.rel]
        part = df[df["model"] == model]
        part.attrs = dict(df.attrs)  # the rows' lines, for messages
        by_model.setdefault(model, []).append((src, part))
    summary: dict = {"store": str(store_path), "selection": SELECTION_TEXT[all_runs], "models": {},
                     "superseded": sel.superseded, "passed_over": passed_over}
    with open_store(store_path, read_only=False, create=True) as st:
        for model in sorted(by_model):
            parts = by_model[model]
            kind = parts[0][0].kind
            mf = R.build_pairs(model, parts, templates_for(model) if kind == "open" else ())
            files = [{"path": s.rel, "sha256": shas[s.rel], "rows": int(len(df)), "style": s.style,
                      "dataset": s.dataset, "run": s.run} for s, df in parts]
            digest = _digest((f["path"], f["sha256"]) for f in files)
            a_id = stable_hash("authors import", model, kind, digest, all_runs)
            frames_a = {"responses": R.response_frame(a_id, mf), "deltas": R.authors_deltas(a_id, mf),
                        "imported_rows": R.imported_row_frame(a_id, mf)}
            base_origin = {"source": files[0]["path"] if len(files) == 1 else "results",
                           "sha256": digest, "sources": files, "authors_model": model,
                           "superseded": [x for x in sel.superseded if x["model"] == model],
                           "selection": SELECTION_TEXT[all_runs], "leaks": R.leak_summary(mf),
                           "degenerate": R.degenerate_summary(mf),
                           "refused_values": R.refused_summary(frames_a["deltas"]),
                           "repeated_rows": R.repeated_summary(mf)}
            label = MODELS.get(model, model)
            caps = ["cos", "ent", "prob"] if kind == "open" else []
            a_origin = {"kind": "imported", **base_origin, "definitions": AUTHORS_DEFINITIONS, "clip": False,
                        "normalizers": AUTHORS_NORMALIZERS}
            runs = [(_run(a_id, f"{label} · authors' rows", kind, caps, AUTHORS_NORMALIZERS, a_origin, root), frames_a)]
            if recompute:
                r_id = stable_hash("authors import recomputed", a_id)
                r_origin = {"kind": "imported+recomputed", "of_run": a_id, **base_origin,
                            "definitions": RECOMPUTED_DEFINITIONS, "not_recomputed": R.NOT_RECOMPUTED}
                frames_r = {"responses": R.response_frame(r_id, mf), "deltas": R.recomputed_deltas(r_id, mf)}
                runs.append((_run(r_id, f"{label} · authors' replies, sago axes", kind, [],
                                  resolve_normalizers(None), r_origin, root), frames_r))
            runlabels.refuse_taken(st.con, [(r["run_id"], r["model"]) for r, _ in runs],
                                   "Import into a new --store, or with the selection that store was imported with.")
            _write(st, mf, runs)
            info = {"runs": [r["run_id"] for r, _ in runs], "rows": len(mf.pairs), "leaks": base_origin["leaks"],
                    "degenerate": base_origin["degenerate"], "refused_values": base_origin["refused_values"],
                    "repeated_rows": base_origin["repeated_rows"]}
            summary["models"][model] = info
            lk, dg, rv, rp = info["leaks"], info["degenerate"], info["refused_values"], info["repeated_rows"]
            log(f"{model}: {lk['rows']} rows from {len(files)} file(s); leaked replies "
                f"{lk['base_leaked_rows'] + lk['variant_leaked_rows']}/{2 * lk['rows']}"
                + (f"; DEGENERATE: {dg['degenerate_pairs']}/{dg['pairs']} pairs are token salad on both sides"
                   if dg["flagged"] else "")
                + (f"; {rv['count']} value(s) refused ({rv['rule']}; stored unavailable with the reason)"
                   if rv["count"] else "")
                + (f"; {rp['count']} repeated row(s) (the variant of an earlier row, e.g. {rp['examples'][0]['row']} "
                   f"repeats {rp['examples'][0]['first']}): the first is scored, every row is kept as released"
                   if rp["count"] else ""))
        st.checkpoint()
    return summary


def _write(st, mf: R.ModelFrames, runs: list[tuple[dict, dict[str, pd.DataFrame]]]) -> None:
    """Prompts and variants, then each run's record, responses, deltas, units and imported rows, in one transaction."""
    now = utc_now()
    with st.transaction():
        st.insert_df("prompts", pd.DataFrame(list(mf.prompts.values())))
        st.insert_df("variants", pd.DataFrame(list(mf.variants.values())))
        for rec, frames in runs:
            st.upsert_run(rec)
            st.insert_df("responses", frames["responses"])
            st.insert_df("deltas", frames["deltas"])
            counts = frames["deltas"].drop_duplicates(["prompt_id", "variant_id"]).groupby("prompt_id").size()
            st.insert_df("units", unit_rows(rec["run_id"], counts.items(), now))
            if "imported_rows" in frames:
                st.insert_df("imported_rows", frames["imported_rows"])
