"""The one-sided paired sign-flip test on the mean (the rephrasing-vs-dice test per model uses it)."""

import numpy as np
import pytest
from scipy import stats as sps

from sago_engine.scoring.signflip import mean_flip_test


def test_one_sided_mean_flip_test_equals_scipys_exact_permutation_test():
    rng = np.random.default_rng(3)
    for n in (3, 8, 11):
        d = np.round(rng.normal(0.05, 0.1, n), 3)
        d[0] = 0.0  # a zero carries no sign
        x = d[d != 0]
        want = sps.permutation_test((x,), np.sum, permutation_type="samples", alternative="greater",
                                    n_resamples=2 ** len(x)).pvalue
        got = mean_flip_test(d, alternative="greater")
        assert got.method == f"exact (all 2^{len(x)} sign flips)" and abs(got.p - want) < 1e-12, (n, got.p, want)
    assert mean_flip_test([0.1, 0.2, 0.3], alternative="greater").p == 1 / 8
    with pytest.raises(ValueError, match="alternative"):
        mean_flip_test([0.1, 0.2], alternative="less")
