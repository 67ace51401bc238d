"""Semantic filter: keep non-surface variants whose BERTScore-F1 vs the base prompt is high enough.

SAGO (arXiv 2610.01428) §Variants: "for the non-surface families a prompt is kept only if all
its variants have BERTScore-F1 > 0.85 against the base prompt" (paper encoder: RoBERTa-large).
Offline the encoder is MiniLM, whose raw F1 lives on another scale, so the paper's threshold is
mapped through bert-score's baseline rescaling: a score's position between the encoder's
unrelated-text baseline b and 1, (F − b)/(1 − b), is matched across encoders:

    t_enc = b_enc + (t_ref − b_ref) / (1 − b_ref) × (1 − b_enc)

b_ref: bert-score's packaged baseline for roberta-large at its default layer (17), column F.
b_enc: mean MiniLM BERTScore-F1 over a fixed, seeded set of unrelated prompt pairs (prompts
from two different datasets of data/datasets).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from sago_engine.models import bertscore

from ..datasets import bundled_dir
from ..seeds import make_rng
from ..types import Variant

DATASETS_DIR = bundled_dir()
REF_MODEL = "roberta-large"
BASELINE_PAIRS = 300
BASELINE_SEED = 0
#: families kept by construction (never scored), SAGO §Variants
UNSCORED_FAMILIES = frozenset({"surface_noise"})


@dataclass(frozen=True)
class FilterConfig:
    """Settings of the semantic filter (stored with every run)."""

    threshold: float = 0.85
    """Keep a variant when its BERTScore-F1 vs the base is > this (paper: 0.85), in (0, 1)."""
    scale: str = "roberta-large"
    """"roberta-large": ``threshold`` is on the paper's RoBERTa-large scale and is mapped to
    the encoder's scale by baseline rescaling; "raw": use it as-is on the encoder's scale."""
    level: str = "prompt"
    """"prompt": a variant is kept only if every variant of its (prompt, family) passes
    (SAGO); "variant": each variant on its own."""
    encoder_baseline: float | None = None
    """b_enc to use instead of measuring it (None = ``encoder_baseline()``)."""
    score: str = "f1"
    """"f1": BERTScore-F1 of the variant vs the base prompt (the paper); "recall": BERTScore recall of
    the base prompt in the variant — how much of the request the variant still says; a frame added
    around it (greeting, politeness) barely lowers it. Calibrated on labelled pairs
    (data/filter_calibration/, ``filter_calibration``): use it with ``scale = "raw"``."""

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1), got {self.threshold}")
        if self.scale not in ("roberta-large", "raw"):
            raise ValueError(f"scale must be 'roberta-large' or 'raw', got {self.scale!r}")
        if self.level not in ("prompt", "variant"):
            raise ValueError(f"level must be 'prompt' or 'variant', got {self.level!r}")
        if self.score not in ("f1", "recall"):
            raise ValueError(f"score must be 'f1' or 'recall', got {self.score!r}")
        if self.score == "recall" and self.scale != "raw":
            raise ValueError("score 'recall' needs scale 'raw' (the paper's mapping is for BERTScore-F1)")
        if self.encoder_baseline is not None and not 0.0 <= self.encoder_baseline < 1.0:
            raise ValueError(f"encoder_baseline must be in [0, 1), got {self.encoder_baseline}")


@dataclass(frozen=True)
class FilterVerdict:
    """The filter's decision on one variant."""

    variant_id: str
    """``Variant.variant_id``."""
    semantic_score: float | None
    """BERTScore-F1 (encoder scale) vs the base prompt; None for surface_noise (not scored)."""
    passes: bool
    """This variant alone clears the threshold (True for unscored families)."""
    kept: bool
    """Kept after the level rule ("prompt": all of its (prompt, family) pass)."""


def map_threshold(t_ref: float, b_ref: float, b_enc: float) -> float:
    """t_enc = b_enc + (t_ref − b_ref)/(1 − b_ref) × (1 − b_enc).

    Args:
        t_ref: threshold on the reference encoder's raw scale; b_ref, b_enc: the reference's
            and the target encoder's unrelated-text baselines, each in [0, 1).
    Returns:
        The threshold on the target encoder's raw scale (same rescaled value).
    Raises:
        ValueError: a baseline outside [0, 1).
    Source: bert-score baseline rescaling (Zhang et al. 2020); SAGO (arXiv 2610.01428) §Variants.
    """
    for name, b in (("b_ref", b_ref), ("b_enc", b_enc)):
        if not 0.0 <= b < 1.0:
            raise ValueError(f"{name} must be in [0, 1), got {b}")
    return b_enc + (t_ref - b_ref) / (1.0 - b_ref) * (1.0 - b_enc)


