"""A sampled run's replies beyond the first: keys and ``samples`` rows.

In a run with sampled decoding (``[[models]] temperature > 0``) the base prompt and every variant
are answered k = ``samples`` times, each reply with its own seed (``seeds.sample_seed``). Sample 0
is the ``responses`` row (same key as a greedy run's, ``pipeline.response_id``) and gives the
``deltas``; samples 1..k−1 are kept in the ``samples`` table (docs/METHOD.md, "Sampled decoding")
so the movement between samples can be measured without asking the model again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from sago_engine.seeds import stable_hash
from sago_engine.types import GenerationResult

__all__ = ["SAMPLE_COLUMNS", "Sample", "sample_response_id", "sample_rows"]

#: Columns of the store's ``samples`` table (schema v5).
SAMPLE_COLUMNS = ["response_id", "run_id", "prompt_id", "variant_id", "sample", "seed", "response", "n_tokens",
                  "token_ids", "seq_logprob", "mean_entropy", "finish_reason", "latency_s", "error"]


@dataclass(frozen=True)
class Sample:
    """Sample ``sample`` (≥ 1) of the reply to the base prompt (``variant_id`` None) or a variant."""

    variant_id: str | None
    sample: int
    seed: int
    """The seed it was drawn with (``seeds.sample_seed``)."""
    reply: GenerationResult


def sample_response_id(run_id: str, prompt_id: str, variant_id: str | None, sample: int) -> str:
    """Key of sample ``sample`` (≥ 1) of a reply: a 20-hex sha256 of (run, prompt, variant or
    ``"<base>"``, ``"#<sample>"``) — never a ``responses`` or ``base_repeats`` key.

    Raises:
        ValueError: ``sample < 1`` (sample 0 is the ``responses`` row, ``pipeline.response_id``).
    """
    if sample < 1:
        raise ValueError(f"sample must be >= 1 (sample 0 is the responses row), got {sample}")
    return stable_hash(run_id, prompt_id, variant_id or "<base>", f"#{int(sample)}", length=20)


def sample_rows(run_id: str, samples: Sequence[tuple[str, Sample]]) -> pd.DataFrame:
    """``samples`` rows (``SAMPLE_COLUMNS``) of (prompt_id, ``Sample``) pairs: the reply as decoded,
    its token ids and scalar statistics, as its ``responses`` row would hold them."""
    rows = []
    for pid, x in samples:
        r = x.reply
        rows.append({"response_id": sample_response_id(run_id, pid, x.variant_id, x.sample), "run_id": run_id,
                     "prompt_id": pid, "variant_id": x.variant_id, "sample": int(x.sample), "seed": int(x.seed),
                     "response": r.text, "n_tokens": int(r.n_tokens),
                     "token_ids": None if r.token_ids is None else [int(t) for t in r.token_ids],
                     "seq_logprob": r.seq_logprob, "mean_entropy": r.mean_entropy, "finish_reason": r.finish_reason,
                     "latency_s": float(r.latency_s), "error": r.error})
    return pd.DataFrame(rows, columns=SAMPLE_COLUMNS)
