"""Replies cut by the reply cap: the hit_cap flag as stored, the store's counts, the table and warning,
the Profiles page."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd

from sago_engine.measure.reply_flags import HIT_CAP, reply_flags
from sago_engine.scoring.cap_health import COLUMNS, cut_table, cut_warning, over_threshold
from sago_engine.store import open_store
from sago_engine.types import GenerationResult

ROOT = Path(__file__).resolve().parents[3]


def _r(finish: str, error: str | None = None) -> GenerationResult:
    return GenerationResult(text="x", n_tokens=1, finish_reason=finish, error=error)


def test_only_an_answered_reply_that_stopped_at_the_cap_is_flagged():
    assert reply_flags(_r("length")) == [HIT_CAP]
    assert reply_flags(_r("stop")) is None
    assert reply_flags(_r("length", error="boom")) is None


def _raw(store) -> dict[str, pd.DataFrame]:
    con = duckdb.connect(str(store), read_only=True)
    try:
        return {t: con.execute(f"SELECT * FROM {t}").df() for t in ("responses", "variants", "prompts", "runs")}
    finally:
        con.close()


def test_runs_store_the_flag_and_the_store_counts_cut_replies_and_pairs(tiny_store):
    raw = _raw(tiny_store)
    resp = raw["responses"]
    cut = resp["error"].isna() & (resp["finish_reason"] == "length")
    flagged = resp["flags"].map(lambda f: f is not None and HIT_CAP in list(f))
    assert (flagged == cut).all() and cut.any()  # 6 new tokens: the tiny model's replies reach the cap
    ds = resp.merge(raw["prompts"][["prompt_id", "dataset"]], on="prompt_id").assign(cut=cut.to_numpy())
    want = ds.groupby(["run_id", "dataset"]).agg(replies=("cut", "size"), cut=("cut", "sum")).reset_index()
    base = ds[ds["variant_id"].isna()][["run_id", "prompt_id", "cut"]]
    kept = set(raw["variants"].loc[raw["variants"]["kept"], "variant_id"])
    var = ds[ds["variant_id"].isin(kept)].merge(base, on=["run_id", "prompt_id"], suffixes=("", "_base"))
    var["both"] = var["cut"] & var["cut_base"]
    pairs = var.groupby(["run_id", "dataset"]).agg(pairs=("both", "size"), both_cut=("both", "sum")).reset_index()
    with open_store(tiny_store) as st:
        got_cut, got_pairs = st.cut_replies(), st.cut_pairs()
    cols = ["run_id", "dataset", "replies", "cut"]
    pd.testing.assert_frame_equal(got_cut[cols].sort_values(cols[:2]).reset_index(drop=True),
                                  want[cols].sort_values(cols[:2]).reset_index(drop=True), check_dtype=False)
    cols = ["run_id", "dataset", "pairs", "both_cut"]
    pd.testing.assert_frame_equal(got_pairs[cols].sort_values(cols[:2]).reset_index(drop=True),
                                  pairs[cols].sort_values(cols[:2]).reset_index(drop=True), check_dtype=False)


def test_cut_table_sums_runs_of_a_model_and_warns_above_the_share():
    cut = pd.DataFrame({"run_id": ["r1", "r2", "r1"], "model": ["m", "m", "m"], "dataset": ["a", "a", "b"],
                        "replies": [10, 10, 10], "cut": [1, 3, 2]})
    pairs = pd.DataFrame({"run_id": ["r1"], "model": ["m"], "dataset": ["a"], "pairs": [8], "both_cut": [2]})
    t = cut_table(cut, pairs)
    assert list(t.columns) == COLUMNS
    a = t.set_index("dataset").loc["a"]
    assert (a["replies"], a["cut"], a["cut_pct"], a["pairs"], a["both_cut"], a["both_cut_pct"]) == (20, 4, 20.0, 8, 2, 25.0)
    assert t.set_index("dataset").loc["b", "pairs"] == 0  # no pair row: 0, not NaN
    assert over_threshold(t).empty and cut_warning(t) is None  # 20 % is not above 20 %
    w = cut_warning(cut_table(cut.assign(cut=[5, 5, 0]), pairs))
    assert w.startswith("More than 20% of the replies stopped at the reply cap for m on a (50%).")
    assert cut_table(pd.DataFrame(columns=cut.columns), pairs).empty


def test_profiles_page_shows_cut_replies_and_the_warning(tiny_store):
    from tests.support.apptest import open_page
    from tests.support.rendered import all_tables

    at = open_page(tiny_store)
    assert not at.exception, at.exception
    tables = all_tables(at)
    cut = next(t for t in tables if "both_cut" in t.columns)
    assert set(cut["dataset"]) == {"alpaca", "truthfulqa"} and (cut["cut"] > 0).all()
    assert any("stopped at the reply cap for tiny-random on" in w.value for w in at.warning)
