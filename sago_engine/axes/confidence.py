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


def base_reply_deltas(forced_variant: tuple[np.ndarray, np.ndarray],
                      forced_base: tuple[np.ndarray, np.ndarray]) -> tuple[float, float]:
    """Δ-Prob and Δ-Ent of the BASE reply y teacher-forced after x^v and after x (``prob@base_reply``,
    ``ent@base_reply``; the SAGO authors' code, ``utils/metrics.py`` ``compute_confidence``).

    Args:
        forced_variant: (log-probs, entropies) of y's T tokens after the variant prompt, each (T,)
            float (natural log, nats; ``HFLocalBackend.teacher_force``).
        forced_base: the same after the base prompt (y's own prompt).
    Returns:
        (Σ_t log p(y_t | x^v, y_<t) − Σ_t log p(y_t | x, y_<t),
         mean_t H(· | x^v, y_<t) − mean_t H(· | x, y_<t)), in nats; negative Δ-Prob = y less likely
        after the variant. |Δ| below the plain axis's noise floor is exactly 0. R_X = R_prob, R_ent.
    Raises:
        ValueError: the two passes scored different numbers of tokens, or none.
    """
    lv, ev = (np.asarray(a, dtype=np.float64) for a in forced_variant)
    lb, eb = (np.asarray(a, dtype=np.float64) for a in forced_base)
    if not (len(lv) == len(ev) == len(lb) == len(eb)) or len(lb) == 0:
        raise ValueError(f"teacher-forced spans differ or are empty: {len(lv)}, {len(ev)}, {len(lb)}, {len(eb)}")
    return (float(delta_prob([lv.sum()], float(lb.sum()))[0]), float(delta_ent([ev.mean()], float(eb.mean()))[0]))
