"""Conclusions that name their assumptions: rankings and verdicts recomputed under each open method choice
(sago_engine.views.assumptions), and the note beside the claim on Profiles, Pareto, Rankings and Significance (AppTest)
on a store whose option axes flip a ranking and on one where nothing flips."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from sago_engine.store import open_store
from sago_engine.views import assumptions as asm
from sago_engine.views import method_choices as mc
from tests.support.factories import add_option_axes, make_store

ROOT = Path(__file__).resolve().parents[3]
MODELS = ("m-a", "m-b", "m-c")
#: Well-separated models (Δ̃ ×0.6, ×1.2, ×2.4): no ranking is close, R_X rescaling keeps every order.
SCALE = {"m-a": 0.6, "m-b": 1.2, "m-c": 2.4}
NOTE = "Depends on an open method choice"


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("assume")
    flip = make_store(d / "flip.duckdb", models=MODELS, model_scale=SCALE)
    # under user_last m-a's Δ-Cos grows ×4 and m-c's shrinks ×0.3: the Δ-Cos order reverses; under user_mean
    # every Δ-Cos is ×0.05 (noise around 0.02): no model is above ε = 0.05 any more
    add_option_axes(flip, options={"cos": ("user_last", "user_mean")},
                    factors={"cos@user_last": {"m-a": 4.0, "m-b": 1.5, "m-c": 0.3}, "cos@user_mean": 0.05})
    same = make_store(d / "same.duckdb", models=MODELS, model_scale=SCALE)
    add_option_axes(same, options={"cos": ("user_last",)}, factors={"cos@user_last": 1.0})
    return flip, same


def _table(store, **kw):
    with open_store(store) as st:
        chs = mc.collect_choices(st)
    return asm.sensitivity(asm.choice_frame(chs), **kw)


def _order(store, axis):
    """Models by pooled SGS (mean over prompts of the RMS of Δ̃ over variants), computed here with numpy."""
    with open_store(store) as st:
        d = st.deltas(kept_only=False, axes=(axis,))
    d = d[d["available"].astype(bool)]
    s = d.groupby(["model", "prompt_id"])["delta_norm"].apply(lambda v: float(np.sqrt(np.mean(np.square(v)))))
    return list(s.groupby("model").mean().sort_values().index)


def test_a_flipping_option_is_found_with_the_pairs_that_swap(stores):
    flip, same = stores
    default, option = _order(flip, "cos"), _order(flip, "cos@user_last")
    assert default == ["m-a", "m-b", "m-c"] and option == ["m-c", "m-b", "m-a"]  # the factory's design
    t = _table(flip)
    rank = t[(t["choice"] == "axis:cos") & (t["kind"] == asm.RANKING) & (t["option"] == "user_last")]
    assert len(rank) == 1 and rank.iloc[0]["axis"] == "cos"
    assert set(rank.iloc[0]["changed"].split(", ")) == {"m-a > m-b", "m-a > m-c", "m-b > m-c"}
    verdict = t[(t["kind"] == asm.VERDICT)]
    assert list(verdict["option"]) == ["user_mean"] and verdict.iloc[0]["changed"] == "m-a, m-b, m-c"
    assert "m-a, m-b, m-c are then not above ε" in verdict.iloc[0]["detail"]
    lines = asm.statements(t[t["option"] == "user_last"], kinds=(asm.RANKING,), axes=("cos",))
    assert lines == ["Δ-Cos ranking depends on Δ-Cos: token position and layers — under user_last (instead of "
                     "default): m-c is the most stable instead of m-a; 3 pairs of models swap order."]
    assert asm.statements(t, kinds=(asm.RANKING,), axes=("bleu",)) == []  # Δ-Cos options leave Δ-BLEU alone
    # nothing flips on the other store, pooled, under any option it holds (Δ-Cos option, R_X, Δ-Prob per token)
    assert _table(same).empty and _order(same, "cos") == _order(same, "cos@user_last")


def test_a_verdict_that_flips_names_the_model_and_direction():
    import pandas as pd

    rng = np.random.default_rng(0)
    rows = []
    for o, level in (("default", 0.01), ("wide", 0.4)):  # m-x below ε by default, far above under "wide"
        for i in range(12):
            rows.append({"choice": "axis:cos", "title": "Δ-Cos: token position and layers", "reference": "default",
                         "changes": "cos", "option": o, "model": "m-x", "dataset": "d", "prompt_id": f"p{i}",
                         "axis": "cos", "s": level + abs(rng.normal(0, 0.005))})
    t = asm.sensitivity(pd.DataFrame(rows), eps=0.05)
    assert list(t["kind"]) == [asm.VERDICT] and t.iloc[0]["changed"] == "m-x"
    assert asm.statements(t, eps=0.05) == ["Δ-Cos verdict at ε = 0.05 depends on Δ-Cos: token position and layers "
                                           "— under wide (instead of default): m-x is then above ε."]
    assert asm.sensitivity(pd.DataFrame(rows), eps=0.5).empty  # at ε = 0.5 neither option is above ε


# ---------------------------------------------------------------- the pages (AppTest)
PAGES = [("pages/profiles.py", {}), ("pages/pareto.py", {"pareto_x": "cos", "pareto_y": "bleu"}),
         ("pages/rankings.py", {"rankings_axis": "cos"}), ("pages/significance.py", {})]


def _notes(store, page, state):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["app_store_custom"] = str(store)
    for k, v in state.items():
        at.session_state[k] = v
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception, at.exception
    # the note's Markdown with safe.md's backslash escapes removed: the text a visitor reads
    return [m.value.replace("\\", "") for m in at.markdown if NOTE in m.value or "depends on" in m.value]


@pytest.mark.parametrize("page,state", PAGES)
def test_pages_name_the_choice_beside_the_claim_and_stay_quiet_when_nothing_flips(stores, page, state):
    flip, same = stores
    notes = _notes(flip, page, state)
    assert any(NOTE in n for n in notes), notes
    if page.endswith("significance.py"):  # verdicts only: user_mean takes every model below ε
        assert any("Δ-Cos verdict at ε = 0.05 depends on" in n and "user_mean (instead of default)" in n for n in notes), notes
        assert not any("ranking depends" in n for n in notes), notes
    else:
        assert any("Δ-Cos ranking depends on Δ-Cos: token position and layers" in n and "user_last" in n
                   for n in notes), notes
    assert _notes(same, page, state) == []
