"""Per-prompt scores of each option of a method choice, as one long table (``sago_engine.views.method_choices``).

Every function takes ``Store.prompt_scores``-shaped frames (model, dataset, prompt_id, axis, s)
and returns ``SCORE_COLS``: the same scores once per option, with the choice applied. Pure
functions; SQL stays in ``sago_engine.store``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pandas as pd

from sago_engine.types import AXES, OPTION_SEP, option_of
from sago_engine.views import report

#: Option name of the plain (stored) axis in an option-axis choice.
DEFAULT_OPTION = "default"

# ---------------------------------------------------------------- option axes
def option_axes(axis_names: Iterable[str]) -> pd.DataFrame:
    """The option axes among stored axis names: base, option, axis (sorted by base in the paper's order, option)."""
    rows = []
    for a in axis_names:
        opt = option_of(a)
        if opt is not None:
            base = str(a).split(OPTION_SEP, 1)[0]
            rows.append({"base": base, "option": opt, "axis": a})
    out = pd.DataFrame(rows, columns=["base", "option", "axis"])
    order = {a: i for i, a in enumerate(AXES)}
    return out.assign(_o=out["base"].map(lambda b: order.get(b, len(order)))).sort_values(
        ["_o", "base", "option"]).drop(columns="_o").reset_index(drop=True)


SCORE_COLS = ["option", "model", "dataset", "prompt_id", "axis", "s"]


def _plain(scores: pd.DataFrame) -> pd.DataFrame:
    return scores[~scores["axis"].astype(str).str.contains(OPTION_SEP, regex=False)]


def axis_option_scores(scores: pd.DataFrame, base: str, options: Sequence[str]) -> pd.DataFrame:
    """Per-prompt scores under each option of one axis.

    Args:
        scores: ``Store.prompt_scores`` over the plain axes and the option axes ``<base>@<o>``.
        base: the axis the options replace (e.g. ``"cos"``).
        options: option names (text after ``@``).
    Returns:
        option, model, dataset, prompt_id, axis, s: option ``DEFAULT_OPTION`` = the plain rows;
        option o = the plain rows with ``base`` replaced by the ``<base>@<o>`` rows (renamed
        ``base``). A model without ``<base>@<o>`` rows has no ``base`` rows under o (n/a, never 0).
    """
    plain = _plain(scores)
    frames = [plain.assign(option=DEFAULT_OPTION)]
    for o in options:
        rep = scores[scores["axis"] == f"{base}{OPTION_SEP}{o}"].assign(axis=base)
        frames.append(pd.concat([plain[plain["axis"] != base], rep]).assign(option=o))
    return pd.concat(frames, ignore_index=True)[SCORE_COLS]


def normalizer_option_scores(paper_scores: pd.DataFrame, data_scores: pd.DataFrame) -> pd.DataFrame:
    """Scores under the paper's R_X (option ``paper R_X``) and under data-driven R_X (``data-driven R_X``).

    Args:
        paper_scores: ``Store.prompt_scores`` (stored Δ̃, the run's R_X); option axes are dropped.
        data_scores: ``Store.prompt_scores_rescaled`` under ``stats.data_driven_normalizers``.
    """
    return pd.concat([_plain(paper_scores).assign(option="paper R_X"),
                      _plain(data_scores).assign(option="data-driven R_X")], ignore_index=True)[SCORE_COLS]


#: Option names of the clipping choice.
CLIPPED, UNCLIPPED = "clipped Δ̃", "unclipped Δ̃"


def clip_option_scores(clipped: pd.DataFrame, unclipped: pd.DataFrame) -> pd.DataFrame:
    """Scores with Δ̃ clipped to [−1, 1] (option ``CLIPPED``, the paper's text) and unclipped
    (``UNCLIPPED``, the SAGO authors' code); option axes are dropped.

    Args:
        clipped / unclipped: ``Store.prompt_scores_rescaled`` under the same R_X with ``clip``
            True / False. Under ``UNCLIPPED`` s may exceed 1 (a |Δ| above R_X).
    """
    return pd.concat([_plain(clipped).assign(option=CLIPPED), _plain(unclipped).assign(option=UNCLIPPED)],
                     ignore_index=True)[SCORE_COLS]


def per_token_option_scores(scores: pd.DataFrame, per_token: pd.DataFrame, q: float = 0.95) -> tuple[pd.DataFrame, float]:
    """Scores with Δ-Prob per sequence (the paper) and per token (``report.per_token_scores``).

    Returns (scores with option ``per sequence`` | ``per token``, R of the per-token view). Under
    ``per token`` the ``prob`` rows are the length-normalized ones; the other axes are unchanged.
    Only ``per sequence`` is returned when no log-probs are stored.
    """
    plain = _plain(scores)
    r, tok = report.per_token_scores(per_token, q)
    frames = [plain.assign(option="per sequence")]
    if len(tok):
        frames.append(pd.concat([plain[plain["axis"] != "prob"], tok.assign(axis="prob")]).assign(option="per token"))
    return pd.concat(frames, ignore_index=True)[SCORE_COLS], r


# ====================================================================== references that are answers
ALL_PROMPTS, ANSWERS_ONLY = "every prompt", "base reply not degenerate"


def reference_option_scores(scores: pd.DataFrame, base_flags: pd.DataFrame) -> pd.DataFrame:
    """Scores with every prompt, and without the prompts whose base reply (of that run) is degenerate.

    Args:
        scores: ``Store.prompt_scores`` (with run_id); option axes are dropped.
        base_flags: ``degenerate.reply_flags`` over ``Store.reply_texts(base_only=True)`` (run_id,
            prompt_id, kind).
    Returns:
        ``SCORE_COLS`` rows: option ``ALL_PROMPTS`` (every score) and ``ANSWERS_ONLY`` (the scores of
        (run, prompt) pairs whose base reply has kind "").
    """
    plain = _plain(scores)
    bad = base_flags.loc[base_flags["kind"] != "", ["run_id", "prompt_id"]].drop_duplicates()
    keep = plain.merge(bad.assign(_bad=True), on=["run_id", "prompt_id"], how="left")
    kept = keep[keep["_bad"].isna()].drop(columns="_bad")
    return pd.concat([plain.assign(option=ALL_PROMPTS), kept.assign(option=ANSWERS_ONLY)],
                     ignore_index=True)[SCORE_COLS]