@lru_cache(maxsize=4)
def reference_baseline(model: str = REF_MODEL, layer: int | None = None) -> float:
    """b_ref: bert-score's packaged F baseline for ``model`` (English) at ``layer``
    (default: bert-score's default layer for the model; roberta-large → 17 → 0.8312).

    Raises:
        FileNotFoundError: bert-score has no baseline file for the model.
        KeyError: the layer is not in the file.
    """
    import bert_score  # imported here: bert_score loads torch (start-up time)
    from bert_score.utils import model2layers

    layer = model2layers[model] if layer is None else layer
    path = Path(bert_score.__file__).parent / "rescale_baseline" / "en" / f"{model}.tsv"
    with path.open() as fh:
        for row in csv.DictReader(fh):
            if int(row["LAYER"]) == layer:
                return float(row["F"])
    raise KeyError(f"layer {layer} not in {path}")


def load_prompts(datasets_dir: Path = DATASETS_DIR) -> dict[str, list[str]]:
    """Dataset name -> its prompts (field "prompt" of each JSONL row), datasets sorted by name."""
    out: dict[str, list[str]] = {}
    for f in sorted(Path(datasets_dir).glob("*.jsonl")):
        with f.open() as fh:
            out[f.stem] = [json.loads(line)["prompt"] for line in fh if line.strip()]
    return out


def baseline_pairs(n_pairs: int = BASELINE_PAIRS, seed: int = BASELINE_SEED,
                   datasets_dir: Path = DATASETS_DIR) -> list[tuple[str, str]]:
    """A fixed, seeded list of ``n_pairs`` unrelated prompt pairs: two different datasets drawn
    by the rng, then one prompt from each.

    Raises:
        ValueError: fewer than two datasets.
    """
    prompts = load_prompts(datasets_dir)
    names = [k for k, v in prompts.items() if v]
    if len(names) < 2:
        raise ValueError(f"need prompts from >= 2 datasets in {datasets_dir}, found {names}")
    rng = make_rng("sago-semantic-filter-baseline", seed, n_pairs)
    pairs = []
    for _ in range(n_pairs):
        a, b = rng.sample(names, 2)
        pairs.append((rng.choice(prompts[a]), rng.choice(prompts[b])))
    return pairs


@lru_cache(maxsize=4)
def encoder_baseline(n_pairs: int = BASELINE_PAIRS, seed: int = BASELINE_SEED) -> float:
    """b_enc: mean BERTScore-F1 of the offline encoder over ``baseline_pairs(n_pairs, seed)``
    (one batched call; cached per process). Value for MiniLM: see the package README."""
    pairs = baseline_pairs(n_pairs, seed)
    # Rounded to 1e-6: CPU float reductions differ in the last bits between processes (thread
    # count), and this constant is recorded with every run, so it must be reproducible.
    return round(float(bertscore.bertscore_f1([a for a, _ in pairs], [b for _, b in pairs]).mean()), 6)


