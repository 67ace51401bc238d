"""A small store for the statistics-table and score-query tests, and its raw rows as pandas frames.

tests/unit/store/test_suffstats.py and tests/unit/store/test_score_queries.py recompute every number the store's SQL
returns from these frames with pandas/numpy alone (never through ``sago_engine.scoring.scores`` or the
store). The rows reach every branch of that SQL: a run id and a dataset name holding a quote,
cells of every family with a tone or a target length ratio taken from ``meta`` or derived from
the strength, a variant not kept, a text no-op variant, unavailable rows with three reasons (one
a model-input no-op), an option axis, an axis no run measured, two runs of one model, a run
without deltas, and responses with and without log-probs.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from sago_engine.store import open_store
from sago_engine.variants.noop import MODEL_INPUT_NOOP

#: (run_id, model): "ra2" is a second run of m-a; "rc" has no deltas.
RUNS = (("r'a", "m-a"), ("rb", "m-b"), ("ra2", "m-a"), ("rc", "m-c"))
PROMPTS = (("d'x:0", "d'x"), ("d'x:1", "d'x"), ("dy:0", "dy"))
#: variant j of every prompt: family, subtype, strength, position, meta, kept, skip_reason
CELLS = (
    ("surface_noise", "case", 1.0, "GLOBAL", {}, True, None),
    ("social_register", "politeness", -1.0, "PREFIX", {}, True, None),  # tone: negative
    ("social_register", "politeness", 0.0, "SUFFIX", {}, True, None),  # tone: neutral
    ("social_register", "politeness", 1.0, "PREFIX", {"tone": "formal"}, True, None),  # meta wins
    ("structural", "length", 0.5, "GLOBAL", {"target_ratio": 0.75}, True, None),  # ratio from meta
    ("structural", "length", 2.0, "SUFFIX", {}, True, None),  # ratio = strength
    ("structural", "length", 0.5, "PREFIX", {"target_ratio": 0.75}, True, None),
    ("social_register", "formality", 1.0, "PREFIX", {}, True, None),  # no tone: not politeness, none in meta
    ("social_register", "formality", 1.0, "PREFIX", {"tone": "casual"}, True, None),  # same cell, a tone
    ("surface_noise", "case", 1.0, "GLOBAL", {}, False, "semantic filter: 0.41 < 0.85"),
    ("surface_noise", "case", 3.0, "PREFIX", {}, False, "no-op: the variant text equals the base prompt"),
)
#: axes with deltas: a plain axis each run measures, one rb cannot, an option axis, one none can
AXES = ("bleu", "cos", "cos@user_last", "mr")
NO_ACTIVATIONS = "backend exposes no activations"
REPLY_ERROR = "reply error: timeout"
VARIANT_COLS = ["variant_id", "prompt_id", "family", "subtype", "strength", "position", "meta", "kept", "skip_reason"]
DELTA_COLS = ["run_id", "dataset", "prompt_id", "variant_id", "axis", "delta", "delta_norm", "available", "reason",
              "detector"]


def raw_frames(runs=RUNS) -> dict[str, pd.DataFrame]:
    """The rows ``build`` writes: runs, prompts, variants, deltas, responses (seeded, exact)."""
    rng = np.random.default_rng(29)
    run_ids = [r for r, _ in runs]
    prompts = pd.DataFrame([{"prompt_id": p, "dataset": d, "text": f"question {p}"} for p, d in PROMPTS])
    variants = pd.DataFrame([
        {"variant_id": f"{p}/v{j}", "prompt_id": p, "family": fam, "subtype": sub, "strength": s, "position": pos,
         "text": f"variant {j} of {p}", "seed": j, "meta": json.dumps(meta), "kept": kept, "skip_reason": skip}
        for p, _ in PROMPTS for j, (fam, sub, s, pos, meta, kept, skip) in enumerate(CELLS)])
    ds = dict(PROMPTS)
    drows = []
    for run in [r for r in run_ids if r != "rc"]:
        for v in variants.itertuples():
            if isinstance(v.skip_reason, str) and v.skip_reason.startswith("no-op: "):
                continue  # a text no-op is never answered
            for axis in AXES:
                if axis == "cos@user_last" and run != "r'a":
                    continue
                x = float(np.round(rng.uniform(-1, 1), 4))
                reason = None
                if run == "r'a" and v.variant_id == "dy:0/v1":
                    reason = MODEL_INPUT_NOOP  # one row per axis, as the runner writes it
                elif axis == "mr" or (run == "rb" and axis == "cos"):
                    reason = NO_ACTIVATIONS
                elif run == "rb" and v.variant_id in ("d'x:1/v2", "d'x:0/v5") and axis == "bleu":
                    reason = REPLY_ERROR
                ok = reason is None
                drows.append({"run_id": run, "dataset": ds[v.prompt_id], "prompt_id": v.prompt_id,
                              "variant_id": v.variant_id, "axis": axis, "delta": x * 50 if ok else None,
                              "delta_norm": x if ok else None, "available": ok, "reason": reason, "detector": None})
    deltas = pd.DataFrame(drows, columns=DELTA_COLS)
    resp = []
    if "r'a" in run_ids:
        for p, _ in PROMPTS:
            base_err = "boom" if p == "dy:0" else None  # a base that failed: no per-token Δ for its variants
            resp.append({"response_id": f"{p}/base", "run_id": "r'a", "prompt_id": p, "variant_id": None,
                         "response": "b", "n_tokens": 4, "seq_logprob": -2.0, "error": base_err})
            for j, (lp, nt, err) in enumerate([(-3.0, 5, None), (-1.5, 2, None), (None, 3, None), (-1.0, 0, None),
                                               (-6.0, 4, "cut"), (-2.5, 10, None), (-9.0, 3, None), (-4.0, 8, None),
                                               (-5.0, 6, None), (-4.5, 9, None)]):  # v9: not kept
                resp.append({"response_id": f"{p}/v{j}", "run_id": "r'a", "prompt_id": p, "variant_id": f"{p}/v{j}",
                             "response": "x", "n_tokens": nt, "seq_logprob": lp, "error": err})
    runs_df = pd.DataFrame([{"run_id": r, "model": m, "backend": "fake"} for r, m in runs])
    return {"runs": runs_df, "prompts": prompts, "variants": variants, "deltas": deltas,
            "responses": pd.DataFrame(resp)}


def build(path, runs=RUNS, chunks: int | None = 2):
    """A writable store holding ``raw_frames(runs)``; the deltas written in ``chunks`` inserts per run
    (the runner writes a run in chunks of prompts), or all in one insert (``None``). Returns (store, frames)."""
    fr = raw_frames(runs)
    st = open_store(path, read_only=False, create=True)
    with st.transaction():
        st.insert_df("runs", fr["runs"])
        st.insert_df("prompts", fr["prompts"])
        st.insert_df("variants", fr["variants"])
        if not fr["responses"].empty:
            st.insert_df("responses", fr["responses"])
    d = fr["deltas"]
    if chunks is None:
        st.insert_df("deltas", d)
        return st, fr
    for run in d["run_id"].unique():
        part = d[d["run_id"] == run]
        pids = sorted(part["prompt_id"].unique())
        for k in range(chunks):
            chunk = part[part["prompt_id"].isin(pids[k::chunks])]
            if not chunk.empty:
                st.insert_df("deltas", chunk)
    return st, fr


# ------------------------------------------------------------------ independent recomputation (pandas)
def variant_fields(variants: pd.DataFrame) -> pd.DataFrame:
    """variant_id, prompt_id, family, subtype, strength, position, kept, tone, target_ratio as the
    statistics tables define them: tone = meta.tone, else the sign of a politeness strength
    (social_register only); target_ratio = meta.target_ratio, else the strength (structural/length only)."""
    out = variants[["variant_id", "prompt_id", "family", "subtype", "strength", "position", "kept"]].copy()
    tone, ratio = [], []
    for v in variants.itertuples():
        meta = json.loads(v.meta)
        t = None
        if v.family == "social_register":
            t = meta.get("tone") or ({-1: "negative", 0: "neutral", 1: "polite"}[int(np.sign(v.strength))]
                                     if v.subtype == "politeness" else None)
        tone.append(t)
        ratio.append(float(meta.get("target_ratio", v.strength)) if (v.family, v.subtype) == ("structural", "length")
                     else np.nan)
    return out.assign(tone=tone, target_ratio=ratio)


def with_fields(fr: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per delta with its variant's fields."""
    return fr["deltas"].merge(variant_fields(fr["variants"]), on=["variant_id", "prompt_id"])


