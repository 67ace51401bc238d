"""CSV tables (sago_engine.views.tables): the numbers behind the pages' compact cells, one column each."""

from __future__ import annotations

import numpy as np
import pytest

from sago_engine.views import report, tables
from tests.support.factories import make_store


@pytest.fixture(scope="module")
def scores(tmp_path_factory):
    from sago_engine.store import open_store

    p = make_store(tmp_path_factory.mktemp("tables") / "t.duckdb", models=("model-a", "model-b"),
                   datasets=("truthfulqa", "nq_open"), n_prompts=5, n_variants=4, seed=2)
    with open_store(p) as st:
        return st.prompt_scores()


def test_sgs_numbers_hold_the_numbers_of_the_cells(scores):
    sig = report.sgs_ci_table(scores, 0.05, correction="holm", n_resamples=200)
    num = tables.sgs_numbers(sig)
    assert list(num.columns[:3]) == ["model", "axis", "axis_label"]
    assert {"sgs", "std", "ci_low", "ci_high", "p", "p_adj", "marker"} <= set(num.columns)
    assert not {"cell", "ci_cell", "lo", "hi"} & set(num.columns)
    for c in ("sgs", "std", "ci_low", "ci_high", "p", "p_adj"):
        assert num[c].dtype == np.float64, c
    m = sig.merge(num, on=["model", "axis"], suffixes=("", "_n"))
    for r in m.itertuples():  # the compact cell is made of these numbers
        assert r.cell == f"{r.sgs_n:.3f}±{r.std_n:.3f}{r.marker_n}"
        assert r.ci_cell == f"{r.sgs_n:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}]{r.marker_n}"
    assert list(num["axis"].iloc[:6]) == ["cos", "bleu", "bert", "prob", "ent", "mr"]


def test_threshold_counts_are_the_cells_of_the_threshold_table(scores):
    eps = (0.01, 0.05)
    wide = report.threshold_table(scores, epsilons=eps, correction="bh").set_index("axis_label")
    long = tables.threshold_counts(scores, epsilons=eps, correction="bh")
    assert len(long) == 6 * 2 * len(report.ALPHAS) and long["n_rejected"].dtype.kind == "i"
    for (lab, e), g in long.groupby(["axis_label", "eps"], sort=False):
        assert wide.loc[lab, f"ε={e:g}"] == "/".join(str(n) for n in g["n_rejected"])
