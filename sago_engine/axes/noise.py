"""What difference counts as float noise, per axis: |Δ| below ``NOISE_TOL[axis]`` is stored as 0.

Each tolerance (``AxisSpec.noise_tol``, with its derivation beside it in ``sago_engine.axis_spec``)
sits above the float error of that axis's own computation (so a result that is 0 up to rounding
reads 0 on every x86 CPU) and far below the smallest real change the axis can show. Units are the
axis's raw Δ units (before dividing by R_X). Documented in docs/METHOD.md.
"""

from __future__ import annotations

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
