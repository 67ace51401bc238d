"""Calibrating the semantic filter on labelled pairs: which threshold rejects meaning changes and keeps
rephrasings, and with what precision and recall.

The pairs (data/filter_calibration/pairs.jsonl, written and labelled by hand with a reason each):
a base prompt of the bundled datasets and a text that either asks the same (``paraphrase``: the
kinds of edit sago's variant families make — greetings, politeness, hedging, a question turned
into an instruction, stop words dropped) or asks something else (``different``: an entity,
event or question word swapped, an antonym, another task). The filter's job is to reject the
second kind. Precision and recall are those of "reject" (positive = ``different``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PAIRS_FILE = Path(__file__).resolve().parents[2] / "data" / "filter_calibration" / "pairs.jsonl"
LABELS = ("paraphrase", "different")


def load_pairs(path: Path = PAIRS_FILE) -> list[dict]:
    """The labelled pairs: dicts with id, a (base prompt), b (other text), label (``LABELS``), kind, reason.

    Raises ValueError naming the file and line of a row without a, b or a known label."""
    rows = []
    with Path(path).open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            r = json.loads(line)
            bad = [k for k in ("a", "b") if not isinstance(r.get(k), str) or not r[k].strip()]
            if bad or r.get("label") not in LABELS:
                raise ValueError(f"{path}:{n}: needs text fields a and b and label in {LABELS}; "
                                 f"missing/bad: {bad or ['label']}")
            rows.append(r)
    return rows


def pair_scores(pairs: list[dict], score: str = "f1") -> np.ndarray:
    """The filter's score of each pair (``b`` as the variant, ``a`` as the base): BERTScore-F1 or recall."""
    from sago_engine.models import bertscore

    fn = bertscore.bertscore_recall if score == "recall" else bertscore.bertscore_f1
    return fn([p["b"] for p in pairs], [p["a"] for p in pairs])


@dataclass(frozen=True)
class Rates:
    """The filter "reject when score ≤ threshold" on labelled pairs."""

    threshold: float
    rejected_different: int
    """True rejections (meaning changed)."""
    rejected_paraphrase: int
    """False rejections (a rephrasing lost)."""
    n_different: int
    n_paraphrase: int

    @property
    def precision(self) -> float:
        """Share of rejections that changed the meaning (NaN with no rejection)."""
        n = self.rejected_different + self.rejected_paraphrase
        return self.rejected_different / n if n else float("nan")

    @property
    def recall(self) -> float:
        """Share of the meaning changes rejected."""
        return self.rejected_different / self.n_different if self.n_different else float("nan")


def rates(scores: np.ndarray, labels: list[str], threshold: float) -> Rates:
    """``Rates`` of the rule the filter applies (a variant passes when score > threshold)."""
    s = np.asarray(scores, dtype=np.float64)
    diff = np.array([lab == "different" for lab in labels])
    rej = s <= threshold
    return Rates(float(threshold), int((rej & diff).sum()), int((rej & ~diff).sum()), int(diff.sum()),
                 int((~diff).sum()))


def calibrate(scores: np.ndarray, labels: list[str]) -> float:
    """The highest threshold that keeps every labelled paraphrase: halfway between the lowest
    paraphrase score and the highest ``different`` score below it (the lowest paraphrase score
    minus 0.01 when none is below). Keeping rephrasings comes first: with the prompt-level rule one
    rejected variant removes its whole (prompt, family)."""
    s = np.asarray(scores, dtype=np.float64)
    para = s[np.array([lab == "paraphrase" for lab in labels])]
    lo = float(para.min())
    below = s[(s < lo) & np.array([lab == "different" for lab in labels])]
    return (lo + float(below.max())) / 2 if len(below) else lo - 0.01


def leave_one_out(scores: np.ndarray, labels: list[str]) -> Rates:
    """Out-of-sample rates of ``calibrate``: each pair judged by the threshold calibrated on the others
    (``Rates.threshold``: the mean of those thresholds)."""
    s = np.asarray(scores, dtype=np.float64)
    rej, thr = [], []
    for i in range(len(s)):
        keep = [j for j in range(len(s)) if j != i]
        t = calibrate(s[keep], [labels[j] for j in keep])
        thr.append(t)
        rej.append(bool(s[i] <= t))
    diff = np.array([lab == "different" for lab in labels])
    r = np.array(rej)
    return Rates(float(np.mean(thr)), int((r & diff).sum()), int((r & ~diff).sum()), int(diff.sum()), int((~diff).sum()))
