"""Δ-BLEU and Δ-BERT: generation consistency against the base response (SAGO §Axes)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import regex

from sago_engine.axes.noise import snap_noise
from sago_engine.models.bertscore import WINDOW, bertscore_f1, n_windows

#: scripts written without spaces between words, scored with sacrebleu's character tokenizer
#: when they carry most letters of a pair (Japanese kana with Han, Hangul, Thai, Lao, Khmer,
#: Myanmar, Tibetan). Korean and Japanese have sacrebleu tokenizers (ko-mecab, ja-mecab) that
#: need extra dictionary packages; sago uses 'char' for them so every machine scores alike.
_CHAR_SCRIPTS = (
    ("japanese", r"[\p{Han}\p{Hiragana}\p{Katakana}]"),
    ("korean", r"\p{Hangul}"),
    ("thai-like", r"[\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}\p{Tibetan}]"),
)


def bleu_tokenizer(hypothesis: str, reference: str) -> str:
    """sacrebleu tokenizer for a (hypothesis, reference) pair, chosen from the script of its letters.

    Letters (Unicode category L) of both texts together are counted per script:

    1. Japanese (at least one Hiragana/Katakana letter, and Han + kana are at least half of the
       letters), Korean (Hangul at least half) or Thai/Lao/Khmer/Myanmar/Tibetan (at least half)
       → ``"char"`` (these scripts do not separate words by spaces; 13a would read a whole
       clause as one token).
    2. otherwise any Han character → ``"zh"`` (sacrebleu's Chinese tokenizer splits Han
       characters and tokenizes everything else exactly like 13a, so mixed text is safe).
    3. otherwise → ``"13a"`` (sacrebleu's default; Latin, Cyrillic, Greek, Arabic, … scripts).

    Returns one of "char", "zh", "13a". Deterministic; needs only the ``regex`` package that
    sacrebleu depends on.
    """
    text = hypothesis + "\n" + reference
    letters = len(regex.findall(r"\p{L}", text))
    if letters == 0:
        return "13a"
    kana = len(regex.findall(r"[\p{Hiragana}\p{Katakana}]", text))
    for name, pattern in _CHAR_SCRIPTS:
        if name == "japanese" and kana == 0:
            continue
        if 2 * len(regex.findall(pattern, text)) >= letters:
            return "char"
    if regex.search(r"\p{Han}", text):
        return "zh"
    return "13a"


@lru_cache(maxsize=8)
def _bleu_metric(tokenize: str):
    from sacrebleu.metrics import (
        BLEU,  # imported here: sacrebleu loads ~185 modules; pages import the axes without scoring BLEU
    )

    return BLEU(tokenize=tokenize, smooth_method="exp", effective_order=True)


@lru_cache(maxsize=8)
def bleu_signature(tokenize: str) -> str:
    """sacrebleu's signature of sentence BLEU with ``tokenize``, e.g.
    ``"nrefs:1|case:mixed|eff:yes|tok:zh|smooth:exp|version:2.6.0"`` (stored per Δ-BLEU row)."""
    from sacrebleu.metrics import BLEU  # imported here: start-up time (see _bleu_metric)

    m = BLEU(tokenize=tokenize, smooth_method="exp", effective_order=True)
    m.sentence_score("a", ["a"])  # the signature needs the reference count, known after scoring
    return m.get_signature().format()


def bleu(hypothesis: str, reference: str, tokenize: str | None = None) -> float:
    """sacrebleu sentence BLEU (0–100, exp smoothing, effective order), tokenizer by script.

    Args:
        hypothesis, reference: the two texts. Leading/trailing whitespace and runs of spaces do
            not count (every tokenizer splits on whitespace).
        tokenize: a sacrebleu tokenizer name; None (default) = ``bleu_tokenizer(hyp, ref)``
            ("13a" for Latin-like scripts, "zh" when Han characters occur, "char" for mostly
            Japanese/Korean/Thai-like text). BLEU("我喜欢狗", ref "我喜欢猫") = 59.46 with "zh".
    Conventions: identical strings score 100 (including two empty strings — identical
    behaviour); an empty or whitespace-only hypothesis or reference (tabs, newlines) against any
    other string scores 0, as sacrebleu scores it (no n-gram matches; no NaN, no exception).
    Source: sacrebleu ``BLEU.sentence_score`` (same settings as ``sentence_bleu``).
    """
    if hypothesis == reference:
        return 100.0
    if not hypothesis.strip() or not reference.strip():
        return 0.0
    tok = tokenize or bleu_tokenizer(hypothesis, reference)
    return float(_bleu_metric(tok).sentence_score(hypothesis, [reference]).score)


def delta_bleu(responses: Sequence[str], base_response: str) -> np.ndarray:
    """ΔBLEU = BLEU(y^(v), ref=y) − BLEU(y, y) = BLEU − 100, shape (n,), range [−100, 0]; R_X = 100.

    Tokenizer per pair from ``bleu_tokenizer``; |Δ| below ``NOISE_TOL["bleu"]`` is exactly 0.
    """
    return snap_noise(np.array([bleu(r, base_response) - 100.0 for r in responses], dtype=np.float64), "bleu")


def delta_bleu_signatures(responses: Sequence[str], base_response: str) -> list[str]:
    """sacrebleu signature of each pair's Δ-BLEU (tokenizer chosen by ``bleu_tokenizer``), length n."""
    return [bleu_signature(bleu_tokenizer(r, base_response)) for r in responses]


def delta_bert_pairs(responses: Sequence[str], base_responses: Sequence[str]) -> np.ndarray:
    """ΔBERT for many (variant reply, base reply) pairs in ONE batched BERTScore call, shape (n,).

    Same conventions as ``delta_bert``; lets a caller score all prompts of a chunk together.
    Each pair's value equals the pair scored alone (no padding enters; ``bertscore_f1``).
    """
    f1 = bertscore_f1(list(responses), list(base_responses))
    return snap_noise(np.minimum(f1 - 1.0, 0.0), "bert")


def bert_windows_note(response: str, base_response: str) -> str | None:
    """None when both texts fit the encoder (≤ 510 word pieces), else a note stored with the
    Δ-BERT row, e.g. ``"windows of 510 word pieces: reply 2, base 1"``."""
    nr, nb = n_windows(response), n_windows(base_response)
    if nr == 1 and nb == 1:
        return None
    return f"windows of {WINDOW} word pieces: reply {nr}, base {nb}"


def delta_bert(responses: Sequence[str], base_response: str) -> np.ndarray:
    """ΔBERT = BERTScore-F1(y^(v), y) − 1, shape (n,), range about [−1, 0]; R_X = 1.

    Encoder: the offline MiniLM of ``sago_engine.models.bertscore`` (the paper used RoBERTa-large).
    MiniLM is uncased: a reply that differs from the base only in letter case (or spacing)
    gives exactly 0 — this axis does not see case (the paper's RoBERTa-large does; Δ-BLEU and
    Δ-MR do). Replies longer than 510 word pieces are scored in windows, not truncated.
    Identical responses give exactly 0, empty vs non-empty gives −1; |Δ| below
    ``NOISE_TOL["bert"]`` (1e-6) is exactly 0.
    """
    return delta_bert_pairs(responses, [base_response] * len(responses))


def delta_bert_rescaled(delta_bert_raw: np.ndarray, baseline: float) -> np.ndarray:
    """ΔBERT on bert-score's baseline-rescaled scale of the same encoder (the ``bert@rescaled`` option).

    Rescaled F1 = (F1 − b)/(1 − b) with b the encoder's unrelated-text baseline, so
    ΔBERT_rescaled = rescaled(F1) − rescaled(1) = (F1 − 1)/(1 − b) = ΔBERT/(1 − b): the same
    F1s, stretched so that an unrelated reply sits at −1. Stored with R_X = R_bert (1), so
    Δ̃ = clip(ΔBERT_rescaled, −1, 1): a reply no closer to its base reply than unrelated text is
    −1 (clipped), 0 stays exactly 0.

    Args:
        delta_bert_raw: (n,) plain ΔBERT (F1 − 1 ≤ 0) from ``delta_bert_pairs``.
        baseline: b in [0, 1) — for MiniLM the semantic filter's ``encoder_baseline()``
            (mean F1 over seeded unrelated prompt pairs, 0.1206).
    Returns:
        (n,) float64 ≤ 0, about [−1/(1 − b), 0] (below −1 for replies under the baseline).
    Raises:
        ValueError: baseline outside [0, 1).
    Source: bert-score baseline rescaling (Zhang et al. 2020, "rescale_with_baseline").
    """
    if not 0.0 <= float(baseline) < 1.0:
        raise ValueError(f"baseline must be in [0, 1), got {baseline}")
    return np.asarray(delta_bert_raw, dtype=np.float64) / (1.0 - float(baseline))