def effective_threshold(cfg: FilterConfig = FilterConfig()) -> dict[str, Any]:
    """The threshold the filter applies on the encoder's scale, with its provenance.

    Returns:
        dict with ``threshold`` (used, encoder scale), ``threshold_config``, ``scale``,
        ``level``, ``score`` (only when not ``"f1"``), ``b_ref``, ``ref_model``, ``ref_layer``, ``b_enc``, ``baseline_pairs``,
        ``baseline_seed`` (baseline fields None for scale "raw") and ``encoder`` (the
        ``bertscore.encoder_info()`` dict).
    Source: SAGO (arXiv 2610.01428) §Variants; bert-score baseline rescaling.
    """
    from bert_score.utils import model2layers  # imported here: bert_score loads torch (start-up time)

    info: dict[str, Any] = {
        "threshold_config": cfg.threshold, "scale": cfg.scale, "level": cfg.level,
        "b_ref": None, "ref_model": None, "ref_layer": None, "b_enc": None,
        "baseline_pairs": None, "baseline_seed": None, "encoder": bertscore.encoder_info(),
    }
    if cfg.score != "f1":  # recorded when not the paper's (older records stay as they were)
        info["score"] = cfg.score
    if cfg.scale == "raw":
        info["threshold"] = cfg.threshold
        return info
    b_ref = reference_baseline(REF_MODEL)
    measured = cfg.encoder_baseline is None
    b_enc = encoder_baseline() if measured else float(cfg.encoder_baseline)
    info.update(
        threshold=map_threshold(cfg.threshold, b_ref, b_enc), b_ref=b_ref, ref_model=REF_MODEL,
        ref_layer=model2layers[REF_MODEL], b_enc=b_enc,
        baseline_pairs=BASELINE_PAIRS if measured else None,
        baseline_seed=BASELINE_SEED if measured else None,
    )
    return info


def bert_rescale_baseline(filter_info: dict[str, Any] | None = None) -> float:
    """b of the ``bert@rescaled`` axis option: the same unrelated-text baseline of the encoder
    that maps the paper's 0.85 filter threshold onto MiniLM's scale.

    Args:
        filter_info: an ``effective_threshold`` record (the run's semantic filter); its
            ``b_enc`` is used when set (so a run's filter and its rescaled Δ-BERT share one b).
    Returns:
        b in [0, 1): ``filter_info["b_enc"]``, else ``encoder_baseline()`` (0.1206 for MiniLM).
    Source: bert-score baseline rescaling (Zhang et al. 2020).
    """
    b = (filter_info or {}).get("b_enc")
    return float(b) if b is not None else encoder_baseline()


def apply_filter(
    variants: Sequence[Variant], base_texts: dict[str, str], cfg: FilterConfig = FilterConfig()
) -> list[FilterVerdict]:
    """Score every non-surface variant against its base prompt and decide what is kept.

    Args:
        variants: the variants, any families and prompts (n of them).
        base_texts: prompt_id -> base prompt text, for every prompt of a scored variant.
        cfg: threshold, scale and level.
    Returns:
        n FilterVerdicts in the order of ``variants``. surface_noise: score None, passes and
        kept True. A variant whose meta has a ``rewrite_issue`` (a degenerate LLM rewrite:
        empty, unchanged, ...) is not scored: score None, passes False. Others: passes = score >
        threshold; kept = passes (level "variant") or all variants of the same (prompt_id,
        family) pass (level "prompt").
    Raises:
        KeyError: a scored variant's prompt_id is missing from ``base_texts``.
    Source: SAGO (arXiv 2610.01428) §Variants. One batched bertscore_f1 call.
    """
    degenerate = {k for k, v in enumerate(variants) if (v.meta or {}).get("rewrite_issue")}
    scored = [k for k, v in enumerate(variants) if v.spec.family not in UNSCORED_FAMILIES and k not in degenerate]
    missing = sorted({variants[k].prompt_id for k in scored} - set(base_texts))
    if missing:
        raise KeyError(f"base_texts lacks prompt ids {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    scores: dict[int, float] = {}
    if scored:
        score = bertscore.bertscore_recall if cfg.score == "recall" else bertscore.bertscore_f1
        f1 = score([variants[k].text for k in scored], [base_texts[variants[k].prompt_id] for k in scored])
        scores = {k: float(s) for k, s in zip(scored, f1)}
        threshold = effective_threshold(cfg)["threshold"]
    passes = {k: scores[k] > threshold for k in scores}
    passes.update({k: False for k in degenerate})
    group_ok: dict[tuple[str, str], bool] = {}
    for k, p in passes.items():
        key = (variants[k].prompt_id, variants[k].spec.family)
        group_ok[key] = group_ok.get(key, True) and p
    out = []
    for k, v in enumerate(variants):
        if k not in passes:
            out.append(FilterVerdict(v.variant_id, None, True, True))
            continue
        kept = passes[k] if cfg.level == "variant" else group_ok[(v.prompt_id, v.spec.family)]
        out.append(FilterVerdict(v.variant_id, scores.get(k), passes[k], kept))
    return out
