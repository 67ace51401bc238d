"""Reads of the Worst cases view: prompts ranked by their score's sums, variants by Δ̃, full-text search, reply pairs.

A variant's reply *differs* when its text is not identical to the base reply of the same run
(``responses.response`` compared exactly, as stored; a missing reply counts as differing).
Search is a case-insensitive substring match (``contains(fold(text), fold(needle))``, one folding: ``FOLD_SQL``) over
the base prompt, the variant text and both replies; the needle is a bound parameter, never
part of the SQL text, and is cut to ``MAX_SEARCH`` characters. Every ranking returns at most
``MAX_ROWS`` rows. Scores are not computed here: the prompt ranking returns n and ΣΔ̃² per
prompt (``sago_engine.views.worst`` applies ``scoring.rms``) and orders by ΣΔ̃²/n, which orders
exactly as sqrt(ΣΔ̃²/n).

A pair's *change* ("break", "repair" or "") is not decided here: the caller classifies the replies
(``sago_engine.views.worst.pair_changes``, Python's degenerate-reply detector) and passes the labels
as bound arrays; the rankings only join, aggregate and filter them, before the row limit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import duckdb
import pandas as pd

from sago_engine.store.reads.correctness import verdict_join
from sago_engine.store.reads.where import fetch_df, filter_where

if TYPE_CHECKING:
    from sago_engine.filters import Filters

#: Pair labels handed to a ranking: (run_ids, variant_ids, labels), three sequences of equal length.
Changes = tuple[Sequence[str], Sequence[str], Sequence[str]]

#: Most rows a ranking returns.
MAX_ROWS = 500
#: Longest search string used (characters; the rest is dropped).
MAX_SEARCH = 200
#: Variant orders: by |Δ̃| (largest first), most negative Δ̃ first, most positive Δ̃ first.
ORDERS = ("abs", "neg", "pos")
_ORDER_SQL = {"abs": "abs(delta_norm) DESC", "neg": "delta_norm ASC", "pos": "delta_norm DESC"}
#: Change labels a ranking can be restricted to (``views.worst.change_kind``).
CHANGE_LABELS = ("break", "repair")
#: Significant digits a ranking's score is compared at: scores equal to 12 digits are one tie (float
#: noise of sums in another order is no difference).
TIE_DIGITS = 12


def _tie_key(expr: str) -> str:
    """SQL of ``expr`` rounded to ``TIE_DIGITS`` significant digits (0 stays 0): the key ties are decided on."""
    return (f"(CASE WHEN ({expr}) = 0 OR NOT isfinite({expr}) THEN ({expr}) ELSE round(({expr}), "
            f"{TIE_DIGITS} - 1 - CAST(floor(log10(abs({expr}))) AS INTEGER)) END)")


#: The one case folding both sides of a search go through (text and search string alike): DuckDB's
#: ``lower`` (Unicode simple lower case: "İ" → "i", "Σ" → "σ"), NFC normalisation (a decomposed
#: "café" equals the composed one), then the two full case foldings ``lower`` lacks: final sigma
#: "ς" → "σ" and "ß" → "ss". Folding in Python on one side and in SQL on the other would disagree
#: ("ΕΛΛΑΔΟΣ", "İstanbul"): text copied from a page would not find itself. (``lower`` before NFC
#: costs about 1.6x a plain ``lower`` on 1M replies; after it, 4x.)
FOLD_SQL = "replace(replace(nfc_normalize(lower({})), 'ς', 'σ'), 'ß', 'ss')"


def search_needle(search: str | None) -> str | None:
    """The search string as given to the query: stripped, at most ``MAX_SEARCH`` characters; None
    when empty. Its case folding is ``FOLD_SQL``'s, in the query, as for the text searched."""
    if search is None:
        return None
    s = str(search).strip()[:MAX_SEARCH]
    return s or None


def _limit(limit: int) -> int:
    n = int(limit)
    if not 1 <= n <= MAX_ROWS:
        raise ValueError(f"limit must be in 1..{MAX_ROWS}, got {limit}")
    return n


def _change_sql(change: str | None, changes: Changes | None) -> tuple[str, list]:
    """The WHERE term (and its parameter) keeping rows whose ``change`` is ``change``; ValueError on an unknown label
    or a label asked for without ``changes``."""
    if change is None:
        return "TRUE", []
    if change not in CHANGE_LABELS:
        raise ValueError(f"unknown change {change!r}; valid: {', '.join(CHANGE_LABELS)}")
    if changes is None:
        raise ValueError("a change filter needs the pairs' change labels (changes=…)")
    return "change = ?", [change]


