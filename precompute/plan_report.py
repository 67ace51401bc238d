"""``python -m precompute --plan``: what a run will do, before it does it, in seconds.

Per model: the replies to generate (new vs already stored), judge calls, estimated tokens, the
cost where prices are set, an estimated time (measured with ``--calibrate``, else from a stated
rate ``--rate``), the memory a local model needs against the memory available, and the inputs
longer than its context. The semantic filter is not run (``make_plan(run_filter=False)``): the
plan counts, it does not score. Local models load their tokenizer and config, never weights
(unless ``--calibrate``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from precompute.context_plan import LOCAL_BACKENDS, over_context_lines
from precompute.plan_estimate import (
    gib,
    input_texts,
    input_tokens,
    memory_available,
    memory_need,
    plan_cost,
    reply_counts,
)
from precompute.terminal import shown
from sago_engine.scoring.cap_health import WARN_CUT_SHARE

#: Share of the memory available above which the plan warns that a local model may not fit.
MEMORY_WARN_SHARE = 0.9


def duration(seconds: float) -> str:
    """``"3 h 05 min"``, ``"12 min 30 s"`` or ``"45 s"``."""
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600} h {(s % 3600) // 60:02d} min"
    if s >= 60:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s} s"


def _local_side(m):
    """``(renderer, context, config)`` of a local model without its weights, or the error as text."""
    from sago_engine.backends.hf_local.prompt_side import load_prompt_side_config

    try:
        return load_prompt_side_config(m.key, m.chat_template_kwargs, m.template_date), None
    except Exception as e:  # noqa: BLE001 - the plan still prints; the run reports the same failure
        return None, f"{type(e).__name__}: {shown(e, 200)}"


def memory_line(m, config, plan, ids: list[str], cap: int, encode, samples: int = 1) -> str:
    """``memory: ≈ 7.1 GiB (weights …, KV cache …, hidden states …, runtime …) of 22.4 GiB available RAM``,
    with a warning above ``MEMORY_WARN_SHARE`` of it. A sampled run (``samples`` = k > 1) decodes k rows
    per input: ``batch_size`` rows hold batch_size / k inputs, each row with its own KV cache and
    hidden states (copied from the input's one prefill), so the need per batch is the greedy one."""
    dtype, batch = getattr(m, "dtype", "float32"), int(getattr(m, "batch_size", 8))
    longest = max((p for p in plan.prompts if p.prompt_id in set(ids)), key=lambda p: len(p.text), default=None)
    n_in = len(encode(longest.text)) * 2 if longest is not None else 64  # variants run up to 2× (length ×2)
    try:
        need = memory_need(config, dtype, batch, n_in, cap)
    except AttributeError as e:
        return f"    memory: not estimated ({shown(e, 120)})"
    avail, where = memory_available(getattr(m, "device", "auto") if getattr(m, "device", "auto") != "auto" else "cpu")
    rows = f"batch {batch}" if samples == 1 else f"batch {batch} (≈ {max(1, batch // samples)} inputs × {samples} samples)"
    parts = (f"weights {gib(need.weights)} in {dtype}, KV cache {gib(need.kv_cache)} and hidden states "
             f"{gib(need.hidden_states)} at {rows}, runtime {gib(need.runtime)}")
    line = f"    memory: ≈ {gib(need.total)} ({parts})"
    if avail is None:
        return line + f"; {where}"
    line += f" of {gib(avail)} {where}"
    if need.total > MEMORY_WARN_SHARE * avail:
        line += f" — warning: may not fit; lower batch_size (each row ≈ {gib((need.kv_cache + need.hidden_states) / batch)})"
    return line


def model_lines(cfg, m, plan, ids: list[str], done: set[str], rate: float | None, calibration=None,
                stored_cut: tuple[int, int] | None = None) -> tuple[list[str], int]:
    """The plan's lines of one model and its new replies. ``stored_cut``: (cut at the cap, replies) of
    the run's replies already stored (``Store.cut_replies``)."""
    cap = cfg.max_new_tokens_for(m)
    k = m.samples if m.sampling is not None else 1  # replies per base prompt and per variant
    c = reply_counts(plan, m.repeats, ids, done, cfg.judge is not None, samples=k)
    pending = [pid for pid in ids if pid not in done]
    side, err = _local_side(m) if m.backend in LOCAL_BACKENDS else (None, None)
    encode = side[0].encode_prompt if side else None
    each = (f"(base × {m.repeats} + their variants)" if k == 1 else f"{k} samples × (base + their variants)"
            + (f" + base × {m.repeats - 1} repeats" if m.repeats > 1 else ""))
    lines = [f"    replies: {c.replies_new:,} to generate ({c.prompts_new} prompts × {each}), "
             f"{c.replies_stored:,} already stored"]
    if stored_cut is not None and stored_cut[1]:
        n_cut, n = stored_cut
        lines.append(f"    cut at the reply cap so far: {n_cut} of {n} stored replies ({100.0 * n_cut / n:.0f}%)"
                     + (" — warning: raise max_new_tokens (a new cap is a new run)" if n_cut > WARN_CUT_SHARE * n
                        else ""))
    if cfg.judge is not None:
        lines.append(f"    judge calls: up to {c.judge_calls:,} (variant and base reply of each social-register variant)")
    local = m.backend in LOCAL_BACKENDS  # a local sampled run prefills each input once for its k samples
    tok_in, how = input_tokens(input_texts(plan, m.repeats, pending, samples=1 if local else k), encode)
    if k > 1:
        how += ", each input once for its samples (one shared prefill)" if local else f", each input × {k} samples"
    tok_out = c.replies_new * cap
    lines.append(f"    tokens: ≈ {tok_in:,} in ({how}), at most {tok_out:,} out (reply cap {cap})")
    cost = plan_cost(tok_in, tok_out, m)
    if cost is not None:
        lines.append(f"    cost: at most ${cost:,.2f} (≈ input tokens, every reply at the cap)")
    if calibration is not None:
        est = calibration.estimate_s(c.replies_new)
        load = (f"load {calibration.load_s:.0f} s, once: it built the model cache, which a run reads, "
                "not counted" if calibration.cache_built else f"load {calibration.load_s:.0f} s")
        lines.append(f"    time: ≈ {duration(est)} (measured here: {load}, "
                     f"{calibration.per_reply_s:.2f} s per reply over {calibration.replies} replies)")
    elif rate:
        lines.append(f"    time: ≈ {duration(c.replies_new / rate)} at the stated rate of {rate:g} replies/s")
    elif c.replies_new:
        lines.append("    time: not estimated — add --calibrate (loads the model, answers one batch) or --rate R")
    if m.backend in LOCAL_BACKENDS:
        if side is None:
            lines.append(f"    memory and context check skipped: {err}")
        else:
            lines.append(memory_line(m, side[2], plan, ids, cap, encode, samples=k))
            lines += over_context_lines(cfg, m, plan, ids, side=(side[0], side[1]))
    return lines, c.replies_new


@dataclass(frozen=True)
class PlannedRun:
    """One model's run as ``--plan`` computes it."""

    model: Any
    """The ``ModelConfig`` (``model.name`` is the run's ``runs.model``)."""
    run_id: str
    """``runner.run_id_for`` of the model over the plan."""
    prompt_ids: tuple[str, ...]
    """The prompts the run covers (its shard's with ``--shard``), in plan order."""


def plan_runs(cfg, runner, shard=None, only_models=None) -> tuple[Any, list[PlannedRun]]:
    """The plan ``--plan`` prints and its runs: ``runner.make_plan`` without rewrite requests or the
    semantic filter's scoring (the ids do not depend on either), one ``PlannedRun`` per model of
    ``only_models`` (keys or names, as ``--model``) or of every model. ``runner``: the module with
    ``make_plan``, ``shard_prompts`` and ``run_id_for`` (``precompute.runner``). Nothing is loaded but
    the prompts; no store is read (a stored LLM rewrite is the same variant id as a placeholder)."""
    plan = runner.make_plan(cfg, None, request_rewrites=False, run_filter=False)  # --plan sends no request
    ids = tuple(p.prompt_id for p in runner.shard_prompts(plan.prompts, cfg.chunk_prompts, shard))
    runs = [PlannedRun(m, runner.run_id_for(cfg, m, plan), ids) for m in cfg.models
            if not only_models or m.key in only_models or m.name in only_models]  # as runner.run skips them
    return plan, runs


def print_plan(cfg, runner, shard, only_models=None, rate: float | None = None, calibrate: bool = False) -> None:
    """Print the plan (module docstring) of the models of ``only_models`` (keys or names, as
    ``--model``) or all. ``rate``: a stated rate in replies/s for the time; ``calibrate``: measure
    it per model (``precompute.calibrate``). Model-input no-ops need the model's tokenizer: the run
    finds and counts them (they lower the replies)."""
    from precompute.config import missing_api_keys, run_key_holders
    from sago_engine.store import open_store

    store = open_store(cfg.store, read_only=True) if Path(cfg.store).exists() else None
    plan, runs = plan_runs(cfg, runner, shard, only_models)
    n_var = sum(len(v) for v in plan.variants.values())
    pending_rw = sum(bool(v.meta.get("pending_rewrite")) for vs in plan.variants.values() for v in vs)
    kept = "decided by the semantic filter at run time" if cfg.filter is not None else "all (no semantic filter)"
    print(f"prompts: {len(plan.prompts)}  variants: {n_var}  kept: {kept}"
          + (f"  (+ {pending_rw} LLM rewrites, requested and filtered at run time unless already stored)"
             if pending_rw else ""))
    if plan.noops:
        from sago_engine.variants.noop import count_by_cell

        cells = count_by_cell([v for vs in plan.variants.values() for v in vs], plan.noops)
        print(f"no-op variants (text equals the base prompt; stored with kept = false, not run): {len(plan.noops)}"
              f" ({', '.join(f'{k}: {n}' for k, n in cells.items())})")
    missing = missing_api_keys(run_key_holders(cfg))
    if missing:
        print("warning: a run needs these API keys, unset now: " + "; ".join(missing))
    ids = [p.prompt_id for p in runner.shard_prompts(plan.prompts, cfg.chunk_prompts, shard)]
    total = 0
    for r in runs:
        m, rid = r.model, r.run_id
        done = store.done_units(rid) if store else set()
        part = f" (shard {shard[0]}/{shard[1]}: {len(ids)} prompts)" if shard else ""
        print(f"  {shown(m.name, 60)}: run {rid}, {len(set(ids) - done)} prompts pending{part}")
        cal = None
        if calibrate and set(ids) - done:
            from precompute.calibrate import calibrate as measure

            cal = measure(cfg, m, plan, [i for i in ids if i not in done])
        cut = store.cut_replies() if store else None
        mine = None if cut is None else cut[cut["run_id"] == rid]
        lines, n = model_lines(cfg, m, plan, ids, done, rate, cal,
                               None if mine is None else (int(mine["cut"].sum()), int(mine["replies"].sum())))
        total += n
        for line in lines:
            print(line)
    print(f"total: {total:,} replies to generate")
    print(f"reply cap: {cfg.max_new_tokens} tokens (a model's own max_new_tokens overrides it); a reply that "
          "reaches it is cut — the run reports the share per model × dataset (docs/CONFIG.md, \"Choosing the reply cap\")")
    if store:
        store.close()
