"""Every score query of the store (``store.scores.ScoreQueries``) against pandas/numpy on the raw rows.

The store (tests/support/stats_store.py) is read under several filters and axis choices; each query's
rows are recomputed from the rows written, in the test, and compared value by value (labels
aligned). The same queries on a store without the statistics tables (an old read-only store)
give the same numbers.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from sago_engine.filters import Filters
from sago_engine.store import STATS_TABLES
from sago_engine.types import AXES as PLAIN
from tests.support.stats_store import CELL, FINE, PROMPT, assert_rows, build, expected_length, expected_table, joined

ONE_RUN_PER_MODEL = (("r'a", "m-a"), ("rb", "m-b"), ("rc", "m-c"))
F_ALL = Filters(models=("m-a",), datasets=("d'x",), families=("social_register", "structural"),
                subtypes=("politeness", "length"), strengths=(-1.0, 0.5, 2.0), positions=("PREFIX", "SUFFIX"))
#: (filters, axes) every query is read under
CASES = [
    (None, None),
    (F_ALL, None),
    (Filters(positions=("GLOBAL", "SUFFIX"), models=("m-b", "m-a")), ("bleu", "cos@user_last")),
    (Filters(datasets=("dy",)), ("cos@user_last", "mr", "cos")),
    (Filters(families=("structural",)), None),
    (Filters(models=()), None),
]
PROMPT_KEYS = ["run_id", "model", "dataset", "prompt_id", "axis"]
SUMS = ["n", "sum_norm", "sum_sq", "sum_abs"]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """m-a has two runs (the per-prompt length path); rc has no deltas."""
    st, fr = build(tmp_path_factory.mktemp("q") / "two.duckdb", chunks=None)
    yield st, fr
    st.close()


@pytest.fixture(scope="module")
def one_run(tmp_path_factory):
    """One run per model (``length_stats`` answers the length ablation)."""
    st, fr = build(tmp_path_factory.mktemp("q") / "one.duckdb", runs=ONE_RUN_PER_MODEL, chunks=None)
    yield st, fr
    st.close()


def _rows(fr, f, axes, *, kept=True, available=True, axis=True, models=True):
    """The raw delta rows a query reads under ``f`` and ``axes`` (pandas)."""
    d = joined(fr)
    keep = pd.Series(True, index=d.index)
    for name, col in (("models", "model"), ("datasets", "dataset"), ("families", "family"),
                      ("subtypes", "subtype"), ("strengths", "strength"), ("positions", "position")):
        vals = None if f is None else getattr(f, name)
        if vals is not None and (models or name != "models"):
            keep &= d[col].isin(list(vals))
    if axis:
        keep &= d["axis"].isin(list(PLAIN) if axes is None else list(axes))
    if kept:
        keep &= d["kept"]
    if available:
        keep &= d["available"] & np.isfinite(d["delta_norm"].astype(float))
    return d[keep].copy()


def _rms(x: pd.Series) -> float:
    return float(np.sqrt(np.mean(x.to_numpy(dtype=float) ** 2)))


def _scores(d: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    g = d.groupby(keys, dropna=False, sort=True)["delta_norm"]
    return g.agg(s=_rms, n_variants="size").reset_index()


def _sorted_by(df: pd.DataFrame, keys: list[str]) -> bool:
    rows = [tuple(r) for r in df[keys].itertuples(index=False)]
    return rows == sorted(rows)


def _stores(*built):
    """(store, frames) pairs: each store as it is and as a store without statistics tables reads it."""
    for st, fr in built:
        yield st, fr
        yield dataclasses.replace(st, stats_materialised=False), fr


# ------------------------------------------------------------------ per-prompt sums and scores
def test_prompt_stats_and_prompt_scores(two_runs):
    for st, fr in _stores(two_runs):
        for f, axes in CASES:
            d = _rows(fr, f, axes)
            x = d.assign(_sq=d["delta_norm"] ** 2, _abs=d["delta_norm"].abs())
            want = x.groupby(PROMPT_KEYS, sort=True).agg(
                n=("delta_norm", "size"), sum_norm=("delta_norm", "sum"), sum_sq=("_sq", "sum"),
                sum_abs=("_abs", "sum")).reset_index()
            got = st.prompt_stats(f, axes=axes)
            assert list(got.columns) == PROMPT_KEYS + SUMS
            assert_rows(got, want, PROMPT_KEYS, SUMS)
            assert _sorted_by(got, ["model", "dataset", "prompt_id", "axis"])
            ps = st.prompt_scores(f, axes=axes)
            assert list(ps.columns) == PROMPT_KEYS + ["s", "n_variants"]
            assert_rows(ps, _scores(d, PROMPT_KEYS), PROMPT_KEYS, ["s", "n_variants"])
            if f is None and axes is None:
                assert len(got) > 5


def test_views(two_runs):
    for st, fr in _stores(two_runs):
        for axes in (None, ("cos@user_last", "bleu")):
            ps = _scores(_rows(fr, None, axes), PROMPT_KEYS)
            got = st.view("prompt_scores", axes=axes)
            assert list(got.columns) == PROMPT_KEYS + ["s", "n_variants"]
            assert got.index.tolist() == list(range(len(got)))
            want = ps.sort_values(PROMPT_KEYS + ["s", "n_variants"]).reset_index(drop=True)
            assert_rows(got, want, PROMPT_KEYS, ["s", "n_variants"], ordered=True)
            for name, by in (("sgs_dataset", ["run_id", "model", "dataset", "axis"]),
                             ("sgs_total", ["run_id", "model", "axis"])):
                g = ps.groupby(by)["s"]
                w = pd.DataFrame({"sgs": g.mean(), "std": g.std(ddof=1), "n_prompts": g.size()}).reset_index()
                w = w.sort_values(list(w.columns)).reset_index(drop=True)
                got = st.view(name, axes=axes)
                assert list(got.columns) == by + ["sgs", "std", "n_prompts"]
                assert_rows(got, w, by, ["sgs", "std", "n_prompts"], ordered=True)
                assert got.index.tolist() == list(range(len(got)))
            if axes is None:
                pd.testing.assert_frame_equal(st.view("sgs_total"), st.view("sgs_total", axes=None))
    with pytest.raises(ValueError, match="unknown view 'deltas'"):
        two_runs[0].view("deltas")


def test_cell_prompt_scores(two_runs):
    keys = ["model", "axis", "dataset", "prompt_id", "family", "subtype", "strength", "position"]
    for st, fr in _stores(two_runs):
        for f, axes in CASES:
            got = st.cell_prompt_scores(f, axes=axes)
            assert list(got.columns) == keys + ["s", "n_variants"]
            assert_rows(got, _scores(_rows(fr, f, axes), keys), keys, ["s", "n_variants"], ordered=True)


# ------------------------------------------------------------------ availability, options, counts
def test_axis_availability(two_runs):
    for st, fr in _stores(two_runs):
        for f, axes in CASES:
            d = _rows(fr, f, axes, available=False)
            rows = []
            for (model, axis), x in d.groupby(["model", "axis"], sort=True):
                ok = int(x["available"].sum())
                reasons = sorted(set(x.loc[~x["available"], "reason"]))
                rows.append({"model": model, "axis": axis, "n_available": ok, "n_unavailable": len(x) - ok,
                             "available": ok > 0, "reasons": "; ".join(reasons) if reasons else None})
            want = pd.DataFrame(rows, columns=["model", "axis", "n_available", "n_unavailable", "available", "reasons"])
            got = st.axis_availability(f, axes=axes)
            assert list(got.columns) == list(want.columns)
            assert got[["model", "axis"]].values.tolist() == want[["model", "axis"]].values.tolist()
            assert got["n_available"].tolist() == want["n_available"].tolist()
            assert got["n_unavailable"].tolist() == want["n_unavailable"].tolist()
            assert got["available"].tolist() == want["available"].tolist()
            assert [None if pd.isna(r) else r for r in got["reasons"]] == [None if pd.isna(r) else r
                                                                           for r in want["reasons"]]
            if f is None and axes is None:
                assert "; " in " ".join(want["reasons"].dropna())  # two reasons on one axis


def test_filter_options_axis_names_and_counts(two_runs):
    for st, fr in _stores(two_runs):
        kept = fr["variants"][fr["variants"]["kept"]]
        with_deltas = fr["runs"][fr["runs"]["run_id"].isin(fr["deltas"]["run_id"])]
        assert st.filter_options() == {
            "models": sorted(set(with_deltas["model"])), "datasets": ["d'x", "dy"],
            "families": sorted(set(kept["family"])), "subtypes": sorted(set(kept["subtype"])),
            "strengths": sorted(set(kept["strength"])), "positions": sorted(set(kept["position"]))}
        assert 3.0 not in st.filter_options()["strengths"] and "m-c" not in st.filter_options()["models"]
        ok = fr["deltas"][fr["deltas"]["available"]]
        assert st.axis_names() == sorted(set(ok["axis"])) == ["bleu", "cos", "cos@user_last"]
        if st.stats_materialised:
            want = {t: len(expected_table(fr, g)) for t, g in
                    (("delta_stats", FINE), ("prompt_stats", PROMPT), ("cell_stats", CELL))}
            counts = st.stats_counts()
            assert list(counts) == list(STATS_TABLES)
            assert {k: counts[k] for k in want} == want
            assert counts["length_stats"] == st.con.execute("SELECT count(*) FROM length_stats").fetchall()[0][0] > 0
        else:
            assert st.stats_counts() == {}


# ------------------------------------------------------------------ ablations and no-ops
def test_ablation_frame(two_runs, one_run):
    keys = ["model", "axis", "family", "subtype", "strength", "position", "tone", "target_ratio"]
    cases = CASES + [(Filters(positions=("PREFIX",)), None), (Filters(models=("m-b",), datasets=("dy",)), ("bleu",))]
    for st, fr in _stores(two_runs, one_run):
        for f, axes in cases:
            d = _rows(fr, f, axes)
            x = d.assign(_sq=d["delta_norm"] ** 2, _abs=d["delta_norm"].abs())
            cells = x.groupby(keys, dropna=False, sort=True).agg(
                n=("delta_norm", "size"), sum_abs=("_abs", "sum"), sum_sq=("_sq", "sum"),
                sum=("delta_norm", "sum")).reset_index()
            got = st.ablation_frame(f, axes=axes)
            assert list(got) == ["cells", "length"]
            c = got["cells"]
            assert list(c.columns) == keys + ["n", "sum_abs", "sum_sq", "sum"]
            assert c.index.tolist() == list(range(len(c)))
            want_c = cells.sort_values(keys, na_position="first").reset_index(drop=True)
            assert_rows(c, want_c, keys, ["n", "sum_abs", "sum_sq", "sum"], ordered=True)
            # s_i pools a model's runs per prompt
            lk = ["model", "axis", "target_ratio"]
            want_l = expected_length(d, lk, lk + ["prompt_id"]) if len(d) else pd.DataFrame(columns=lk)
            ln = got["length"]
            assert list(ln.columns) == lk + ["n_prompts", "sum_s", "sum_s2"]
            assert ln.index.tolist() == list(range(len(ln)))
            if len(d):
                assert_rows(ln, want_l, lk, ["n_prompts", "sum_s", "sum_s2"], ordered=True)
            else:
                assert ln.empty
            if f is None and axes is None:
                assert (ln["n_prompts"] > 1).any() and ln["target_ratio"].tolist()[:2] == [0.75, 2.0]


def test_noop_counts(two_runs):
    keys = ["family", "subtype", "strength", "position"]
    cols = ["model", *keys, "reason", "n"]
    for st, fr in _stores(two_runs):
        for f, _ in CASES + [(Filters(datasets=("dy",), families=("social_register", "surface_noise")), None)]:
            d = _rows(fr, f, None, kept=False, available=False, axis=False)
            d = d[~d["available"] & d["reason"].str.startswith("no-op: ", na=False) & (d["axis"] == "bleu")]
            model_rows = d.groupby(["model", *keys, "reason"]).size().rename("n").reset_index()
            v = fr["variants"].merge(fr["prompts"][["prompt_id", "dataset"]], on="prompt_id")
            v = v[v["skip_reason"].str.startswith("no-op: ", na=False)]
            for name in ("datasets", "families", "subtypes", "strengths", "positions"):
                vals = None if f is None else getattr(f, name)
                if vals is not None:
                    v = v[v[name[:-1] if name != "families" else "family"].isin(list(vals))]
            text_rows = v.groupby(keys).size().rename("n").reset_index().assign(model=None)
            text_rows = text_rows.assign(reason=v["skip_reason"].iloc[0] if len(v) else None)
            got = st.noop_counts(f)
            assert list(got.columns) == cols and got.index.tolist() == list(range(len(got)))
            n_text = int(got["model"].isna().sum())
            assert n_text == len(text_rows) and got["model"].isna().tolist() == [True] * n_text + [False] * len(model_rows)
            assert_rows(got.iloc[:n_text], text_rows[cols], keys + ["reason"], ["n"], ordered=True)
            assert_rows(got.iloc[n_text:].reset_index(drop=True), model_rows[cols], ["model", *keys, "reason"], ["n"],
                        ordered=True)
            if f is None:
                assert got["n"].tolist() == [3, 1]  # 3 text no-ops in one cell; one model-input no-op of m-a


# ------------------------------------------------------------------ raw Δ
def test_delta_abs_quantiles(two_runs):
    st, fr = two_runs
    for f, axes in CASES:
        for q in (None, 0.5, 0.9):
            d = _rows(fr, f, axes)
            d = d[np.isfinite(d["delta"].astype(float))]
            got = st.delta_abs_quantiles(f, axes=axes) if q is None else st.delta_abs_quantiles(f, q=q, axes=axes)
            qq = 0.95 if q is None else q
            g = d.assign(a=d["delta"].abs()).groupby("axis", sort=True)["a"]
            assert list(got.columns) == ["axis", "n", "q", "q_abs", "max_abs", "models"]
            assert got["axis"].tolist() == sorted(g.groups)
            pooled = d.groupby("axis", sort=True)["model"].agg(lambda m: sorted(set(m)))
            assert [list(m) for m in got["models"]] == pooled.tolist()  # the models each R_X was pooled over
            assert got["n"].tolist() == g.size().tolist()
            assert (got["q"] == qq).all()
            np.testing.assert_allclose(got["q_abs"], g.quantile(qq, interpolation="linear").to_numpy(), rtol=1e-12)
            np.testing.assert_allclose(got["max_abs"], g.max().to_numpy(), rtol=1e-12)


def test_prompt_scores_rescaled(two_runs):
    st, fr = two_runs
    norms = (("bleu", 40.0), ("cos", 0.0), ("cos@user_last", 0.5), ("mr", -3.0))
    for f, _ in CASES:
        for clip in (None, True, False):
            axes = ("bleu", "cos", "cos@user_last", "mr")
            d = _rows(fr, f, axes)
            rr = d["axis"].map(lambda a: dict(norms)[a]).astype(float)
            d, rr = d[rr > 0], rr[rr > 0]
            z = d["delta"].astype(float) / rr
            z = z.clip(-1, 1) if clip in (None, True) else z
            want = _scores(d.assign(delta_norm=z), PROMPT_KEYS)
            kw = {} if clip is None else {"clip": clip}
            got = st.prompt_scores_rescaled(f, normalizers=norms, axes=axes, **kw)
            assert list(got.columns) == PROMPT_KEYS + ["s", "n_variants"]
            assert_rows(got, want, PROMPT_KEYS, ["s", "n_variants"])
            assert _sorted_by(got, ["model", "dataset", "prompt_id", "axis"])
            if f is None:
                assert (z.abs() > 1).any() or clip is not False
    for axes, want_axes in ((None, ["bleu", "cos"]), (("bleu",), ["bleu"])):  # a pair outside ``axes`` is not read
        got = st.prompt_scores_rescaled(None, normalizers=(("bleu", 40.0), ("cos", 0.3), ("cos@user_last", 20.0)),
                                        axes=axes)
        assert sorted(set(got["axis"])) == want_axes
    for none in ((), (("bleu", 0.0),)):
        empty = st.prompt_scores_rescaled(None, normalizers=none)
        assert empty.empty and list(empty.columns) == PROMPT_KEYS + ["s", "n_variants"]


def test_per_token_logprob_deltas(two_runs):
    st, fr = two_runs
    r = fr["responses"].merge(fr["runs"][["run_id", "model"]], on="run_id")
    base = r[r["variant_id"].isna()].set_index(["run_id", "prompt_id"])
    x = r[r["variant_id"].notna()].merge(joined(fr)[["variant_id", "family", "subtype", "strength", "position",
                                                     "kept", "dataset"]].drop_duplicates(), on="variant_id")
    for f in (None, F_ALL, Filters(datasets=("d'x",), positions=("GLOBAL",))):
        rows = []
        for v in x.itertuples():
            b = base.loc[(v.run_id, v.prompt_id)]
            if not (v.kept and pd.notna(v.seq_logprob) and v.n_tokens > 0 and pd.isna(v.error)
                    and pd.notna(b.seq_logprob) and b.n_tokens > 0 and pd.isna(b.error)):
                continue
            if f is not None and not all(getattr(f, n) is None or getattr(v, c) in getattr(f, n) for n, c in (
                    ("models", "model"), ("datasets", "dataset"), ("families", "family"), ("subtypes", "subtype"),
                    ("strengths", "strength"), ("positions", "position"))):
                continue
            rows.append((v.model, v.dataset, v.prompt_id, v.variant_id,
                         v.seq_logprob / v.n_tokens - b.seq_logprob / b.n_tokens, v.seq_logprob - b.seq_logprob))
        want = pd.DataFrame(rows, columns=["model", "dataset", "prompt_id", "variant_id", "delta_per_token",
                                           "delta_seq"]).sort_values(["model", "dataset", "prompt_id", "variant_id"])
        got = st.per_token_logprob_deltas(f)
        assert list(got.columns) == list(want.columns)
        assert_rows(got, want, ["model", "dataset", "prompt_id", "variant_id"], ["delta_per_token", "delta_seq"],
                    ordered=True)
        if f is None:
            assert len(got) == 12  # 6 kept variants with a usable log-prob × the 2 prompts whose base has one


def test_delta_matrix(two_runs):
    st, fr = two_runs
    cols = ["model", "run_id", "dataset", "prompt_id", "variant_id", "family", "subtype", "strength", "position",
            "axis", "delta", "delta_norm", "available", "reason"]
    for f, axes in CASES:
        want = _rows(fr, f, axes, available=False)
        got = st.delta_matrix(f, axes=axes)
        assert list(got.columns) == cols
        assert_rows(got, want, ["run_id", "variant_id", "axis", "model", "dataset", "prompt_id", "family", "subtype",
                                "strength", "position", "available", "reason"], ["delta", "delta_norm"])
        assert _sorted_by(got, ["model", "dataset", "prompt_id", "variant_id", "axis"])


# ------------------------------------------------------------------ a store without the statistics tables
def test_a_store_without_statistics_tables_or_skip_reasons(tmp_path):
    """The length ablation and the no-op counts of an old store come from ``deltas`` (no ``length_stats``,
    no ``variants.skip_reason``): the same numbers, no text no-ops."""
    st, fr = build(tmp_path / "old.duckdb", runs=ONE_RUN_PER_MODEL, chunks=None)
    with st:
        want_ab = st.ablation_frame()
        want_noop = st.noop_counts()
        want_options, want_axes = st.filter_options(), st.axis_names()
        for t in STATS_TABLES:
            st.con.execute(f"DROP TABLE {t}")
        st.con.execute("ALTER TABLE variants DROP COLUMN skip_reason")
        old = dataclasses.replace(st, stats_materialised=False)
        assert old.filter_options() == want_options and old.axis_names() == want_axes
        assert old.stats_counts() == {}
        got = old.ablation_frame()
        pd.testing.assert_frame_equal(got["cells"], want_ab["cells"], check_exact=False, rtol=1e-12)
        pd.testing.assert_frame_equal(got["length"], want_ab["length"], check_exact=False, rtol=1e-12)
        noop = old.noop_counts()
        pd.testing.assert_frame_equal(noop, want_noop[want_noop["model"].notna()].reset_index(drop=True))
        assert noop["model"].tolist() == ["m-a"]