def _changed_sql(changed: bool | None, col: str) -> str:
    return "TRUE" if changed is None else (f"{col}" if changed else f"NOT {col}")


class WorstQueries:
    """Worst-case reads of ``Store`` (``self.con``: a DuckDB connection)."""

    con: duckdb.DuckDBPyConnection

    def _has_request_column(self) -> bool:
        return bool(self.con.execute("SELECT 1 FROM information_schema.columns WHERE table_name = 'responses' "
                                     "AND column_name = 'request'").fetchall())

    def _pairs_cte(self, f: Filters | None, axis: str, model: str | None, search: str | None,
                   scorers: Mapping[str, str] | None = None, changes: Changes | None = None) -> tuple[str, list]:
        """``WITH pairs AS (…)``: one row per (run, kept variant) with an available Δ̃ on ``axis``, its reply's
        ``differs`` flag, ``matched`` (the search hits its prompt, variant or either reply), ``flip_rw``
        (``scorers`` given: under the dataset's scorer the base reply is correct and the variant's wrong) and
        ``change`` (the label ``changes`` gives the pair; "" for a pair it does not name)."""
        from sago_engine.store.reads.where import axis_names

        axis_names([axis])  # ValueError on an unknown axis name
        where, params = filter_where(f, d="d", v="v", r="r")
        needle = search_needle(search)
        match, mparams = "TRUE", []
        if needle is not None:
            fold, q = FOLD_SQL.format, FOLD_SQL.format("?")
            match = "(" + " OR ".join(f"contains({fold(col)}, {q})" for col in (
                "p.text", "v.text", "coalesce(b.response, '')", "coalesce(x.response, '')")) + ")"
            mparams = [needle] * 4
        mwhere, mp = ("TRUE", []) if model is None else ("r.model = ?", [str(model)])
        flip, fjoin, fparams = "FALSE", "", []
        if scorers:
            flip = "coalesce(cb.verdict = 'correct' AND cx.verdict = 'wrong', FALSE)"
            jb, pb = verdict_join(scorers, "cb", "d.run_id", "b.response_id")
            jx, px = verdict_join(scorers, "cx", "d.run_id", "x.response_id")
            fjoin, fparams = f"{jb}\n{jx}", pb + px
        cjoin, cparams = "", []
        if changes is not None:
            cjoin = ("LEFT JOIN (SELECT unnest(?::VARCHAR[]) AS run_id, unnest(?::VARCHAR[]) AS variant_id, "
                     "unnest(?::VARCHAR[]) AS change) c ON c.run_id = d.run_id AND c.variant_id = d.variant_id")
            cparams = [[str(x) for x in changes[0]], [str(x) for x in changes[1]], [str(x) for x in changes[2]]]
        sql = f"""
            WITH pairs AS (
                SELECT r.model, d.run_id, d.dataset, d.prompt_id, d.variant_id, d.delta, d.delta_norm,
                       (x.response IS DISTINCT FROM b.response) AS differs, {match} AS matched, {flip} AS flip_rw,
                       {"coalesce(c.change, '')" if changes is not None else "''"} AS change
                FROM deltas d
                JOIN variants v USING (variant_id)
                JOIN runs r USING (run_id)
                JOIN prompts p ON p.prompt_id = d.prompt_id
                LEFT JOIN responses x ON x.run_id = d.run_id AND x.variant_id = d.variant_id
                LEFT JOIN responses b ON b.run_id = d.run_id AND b.prompt_id = d.prompt_id AND b.variant_id IS NULL
                {fjoin}
                {cjoin}
                WHERE v.kept AND d.available AND d.delta_norm IS NOT NULL AND d.axis = ? AND {where} AND {mwhere})"""
        return sql, [*mparams, *fparams, *cparams, str(axis), *params, *mp]

    def variant_ranking(self, f: Filters | None = None, *, axis: str, model: str | None = None,
                        order: str = "abs", changed: bool | None = None, search: str | None = None,
                        limit: int = 50, flips: Mapping[str, str] | None = None, changes: Changes | None = None,
                        change: str | None = None) -> pd.DataFrame:
        """Kept variants ranked by Δ̃ on one axis, over the runs and variants ``f`` (and ``model``) select.

        Args:
            axis: a plain or option axis name (``where.axis_names``).
            order: ``"abs"`` (|Δ̃| largest first), ``"neg"`` (most negative first), ``"pos"``.
            changed: True = only variants whose reply differs from the base reply, False = only
                identical replies, None = all.
            search: substring (case-insensitive) of the base prompt, variant text or either reply.
            limit: 1 … ``MAX_ROWS``.
            flips: dataset → correctness scorer: only variants whose base reply that scorer calls
                correct and whose own reply it calls wrong (None: no such restriction).
            changes: (run_ids, variant_ids, labels): each pair's change label ("break" | "repair"),
                computed by the caller; pairs it does not name are "".
            change: only pairs with this label (one of ``CHANGE_LABELS``; None: every pair).
        Returns:
            model, run_id, dataset, prompt_id, variant_id, delta (raw), delta_norm (Δ̃), differs, change,
            sorted by the order, then model, dataset, prompt_id, variant_id.
        Raises:
            ValueError: unknown order, axis or change label, limit out of range.
        """
        if order not in ORDERS:
            raise ValueError(f"unknown order {order!r}; valid: {', '.join(ORDERS)}")
        cwhere, cp = _change_sql(change, changes)
        cte, params = self._pairs_cte(f, axis, model, search, flips, changes)
        key = _tie_key(_ORDER_SQL[order].rsplit(" ", 1)[0])
        sql = f"""{cte}
            SELECT model, run_id, dataset, prompt_id, variant_id, delta, delta_norm, differs, change,
                   rank() OVER (ORDER BY {key} {_ORDER_SQL[order].rsplit(" ", 1)[1]})::BIGINT AS tie_rank,
                   count(*) OVER (PARTITION BY {key})::BIGINT AS n_tied
            FROM pairs
            WHERE matched AND {_changed_sql(changed, "differs")} AND {"flip_rw" if flips else "TRUE"} AND {cwhere}
            ORDER BY {_ORDER_SQL[order]}, model, dataset, prompt_id, variant_id LIMIT ?"""
        return fetch_df(self.con, sql, [*params, *cp, _limit(limit)])

    def prompt_ranking(self, f: Filters | None = None, *, axis: str, model: str | None = None,
                       changed: bool | None = None, search: str | None = None, limit: int = 50,
                       flips: Mapping[str, str] | None = None, changes: Changes | None = None,
                       change: str | None = None) -> pd.DataFrame:
        """Prompts (per run) ranked by s_X(i) on one axis: the sums of Δ̃ over their kept variants.

        ``f`` and ``model`` select runs and variants exactly as ``Store.prompt_scores``; ``search``
        keeps a prompt when it hits its text or any of its variants' texts or replies (the score
        still uses every selected variant); ``changed`` True keeps prompts with at least one reply
        that differs from the base reply, False those with none; ``flips`` (dataset → correctness scorer)
        keeps prompts with at least one variant that scorer calls wrong while it calls the base correct.
        ``changes`` labels pairs as ``variant_ranking``; a prompt's change is "break" when any of its pairs is
        one, else "repair" when any is one, else ""; ``change`` keeps only prompts with that label (ranks and
        ties are then counted among those prompts).

        Returns:
            model, run_id, dataset, prompt_id, n (variants with a Δ̃), sum_sq (ΣΔ̃²), n_different
            (variants whose reply differs), worst_variant_id (largest |Δ̃|; ties: smallest id),
            worst_delta_norm, change, tie_rank, n_tied (as ``variant_ranking``) — ordered by ΣΔ̃²/n
            descending, then model, dataset, prompt_id.
        Raises:
            ValueError: unknown axis or change label, limit out of range.
        """
        cwhere, cp = _change_sql(change, changes)
        cte, params = self._pairs_cte(f, axis, model, search, flips, changes)
        sql = f"""{cte}
            SELECT model, run_id, dataset, prompt_id, count(*)::BIGINT AS n, sum(delta_norm * delta_norm) AS sum_sq,
                   count(*) FILTER (WHERE differs)::BIGINT AS n_different,
                   first(variant_id ORDER BY abs(delta_norm) DESC, variant_id) AS worst_variant_id,
                   first(delta_norm ORDER BY abs(delta_norm) DESC, variant_id) AS worst_delta_norm,
                   CASE WHEN bool_or(change = 'break') THEN 'break' WHEN bool_or(change = 'repair') THEN 'repair'
                        ELSE '' END AS change
            FROM pairs GROUP BY model, run_id, dataset, prompt_id
            HAVING bool_or(matched) AND {_changed_sql(changed, "count(*) FILTER (WHERE differs) > 0")}
                   AND {"bool_or(flip_rw)" if flips else "TRUE"}
        """
        key = _tie_key("sum_sq / n")
        sql = f"""SELECT *, rank() OVER (ORDER BY {key} DESC)::BIGINT AS tie_rank,
                   count(*) OVER (PARTITION BY {key})::BIGINT AS n_tied
            FROM ({sql}) ranked WHERE {cwhere}
            ORDER BY sum_sq / n DESC, model, dataset, prompt_id LIMIT ?"""
        return fetch_df(self.con, sql, [*params, *cp, _limit(limit)])

    def reply_texts(self, f: Filters | None = None, *, base_only: bool = False) -> pd.DataFrame:
        """Every stored reply with the text it answers, for the degenerate-reply detector.

        Columns: run_id, model, dataset, prompt_id, variant_id (NULL for a base reply), response,
        prompt (the base prompt's text, or the variant's). The model and dataset filters apply to
        every reply; the (F, u, s, p) filters to variant replies (a base reply has no cell). Sorted
        by model, prompt_id, variant_id (base first).
        """
        where, params = filter_where(None if f is None else replace(f, families=None, subtypes=None,
                                                                        strengths=None, positions=None), d="p")
        cell, cparams = filter_where(None if f is None else replace(f, models=None, datasets=None))
        sql = f"""
            SELECT x.run_id, r.model, p.dataset, x.prompt_id, x.variant_id, x.response,
                   coalesce(v.text, p.text) AS prompt
            FROM responses x JOIN runs r USING (run_id) JOIN prompts p ON p.prompt_id = x.prompt_id
            LEFT JOIN variants v ON v.variant_id = x.variant_id
            WHERE {where} AND (x.variant_id IS NULL OR ({cell}))"""
        if base_only:
            sql += " AND x.variant_id IS NULL"
        sql += " ORDER BY r.model, x.prompt_id, x.variant_id NULLS FIRST"
        return self.con.execute(sql, params + cparams).df()

    def reply_pairs(self, keys: Sequence[tuple[str, str]], f: Filters | None = None) -> pd.DataFrame:
        """The texts behind (run_id, variant_id) pairs: prompt, variant, both replies, tokens, latency, request.

        ``f``'s dataset and (F, u, s, p) fields number variants that share (F, u, s, p) within a
        prompt the way the Prompts page labels them (``dup``: 1 for the first by variant id).
        Returns, in the order of ``keys``: model, run_id, dataset, prompt_id, variant_id, family,
        subtype, strength, position, dup, prompt_text, variant_text, base_reply, variant_reply
        (NULL = no reply stored), base_tokens, variant_tokens, base_latency_s, variant_latency_s,
        base_finish, variant_finish, base_error, variant_error, base_request, variant_request
        (``responses.request``: the rendered model input; NULL where not recorded or on a store
        without the column). Unknown pairs are absent. At most ``MAX_ROWS`` keys.
        """
        keys = list(keys)[:MAX_ROWS]
        req = ("b.request AS base_request, x.request AS variant_request" if self._has_request_column()
               else "NULL::VARCHAR AS base_request, NULL::VARCHAR AS variant_request")
        vwhere, vparams = filter_where(None if f is None else replace(f, models=None), d="p")
        sql = f"""
            WITH k AS (SELECT unnest(?::VARCHAR[]) AS run_id, unnest(?::VARCHAR[]) AS variant_id,
                              unnest(?::INTEGER[]) AS ord),
            lab AS (SELECT v.variant_id, row_number() OVER (PARTITION BY v.prompt_id, v.family, v.subtype, v.strength,
                                                            v.position ORDER BY v.variant_id) AS dup
                    FROM variants v JOIN prompts p USING (prompt_id)
                    WHERE v.prompt_id IN (SELECT v2.prompt_id FROM variants v2 JOIN k USING (variant_id)) AND {vwhere})
            SELECT r.model, k.run_id, p.dataset, v.prompt_id, k.variant_id, v.family, v.subtype, v.strength,
                   v.position, coalesce(lab.dup, 1)::INTEGER AS dup, p.text AS prompt_text, v.text AS variant_text,
                   b.response AS base_reply, x.response AS variant_reply, b.n_tokens AS base_tokens,
                   x.n_tokens AS variant_tokens, b.latency_s AS base_latency_s, x.latency_s AS variant_latency_s,
                   b.finish_reason AS base_finish, x.finish_reason AS variant_finish, b.error AS base_error,
                   x.error AS variant_error, {req}
            FROM k JOIN runs r USING (run_id)
            JOIN variants v ON v.variant_id = k.variant_id
            JOIN prompts p ON p.prompt_id = v.prompt_id
            LEFT JOIN lab ON lab.variant_id = k.variant_id
            LEFT JOIN responses x ON x.run_id = k.run_id AND x.variant_id = k.variant_id
            LEFT JOIN responses b ON b.run_id = k.run_id AND b.prompt_id = v.prompt_id AND b.variant_id IS NULL
            ORDER BY k.ord"""
        params = [[str(r) for r, _ in keys], [str(v) for _, v in keys], list(range(len(keys))), *vparams]
        return fetch_df(self.con, sql, params)
