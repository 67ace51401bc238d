"""Re-derive stored white-box statistics by teacher forcing over the stored token ids.

A local (``hf_local``) run stores, per response, the generated token ids exactly as the model
emitted them (``responses.token_ids``, EOS included), the reply as decoded from them
(``responses.response``), ``seq_logprob`` (sum of token log-probs, nats) and ``mean_entropy``
(mean predictive entropy, nats). ``replay_token_stats`` samples responses of every local run of a
store, feeds prompt + stored ids through the model in one teacher-forced forward pass
(``HFLocalBackend.teacher_force``; SAGO (arXiv 2610.01428) §Axes defines Δ-Prob / Δ-Ent under
teacher forcing) and reports how far the recomputed values are from the stored ones. It also
checks that the stored reply is the decode of the stored ids and that the chat template the
model has now is the one the run recorded (same sha256), rendered with the recorded variables.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sago_engine.axes.noise import ENTROPY_TOL, LOGPROB_TOL_PER_TOKEN, REPLAYED_AXES, logprob_tol, replay_tol
from sago_engine.axis_spec import AXIS_SPECS
from sago_engine.backends import get_backend
from sago_engine.backends.hf_local.prompt_render import template_records_match
from sago_engine.scoring.runpairs import model_key
from sago_engine.seeds import stable_hash
from sago_engine.store import open_store
from sago_engine.types import GenerationResult

__all__ = ["replay_token_stats", "REPLAY_COLUMNS", "REPLAYED_AXES", "LOGPROB_TOL_PER_TOKEN", "ENTROPY_TOL", "logprob_tol",
           "replay_tol"]

# The replay's agreement tolerances are the cross-batch float noise decided in axes/noise.py.


#: Per replayed axis: the stored statistic, its replay and their absolute error ``err_<axis>``.
REPLAY_COLUMNS = ["run_id", "model", "response_id", "prompt_id", "variant_id", "n_tokens",
                  *[c for a in REPLAYED_AXES for c in (AXIS_SPECS[a].response_stat,
                                                       f"{AXIS_SPECS[a].response_stat}_replay", f"err_{a}")],
                  "text_is_decode", "template_match"]


def _json(v: Any) -> Any:
    if isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def _ids(v: Any) -> list[int] | None:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return None
    return [int(t) for t in v]


def _default_factory(device: str) -> Callable[[pd.Series, dict], Any]:
    def make(run: pd.Series, kwargs: dict):
        # runs.model is the run's label; the model it loads is config.run_model.key when one is recorded
        key = model_key({"config": _json(run.get("config")), "model": run["model"]})
        spec = {"name": "hf_local", "model": key, "dtype": run["dtype"] or "float32", "device": device,
                "batch_size": 8}
        if kwargs:
            spec["chat_template_kwargs"] = kwargs
        tmpl = (_json(run["decoding"]) or {}).get("chat_template")
        if isinstance(tmpl, dict) and tmpl.get("template_date") is not None:  # the day the run's template saw
            spec["template_date"] = tmpl["template_date"]
        return get_backend(spec)

    return make


def replay_token_stats(store_path: str | Path, per_run: int = 8, seed: int = 0, device: str = "cpu",
                       backend_for: Callable[[pd.Series, dict], Any] | None = None) -> pd.DataFrame:
    """Teacher-force sampled stored responses of every local run and compare with what is stored.

    Args:
        store_path: a sago store (opened read-only).
        per_run: responses sampled per run (those with stored ``token_ids`` and no error; fewer
            when the run has fewer). The sample is deterministic: prompts ordered by
            ``stable_hash(seed, run_id, prompt_id)``, all responses of a prompt taken together.
        seed: sample seed.
        device: device for the default backend (the run's model and dtype are reused).
        backend_for: ``(run row, chat_template_kwargs) -> backend`` with ``teacher_force``,
            ``template_record()`` and ``tokenizer`` (default: ``get_backend`` of the run's model,
            dtype and recorded template variables on ``device``). Backends it returns are not
            closed here when given; the default ones are.
    Returns:
        DataFrame with ``REPLAY_COLUMNS``, one row per sampled response: per axis of
        ``REPLAYED_AXES`` the stored and replayed statistic (``seq_logprob`` / ``mean_entropy``,
        nats, computed as ``GenerationResult`` computes it) and their absolute error ``err_prob`` /
        ``err_ent`` (inf when the replay gives no valid value; within ``replay_tol``), ``text_is_decode`` (stored reply == decode of the stored ids, special
        tokens skipped, no clean-up) and ``template_match`` (the backend renders as the run's record
        says: ``prompt_render.template_records_match``; None when the run recorded none). Empty when the
        store has no local run with stored ids.
    Raises:
        StoreError / FileNotFoundError: not a readable store.
    """
    make = backend_for or _default_factory(device)
    rows: list[dict] = []
    with open_store(store_path, read_only=True) as st:
        runs = st.runs()
        runs = runs[runs["backend"] == "hf_local"]
        if runs.empty:
            return pd.DataFrame(columns=REPLAY_COLUMNS)
        prompts = st.prompts().set_index("prompt_id")["text"].to_dict()
        var_text: dict[str, dict[str, str]] = {}
        for _, run in runs.iterrows():
            rid = run["run_id"]
            order = sorted(prompts, key=lambda pid: stable_hash(seed, rid, pid))
            picked: list[pd.Series] = []
            for pid in order:
                if len(picked) >= per_run:
                    break
                resp = st.responses(pid)
                resp = resp[(resp["run_id"] == rid) & resp["error"].isna()]
                for _, r in resp.iterrows():
                    if _ids(r["token_ids"]) is not None and len(picked) < per_run:
                        picked.append(r)
            if not picked:
                continue
            texts = []
            for r in picked:
                if r["variant_id"] is None or (isinstance(r["variant_id"], float) and np.isnan(r["variant_id"])):
                    texts.append(prompts[r["prompt_id"]])
                else:
                    if r["prompt_id"] not in var_text:
                        v = st.variants(r["prompt_id"])
                        var_text[r["prompt_id"]] = dict(zip(v["variant_id"], v["text"]))
                    texts.append(var_text[r["prompt_id"]][r["variant_id"]])
            tmpl = (_json(run["decoding"]) or {}).get("chat_template")
            kwargs = ({k: v for k, v in (tmpl.get("kwargs") or {}).items() if k != "add_generation_prompt"}
                      if isinstance(tmpl, dict) else {})
            be = make(run, kwargs)
            try:
                match = None if tmpl is None else template_records_match(tmpl, be.template_record())
                ids = [_ids(r["token_ids"]) for r in picked]
                stats = be.teacher_force(texts, ids)
                for r, tid, (lp, ent) in zip(picked, ids, stats):
                    # the statistics as the backend computes them (``GenerationResult`` properties)
                    replayed = GenerationResult(text="", n_tokens=len(tid), token_logprobs=np.asarray(lp, np.float64),
                                                token_entropies=np.asarray(ent, np.float64))
                    dec = be.tokenizer.decode(tid, skip_special_tokens=True, clean_up_tokenization_spaces=False)
                    row = {"run_id": rid, "model": run["model"], "response_id": r["response_id"],
                           "prompt_id": r["prompt_id"], "variant_id": r["variant_id"], "n_tokens": int(r["n_tokens"])}
                    for a in REPLAYED_AXES:
                        stat = AXIS_SPECS[a].response_stat
                        new = getattr(replayed, stat)  # None: not a valid statistic → an infinite error
                        new = float("nan") if new is None else float(new)
                        err = abs(new - float(r[stat])) if np.isfinite(new) else float("inf")
                        row.update({stat: float(r[stat]), f"{stat}_replay": new, f"err_{a}": err})
                    rows.append({**row, "text_is_decode": dec == r["response"], "template_match": match})
            finally:
                if backend_for is None:
                    be.close()
    return pd.DataFrame(rows, columns=REPLAY_COLUMNS)
