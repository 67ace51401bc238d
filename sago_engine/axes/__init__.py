"""The six behavioural axes of SAGO (arXiv 2610.01428) §Axes: raw signed Δ per variant.

Each function returns raw per-variant values; normalisation by R_X, per-prompt RMS and tests
live in ``sago_engine.scoring`` (like sacrebleu keeps statistics apart from aggregation).
Direction for every axis: a Δ further from 0 means less stable.
"""

from sago_engine.axes.activation import cosine_per_layer, delta_cos, delta_cos_from_layers
from sago_engine.axes.confidence import delta_ent, delta_prob
from sago_engine.axes.generation import bleu, delta_bert, delta_bert_pairs, delta_bleu
from sago_engine.axes.mirroring import delta_mr, mirrors, detector_kind

__all__ = [
    "bleu",
    "cosine_per_layer",
    "delta_bert",
    "delta_bert_pairs",
    "delta_bleu",
    "delta_cos",
    "delta_cos_from_layers",
    "delta_ent",
    "delta_mr",
    "delta_prob",
    "detector_kind",
    "mirrors",
]
