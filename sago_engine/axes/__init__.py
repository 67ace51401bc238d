"""The six behavioural axes of SAGO (arXiv 2610.01428) §Axes: raw signed Δ per variant.

Each function returns raw per-variant values; normalisation by R_X, per-prompt RMS and tests
live in ``sago_engine.scoring.scores`` (like sacrebleu keeps statistics apart from aggregation).
Direction for every axis: a Δ further from 0 means less stable. |Δ| below ``NOISE_TOL[axis]``
(float noise of that axis's computation, ``sago_engine.axes.noise``) is returned as exactly 0.
"""

from sago_engine.axes.activation import (
    COS_OPTION_SPECS,
    cosine_per_layer,
    delta_cos,
    delta_cos_from_layers,
    delta_cos_layers,
    delta_cos_option,
)
from sago_engine.axes.confidence import delta_ent, delta_prob
from sago_engine.axes.generation import (
    bert_windows_note,
    bleu,
    bleu_signature,
    bleu_tokenizer,
    delta_bert,
    delta_bert_pairs,
    delta_bert_rescaled,
    delta_bleu,
    delta_bleu_signatures,
)
from sago_engine.axes.mirroring import delta_mr, detector_kind, mirrors
from sago_engine.axes.noise import NOISE_TOL, snap_noise
from sago_engine.axes.pairs import delta_fn

__all__ = [
    "COS_OPTION_SPECS",
    "delta_bert_rescaled",
    "delta_cos_layers",
    "delta_cos_option",
    "NOISE_TOL",
    "bert_windows_note",
    "bleu",
    "bleu_signature",
    "bleu_tokenizer",
    "cosine_per_layer",
    "delta_bert",
    "delta_bert_pairs",
    "delta_bleu",
    "delta_bleu_signatures",
    "delta_cos",
    "delta_cos_from_layers",
    "delta_fn",
    "delta_ent",
    "delta_mr",
    "delta_prob",
    "detector_kind",
    "mirrors",
    "snap_noise",
]
