"""SGS of the bundled demo store, recomputed from its raw deltas by the paper's formula written out
here in numpy, equals what sago's one aggregation (``scoring.scores.sgs_of`` via the store's
sufficient statistics) gives — for every model × axis and every model × dataset × axis.

SAGO (arXiv 2610.01428) §Notation: Δ̃ = clip(Δ / R_X, −1, 1); s_X(i) = sqrt(mean_v Δ̃²) over prompt
i's kept variants with an available Δ; SGS_X = mean_i s_X(i)."""

import json

import numpy as np
import pytest

from sago_engine.scoring import scores
from sago_engine.store import open_store
from sago_engine.store.catalog import DEMO_STORE

#: Two sums of the same ≤ 13 squares in another order differ by a few ulps; 1e-12 is far above that
#: and far below the 3 digits a page shows.
TOL = 1e-12


def _old_formula(deltas, normalizers, by):
    """{key: SGS} from raw Δ: normalise, RMS per prompt, mean over prompts (numpy only)."""
    d = deltas[deltas["available"].astype(bool) & np.isfinite(deltas["delta"].to_numpy(float))]
    r = np.array([normalizers[run][axis] for run, axis in zip(d["run_id"], d["axis"])])
    x = np.clip(d["delta"].to_numpy(float) / r, -1.0, 1.0)
    per_prompt = {}
    for key, sq in zip(zip(*(d[c] for c in (*by, "prompt_id"))), x * x):
        per_prompt.setdefault(key, []).append(sq)
    groups = {}
    for key, sqs in per_prompt.items():
        groups.setdefault(key[:-1], []).append(np.sqrt(np.sum(sqs) / len(sqs)))
    return {k: float(np.sum(v) / len(v)) for k, v in groups.items()}


@pytest.mark.parametrize("by", [("model", "axis"), ("model", "dataset", "axis")])
def test_demo_sgs_is_the_papers_formula_on_raw_deltas(by):
    with open_store(DEMO_STORE) as st:
        deltas = st.deltas(kept_only=True)
        runs = st.runs()
        ps = st.prompt_scores()
    normalizers = {r: json.loads(n) for r, n in zip(runs["run_id"], runs["normalizers"])}
    want = _old_formula(deltas, normalizers, by)
    table = scores.sgs_by(ps, by)
    sig = scores.significance(ps, by=by)
    assert len(table) == len(want) == len(sig) and len(want) == len(runs) * 6 * (1 if len(by) == 2 else 6)  # 6 axes (× 6 datasets)
    got = {tuple(k): v for k, v in zip(table[list(by)].itertuples(index=False), table["sgs"])}
    assert set(got) == set(want)
    worst = max(abs(got[k] - want[k]) for k in want)
    assert worst <= TOL, worst
    assert sig["sgs"].tolist() == table["sgs"].tolist()  # the t-test table shows the same numbers, bit for bit
