"""Is a store what its config produces today? Ids against ``--plan``, and rows against a re-run of a cut.

``store_vs_plan``: the run ids, per run the prompt ids, and the variant ids a store holds, against
those ``--plan`` computes from the config (``plan_report.plan_runs``, the functions ``--plan`` uses).
``cut_config`` and ``slice_differences``: a small cut of the config (its first prompts of its first
dataset, some of its models; the same seed, variant grid, semantic filter and R_X, so each prompt gets
the same variants) re-run into another store, and every row of the cut's prompts compared with the
store's (``sago_engine.verify.reproduce``: matched by prompt, variant, axis, sample; replies and token
ids exactly, floats within ``NOISE_TOL``). The cut's run ids differ from the full runs' (a run id
hashes every prompt of its plan), so runs are matched by their model label (``runs.model``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from precompute.config import RunConfig
from precompute.plan_report import plan_runs
from sago_engine.store import open_store
from sago_engine.verify.reproduce import ROW_KEYS, store_differences


def store_vs_plan(cfg: RunConfig, store_path: str | Path | None = None) -> list[str]:
    """What of the store (``cfg.store`` unless ``store_path``) differs from ``--plan`` on ``cfg``.

    Returns one line per difference: a planned run the store lacks or a stored run the plan does not
    make (each with its model label), a run whose finished prompts are not the planned ones, and the
    variant ids only one side has (counted, the first few named). ``[]``: a run of ``cfg`` against
    this store has nothing to do and adds no run.
    """
    from precompute import runner

    plan, runs = plan_runs(cfg, runner)
    out: list[str] = []
    with open_store(store_path or cfg.store, read_only=True) as st:
        stored = dict(zip(st.runs()["run_id"], st.runs()["model"]))
        units: dict[str, set[str]] = {}
        for rid, pid in st.unit_keys():
            units.setdefault(rid, set()).add(pid)
        stored_variants = set(st.variants()["variant_id"])
    for r in runs:
        if r.run_id not in stored:
            same = sorted(rid for rid, name in stored.items() if name == r.model.name)
            out.append(f"run {r.run_id} ({r.model.name}) planned, not in the store"
                       + (f" (the store's {r.model.name} run: {', '.join(same)})" if same else ""))
            continue
        got, want = units.get(r.run_id, set()), set(r.prompt_ids)
        if got != want:
            out.append(f"run {r.run_id} ({r.model.name}): {len(want - got)} planned prompts not finished, "
                       f"{len(got - want)} finished prompts not planned")
    planned_ids = {r.run_id for r in runs}
    out += [f"run {rid} ({name}) stored, not planned" for rid, name in sorted(stored.items()) if rid not in planned_ids]
    planned_variants = {v.variant_id for vs in plan.variants.values() for v in vs}
    for name, ids in (("planned, not in the store", planned_variants - stored_variants),
                      ("stored, not planned", stored_variants - planned_variants)):
        if ids:
            out.append(f"{len(ids)} variant ids {name} (e.g. {', '.join(sorted(ids)[:3])})")
    return out


def cut_config(cfg: RunConfig, models: Sequence[str], n_prompts: int, store: str | Path) -> RunConfig:
    """``cfg`` cut to its first ``n_prompts`` prompts of its first dataset and the models named
    ``models`` (``ModelConfig.name``: label or key), written to ``store``; every other setting kept.

    Raises:
        ValueError: a name of ``models`` is not a model of ``cfg``; ``cfg`` has no bundled dataset.
    """
    names = {m.name: m for m in cfg.models}
    missing = [n for n in models if n not in names]
    if missing or not cfg.datasets:
        raise ValueError(f"no model {missing} in the config" if missing else "the config names no dataset")
    return replace(cfg, store=str(store), datasets=cfg.datasets[:1], n_prompts=int(n_prompts), sources=(),
                   models=tuple(names[n] for n in models))


def slice_differences(store_path: str | Path, rerun_path: str | Path, models: Sequence[str]) -> list[str]:
    """Every difference between the rows of ``store_path`` and of ``rerun_path`` (a re-run of a cut,
    ``cut_config``) about the prompts of the re-run, for each run label of ``models``.

    Per model, its one run in each store (by ``runs.model``) is compared table by table
    (``verify.reproduce.store_differences`` under the run's R_X); ``prompts`` and ``variants`` rows
    of those prompts are compared once. Returns one line per difference; ``[]`` when all match.
    """
    out: list[str] = []
    with open_store(store_path, read_only=True) as full, open_store(rerun_path, read_only=True) as cut:
        pids = list(cut.prompts()["prompt_id"])
        if not pids:
            return [f"the re-run {rerun_path} holds no prompt"]
        shared = {t: (full.rows_of_prompts(t, pids), cut.rows_of_prompts(t, pids)) for t in ("prompts", "variants")}
        out += store_differences({t: a for t, (a, _) in shared.items()}, {t: b for t, (_, b) in shared.items()}, {})
        for name in models:
            ids = []
            for st in (full, cut):
                runs = st.runs()
                mine = runs[runs["model"] == name]
                ids.append(mine)
            if len(ids[0]) != 1 or len(ids[1]) != 1:
                out.append(f"{name}: {len(ids[0])} runs in the store, {len(ids[1])} in the re-run (need one each)")
                continue
            normalizers = json.loads(ids[1]["normalizers"].iloc[0])
            cap = (json.loads(ids[1]["decoding"].iloc[0]) or {}).get("max_new_tokens")
            tables = [t for t in ROW_KEYS if t not in ("prompts", "variants")]
            want = {t: full.rows_of_prompts(t, pids, ids[0]["run_id"].iloc[0]) for t in tables}
            got = {t: cut.rows_of_prompts(t, pids, ids[1]["run_id"].iloc[0]) for t in tables}
            out += [f"{name}: {line}" for line in store_differences(want, got, normalizers, cap=cap)]
    return out
