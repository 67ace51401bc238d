"""A sampled run's Δ against the base reply: the dice alone and rephrasing + dice (``sample_deltas``).

In a sampled run (k > 1 samples per input, ``measure.samples``) every sample is compared with one
reference, the base prompt's sample 0 (the ``responses`` row every ``deltas`` row is measured
against), by the same axis functions and R_X as the variants (SAGO, arXiv 2610.01428 §Axes):

* **base samples** 1..k−1 against base sample 0 — the movement the dice alone give (the noise
  floor of a sampled run; ``variant_id`` NULL);
* **variant samples** 0..k−1 of every variant against base sample 0 — rephrasing and dice
  together (sample 0's Δ equals its ``deltas`` row).

One reference for both sets makes their Δ exchangeable when rephrasing has no effect: given base
sample 0, every other reply is an independent draw compared with the same fixed text, so the
test of ``measure.separation`` is exact (docs/METHOD.md, "Two sources of movement").

Axes: Δ-BLEU, Δ-BERT, Δ-Prob and Δ-Ent. Δ-Cos reads the hidden state of the input's last token,
which sampling cannot change (its floor is 0 by construction: every Δ-Cos is rephrasing);
Δ-MR needs a variant (a base sample has no register to mirror), as the repeat floor says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sago_engine.axes import delta_fn
from sago_engine.axis_spec import AXIS_SPECS
from sago_engine.measure.pipeline import _unavailable_reason, response_id
from sago_engine.measure.samples import Sample, sample_response_id
from sago_engine.scoring.scores import normalize
from sago_engine.types import AXES, GenerationResult, Variant

__all__ = ["SAMPLED_AXES", "SAMPLE_DELTA_COLUMNS", "SampledUnit", "sample_delta_rows"]

#: Axes a sample can move: not input-side (Δ-Cos) and not needing a variant on both sides (Δ-MR).
SAMPLED_AXES: tuple[str, ...] = tuple(a for a in AXES if AXIS_SPECS[a].needs != "hidden_states"
                                      and not AXIS_SPECS[a].needs_variant)
#: Columns of the store's ``sample_deltas`` table (schema v5).
SAMPLE_DELTA_COLUMNS = ["run_id", "dataset", "prompt_id", "variant_id", "sample", "response_id", "axis", "delta",
                        "delta_norm", "available", "reason"]


@dataclass(frozen=True)
class SampledUnit:
    """One prompt of a sampled run: base sample 0, its variants' sample-0 replies, samples ≥ 1."""

    prompt_id: str
    dataset: str
    base: GenerationResult
    variants: Sequence[Variant]
    results: Sequence[GenerationResult]
    """Sample 0 of each variant's reply, in ``variants`` order."""
    samples: Sequence[Sample]
    """Samples ≥ 1 of the base (``variant_id`` None) and of the variants."""


def _pairs(run_id: str, u: SampledUnit) -> list[tuple[str | None, int, str, GenerationResult]]:
    """(variant id, sample, response id, reply) of every reply of ``u`` compared with base sample 0."""
    out = [(v.variant_id, 0, response_id(run_id, u.prompt_id, v.variant_id), r) for v, r in zip(u.variants, u.results)]
    out += [(x.variant_id, x.sample, sample_response_id(run_id, u.prompt_id, x.variant_id, x.sample), x.reply)
            for x in u.samples]
    return out


def sample_delta_rows(run_id: str, units: Sequence[SampledUnit], normalizers: Mapping[str, float],
                      capabilities: frozenset[str]) -> pd.DataFrame:
    """``sample_deltas`` rows: each sample's Δ per ``SAMPLED_AXES`` axis against base sample 0.

    Args:
        run_id: the run; units: prompts with their samples (a unit without samples ≥ 1 gives no
            row: a run of k = 1 has no floor); normalizers: R_X per axis; capabilities: the
            backend's white-box axes.
    Returns:
        ``SAMPLE_DELTA_COLUMNS`` rows, one per (reply, axis): base samples 1..k−1 (``variant_id``
        None) and variant samples 0..k−1. An axis that cannot be measured (an error, no visible
        text, a missing capability) has NULL delta, ``available`` False and the reason — never 0.
        One batched BERTScore call for all pairs.
    Source: SAGO (arXiv 2610.01428) §Axes (the Δ definitions of the variants).
    """
    todo = [(u, p) for u in units if u.samples for p in _pairs(run_id, u)]
    replies = [p[3] for _, p in todo]
    bases = [u.base for u, _ in todo]
    raw = {a: delta_fn(a)(replies, bases) for a in SAMPLED_AXES}
    rows = []
    for j, (u, (vid, s, rid, r)) in enumerate(todo):
        for axis in SAMPLED_AXES:
            reason = _unavailable_reason(axis, capabilities, u.base, r)
            d = float(raw[axis][j])
            if reason is None and np.isfinite(d):
                rows.append((run_id, u.dataset, u.prompt_id, vid, s, rid, axis, d,
                             float(normalize(d, normalizers[axis])), True, None))
            else:
                rows.append((run_id, u.dataset, u.prompt_id, vid, s, rid, axis, None, None, False,
                             reason or "not computed"))
    return pd.DataFrame(rows, columns=SAMPLE_DELTA_COLUMNS)
