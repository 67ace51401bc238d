"""Each axis's Δ over (reply, base reply) pairs: the one signature ``AxisSpec.delta`` names.

``f(replies, bases, variants=None) -> (n,) float64``: ``replies[k]`` is compared with
``bases[k]`` (``GenerationResult``s; ``variants[k]`` is the variant behind ``replies[k]``, needed
only by axes with ``AxisSpec.needs_variant``). A pair whose inputs are missing (no hidden states,
no log-probs) gives NaN; the row builders store it as unavailable with the reason the axis's
``Need`` names. Values equal the per-axis functions of this package element by element
(SAGO, arXiv 2610.01428 §Axes).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

import numpy as np

from sago_engine.axes.activation import cosine_per_layer, delta_cos_from_layers
from sago_engine.axes.confidence import delta_ent, delta_prob
from sago_engine.axes.generation import bleu, delta_bert_pairs
from sago_engine.axes.mirroring import mirrors
from sago_engine.axes.noise import snap_noise
from sago_engine.axis_spec import AXIS_SPECS
from sago_engine.types import GenerationResult, Variant

__all__ = ["bert_pairs", "bleu_pairs", "cos_pairs", "delta_fn", "ent_pairs", "mr_pairs", "prob_pairs"]

Results = Sequence[GenerationResult]


def _nan(x: float | None) -> float:
    return float("nan") if x is None else float(x)


def _check(replies: Results, bases: Results) -> None:
    if len(replies) != len(bases):
        raise ValueError(f"{len(replies)} replies vs {len(bases)} base replies")


def cos_pairs(replies: Results, bases: Results, variants: Sequence[Variant] | None = None) -> np.ndarray:
    """Δ-Cos of each pair from ``hidden_last`` (``activation.delta_cos``), NaN where either has none."""
    _check(replies, bases)
    return np.array([float(delta_cos_from_layers(cosine_per_layer(r.hidden_last, b.hidden_last)))
                     if r.hidden_last is not None and b.hidden_last is not None else float("nan")
                     for r, b in zip(replies, bases)], dtype=np.float64)


def bleu_pairs(replies: Results, bases: Results, variants: Sequence[Variant] | None = None) -> np.ndarray:
    """Δ-BLEU of each pair's texts (``generation.delta_bleu``), in [−100, 0]."""
    _check(replies, bases)
    return snap_noise(np.array([bleu(r.text, b.text) - 100.0 for r, b in zip(replies, bases)], dtype=np.float64),
                      "bleu")


def bert_pairs(replies: Results, bases: Results, variants: Sequence[Variant] | None = None) -> np.ndarray:
    """Δ-BERT of every pair in one batched BERTScore call (``generation.delta_bert_pairs``), about [−1, 0]."""
    _check(replies, bases)
    if not replies:
        return np.zeros(0)
    return delta_bert_pairs([r.text for r in replies], [b.text for b in bases])


def prob_pairs(replies: Results, bases: Results, variants: Sequence[Variant] | None = None) -> np.ndarray:
    """Δ-Prob of each pair from ``seq_logprob`` (``confidence.delta_prob``, nats), NaN where either has none."""
    _check(replies, bases)
    return np.array([float(delta_prob([_nan(r.seq_logprob)], _nan(b.seq_logprob))[0]) for r, b in zip(replies, bases)],
                    dtype=np.float64)


def ent_pairs(replies: Results, bases: Results, variants: Sequence[Variant] | None = None) -> np.ndarray:
    """Δ-Ent of each pair from ``mean_entropy`` (``confidence.delta_ent``, nats), NaN where either has none."""
    _check(replies, bases)
    return np.array([float(delta_ent([_nan(r.mean_entropy)], _nan(b.mean_entropy))[0]) for r, b in zip(replies, bases)],
                    dtype=np.float64)


def mr_pairs(replies: Results, bases: Results, variants: Sequence[Variant] | None = None) -> np.ndarray:
    """Δ-MR of each pair (``mirroring.delta_mr``), in {−1, 0, 1}.

    Raises:
        ValueError: ``variants`` missing or of another length (Δ-MR needs each reply's variant).
    """
    _check(replies, bases)
    if variants is None or len(variants) != len(replies):
        raise ValueError("Δ-MR needs the variant of every reply")
    return np.array([mirrors(r.text, v, b.text) - mirrors(b.text, v, b.text)
                     for r, b, v in zip(replies, bases, variants)], dtype=np.float64)


def delta_fn(axis: str) -> Callable[..., np.ndarray]:
    """The Δ function of a plain axis, as its ``AxisSpec.delta`` names it.

    Raises:
        UnknownNameError (a KeyError and a ValueError): not a registered axis (an option axis is
            its base axis's measurement under another choice and has no function of its own here).
    """
    mod, _, attr = AXIS_SPECS[axis].delta.partition(":")
    return getattr(importlib.import_module(mod), attr)
