"""Core records shared by every stage: variant specs, variants, generation results, axes.

SAGO (arXiv 2610.01428) §Variants: a variant is v = (F, u, s, p) — family, subtype, strength,
position — applied to a base prompt x_i with a recorded seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Positions a variant may edit (SAGO §Variants). PREFIX / SUFFIX edit only the start / end
#: region of the prompt, GLOBAL may touch the whole prompt.
POSITIONS: tuple[str, ...] = ("PREFIX", "SUFFIX", "GLOBAL")

#: The six behavioural axes, in the paper's order, with the store's short names.
AXES: tuple[str, ...] = ("cos", "bleu", "bert", "prob", "ent", "mr")

#: Display labels in the paper's terms.
AXIS_LABELS: dict[str, str] = {
    "cos": "Δ-Cos",
    "bleu": "Δ-BLEU",
    "bert": "Δ-BERT",
    "prob": "Δ-Prob",
    "ent": "Δ-Ent",
    "mr": "Δ-MR",
}

#: Default normalizers R_X (SAGO §Axes table); configurable per run and stored with it.
DEFAULT_NORMALIZERS: dict[str, float] = {
    "cos": 2.0,
    "bleu": 100.0,
    "bert": 1.0,
    "prob": 250.0,
    "ent": 10.0,
    "mr": 1.0,
}

#: Axes that need white-box access to the model (hidden states / token distributions).
WHITE_BOX_AXES: frozenset[str] = frozenset({"cos", "prob", "ent"})


@dataclass(frozen=True, order=True)
class VariantSpec:
    """The (F, u, s, p) tuple of a variant (SAGO §Variants)."""

    family: str
    """Family name, e.g. ``"social_register"``, ``"surface_noise"``, ``"structural"``."""
    subtype: str
    """Subtype within the family, e.g. ``"politeness"``, ``"case"``, ``"length"``."""
    strength: float
    """Strength; its scale is the family's (politeness −5..+5, noise 1..3, length ratio 0.5..2.0)."""
    position: str
    """One of ``POSITIONS``."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "subtype": self.subtype,
            "strength": float(self.strength),
            "position": self.position,
        }

    def label(self) -> str:
        s = f"{self.strength:g}"
        return f"{self.family}/{self.subtype}/{s}/{self.position}"


@dataclass(frozen=True)
class Variant:
    """One perturbed prompt x_i^(v) = T_v(x_i) with everything needed to reproduce it."""

    variant_id: str
    """Deterministic key: hash of (prompt_id, spec, seed, generator)."""
    prompt_id: str
    """The base prompt's id (unique across datasets)."""
    spec: VariantSpec
    """(F, u, s, p)."""
    text: str
    """The variant prompt text."""
    seed: int
    """The 63-bit seed the transform's rng was built from."""
    generator: str = "rules-v1"
    """Which implementation produced the text (offline rules, or an LLM rewriter id)."""
    meta: dict[str, Any] = field(default_factory=dict, compare=False)
    """Family-specific facts, e.g. ``{"achieved_ratio": 0.52}`` for length, or the target
    attribute the mirroring detector looks for (``{"target": "upper"}``)."""


@dataclass
class GenerationResult:
    """What a backend returns for one prompt (SAGO §Axes needs all of it).

    Shapes: ``token_logprobs`` and ``token_entropies`` are float64 arrays of shape (T,), T the
    number of response tokens (including the end-of-sequence token when the model emitted
    one); ``hidden_last`` is float32 (L+1, H): the hidden state of the last non-padding input
    token at the embedding output and after every layer, or ``None`` where the backend cannot
    expose activations. Log-probs are natural-log, entropies in nats.
    """

    text: str
    n_tokens: int = 0
    token_logprobs: np.ndarray | None = None
    token_entropies: np.ndarray | None = None
    hidden_last: np.ndarray | None = None
    finish_reason: str = "stop"
    latency_s: float = 0.0
    error: str | None = None
    token_ids: list[int] | None = None
    """Generated token ids (the scored ones), so a teacher-forced pass can re-score them."""
    meta: dict[str, Any] | None = None
    """Backend-specific facts about this response (API backends: the model string the API
    returned, prompt/completion token counts, cache hit, attempts, raw stop reason); None for
    local models."""

    @property
    def seq_logprob(self) -> float | None:
        """Sum of token log-probs (not length-normalized), or None if unavailable."""
        if self.token_logprobs is None:
            return None
        return float(np.sum(self.token_logprobs))

    @property
    def mean_entropy(self) -> float | None:
        """Mean per-token predictive entropy in nats, or None if unavailable."""
        if self.token_entropies is None or len(self.token_entropies) == 0:
            return None if self.token_entropies is None else 0.0
        return float(np.mean(self.token_entropies))
