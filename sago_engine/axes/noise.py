"""What difference counts as float noise, per axis: |Δ| below ``NOISE_TOL[axis]`` is stored as 0.

Each tolerance sits above the float error of that axis's own computation (so a result that is
0 up to rounding reads 0 on every x86 CPU) and far below the smallest real change the axis can
show. Units are the axis's raw Δ units (before dividing by R_X). Documented in docs/METHOD.md.
"""

from __future__ import annotations

import numpy as np

NOISE_TOL: dict[str, float] = {
    # float64 cosines of fp32 hidden states: identical states give |Δ| ~1e-16; fp32 rounding of
    # the states (2^-24 relative) moves a cosine by ≲1e-7. Range [−2, 0].
    "cos": 1e-6,
    # sacrebleu, float64 over integer n-gram counts: identical token sequences give 100 up to
    # ~1e-13 (exp of a mean of logs; measured 100.00000000000004). BLEU points, range [−100, 0].
    "bleu": 1e-9,
    # fp32 BERTScore-F1 of 384-dim unit vectors: a text against itself measured |1 − F1| ≤ 1.2e-7
    # (one fp32 ulp at 1); one changed word piece in 500 moves F1 by ≥ ~1e-4. Range about [−1, 0].
    "bert": 1e-6,
    # summed fp32 token log-probs: 2^-24 relative of |log p| ≤ ~250 nats ≈ 1.5e-5 nats.
    "prob": 1e-4,
    # mean fp32 per-token entropy ≤ ln(vocab) ≈ 12 nats: 2^-24 relative ≈ 7e-7 nats.
    "ent": 1e-5,
    # integers in {−1, 0, 1}: exact.
    "mr": 0.0,
}


def snap_noise(values, axis: str) -> np.ndarray:
    """Values with |Δ| < ``NOISE_TOL[axis]`` set to exactly 0.0 (NaN and everything else kept).

    Args:
        values: raw Δ of one axis, any shape (array-like of floats).
        axis: one of ``NOISE_TOL``'s keys. Raises KeyError for an unknown axis.
    Returns:
        float64 array of the same shape.
    """
    tol = NOISE_TOL[axis]
    v = np.asarray(values, dtype=np.float64)
    return np.where(np.abs(v) < tol, 0.0, v)
