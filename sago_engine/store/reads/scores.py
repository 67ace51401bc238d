"""Score queries of the summary pages: SQL filters and sums sufficient statistics, ``scoring`` scores.

SAGO (arXiv 2610.01428) §Notation, §Ablations, appendix D. Every per-prompt score goes through
``sago_engine.scoring.scores.prompt_score`` (via ``scoring.scores_from_stats``); SQL here returns only n, ΣΔ̃,
ΣΔ̃², Σ|Δ̃| per group. The statistics tables (``suffstats``) answer every filter exactly:
``prompt_stats`` when no variant field (F, u, s, p) is filtered, ``delta_stats`` when one is,
``cell_stats`` for the ablations. Raw deltas are read only where a summary cannot come from sums:
quantiles of |Δ|, a rescaled clip(Δ/R) (a new R_X), per-token log-probs and the export.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import duckdb
import pandas as pd

from sago_engine.scoring import scores as scoring
from sago_engine.store import suffstats
from sago_engine.store.reads.where import fetch_df, filter_where
from sago_engine.variants.noop import NOOP_PREFIX

if TYPE_CHECKING:  # only for annotations; filters.py has no store dependency
    from sago_engine.filters import Filters

_SUMS = ("sum(s.n)::BIGINT AS n, sum(s.sum_norm) AS sum_norm, sum(s.sum_sq) AS sum_sq, "
         "sum(s.sum_abs) AS sum_abs")


class ScoreQueries:
    """Score methods of ``Store`` (``self.con``; ``self.stats_materialised``: the statistics tables exist)."""

    con: duckdb.DuckDBPyConnection
    stats_materialised: bool

    def _src(self, level: str) -> str:
        return suffstats.source(level, self.stats_materialised)

    # ------------------------------------------------------------------ sufficient statistics
    def stats_counts(self) -> dict[str, int]:
        """Row count of each statistics table (``suffstats.STATS_TABLES``); empty for a store without them."""
        if not self.stats_materialised:
            return {}
        return {t: int(self.con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0]) for t in suffstats.STATS_TABLES}

    def prompt_stats(self, f: Filters | None = None, *, axes: tuple[str, ...] | None = None) -> pd.DataFrame:
        """Sufficient statistics of Δ̃ per (run, prompt, axis) over kept variants with an available Δ̃.

        ``f`` applies (all fields); ``axes``: None = the six plain axes, else exactly these names
        (plain or option axes ``<base>@<option>``; ``where.axis_names``). Columns: run_id, model, dataset, prompt_id, axis, n (number of
        Δ̃, ≥ 1), sum_norm (ΣΔ̃), sum_sq (ΣΔ̃²), sum_abs (Σ|Δ̃|); sorted by model, dataset, prompt, axis.
        An axis a model cannot measure has no rows.
        """
        fine = f is not None and f.variant_restricted()
        where, params = filter_where(f, d="s", v="s", a="s", axes=axes)
        if fine:  # a (F, u, s, p) selection: sum the matching cells of each prompt
            sql = f"""
                SELECT s.run_id, r.model, s.dataset, s.prompt_id, s.axis, {_SUMS}
                FROM {self._src("fine")} s JOIN runs r USING (run_id)
                WHERE {suffstats.USABLE} AND {where}
                GROUP BY s.run_id, r.model, s.dataset, s.prompt_id, s.axis"""
        else:  # one row per (run, prompt, axis) among kept, available rows: no aggregation left
            sql = f"""
                SELECT s.run_id, r.model, s.dataset, s.prompt_id, s.axis, s.n, s.sum_norm, s.sum_sq, s.sum_abs
                FROM {self._src("prompt")} s JOIN runs r USING (run_id)
                WHERE {suffstats.USABLE} AND {where}"""
        return fetch_df(self.con, sql + " ORDER BY r.model, s.dataset, s.prompt_id, s.axis", params)

    def prompt_scores(self, f: Filters | None = None, *, axes: tuple[str, ...] | None = None) -> pd.DataFrame:
        """Per-prompt RMS s_X(i) = sqrt(mean_v Δ̃²) over kept, available variants matching ``f``.

        ``axes``: None = the six plain axes; name option axes (``("cos@user_mean", …)``) to read them.

        SAGO (arXiv 2610.01428) §Notation: ``scoring.prompt_score`` of ``prompt_stats(f)`` (the store never
        sends raw deltas for this). Columns: run_id, model, dataset, prompt_id, axis, s (in [0, 1]),
        n_variants. An axis a model cannot measure has no rows (shown as n/a, never 0).
        """
        return scoring.scores_from_stats(self.prompt_stats(f, axes=axes))

    def axis_names(self) -> list[str]:
        """Every distinct ``deltas.axis`` name with at least one available Δ̃, sorted — the six axes and
        any option axis ``<base>@<option>`` (e.g. ``cos@user_last``, ``bert@rescaled``) a run stored."""
        src = self._src("prompt")
        return [r[0] for r in self.con.execute(
            f"SELECT DISTINCT s.axis FROM {src} s WHERE s.available AND s.n > 0 AND isfinite(s.sum_sq) ORDER BY s.axis").fetchall()]

    def view(self, name: str, *, axes: tuple[str, ...] | None = None) -> pd.DataFrame:
        """The score tables named as schema 1/2's SQL views, computed by ``sago_engine.scoring.scores``.

        ``prompt_scores`` (= ``prompt_scores()``), ``sgs_dataset`` (run_id, model, dataset, axis,
        sgs, std, n_prompts) or ``sgs_total`` (run_id, model, axis, sgs, std, n_prompts; every
        prompt of every dataset weighs the same). Sorted by every column. Raises ValueError otherwise.
        ``axes`` as ``prompt_scores`` (None = the six plain axes).
        """
        if name not in ("prompt_scores", "sgs_dataset", "sgs_total"):
            raise ValueError(f"unknown view {name!r}")
        ps = self.prompt_scores(axes=axes)
        if name == "prompt_scores":
            out = ps
        else:
            by = ("run_id", "model", "dataset", "axis") if name == "sgs_dataset" else ("run_id", "model", "axis")
            out = scoring.sgs(ps, by=by)
        return out.sort_values(list(out.columns)).reset_index(drop=True)

    def cell_prompt_scores(self, f: Filters | None = None, *, axes: tuple[str, ...] | None = None) -> pd.DataFrame:
        """Per-prompt RMS of Δ̃ within each variant cell (F, u, s, p), for the sample-size view.

        SAGO (arXiv 2610.01428) appendix D. Kept variants, available axes, ``f`` applies.
        Columns: model, axis, dataset, prompt_id, family, subtype, strength, position,
        s (``scoring.rms`` over the prompt's variants in that cell), n_variants. ``axes``: None =
        the six plain axes, else these names.
        """
        where, params = filter_where(f, d="s", v="s", a="s", axes=axes)
        sql = f"""
            SELECT r.model, s.axis, s.dataset, s.prompt_id, s.family, s.subtype, s.strength, s.position, {_SUMS}
            FROM {self._src("fine")} s JOIN runs r USING (run_id)
            WHERE {suffstats.USABLE} AND {where}
            GROUP BY ALL ORDER BY model, axis, dataset, prompt_id, family, subtype, strength, position"""
        return scoring.scores_from_stats(fetch_df(self.con, sql, params))

    def axis_availability(self, f: Filters | None = None, *, axes: tuple[str, ...] | None = None) -> pd.DataFrame:
        """Per model and axis: how many delta rows are available / unavailable, and why.

        Columns: model, axis, n_available, n_unavailable, available (True iff any row is
        available), reasons (distinct reasons of unavailable rows, sorted, "; "-joined, or NULL).
        ``axes``: None = the six plain axes, else these names.
        """
        where, params = filter_where(f, d="s", v="s", a="s", axes=axes)
        src = self._src("fine" if f is not None and f.variant_restricted() else "prompt")
        sql = f"""
            WITH a AS (
                SELECT r.model, s.axis, coalesce(sum(s.n) FILTER (WHERE s.available), 0) AS n_ok,
                       sum(s.n_rows) AS n_rows,
                       string_agg(DISTINCT s.reason, '; ' ORDER BY s.reason) FILTER (WHERE NOT s.available) AS reasons
                FROM {src} s JOIN runs r USING (run_id)
                WHERE s.kept AND {where}
                GROUP BY r.model, s.axis)
            SELECT model, axis, n_ok::INTEGER AS n_available, (n_rows - n_ok)::INTEGER AS n_unavailable,
                   n_ok > 0 AS available, reasons
            FROM a ORDER BY model, axis"""
        return fetch_df(self.con, sql, params)

    def filter_options(self) -> dict[str, list]:
        """Distinct values for the sidebar filters: models, datasets, families, subtypes, strengths, positions.

        Models come from runs that have deltas; datasets from deltas; the variant fields from
        kept variants. Each list is sorted.
        """
        src = "prompt_stats" if self.stats_materialised else "deltas"
        rd = self.con.execute(f"SELECT DISTINCT run_id, dataset FROM {src}").fetchall()
        run_ids = sorted({r for r, _ in rd})
        models = self.con.execute("SELECT DISTINCT model FROM runs WHERE list_contains(?, run_id) ORDER BY 1",
                                  [run_ids]).fetchall()
        cells = self.con.execute(
            "SELECT DISTINCT family, subtype, strength, position FROM variants WHERE kept").fetchall()
        return {
            "models": [x[0] for x in models],
            "datasets": sorted({d for _, d in rd}),
            "families": sorted({c[0] for c in cells}),
            "subtypes": sorted({c[1] for c in cells}),
            "strengths": sorted({float(c[2]) for c in cells}),
            "positions": sorted({c[3] for c in cells}),
        }

    def ablation_frame(self, f: Filters | None = None, *,
                       axes: tuple[str, ...] | None = None) -> dict[str, pd.DataFrame]:
        """Sufficient statistics of Δ̃ for the ablations, from ``cell_stats`` (never the raw deltas).

        SAGO (arXiv 2610.01428) §Ablations. Kept variants and available axes only; ``f`` applies.

        Returns:
            ``cells``: one row per (model, axis, family, subtype, strength, position, tone,
            target_ratio) with ``n`` (number of Δ̃ values), ``sum_abs`` (Σ|Δ̃|), ``sum_sq``
            (Σ Δ̃²), ``sum`` (Σ Δ̃). Additive, so ``sago_engine.scoring.ablations`` pools any coarser
            grouping exactly. tone: ``meta.tone`` (else the sign of a politeness strength);
            target_ratio: ``meta.target_ratio`` (else the strength) for structural/length only.
            ``length``: one row per (model, axis, target_ratio) with ``n_prompts``, ``sum_s``
            (Σ_i s_i) and ``sum_s2`` (Σ_i s_i²), where s_i = ``scoring.rms`` over prompt i's
            length variants of that ratio — the per-prompt instability of the length factor
            (from ``length_stats`` when no variant field is filtered and each model has one run,
            else per prompt from ``delta_stats``; the same numbers).
            ``axes``: None = the six plain axes, else these names.
        """
        where, params = filter_where(f, d="s", v="s", a="s", axes=axes)
        keys = ["model", "axis", "family", "subtype", "strength", "position", "tone", "target_ratio"]
        src = self._src("cell")
        cells = fetch_df(self.con, f"""
            SELECT r.model, s.axis, s.family, s.subtype, s.strength, s.position, s.tone, s.target_ratio,
                   sum(s.n)::BIGINT AS n, sum(s.sum_abs) AS sum_abs, sum(s.sum_sq) AS sum_sq, sum(s.sum_norm) AS sum
            FROM {src} s JOIN runs r USING (run_id)
            WHERE {suffstats.USABLE} AND {where}
            GROUP BY ALL""", params)
        one_run_per_model = self.con.execute(
            "SELECT count(*) = count(DISTINCT model) FROM runs").fetchall()[0][0]
        if (self.stats_materialised and one_run_per_model
                and (f is None or not f.variant_restricted())):  # precomputed per (run, dataset, axis, ratio)
            lwhere, lparams = filter_where(f, d="l", a="l", axes=axes)
            length = fetch_df(self.con, f"""
                SELECT r.model, l.axis, l.target_ratio, sum(l.n_prompts)::BIGINT AS n_prompts,
                       sum(l.sum_s) AS sum_s, sum(l.sum_s2) AS sum_s2
                FROM length_stats l JOIN runs r USING (run_id)
                WHERE isfinite(l.sum_s) AND isfinite(l.sum_s2) AND {lwhere} GROUP BY ALL""", lparams)
        else:  # per prompt (and model) from the finest grain
            per_prompt = fetch_df(self.con, f"""
                SELECT r.model, s.axis, s.target_ratio, s.prompt_id, sum(s.n)::BIGINT AS n, sum(s.sum_sq) AS sum_sq
                FROM {self._src("fine")} s JOIN runs r USING (run_id)
                WHERE {suffstats.USABLE} AND s.target_ratio IS NOT NULL AND {where}
                GROUP BY ALL""", params)
            length = suffstats.length_rows(per_prompt, by=("model", "axis", "target_ratio"))
        return {"cells": cells.sort_values(keys, na_position="first").reset_index(drop=True),
                "length": length.sort_values(["model", "axis", "target_ratio"]).reset_index(drop=True)}

    def noop_counts(self, f: Filters | None = None) -> pd.DataFrame:
        """Variants that do not vary (``sago_engine.variants.noop``), counted per model and cell.

        Text no-ops (``variants.skip_reason`` starting "no-op: "; every model: ``model`` NULL, the
        model filter does not apply) and model-input no-ops (``deltas.reason`` starting "no-op: ",
        one per variant and run, counted on the Δ-BLEU row in ``cell_stats``). The dataset and
        (F, u, s, p) filters apply. Columns: model, family, subtype, strength, position, reason,
        n; sorted with text no-ops first. A store without ``skip_reason`` (schema < 4, read-only)
        has no text no-ops.
        """
        where, params = filter_where(f, d="s", v="s")
        like = NOOP_PREFIX + "%"
        model_rows = fetch_df(self.con, f"""
            SELECT r.model, s.family, s.subtype, s.strength, s.position, s.reason, sum(s.n_rows)::BIGINT AS n
            FROM {self._src("cell")} s JOIN runs r USING (run_id)
            WHERE NOT s.available AND s.reason LIKE ? AND s.axis = 'bleu' AND {where}
            GROUP BY ALL""", [like, *params])
        has_col = self.con.execute("SELECT count(*) FROM information_schema.columns WHERE table_name = 'variants' "
                                   "AND column_name = 'skip_reason'").fetchall()[0][0]
        text_rows = model_rows.iloc[0:0]
        if has_col:
            twhere, tparams = filter_where(None if f is None else replace(f, models=None), d="p")
            text_rows = fetch_df(self.con, f"""
                SELECT NULL::VARCHAR AS model, v.family, v.subtype, v.strength, v.position, v.skip_reason AS reason,
                       count(*)::BIGINT AS n
                FROM variants v JOIN prompts p USING (prompt_id)
                WHERE v.skip_reason LIKE ? AND {twhere}
                GROUP BY ALL""", [like, *tparams])
        keys = ["family", "subtype", "strength", "position"]
        return pd.concat([text_rows.sort_values(keys), model_rows.sort_values(["model", *keys])],
                         ignore_index=True)

    # ------------------------------------------------------------------ raw Δ (no sum answers these)
    def delta_abs_quantiles(self, f: Filters | None = None, *, q: float = 0.95,
                            axes: tuple[str, ...] | None = None) -> pd.DataFrame:
        """Per axis over the store (kept, available, ``f``): n, q, q_abs = quantile_cont(|Δ|, q), max_abs,
        models (the sorted models whose deltas were pooled). ``axes``: None = the six plain axes, else these names."""
        where, params = filter_where(f, a="d", axes=axes)
        sql = f"""
            SELECT d.axis, count(*)::BIGINT AS n, ?::DOUBLE AS q,
                   quantile_cont(abs(d.delta), ?::DOUBLE) AS q_abs, max(abs(d.delta)) AS max_abs,
                   list(DISTINCT r.model ORDER BY r.model) AS models
            FROM deltas d JOIN variants v USING (variant_id) JOIN runs r USING (run_id)
            WHERE {suffstats.USABLE_DELTA} AND v.kept AND {where}
            GROUP BY d.axis ORDER BY d.axis
        """
        return self.con.execute(sql, [float(q), float(q), *params]).df()

    def prompt_scores_rescaled(self, f: Filters | None = None, *, normalizers: tuple = (),
                               axes: tuple[str, ...] | None = None, clip: bool = True) -> pd.DataFrame:
        """``prompt_scores`` recomputed from raw Δ under other R_X: s = ``scoring.prompt_score`` of clip(Δ/R, −1, 1).

        ``normalizers``: ((axis, R), …) pairs (a tuple, so it can key a cache); axes not listed
        are left out. Same columns as ``prompt_scores``. SQL sums n, Σx, Σx², Σ|x| of x = clip(Δ/R) per prompt.
        ``axes``: None = the six plain axes, else these names (an option axis needs its own pair).
        ``clip``: False = Δ/R not clipped (the SAGO authors' code), so s may exceed 1.
        """
        pairs = [(str(a), float(r)) for a, r in normalizers if float(r) > 0]  # none: no rows
        where, params = filter_where(f, a="d", axes=axes)
        term = "least(greatest(d.delta / rx.rr, -1.0), 1.0)" if clip else "d.delta / rx.rr"
        sql = f"""
            WITH rx AS (SELECT unnest(?::VARCHAR[]) AS axis, unnest(?::DOUBLE[]) AS rr)
            SELECT d.run_id, r.model, d.dataset, d.prompt_id, d.axis, count(*)::BIGINT AS n,
                   sum({term}) AS sum_norm, sum(pow({term}, 2)) AS sum_sq, sum(abs({term})) AS sum_abs
            FROM deltas d JOIN rx USING (axis) JOIN variants v USING (variant_id) JOIN runs r USING (run_id)
            WHERE {suffstats.USABLE_DELTA} AND v.kept AND {where}
            GROUP BY d.run_id, r.model, d.dataset, d.prompt_id, d.axis
            ORDER BY r.model, d.dataset, d.prompt_id, d.axis
        """
        st = self.con.execute(sql, [[a for a, _ in pairs], [r for _, r in pairs], *params]).df()
        return scoring.scores_from_stats(st)

    def per_token_logprob_deltas(self, f: Filters | None = None) -> pd.DataFrame:
        """Δ of the length-normalized log-prob per kept variant: seq_logprob/n_tokens (variant − base).

        Columns: model, dataset, prompt_id, variant_id, delta_per_token (nats per token),
        delta_seq (the paper's Δ-Prob, not normalized). Responses without a log-prob or with 0
        tokens are left out (closed models: no rows, i.e. unavailable, never 0).
        """
        where, params = filter_where(f, d="p")
        sql = f"""
            SELECT r.model, p.dataset, x.prompt_id, x.variant_id,
                   x.seq_logprob / x.n_tokens - b.seq_logprob / b.n_tokens AS delta_per_token,
                   x.seq_logprob - b.seq_logprob AS delta_seq
            FROM responses x
            JOIN responses b ON b.run_id = x.run_id AND b.prompt_id = x.prompt_id AND b.variant_id IS NULL
            JOIN variants v ON v.variant_id = x.variant_id
            JOIN prompts p ON p.prompt_id = x.prompt_id
            JOIN runs r ON r.run_id = x.run_id
            WHERE v.kept AND x.seq_logprob IS NOT NULL AND b.seq_logprob IS NOT NULL
                  AND x.n_tokens > 0 AND b.n_tokens > 0 AND x.error IS NULL AND b.error IS NULL AND {where}
            ORDER BY r.model, p.dataset, x.prompt_id, x.variant_id
        """
        return self.con.execute(sql, params).df()

    def delta_matrix(self, f: Filters | None = None, *, axes: tuple[str, ...] | None = None,
                     scorers: tuple[tuple[str, str], ...] | None = None) -> pd.DataFrame:
        """The per-prompt delta matrix of the current filter (for CSV / Parquet export).

        One row per (run, prompt, variant, axis) of kept variants: model, dataset, prompt_id,
        variant_id, family, subtype, strength, position, axis, delta (signed, raw units),
        delta_norm (Δ̃), available, reason. Unavailable axes keep NULL deltas with their reason.
        ``axes``: None = the six plain axes, else these names (option axes ``<base>@<option>``).
        ``scorers`` ((dataset, correctness scorer) pairs): also scorer, base_verdict and
        variant_verdict — the correctness verdicts of the base reply and the variant's reply
        (NULL where none is stored).
        """
        where, params = filter_where(f, a="d", axes=axes)
        extra, joins, jparams = "", "", []
        if scorers is not None:
            from sago_engine.store.reads.correctness import verdict_join

            jb, pb = verdict_join(scorers, "cb", "d.run_id", "b.response_id")
            jx, px = verdict_join(scorers, "cx", "d.run_id", "x.response_id")
            extra = ", coalesce(cx.scorer, cb.scorer) AS scorer, cb.verdict AS base_verdict, cx.verdict AS variant_verdict"
            joins = f"""LEFT JOIN responses x ON x.run_id = d.run_id AND x.variant_id = d.variant_id
                LEFT JOIN responses b ON b.run_id = d.run_id AND b.prompt_id = d.prompt_id AND b.variant_id IS NULL
                {jb} {jx}"""
            jparams = pb + px
        sql = f"""
            SELECT r.model, d.run_id, d.dataset, d.prompt_id, d.variant_id,
                   v.family, v.subtype, v.strength, v.position,
                   d.axis, d.delta, d.delta_norm, d.available, d.reason{extra}
            FROM deltas d JOIN variants v USING (variant_id) JOIN runs r USING (run_id) {joins}
            WHERE v.kept AND {where}
            ORDER BY r.model, d.dataset, d.prompt_id, d.variant_id, d.axis
        """
        return self.con.execute(sql, jparams + params).df()
