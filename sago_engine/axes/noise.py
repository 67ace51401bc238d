"""What difference counts as float noise, per axis: |Δ| below ``NOISE_TOL[axis]`` is stored as 0.

Each tolerance (``AxisSpec.noise_tol``, with its derivation beside it in ``sago_engine.axis_spec``)
sits above the float error of that axis's own computation (so a result that is 0 up to rounding
reads 0 on every x86 CPU) and far below the smallest real change the axis can show. Units are the
axis's raw Δ units (before dividing by R_X). Documented in docs/METHOD.md.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sago_engine.axis_spec import AXIS_SPECS

#: Axis → float-noise tolerance of its raw Δ (``AxisSpec.noise_tol``).
NOISE_TOL: dict[str, float] = {name: spec.noise_tol for name, spec in AXIS_SPECS.items()}


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


# Across computations: the same reply's statistics computed in another batch shape, on another CPU
# or kernel (a replay, a re-run of part of a config) differ by more than one computation's noise.
#: Agreement required of a float32 replay (absolute, nats). A token's log-prob replays within
#: ``LOGPROB_TOL_PER_TOKEN`` (another batch shape, CPU or kernel sums the same float32 products
#: in another order; ≈ 2e-5 per token observed). ``seq_logprob`` sums n of them, so its
#: tolerance is n times that (``logprob_tol``): a fixed 1e-3 failed on 48-token gemma-3-270m
#: replies of the bundled store (1.1e-3, on an AMD EPYC, under either kernel) while shorter
#: ones passed. ``mean_entropy`` is a mean: one absolute tolerance whatever n.
LOGPROB_TOL_PER_TOKEN = 1e-4
ENTROPY_TOL = 1e-4


def logprob_tol(n_tokens: int) -> float:
    """Tolerance (nats, absolute) of a replayed ``seq_logprob`` over ``n_tokens`` tokens (≥ 1 counted)."""
    return LOGPROB_TOL_PER_TOKEN * max(1, int(n_tokens))


#: The axes scored under teacher forcing (an ``AxisSpec.response_stat``: ``seq_logprob`` of
#: Δ-Prob, ``mean_entropy`` of Δ-Ent): the statistics a replay re-derives, whose tolerance grows
#: across computations.
REPLAYED_AXES: tuple[str, ...] = tuple(name for name, spec in AXIS_SPECS.items() if spec.response_stat)

#: Tolerance (absolute, the statistic's unit) of each replayed statistic over n reply tokens: a
#: sum grows with n (``logprob_tol``), a mean does not.
REPLAY_TOL: dict[str, Callable[[int], float]] = {"seq_logprob": logprob_tol, "mean_entropy": lambda n: ENTROPY_TOL}


def replay_tol(axis: str, n_tokens: int) -> float:
    """Tolerance of the replayed statistic of ``axis`` (one of ``REPLAYED_AXES``: Δ-Prob, Δ-Ent) over ``n_tokens`` tokens."""
    return REPLAY_TOL[AXIS_SPECS[axis].response_stat](n_tokens)