def joined(fr: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per delta with its variant's fields and its run's model (runs without a ``runs`` row drop out)."""
    return with_fields(fr).merge(fr["runs"][["run_id", "model"]], on="run_id")


def _sum(x: pd.Series) -> float:
    return x.sum(min_count=1)  # SQL: the sum of NULLs only is NULL


def sums(d: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """``by`` + n_rows, n (non-NULL Δ̃), sum_norm, sum_sq, sum_abs of ``d``'s rows."""
    x = d.assign(_sq=d["delta_norm"] ** 2, _abs=d["delta_norm"].abs())
    g = x.groupby(by, dropna=False, sort=True)
    return g.agg(n_rows=("delta_norm", "size"), n=("delta_norm", "count"), sum_norm=("delta_norm", _sum),
                 sum_sq=("_sq", _sum), sum_abs=("_abs", _sum)).reset_index()


FINE = ["run_id", "dataset", "prompt_id", "axis", "family", "subtype", "strength", "position", "tone", "target_ratio",
        "kept", "available", "reason"]
PROMPT = ["run_id", "dataset", "prompt_id", "axis", "kept", "available", "reason"]
CELL = ["run_id", "dataset", "axis", "family", "subtype", "strength", "position", "tone", "target_ratio", "kept",
        "available", "reason"]
VALUES = ["n_rows", "n", "sum_norm", "sum_sq", "sum_abs"]


def expected_table(fr: dict[str, pd.DataFrame], grain: list[str]) -> pd.DataFrame:
    """The rows of one statistics table (``FINE``, ``PROMPT`` or ``CELL`` grain) from the raw deltas."""
    d = with_fields(fr)
    d["reason"] = d["reason"].where(~d["available"], None)
    return sums(d, grain)


def expected_length(d: pd.DataFrame, by: list[str], prompt_key: list[str]) -> pd.DataFrame:
    """``by`` + n_prompts, sum_s, sum_s2, s_i = sqrt(mean Δ̃²) over prompt i's kept, available length variants
    (of one ratio); ``prompt_key`` is the per-prompt grouping (a superset of ``by``)."""
    x = d[d["kept"] & d["available"] & d["target_ratio"].notna()]
    s = x.groupby(prompt_key)["delta_norm"].apply(lambda v: float(np.sqrt(np.mean(v.to_numpy() ** 2))))
    s = s.rename("s").reset_index()
    g = s.assign(s2=s["s"] ** 2).groupby(by, sort=True)
    return g.agg(n_prompts=("s", "size"), sum_s=("s", "sum"), sum_s2=("s2", "sum")).reset_index()


def _key(v) -> str:
    return "∅" if v is None or (isinstance(v, float) and np.isnan(v)) else repr(v)


def assert_rows(got: pd.DataFrame, want: pd.DataFrame, keys: list[str], values: list[str], *, ordered: bool = False):
    """``got`` holds exactly ``want``'s rows: the same ``keys`` (NULL = NaN = None), ``values`` equal within 1e-12
    relative (NULL = NaN). ``ordered``: in the same order too (else both are sorted by the keys first)."""
    assert list(got.columns[:len(keys)]) == keys or set(keys) <= set(got.columns), got.columns
    gk = [tuple(_key(v) for v in row) for row in got[keys].itertuples(index=False)]
    wk = [tuple(_key(v) for v in row) for row in want[keys].itertuples(index=False)]
    if ordered:
        assert gk == wk
        gi, wi = list(range(len(gk))), list(range(len(wk)))
    else:
        assert sorted(gk) == sorted(wk)
        gi = sorted(range(len(gk)), key=gk.__getitem__)
        wi = sorted(range(len(wk)), key=wk.__getitem__)
    for c in values:
        g = got[c].to_numpy(dtype=float)[gi]
        w = want[c].to_numpy(dtype=float)[wi]
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=0, equal_nan=True, err_msg=c)
