"""Δ-Prob and Δ-Ent: confidence drift under teacher forcing on the model's own response (SAGO §Axes)."""

from __future__ import annotations

import numpy as np

from sago_engine.axes.noise import snap_noise


def delta_prob(seq_logprob_variants, seq_logprob_base: float) -> np.ndarray:
    """ΔProb = log p(y^(v) | x^(v)) − log p(y | x), sequence log-probs in nats (not length-normalized).

    Args:
        seq_logprob_variants: (n,) summed token log-probs of each variant's own response
            (teacher forcing; ``GenerationResult.seq_logprob``).
        seq_logprob_base: the base prompt's own-response log-prob.
    Returns:
        (n,) float64, unbounded and signed (longer responses have lower log-prob on purpose);
        R_X = 250 (empirical, SAGO) with clipping maps it to [−1, 1]. |Δ| below
        ``NOISE_TOL["prob"]`` (1e-4 nats, float noise) is returned as exactly 0.
    """
    return snap_noise(np.asarray(seq_logprob_variants, dtype=np.float64) - float(seq_logprob_base), "prob")


def delta_ent(mean_entropy_variants, mean_entropy_base: float) -> np.ndarray:
    """ΔEnt = H̄(y^(v) | x^(v)) − H̄(y | x), mean per-token predictive entropy in nats.

    Args:
        mean_entropy_variants: (n,) mean entropy over each variant's response tokens.
        mean_entropy_base: the base response's mean entropy.
    Returns:
        (n,) float64 signed; R_X = 10 (empirical, SAGO) with clipping maps it to [−1, 1].
        |Δ| below ``NOISE_TOL["ent"]`` (1e-5 nats, float noise) is returned as exactly 0.
    """
    return snap_noise(np.asarray(mean_entropy_variants, dtype=np.float64) - float(mean_entropy_base), "ent")
