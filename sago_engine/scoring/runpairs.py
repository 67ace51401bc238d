"""Runs of one store that differ in a single setting: the reply-cap ablation pairs.

A config can hold two ``[[models]]`` entries of the same model that differ only in
``max_new_tokens`` and ``label`` (``precompute/configs/ablation_cap.toml``: smollm2-135m-instruct
at 48 and at 128 new tokens, labelled ``smollm2-135m-instruct·cap48`` / ``·cap128``). Their
``runs`` rows then agree in everything that can change a number — weights, dtype, device,
decoding (greedy, batch size, template), seed, R_X, semantic filter, encoder, library versions,
the config as read — except ``model`` (the label), ``decoding.max_new_tokens`` and
``config.run_model`` (key, label, cap). ``cap_pairs`` finds such pairs, so a page can compare
SGS per axis at two reply caps without being told which runs to compare. Pure functions over a
``runs`` frame (``Store.runs()``); no SQL here.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from sago_engine.seeds import stable_hash

__all__ = ["CAP_PAIR_COLUMNS", "model_key", "setting_signature", "cap_pairs"]

#: Columns of ``cap_pairs``' result.
CAP_PAIR_COLUMNS = ["model_key", "run_short", "run_long", "model_short", "model_long", "cap_short", "cap_long"]

#: ``runs`` columns that never change a number (identity, bookkeeping, display name).
_IGNORED = ("run_id", "model", "fingerprint", "started_at", "finished_at", "status")
#: ``runs`` columns stored as JSON text.
_JSON = ("decoding", "normalizers", "semantic_filter", "encoder", "capabilities", "versions", "config")


def _obj(v: Any) -> Any:
    """A JSON column's value as a Python object (text is parsed; None / NaN stay None)."""
    if v is None or (isinstance(v, float) and v != v):
        return None
    if isinstance(v, (str, bytes)):
        return json.loads(v)
    return v


def model_key(row: dict) -> str:
    """The run's model key: ``config.run_model.key`` when recorded, else ``model``."""
    rm = (row.get("config") or {}).get("run_model") if isinstance(row.get("config"), dict) else None
    return rm["key"] if isinstance(rm, dict) and rm.get("key") else str(row["model"])


def setting_signature(run: dict | pd.Series) -> str:
    """A hash of every setting of a run except its reply cap and display name.

    Args:
        run: one ``runs`` row (dict or Series; JSON columns as text or parsed objects).
    Returns:
        16 hex chars (``seeds.stable_hash``): equal for two runs whose records are identical
        except ``run_id``, ``model``, ``fingerprint``, timestamps, ``status``,
        ``decoding.max_new_tokens`` and ``config.run_model``'s ``label`` / ``max_new_tokens``
        (the model key stays in the hash).
    """
    row = {k: _obj(v) if k in _JSON else v for k, v in dict(run).items()}
    rec = {k: v for k, v in row.items() if k not in _IGNORED}
    rec["decoding"] = {k: v for k, v in (rec.get("decoding") or {}).items() if k != "max_new_tokens"}
    cfg = dict(rec.get("config") or {})
    cfg.pop("run_model", None)
    rec["config"] = cfg
    rec["model_key"] = model_key(row)
    return stable_hash(rec)


def cap_pairs(runs: pd.DataFrame) -> pd.DataFrame:
    """Pairs of runs that differ only in the reply cap (``max_new_tokens``) and the label.

    Runs are grouped by ``setting_signature``; in a group every two runs with different caps
    form a pair (shorter cap first). Runs that are not ``complete`` still pair (the caller
    decides whether to show a partial run).

    Args:
        runs: the ``runs`` table (``Store.runs()``): columns run_id, model, decoding, config and
            the other recorded settings; JSON columns as text or objects.
    Returns:
        One row per pair, columns ``CAP_PAIR_COLUMNS``: the model key, the two run ids and
        display names (``runs.model``) and their caps in tokens (ints ≥ 1), sorted by model key
        and caps. Empty (with those columns) when no two runs form a pair.
    Raises:
        KeyError: ``runs`` lacks run_id, model or decoding.
    """
    rows = []
    for rec in runs.to_dict("records"):
        dec = _obj(rec["decoding"]) or {}
        cap = dec.get("max_new_tokens")
        if cap is None:
            continue
        cfg = _obj(rec.get("config"))
        rows.append({"sig": setting_signature(rec), "run_id": rec["run_id"], "model": rec["model"], "cap": int(cap),
                     "model_key": model_key({"model": rec["model"], "config": cfg})})
    out = []
    by_sig: dict[str, list[dict]] = {}
    for r in rows:
        by_sig.setdefault(r["sig"], []).append(r)
    for group in by_sig.values():
        group.sort(key=lambda r: (r["cap"], r["run_id"]))
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                if a["cap"] != b["cap"]:
                    out.append({"model_key": a["model_key"], "run_short": a["run_id"], "run_long": b["run_id"],
                                "model_short": a["model"], "model_long": b["model"], "cap_short": a["cap"],
                                "cap_long": b["cap"]})
    df = pd.DataFrame(out, columns=CAP_PAIR_COLUMNS)
    return df.sort_values(["model_key", "cap_short", "cap_long"], ignore_index=True) if len(df) else df
