"""The pages' view of sampled runs: the dice against rephrasing per prompt and model, pass^k, floors.

Reads the store's sampled rows (``Store.sample_deltas``, ``sample_floor``, ``sample_replies``)
and hands them to ``measure.separation`` (the math). A store without sampled runs gives empty
frames, so a page shows what it showed before.
"""

from __future__ import annotations

import pandas as pd

from sago_engine.correctness.scorers import normalize_answer
from sago_engine.filters import Filters
from sago_engine.measure import separation
from sago_engine.types import AXIS_LABELS

__all__ = ["floors", "prompt_separation", "separation_view", "AGREE_RULE"]

#: What "agree" means for pass^k (shown under the table).
AGREE_RULE = ("two replies agree when their SQuAD-normalised texts are identical (lower case, punctuation and "
              "articles removed, spaces collapsed); a reply with an error agrees with nothing")


def floors(store, f: Filters | None = None) -> pd.DataFrame:
    """The noise floor rows of every run: repeats of the base prompt (``Store.noise_floor``) and, for
    a sampled run, base samples 1..k−1 against base sample 0 (``Store.sample_floor``), in the
    columns of ``Store.noise_floor`` (``measure.noise_floor.floor_table`` reads either)."""
    nf, sf = store.noise_floor(), store.sample_floor()
    if sf.empty:
        return nf
    return sf if nf.empty else pd.concat([nf, sf], ignore_index=True)


def _labels(replies: pd.DataFrame) -> pd.DataFrame:
    lab = [None if isinstance(e, str) and e else normalize_answer(t) for t, e in zip(replies["response"],
                                                                                        replies["error"])]
    return replies.assign(label=lab)


def prompt_separation(rows: pd.DataFrame, alpha: float = 0.05, seed: int = 0) -> pd.DataFrame:
    """Per model × axis × prompt: the dice against rephrasing (``separation.prompt_movement``).

    Args:
        rows: ``Store.sample_deltas`` rows of kept variants and base samples (columns model, axis,
            prompt_id, variant_id, delta_norm, available; a Live probe's rows with its model).
        alpha: level of ``exceeds``; seed: of the Monte Carlo nulls (``prompt_movement``).
    Returns:
        ``separation.prompt_movement`` rows with ``axis_label`` and ``exceeds`` (p < alpha); empty
        (same columns) without sampled rows.
    """
    per = separation.prompt_movement(rows, ("model", "axis"), seed=seed)
    per["axis_label"] = per["axis"].map(AXIS_LABELS)
    per["exceeds"] = per["p"] < alpha
    return per


def separation_view(store, f: Filters | None = None, alpha: float = 0.05, n_resamples: int = 1000,
                    seed: int = 0) -> dict[str, pd.DataFrame]:
    """Everything the pages show of the two sources of movement, for the selection ``f``.

    Returns:
        ``{"prompts", "models", "pass_k"}``: ``separation.prompt_movement`` rows per model × axis ×
        prompt (with axis_label and ``exceeds`` = p < alpha), ``separation.model_movement`` rows per
        model × axis (with axis_label), and ``separation.pass_k_summary`` per model. All empty
        without sampled runs.
    """
    per = prompt_separation(store.sample_deltas(f), alpha, seed)
    models = separation.model_movement(per, ("model", "axis"), alpha=alpha, n_resamples=n_resamples, seed=seed)
    models.insert(2, "axis_label", models["axis"].map(AXIS_LABELS))
    replies = store.sample_replies(f)
    pk = separation.pass_k_summary(separation.pass_k(_labels(replies), ("model",)), ("model",)) if len(replies) \
        else separation.pass_k_summary(pd.DataFrame())
    return {"prompts": per, "models": models, "pass_k": pk}
