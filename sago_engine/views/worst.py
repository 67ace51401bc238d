"""Worst cases: prompts ranked by s_X(i) and variants by Δ̃, with the texts a person reads to see why.

SAGO (arXiv 2610.01428) §Notation: s_X(i) = sqrt(mean_v Δ̃X(i, v)²) (``scoring.rms``). The
Worst cases view lists, per axis and model, the prompts with the largest s_X(i) (each with its
worst variant: the largest |Δ̃|) or the variants with the largest |Δ̃| (or the most negative /
most positive Δ̃), each with the base prompt, the variant, both replies, their word diff, the
rendered request and tokens / latency. Each row says what its variant did to the base reply
(``change_kind``): a *break* (the base reply is an answer and the variant's reply differs from it or
is no answer), a *repair* (the base reply is no answer — a loop, an echo, token salad — and the
variant's is one) or neither. A repair moves the reply as far as a break does, so a ranking by Δ̃
alone puts repaired broken references among the worst cases; the page ranks breaks only by
default. Queries: ``Store.prompt_ranking``,
``Store.variant_ranking``, ``Store.reply_pairs``; nothing here runs SQL or Streamlit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sago_engine.correctness.compare import chosen_scorers
from sago_engine.external import degenerate
from sago_engine.measure.reply_flags import stopped_at_cap
from sago_engine.scoring import scores as scoring
from sago_engine.views.detail import NO_REPLY, numbered_label, variant_label
from sago_engine.views.textdiff import diff_html, diff_segments

if TYPE_CHECKING:
    from sago_engine.filters import Filters
    from sago_engine.store import Store

#: What a row ranks: prompts by s_X(i), or single variants by Δ̃.
BY = ("prompt", "variant")
#: The reply filter: every row, only replies that differ from the base reply, only identical ones, only
#: variants whose reply is wrong where the base reply is right (correctness verdicts of the store).
REPLIES = ("all", "different", "unchanged", "right_to_wrong")
_CHANGED = {"all": None, "different": True, "unchanged": False, "right_to_wrong": None}
#: The change filter: only breaks, only repairs, every row (``change_kind``).
CHANGES = ("breaks", "repairs", "all")
_CHANGE_LABEL = {"breaks": "break", "repairs": "repair", "all": None}
BREAK, REPAIR = "break", "repair"
#: Shown for a reply stored as the empty string (an empty box says nothing).
EMPTY_REPLY = "(empty reply)"
#: Shown where a store keeps no rendered request (``responses.request`` NULL or absent).
NOT_RECORDED = "not recorded"

COLUMNS = ["rank", "n_tied", "model", "run_id", "dataset", "prompt_id", "variant_id", "label", "score", "s", "delta_norm",
           "n_variants", "n_different", "differs", "prompt_text", "variant_text", "base_reply", "variant_reply",
           "base_tokens", "variant_tokens", "base_latency_s", "variant_latency_s", "base_finish", "variant_finish",
           "base_error", "variant_error", "base_request", "variant_request", "base_kind", "variant_kind", "change"]


def change_kind(base_kind: str, variant_kind: str, differs: bool) -> str:
    """What a variant did to the base reply: ``"break"``, ``"repair"`` or ``""`` (neither).

    Args:
        base_kind: ``degenerate.reply_kind`` of the base reply ("" = it may be an answer).
        variant_kind: the same of the variant's reply.
        differs: the variant's reply text is not identical to the base reply.
    Returns:
        "repair" when the base reply is no answer and the variant's is one; "break" when the base
        reply is an answer and the variant's is none or differs from it; "" otherwise (both no
        answer, or the same answer).
    """
    if base_kind:
        return "" if variant_kind else REPAIR
    return BREAK if (variant_kind or differs) else ""


def pair_changes(replies: pd.DataFrame) -> pd.DataFrame:
    """Every variant reply's ``change_kind`` against the base reply of its run and prompt.

    Args:
        replies: ``Store.reply_texts`` (run_id, prompt_id, variant_id (None for a base reply), response, prompt).
    Returns:
        run_id, variant_id, change ("break" | "repair" | "") — one row per variant reply with a base reply.
    """
    if replies.empty:
        return pd.DataFrame({"run_id": [], "variant_id": [], "change": []}, dtype=object)
    flagged = degenerate.reply_flags(replies)
    is_base = flagged["variant_id"].isna()
    base = flagged[is_base][["run_id", "prompt_id", "response", "kind"]]
    pairs = flagged[~is_base].merge(base, on=["run_id", "prompt_id"], suffixes=("", "_base"), validate="many_to_one")
    change = [change_kind(bk, vk, b != v) if isinstance(b, str) and isinstance(v, str) else ""
              for bk, vk, b, v in zip(pairs["kind_base"], pairs["kind"], pairs["response_base"], pairs["response"])]
    return pd.DataFrame({"run_id": pairs["run_id"].astype(str), "variant_id": pairs["variant_id"].astype(str),
                         "change": change})


def worst_cases(store: Store, f: Filters | None = None, *, axis: str, by: str = "prompt", model: str | None = None,
                order: str = "abs", replies: str = "all", search: str | None = None, limit: int = 25,
                change: str = "all") -> pd.DataFrame:
    """The ranked rows of the Worst cases view.

    Args:
        store: an open ``Store``.
        f: the sidebar's filters (models, datasets, F, u, s, p).
        axis: the axis ranked on (plain or option name).
        by: ``"prompt"`` — prompts (per model) by s_X(i) over their kept variants, each shown with
            its worst variant; ``"variant"`` — variants by Δ̃ in ``order``
            (``Store.variant_ranking``: ``"abs"`` |Δ̃|, ``"neg"``, ``"pos"``).
        model: one model, or None for every model ``f`` allows (rows name their model).
        replies: ``"all"`` | ``"different"`` (the reply text differs from the base reply of the
            same run) | ``"unchanged"`` (identical); for prompts: at least one / none of its
            variants' replies differ | ``"right_to_wrong"``: the dataset's correctness scorer
            (``correctness.compare.chosen_scorers``) calls the base reply correct and the variant's
            wrong (for prompts: at least one such variant); no rows in a store without verdicts.
        search: case-insensitive substring of the prompt, a variant or a reply (``Store``
            bounds it to ``store.worst.MAX_SEARCH`` characters; it is a bound SQL parameter).
        limit: rows, 1 … ``store.worst.MAX_ROWS``.
        change: ``"breaks"`` | ``"repairs"`` | ``"all"`` (``CHANGES``): only rows whose change
            (``change_kind``; for a prompt: "break" when any of its variants breaks the base reply,
            else "repair" when any repairs it) is a break / a repair, chosen before the row limit.
    Returns:
        ``COLUMNS``: rank (1 = worst; tied scores share the rank), n_tied (rows of the whole selection
        with that score, this one included), model, run_id, dataset, prompt_id, variant_id (the row's
        variant: the worst one for a prompt row), label (F · u · s · p as on the Prompts page),
        score (what the rank orders: s_X(i) for prompts, Δ̃ for variants), s (s_X(i); NaN for
        variant rows), delta_norm (the variant's Δ̃), n_variants, n_different (prompt rows; NaN
        for variants), differs (the shown variant's reply differs from the base reply), the
        texts (prompt_text, variant_text, base_reply, variant_reply; None = no reply stored),
        tokens, latency (seconds), finish reasons, errors and the requests (None = not recorded),
        base_kind / variant_kind (``external.degenerate.reply_kind``: "" or salad / loop / echo),
        change ("break" | "repair" | "").
    Raises:
        ValueError: unknown ``by``, ``replies``, ``order``, ``change`` or axis; ``limit`` out of range.
    """
    if change not in CHANGES:
        raise ValueError(f"unknown change filter {change!r}; valid: {', '.join(CHANGES)}")
    if by not in BY:
        raise ValueError(f"unknown ranking {by!r}; valid: {', '.join(BY)}")
    if replies not in REPLIES:
        raise ValueError(f"unknown reply filter {replies!r}; valid: {', '.join(REPLIES)}")
    changed = _CHANGED[replies]
    flips = None
    if replies == "right_to_wrong":
        flips = chosen_scorers(store.correctness_scorers())
        if not flips:
            return pd.DataFrame(columns=COLUMNS)
    pc = pair_changes(store.reply_texts(f))
    labels = (pc["run_id"].tolist(), pc["variant_id"].tolist(), pc["change"].tolist())
    pick = {"changes": labels, "change": _CHANGE_LABEL[change]}
    if by == "prompt":
        rk = store.prompt_ranking(f, axis=axis, model=model, changed=changed, search=search, limit=limit, flips=flips,
                                  **pick)
        rk = rk.assign(s=scoring.rms(rk["n"].to_numpy(), rk["sum_sq"].to_numpy()), variant_id=rk["worst_variant_id"],
                       delta_norm=rk["worst_delta_norm"], n_variants=rk["n"], n_different=rk["n_different"])
        rk["score"] = rk["s"]
    else:
        rk = store.variant_ranking(f, axis=axis, model=model, order=order, changed=changed, search=search, limit=limit,
                                   flips=flips, **pick)
        rk = rk.assign(s=np.nan, n_variants=1, n_different=np.nan, score=rk["delta_norm"])
    if rk.empty:
        return pd.DataFrame(columns=COLUMNS)
    texts = store.reply_pairs(list(zip(rk["run_id"], rk["variant_id"])), f)
    out = rk[["run_id", "variant_id", "score", "s", "delta_norm", "n_variants", "n_different", "tie_rank",
              "n_tied", "change"]].merge(texts, on=["run_id", "variant_id"], how="left", validate="one_to_one")
    out["rank"] = out["tie_rank"].astype(int)
    out["label"] = [numbered_label(variant_label(*t), k) for *t, k in
                    zip(out["family"], out["subtype"], out["strength"], out["position"], out["dup"])]
    out["differs"] = [not (isinstance(b, str) and isinstance(v, str) and b == v)
                      for b, v in zip(out["base_reply"], out["variant_reply"])]
    for c in ("base_reply", "variant_reply", "base_request", "variant_request", "base_error", "variant_error",
              "base_finish", "variant_finish"):
        out[c] = pd.Series([v if isinstance(v, str) else None for v in out[c]], index=out.index, dtype=object)
    out["base_kind"] = [degenerate.reply_kind(r, p) if isinstance(r, str) else ""
                        for r, p in zip(out["base_reply"], out["prompt_text"])]
    out["variant_kind"] = [degenerate.reply_kind(r, p) if isinstance(r, str) else ""
                           for r, p in zip(out["variant_reply"], out["variant_text"])]
    return out[COLUMNS].reset_index(drop=True)


def tie_note(rows: pd.DataFrame) -> str:
    """A sentence on the ties among ``worst_cases`` rows ("" when none): which ranks are shared, by how many rows
    of the whole selection, and that the order inside a tie is alphabetical, not by instability."""
    tied = rows[rows["n_tied"] > 1].drop_duplicates("rank")
    if tied.empty:
        return ""
    parts = [f"rank {int(r['rank'])}: {int(r['n_tied'])} rows at {r['score']:+.4g}" for _, r in tied.iterrows()]
    return ("Ties (score equal to 12 significant digits) share a rank — " + "; ".join(parts)
            + ". Inside a tie the rows are listed by model, dataset, prompt and variant, which says nothing about "
              "which is worse; a tie larger than the rows shown continues beyond them.")


def reply_text(text) -> str:
    """A reply as shown: the stored text, ``EMPTY_REPLY`` for an empty (or whitespace-only) one, or
    ``detail.NO_REPLY`` when none is stored."""
    if not isinstance(text, str):
        return NO_REPLY
    return text if text.strip() else EMPTY_REPLY


def request_text(text) -> str:
    """A rendered request as shown: the stored text, or ``NOT_RECORDED``."""
    return text if isinstance(text, str) else NOT_RECORDED


def grouped_segments(segments: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Diff segments with each run of changes read as one deletion then one insertion.

    Two replies that differ in most words diff word by word into alternating delete / insert
    pieces around the shared spaces (``~~The~~ **I'm** ~~capital~~ **not** …``). Here an equal
    segment that is only whitespace between two changes joins the change, and each run of
    changes becomes all its deleted text, then all its inserted text. Joining equal + delete
    texts still gives the base, equal + insert texts the variant.
    """
    out: list[tuple[str, str]] = []
    dels: list[str] = []
    ins: list[str] = []

    def flush() -> None:
        if dels:
            out.append(("delete", "".join(dels)))
        if ins:
            out.append(("insert", "".join(ins)))
        dels.clear()
        ins.clear()

    for k, (op, text) in enumerate(segments):
        between = 0 < k < len(segments) - 1 and segments[k - 1][0] != "equal" and segments[k + 1][0] != "equal"
        if op == "equal" and not (between and text.isspace()):
            flush()
            out.append((op, text))
        elif op == "equal":
            dels.append(text)
            ins.append(text)
        else:
            (dels if op == "delete" else ins).append(text)
    flush()
    return out


def reply_diff_html(base, variant) -> str:
    """Word diff of the base reply (struck through) into the variant's reply (highlighted), as escaped HTML.

    ``textdiff.diff_segments``, grouped by ``grouped_segments``, drawn by ``textdiff.diff_html``
    (every piece of text escaped); a missing reply diffs as the empty string; two empty replies show
    ``EMPTY_REPLY``.
    """
    a, b = (base if isinstance(base, str) else ""), (variant if isinstance(variant, str) else "")
    if not (a.strip() or b.strip()):
        return diff_html([("equal", EMPTY_REPLY)])
    return diff_html(grouped_segments(diff_segments(a, b)))


def prompts_link(row) -> dict[str, str]:
    """URL parameters that open the Prompts page on this row's prompt and variant: dataset, prompt, variant (label)."""
    return {"dataset": str(row["dataset"]), "prompt": str(row["prompt_id"]), "variant": str(row["label"])}


def cut_cell(row) -> str:
    """Which of the row's two replies stopped at the reply cap (``reply_flags.stopped_at_cap``): "both",
    "base", "variant" or "" (neither, or not recorded)."""
    base = stopped_at_cap(row["base_finish"], row["base_error"])
    var = stopped_at_cap(row["variant_finish"], row["variant_error"])
    return "both" if base and var else "base" if base else "variant" if var else ""


def cut_note(row) -> str:
    """A sentence on the row's replies cut at the reply cap ("" when neither was): a cut reply's text stops
    mid-sentence, and where both were cut Δ-BLEU, Δ-BERT and Δ-MR's length rule compare cut text of equal
    token length, so the row's Δ̃ on those axes says little about the model (docs/CONFIG.md, "Choosing the
    reply cap")."""
    which = cut_cell(row)
    if which == "both":
        return ("Both replies stopped at the reply cap (finish reason \"length\"): their text is cut, so Δ-BLEU and "
                "Δ-BERT compare cut text and Δ-MR's length rule compares two replies cut to the same number of "
                "tokens. Read this row's Δ̃ on those axes with care; a larger cap lets the replies end.")
    if which:
        return (f"The {'base' if which == 'base' else 'variant'} reply stopped at the reply cap (finish reason "
                "\"length\"): its text is cut.")
    return ""


def token_table(row) -> pd.DataFrame:
    """The row's two replies side by side: reply (base / variant), tokens, finish, latency_s, error."""
    return pd.DataFrame({
        "reply": ["base prompt", "variant"],
        "tokens": pd.array([row["base_tokens"], row["variant_tokens"]], dtype="Int64"),
        "finish": [row["base_finish"], row["variant_finish"]],
        "latency_s": [row["base_latency_s"], row["variant_latency_s"]],
        "error": [e if isinstance(e, str) else "none" for e in (row["base_error"], row["variant_error"])],
    })
