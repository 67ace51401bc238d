"""Δ-BLEU and Δ-BERT: generation consistency against the base response (SAGO §Axes)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from sago_engine.bertscore import bertscore_f1


def bleu(hypothesis: str, reference: str) -> float:
    """sacrebleu sentence BLEU (0–100, default tokenizer 13a, exp smoothing, effective order).

    Conventions: identical strings score 100 (including two empty strings — identical
    behaviour); an empty hypothesis or reference against a non-empty one scores 0.
    Source: sacrebleu ``sentence_bleu``.
    """
    if hypothesis == reference:
        return 100.0
    if not hypothesis.strip() or not reference.strip():
        return 0.0
    import sacrebleu

    return float(sacrebleu.sentence_bleu(hypothesis, [reference]).score)


def delta_bleu(responses: Sequence[str], base_response: str) -> np.ndarray:
    """ΔBLEU = BLEU(y^(v), ref=y) − BLEU(y, y) = BLEU − 100, shape (n,), range [−100, 0]; R_X = 100."""
    return np.array([bleu(r, base_response) - 100.0 for r in responses], dtype=np.float64)


def delta_bert_pairs(responses: Sequence[str], base_responses: Sequence[str]) -> np.ndarray:
    """ΔBERT for many (variant reply, base reply) pairs in ONE batched BERTScore call, shape (n,).

    Same conventions as ``delta_bert``; lets a caller score all prompts of a chunk together.
    """
    f1 = bertscore_f1(list(responses), list(base_responses))
    return np.minimum(f1 - 1.0, 0.0)


def delta_bert(responses: Sequence[str], base_response: str) -> np.ndarray:
    """ΔBERT = BERTScore-F1(y^(v), y) − 1, shape (n,), range about [−1, 0]; R_X = 1.

    Encoder: the offline MiniLM of ``sago_engine.bertscore`` (the paper used RoBERTa-large);
    identical responses give exactly 0, empty vs non-empty gives −1.
    """
    return delta_bert_pairs(responses, [base_response] * len(responses))
