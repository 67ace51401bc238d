"""Reads of stored facts: runs, prompts, variants, responses, raw deltas, the Prompts and Variants pages'
lists and details, judge verdicts, templates, API usage.

Scores are not computed here (``reads/scores.py`` reads the statistics tables). ``Filters`` become SQL
through ``where.filter_where``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import duckdb
import pandas as pd

from sago_engine.filters import Filters
from sago_engine.store.reads.where import axis_names, fetch_df, filter_where
from sago_engine.store.schema import KEYS, TABLES, USAGE_EXTRA_COUNTERS, has_table
from sago_engine.variants.noop import NOOP_PREFIX

#: RE2 pattern (``regexp_full_match``) of a blank text: only characters Python's ``str.isspace``
#: accepts — tab, newline, vertical tab, form feed, carriage return, the separators U+001C–U+001F,
#: U+0085 and Unicode's space, line and paragraph separators (``\p{Z}``). DuckDB's ``trim`` strips
#: spaces only, so a reply of tabs and newlines would not count as blank.
BLANK_PATTERN = r"[\t\n\v\f\r\x{1c}-\x{1f}\x{85}\p{Z}]*"


class Browse:
    """Read methods of ``Store`` over stored rows (``self.con``: a DuckDB connection)."""

    con: duckdb.DuckDBPyConnection
    columns: dict[str, tuple[str, ...]]  # known columns per table (schema.check); reads select only these

    def _has_table(self, name: str) -> bool:
        return has_table(self.con, name)

    def _cols(self, table: str, alias: str = "", exclude: tuple[str, ...] = ()) -> str:
        """The select list of ``table``'s known columns (``alias.`` prefixed), never ``*``: a column a
        store file adds is not read."""
        pre = f"{alias}." if alias else ""
        return ", ".join(f'{pre}"{c}"' for c in self.columns[table] if c not in exclude)

    def meta(self) -> dict[str, str]:
        """All ``meta`` key/value pairs (app, schema_version, published_at, progress…)."""
        return dict(self.con.execute("SELECT key, value FROM meta").fetchall())

    def run_usage(self) -> pd.DataFrame:
        """API usage per run (``run_usage``, see ``EXTRA_TABLES``) joined with the model name; empty for a store
        written before the table existed."""
        cols = ["run_id", "model", "backend", "requests", "cache_hits", "retries", "errors", "prompt_tokens",
                "completion_tokens", "price_in_per_mtok", "price_out_per_mtok", "cost_usd", "models_returned",
                "updated_at", *USAGE_EXTRA_COUNTERS, "price_cached_in_per_mtok"]
        if not self._has_table("run_usage"):
            return pd.DataFrame(columns=cols)
        return self.con.execute(
            f"SELECT u.run_id, r.model, r.backend, {self._cols('run_usage', 'u', ('run_id',))} FROM run_usage u "
            "LEFT JOIN runs r USING (run_id) ORDER BY r.model").df().reindex(columns=cols)

    def api_responses(self, run_id: str | None = None) -> pd.DataFrame:
        """Per-response API facts (model string returned, tokens, cache hit, attempts, raw stop
        reason), optionally of one run; empty for a store without the table."""
        if not self._has_table("api_responses"):
            return pd.DataFrame(columns=["response_id", "run_id", "model_returned", "prompt_tokens",
                                         "completion_tokens", "cached", "attempts", "finish_raw"])
        if run_id is None:
            return self.con.execute(f"SELECT {self._cols('api_responses')} FROM api_responses ORDER BY response_id").df()
        return self.con.execute(f"SELECT {self._cols('api_responses')} FROM api_responses WHERE run_id = ? "
                                "ORDER BY response_id", [run_id]).df()

    def imported_rows(self, run_id: str | None = None) -> pd.DataFrame:
        """Rows of imported external files exactly as read (``imported_rows``): run_id, source,
        row_index, prompt_id, variant_id and ``columns`` (dict column → text, every column of the
        source row); optionally of one run, ordered by source and row. Empty for a store without
        the table."""
        cols = ["run_id", "source", "row_index", "prompt_id", "variant_id", "columns"]
        if not self._has_table("imported_rows"):
            return pd.DataFrame(columns=cols)
        where, params = ("WHERE run_id = ?", [run_id]) if run_id is not None else ("", [])
        df = self.con.execute(f"SELECT {', '.join(cols)} FROM imported_rows {where} "
                              "ORDER BY run_id, source, row_index", params).df()
        df["columns"] = [json.loads(c) for c in df["columns"]]
        return df

    def run_origins(self) -> pd.DataFrame:
        """run_id, model, backend and ``origin`` (parsed JSON, None for sago's own runs) of every run."""
        df = self.con.execute("SELECT run_id, model, backend, origin FROM runs ORDER BY model, run_id").df()
        df["origin"] = [json.loads(o) if isinstance(o, str) else None for o in df["origin"]]
        return df

    def done_units(self, run_id: str) -> set[str]:
        """Prompt ids whose unit (base + all variants) is finished for this run."""
        return {r[0] for r in self.con.execute("SELECT prompt_id FROM units WHERE run_id = ?", [run_id]).fetchall()}

    def existing_ids(self, table: str, column: str, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` already exist in ``table.column``."""
        if table not in TABLES:
            raise ValueError(f"unknown table {table!r}")
        if not ids:
            return set()
        df = pd.DataFrame({"id": list(ids)})
        self.con.register("_ids", df)
        try:
            rows = self.con.execute(f'SELECT DISTINCT t."{column}" FROM {table} t JOIN _ids ON t."{column}" = _ids.id').fetchall()
        finally:
            self.con.unregister("_ids")
        return {r[0] for r in rows}

    def counts(self) -> dict[str, int]:
        """Row count of every table."""
        return {t: int(self.con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0]) for t in TABLES}

    def duplicate_keys(self) -> dict[str, int]:
        """Per table of ``TABLES``: rows minus distinct keys (``schema.KEYS``); all 0 in a sound store."""
        return {t: int(self.con.execute(f"SELECT count(*) - count(DISTINCT ({', '.join(k)})) FROM {t}").fetchall()[0][0])
                for t, k in KEYS.items()}

    def unit_keys(self) -> set[tuple[str, str]]:
        """Every finished (run_id, prompt_id) unit."""
        return set(map(tuple, self.con.execute("SELECT run_id, prompt_id FROM units").fetchall()))

    def runs(self) -> pd.DataFrame:
        """All runs, one row each, newest first."""
        return self.con.execute(f"SELECT {self._cols('runs')} FROM runs ORDER BY model, started_at").df()

    def prompts(self, datasets: Iterable[str] | None = None) -> pd.DataFrame:
        """Prompts (optionally of some datasets)."""
        q = f"SELECT {self._cols('prompts')} FROM prompts"
        params: list[Any] = []
        if datasets is not None:
            q += " WHERE list_contains(?, dataset)"
            params.append(list(datasets))
        return self.con.execute(q + " ORDER BY dataset, prompt_id", params).df()

    def variants(self, prompt_id: str | None = None) -> pd.DataFrame:
        """Variants (optionally of one prompt) with (F, u, s, p), text, seed, semantic score, kept."""
        q = f"SELECT {self._cols('variants')} FROM variants"
        params: list[Any] = []
        if prompt_id is not None:
            q += " WHERE prompt_id = ?"
            params.append(prompt_id)
        return self.con.execute(q + " ORDER BY family, subtype, strength, position", params).df()

    def deltas(self, *, kept_only: bool = True, run_ids: Iterable[str] | None = None,
               axes: Sequence[str] | None = None) -> pd.DataFrame:
        """Every delta joined with its model, dataset and variant tuple (F, u, s, p).

        ``axes``: None = the six plain axes, else exactly these names (option axes
        ``<base>@<option>`` only when named; ``where.axis_names``).

        Columns: run_id, model, dataset, prompt_id, variant_id, family, subtype, strength,
        position, axis, delta, delta_norm (NULL where unavailable), available, reason, detector,
        kept, semantic_score.
        """
        q = """
            SELECT d.run_id, r.model, d.dataset, d.prompt_id, d.variant_id,
                   v.family, v.subtype, v.strength, v.position,
                   d.axis, d.delta, d.delta_norm, d.available, d.reason, d.detector,
                   v.kept, v.semantic_score
            FROM deltas d JOIN variants v USING (variant_id) JOIN runs r USING (run_id)
            WHERE list_contains(?::VARCHAR[], d.axis)
        """
        params: list[Any] = [axis_names(axes)]
        if kept_only:
            q += " AND v.kept"
        if run_ids is not None:
            q += " AND list_contains(?, d.run_id)"
            params.append(list(run_ids))
        return self.con.execute(q + " ORDER BY d.run_id, d.prompt_id, d.variant_id, d.axis", params).df()

    def responses(self, prompt_id: str) -> pd.DataFrame:
        """All responses (base: variant_id NULL) for one prompt across runs, with the model name."""
        return self.con.execute(
            f"""SELECT r.model, {self._cols('responses', 'x')} FROM responses x JOIN runs r USING (run_id)
               WHERE x.prompt_id = ? ORDER BY r.model, x.variant_id NULLS FIRST""",
            [prompt_id],
        ).df()

    def run_records(self) -> pd.DataFrame:
        """Provenance of every run: model, backend, fingerprint, seed, R_X, encoder, filter, versions, status.

        JSON columns are returned as JSON text (shown verbatim in the provenance expander).
        """
        return self.con.execute(
            """SELECT run_id, model, backend, model_source, weights_sha256, dtype, device, fingerprint, seed,
                      CAST(decoding AS VARCHAR) AS decoding, CAST(normalizers AS VARCHAR) AS normalizers,
                      CAST(encoder AS VARCHAR) AS encoder, CAST(semantic_filter AS VARCHAR) AS semantic_filter,
                      CAST(versions AS VARCHAR) AS versions, started_at, finished_at, status
               FROM runs ORDER BY model, started_at"""
        ).df()

    def run_settings(self) -> pd.DataFrame:
        """Every run's settings as stored, to tell which runs differ in one setting only.

        Columns: run_id, model, backend, model_source, weights_sha256, dtype, seed, decoding,
        config, normalizers, semantic_filter, encoder (JSON columns as JSON text, NULL when not
        recorded); sorted by model, run_id.
        """
        return self.con.execute(
            """SELECT run_id, model, backend, model_source, weights_sha256, dtype, seed,
                      CAST(decoding AS VARCHAR) AS decoding, CAST(config AS VARCHAR) AS config,
                      CAST(normalizers AS VARCHAR) AS normalizers,
                      CAST(semantic_filter AS VARCHAR) AS semantic_filter, CAST(encoder AS VARCHAR) AS encoder
               FROM runs ORDER BY model, run_id""").df()

    def prompt_list(self, f: Filters | None = None) -> pd.DataFrame:
        """Prompts that have kept variants matching ``f``: dataset, prompt_id, text, n_variants.

        The dataset and (F, u, s, p) filters apply; with a model filter only prompts that one of
        those models answered (a base response exists) are listed. Sorted by dataset, prompt_id.
        """
        models = None if f is None else f.models
        where, params = filter_where(None if f is None else replace(f, models=None), d="p")
        sql = f"""
            SELECT p.dataset, p.prompt_id, p.text, count(*)::INTEGER AS n_variants
            FROM prompts p JOIN variants v USING (prompt_id)
            WHERE v.kept AND {where}
        """
        if models is not None:
            sql += """ AND p.prompt_id IN (SELECT x.prompt_id FROM responses x JOIN runs r USING (run_id)
                                           WHERE x.variant_id IS NULL AND list_contains(?::VARCHAR[], r.model))"""
            params.append([str(m) for m in models])
        sql += " GROUP BY p.dataset, p.prompt_id, p.text ORDER BY p.dataset, p.prompt_id"
        return self.con.execute(sql, params).df()

    def prompt_detail(self, f: Filters | None = None, *, prompt_id: str,
                      axes: tuple[str, ...] | None = None) -> dict[str, pd.DataFrame]:
        """Everything the Prompts page shows for one prompt, restricted by ``f``.

        Returns a dict of DataFrames:
            ``prompt``: 0 or 1 row (prompt_id, dataset, source_id, text, reference as JSON text, category);
            ``variants``: its variants matching the (F, u, s, p) filters, kept or not — variant_id,
            family, subtype, strength, position, text, seed, generator, meta (JSON text),
            semantic_score, passes_filter, kept;
            ``responses``: model, run_id, variant_id (NULL = the base prompt), response, n_tokens,
            finish_reason, error — the base response and the responses to the listed variants,
            for the filtered models;
            ``deltas``: model, run_id, variant_id, axis, delta (signed Δ), delta_norm (Δ̃),
            available, reason, detector — per listed variant × axis (unavailable axes keep NULLs);
            ``axes``: None = the six plain axes, else these names.
        Empty frames when the prompt is unknown or its dataset is filtered out.
        """
        q = self.con.execute
        fv = None if f is None else replace(f, models=None)
        vwhere, vparams = filter_where(fv, d="p")
        dwhere, dparams = filter_where(None if f is None else Filters(datasets=f.datasets), d="p")
        prompt = q(f"""SELECT prompt_id, dataset, source_id, text, CAST(reference AS VARCHAR) AS reference, category
                       FROM prompts p WHERE prompt_id = ? AND {dwhere}""", [prompt_id, *dparams]).df()
        variants = q(f"""
            SELECT v.variant_id, v.family, v.subtype, v.strength, v.position, v.text, v.seed, v.generator,
                   CAST(v.meta AS VARCHAR) AS meta, v.semantic_score, v.passes_filter, v.kept
            FROM variants v JOIN prompts p USING (prompt_id)
            WHERE v.prompt_id = ? AND {vwhere}
            ORDER BY v.family, v.subtype, v.strength, v.position, v.variant_id""", [prompt_id, *vparams]).df()
        if prompt.empty:
            variants = variants.iloc[0:0]
        vids = [str(x) for x in variants["variant_id"]]
        mwhere, mparams = ("TRUE", []) if f is None or f.models is None else \
            ("list_contains(?::VARCHAR[], r.model)", [[str(m) for m in f.models]])
        if prompt.empty:
            mwhere, mparams = "FALSE", []
        # the dataset condition is implied by the prompt; it lets DuckDB skip other datasets' row groups
        dataset = None if prompt.empty else str(prompt["dataset"].iloc[0])
        responses = q(f"""
            SELECT r.model, x.run_id, x.variant_id, x.response, x.n_tokens, x.finish_reason, x.error
            FROM responses x JOIN runs r USING (run_id)
            WHERE x.prompt_id = ? AND {mwhere} AND (x.variant_id IS NULL OR list_contains(?::VARCHAR[], x.variant_id))
            ORDER BY r.model, x.run_id, x.variant_id NULLS FIRST""", [prompt_id, *mparams, vids]).df()
        deltas = q(f"""
            SELECT r.model, d.run_id, d.variant_id, d.axis, d.delta, d.delta_norm, d.available, d.reason, d.detector
            FROM deltas d JOIN runs r USING (run_id)
            WHERE d.prompt_id = ? AND d.dataset = ? AND {mwhere} AND list_contains(?::VARCHAR[], d.variant_id)
                  AND list_contains(?::VARCHAR[], d.axis)
            ORDER BY r.model, d.run_id, d.variant_id, d.axis""", [prompt_id, dataset, *mparams, vids,
                                                                   axis_names(axes)]).df()
        return {"prompt": prompt.reset_index(drop=True), "variants": variants, "responses": responses,
                "deltas": deltas}

    def variant_audit(self, f: Filters | None = None, with_meta: bool = True, with_ids: bool = True) -> pd.DataFrame:
        """Every variant (kept or not) matching the dataset and (F, u, s, p) filters, for the audit.

        Columns: variant_id, dataset, prompt_id, family, subtype, strength, position,
        semantic_score (BERTScore-F1 vs the base prompt; NULL where not scored), passes_filter,
        kept, meta (JSON text). ``with_meta=False`` drops meta and ``with_ids=False`` drops
        variant_id, dataset and prompt_id: the audit charts need neither, and large stores
        load several times faster without them. Variants do not depend on the model, so the
        model filter does not apply. Rows come in store order.
        """
        where, params = filter_where(None if f is None else replace(f, models=None), d="p")
        return fetch_df(self.con, f"""
            SELECT {"v.variant_id, p.dataset, v.prompt_id, " if with_ids else ""}
                   v.family, v.subtype, v.strength, v.position,
                   v.semantic_score, v.passes_filter, v.kept{", CAST(v.meta AS VARCHAR) AS meta" if with_meta else ""}
            FROM variants v JOIN prompts p USING (prompt_id)
            WHERE {where}""", params)

    def rejected_variants(self, f: Filters | None = None, limit: int = 1000) -> pd.DataFrame:
        """Variants the semantic filter (or the rewrite checks) rejected, with the reason, for the audit.

        SAGO (arXiv 2610.01428) §Variants. The dataset and (F, u, s, p) filters apply (not the
        model filter: variants do not depend on the model). Columns: dataset, prompt_id,
        family, subtype, strength, position, generator, text, semantic_score, reason — reason is
        ``"degenerate rewrite: <why>"`` (an LLM rewrite that was empty, unchanged, repetitive,
        an error or moved the length the wrong way; ``meta.rewrite_issue``), ``"no-op: <why>"`` (the
        variant does not vary: never run; ``variants.skip_reason``), ``"semantic score
        <s> ≤ filter threshold"`` (failed on its own), or ``"prompt-level rule: another <family>
        variant of this prompt failed"`` (passed, but SAGO keeps a prompt's family only if all
        its variants pass). At most ``limit`` rows, ordered by dataset, prompt, (F, u, s, p).
        """
        where, params = filter_where(None if f is None else replace(f, models=None), d="p")
        has_skip = "skip_reason" in self.columns.get("variants", ())  # schema ≥ 4
        noop, noop_params = ("WHEN v.skip_reason LIKE ? THEN v.skip_reason", [NOOP_PREFIX + "%"]) if has_skip else ("", [])
        return self.con.execute(f"""
            SELECT p.dataset, v.prompt_id, v.family, v.subtype, v.strength, v.position, v.generator, v.text,
                   v.semantic_score,
                   CASE WHEN v.meta->>'rewrite_issue' IS NOT NULL THEN 'degenerate rewrite: ' || (v.meta->>'rewrite_issue')
                        {noop}
                        WHEN v.passes_filter IS NOT DISTINCT FROM FALSE AND v.semantic_score IS NOT NULL
                            THEN 'semantic score ' || printf('%.3f', v.semantic_score) || ' ≤ filter threshold'
                        WHEN v.passes_filter THEN 'prompt-level rule: another ' || v.family || ' variant of this prompt failed'
                        ELSE 'not kept' END AS reason
            FROM variants v JOIN prompts p USING (prompt_id)
            WHERE NOT v.kept AND {where}
            ORDER BY p.dataset, v.prompt_id, v.family, v.subtype, v.strength, v.position, v.variant_id
            LIMIT ?""", [*noop_params, *params, int(limit)]).df()

    def variant_records(self, ids: Sequence[str]) -> pd.DataFrame:
        """The stored rows of the variants ``ids`` (all ``variants`` columns; meta as JSON text).

        Lets a resumed run reuse LLM rewrites instead of regenerating them. Unknown ids are absent.
        """
        if not ids:
            return self.con.execute(f"SELECT {self._cols('variants', exclude=('meta',))}, CAST(meta AS VARCHAR) "
                                    "AS meta_json FROM variants LIMIT 0").df()
        self.con.register("_ids", pd.DataFrame({"id": list(ids)}))
        try:
            return self.con.execute(f"""SELECT {self._cols('variants', 'v', ('meta',))}, CAST(v.meta AS VARCHAR) AS meta_json
                                       FROM variants v JOIN _ids ON v.variant_id = _ids.id
                                       ORDER BY v.variant_id""").df()
        finally:
            self.con.unregister("_ids")

    def templates(self, kind: str | None = None) -> pd.DataFrame:
        """Stored prompt templates (LLM judge / rewriter): template_id, kind, text.

        Empty (same columns) on stores written before the table existed.
        """
        if not self._has_table("templates"):
            return pd.DataFrame(columns=["template_id", "kind", "text"])
        q, params = "SELECT template_id, kind, text FROM templates", []
        if kind is not None:
            q += " WHERE kind = ?"
            params.append(kind)
        return self.con.execute(q + " ORDER BY kind, template_id", params).df()

    def mirroring_verdicts(self, run_ids: Iterable[str] | None = None) -> pd.DataFrame:
        """Judge and heuristic verdicts per (run, social-register variant, judged reply).

        Columns: model, run_id, prompt_id, variant_id, response_of ("variant" = the variant's
        reply, "base" = the base reply judged against the variant's register), judge_model,
        template_id, verdict (1/0/NULL = no usable answer), raw (the judge's text), error,
        heuristic_verdict (1/0), detector (the label Δ-MR of that variant used). Empty on stores
        without the table.
        """
        cols = ["model", "run_id", "prompt_id", "variant_id", "response_of", "judge_model", "template_id",
                "verdict", "raw", "error", "heuristic_verdict", "detector"]
        if not self._has_table("mirroring_verdicts"):
            return pd.DataFrame(columns=cols)
        q, params = f"""SELECT r.model, {self._cols('mirroring_verdicts', 'm', ('run_id',))}, m.run_id FROM mirroring_verdicts m
                        JOIN runs r USING (run_id) WHERE TRUE""", []
        if run_ids is not None:
            q += " AND list_contains(?::VARCHAR[], m.run_id)"
            params.append([str(x) for x in run_ids])
        df = self.con.execute(q + " ORDER BY r.model, m.run_id, m.prompt_id, m.variant_id, m.response_of", params).df()
        return df[cols]

    def mirroring_examples(self, f: Filters | None = None) -> pd.DataFrame:
        """Judge and heuristic verdicts with the texts they were about, for the mirroring-judge audit.

        One row per ``mirroring_verdicts`` row of the runs of ``f``'s models and prompts of its
        datasets (the variant fields F, u, s, p apply to the judged variant). Columns: model,
        run_id, dataset, prompt_id, variant_id, response_of ("variant" | "base"), subtype,
        strength, judge_model, verdict (1/0/NULL), raw (the judge's answer), error,
        heuristic_verdict (1/0), detector, base_prompt, variant_prompt, response (the judged
        reply: the variant's reply, or the base reply when ``response_of`` is "base"). Empty (same
        columns) on stores without the table. Sorted by model, run, prompt, variant, response_of.
        """
        cols = ["model", "run_id", "dataset", "prompt_id", "variant_id", "response_of", "subtype", "strength",
                "judge_model", "verdict", "raw", "error", "heuristic_verdict", "detector", "base_prompt",
                "variant_prompt", "response"]
        if not self._has_table("mirroring_verdicts"):
            return pd.DataFrame(columns=cols)
        where, params = filter_where(f, d="p")
        df = fetch_df(self.con, f"""
            SELECT r.model, m.run_id, p.dataset, m.prompt_id, m.variant_id, m.response_of, v.subtype, v.strength,
                   m.judge_model, m.verdict, m.raw, m.error, m.heuristic_verdict, m.detector,
                   p.text AS base_prompt, v.text AS variant_prompt, x.response
            FROM mirroring_verdicts m
            JOIN runs r USING (run_id)
            JOIN prompts p ON p.prompt_id = m.prompt_id
            JOIN variants v ON v.variant_id = m.variant_id
            LEFT JOIN responses x ON x.run_id = m.run_id AND x.prompt_id = m.prompt_id
                 AND ((m.response_of = 'base' AND x.variant_id IS NULL)
                      OR (m.response_of <> 'base' AND x.variant_id = m.variant_id))
            WHERE {where}
            ORDER BY r.model, m.run_id, m.prompt_id, m.variant_id, m.response_of""", params)
        return df[cols]

    def semantic_thresholds(self) -> pd.DataFrame:
        """The semantic filter each run applied: model, run_id, threshold (encoder scale),
        threshold_config (the paper-scale value, 0.85), scale ("mapped" | "raw" | …), encoder (JSON text)."""
        return self.con.execute("""
            SELECT model, run_id,
                   TRY_CAST(semantic_filter->>'threshold' AS DOUBLE) AS threshold,
                   TRY_CAST(semantic_filter->>'threshold_config' AS DOUBLE) AS threshold_config,
                   semantic_filter->>'scale' AS scale,
                   CAST(semantic_filter->'encoder' AS VARCHAR) AS encoder
            FROM runs ORDER BY model, run_id""").df()

    # --- reply health, noise floor, base repeats ---
    def reply_health(self) -> pd.DataFrame:
        """Per run: how many stored replies are not answers.

        Returns:
            DataFrame, one row per run: run_id, model, backend, replies (base + variant rows of
            ``responses``, plus base repeats), errors (``error`` set), empty (no error, blank
            text — nothing but whitespace as Python's ``str.isspace`` knows it, tabs and newlines
            included (``BLANK_PATTERN``) — not a refusal), budget_spent (finish "length" with no
            visible output: no characters at all, or a blank reply after hidden reasoning tokens
            (``api_responses.reasoning_tokens`` > 0); ``pipeline.budget_spent``), refused (no
            error but finish "error": content filter / safety / refusal), judge_verdicts and
            judge_unparsed (mirroring-judge answers with no unambiguous YES/NO, backend errors
            excluded; 0 without a judge), invalid_logprobs (replies whose server log-probs were set
            aside — sentinels, positive or non-finite values — so Δ-Prob / Δ-Ent of their pairs are
            n/a: ``run_usage.invalid_logprobs``; 0 for local runs and older stores).
        """
        rep = ("UNION ALL SELECT response_id, run_id, response, finish_reason, error FROM base_repeats"
               if self._has_table("base_repeats") else "")
        api = "reasoning_tokens" in self.columns.get("api_responses", ())
        hidden = "coalesce(a.reasoning_tokens, 0) > 0" if api else "FALSE"
        join = "LEFT JOIN api_responses a USING (response_id)" if api else ""
        df = self.con.execute(f"""
            WITH r AS (SELECT response_id, run_id, response, finish_reason, error FROM responses {rep}),
            b AS (SELECT r.*, regexp_full_match(r.response, ?) AS blank, {hidden} AS hidden FROM r {join})
            SELECT b.run_id, any_value(ru.model) AS model, any_value(ru.backend) AS backend, count(*) AS replies,
                   count(*) FILTER (WHERE b.error IS NOT NULL) AS errors,
                   count(*) FILTER (WHERE b.error IS NULL AND b.blank AND coalesce(b.finish_reason, '') <> 'error')
                       AS empty,
                   count(*) FILTER (WHERE b.error IS NULL AND b.finish_reason = 'length'
                                           AND (b.response = '' OR (b.blank AND b.hidden))) AS budget_spent,
                   count(*) FILTER (WHERE b.error IS NULL AND b.finish_reason = 'error') AS refused
            FROM b LEFT JOIN runs ru USING (run_id) GROUP BY b.run_id ORDER BY model""", [BLANK_PATTERN]).df()
        if self._has_table("mirroring_verdicts"):
            j = self.con.execute("""SELECT run_id, count(*) AS judge_verdicts,
                       count(*) FILTER (WHERE verdict IS NULL AND error IS NULL) AS judge_unparsed
                    FROM mirroring_verdicts GROUP BY run_id""").df()
            df = df.merge(j, on="run_id", how="left")
        if "invalid_logprobs" in self.columns.get("run_usage", ()):
            u = self.con.execute("SELECT run_id, invalid_logprobs FROM run_usage").df()  # one row per run
            df = df.merge(u, on="run_id", how="left")
        for c in ("judge_verdicts", "judge_unparsed", "invalid_logprobs"):
            df[c] = df[c].fillna(0).astype(int) if c in df else 0
        return df

    def noise_floor(self, run_ids: Iterable[str] | None = None) -> pd.DataFrame:
        """``noise_floor`` rows joined with the run's model (empty, same columns, without the table).

        Columns: run_id, model, dataset, prompt_id, repeat, axis, delta, delta_norm, available, reason.
        """
        cols = ["run_id", "model", "dataset", "prompt_id", "repeat", "axis", "delta", "delta_norm", "available", "reason"]
        if not self._has_table("noise_floor"):
            return pd.DataFrame(columns=cols)
        where, params = "", []
        if run_ids is not None:
            ids = list(run_ids)
            where, params = f"WHERE n.run_id IN ({', '.join('?' * len(ids)) or 'NULL'})", ids
        return self.con.execute(f"SELECT n.run_id, r.model, n.dataset, n.prompt_id, n.repeat, n.axis, n.delta, "
                                f"n.delta_norm, n.available, n.reason FROM noise_floor n LEFT JOIN runs r USING (run_id) "
                                f"{where} ORDER BY ALL", params).df()[cols]


    def base_repeats(self, run_id: str | None = None) -> pd.DataFrame:
        """Stored base-prompt repeats (k ≥ 1), optionally of one run; empty without the table."""
        if not self._has_table("base_repeats"):
            return pd.DataFrame(columns=["response_id", "run_id", "prompt_id", "repeat", "response", "n_tokens",
                                         "seq_logprob", "mean_entropy", "finish_reason", "latency_s", "error"])
        if run_id is None:
            return self.con.execute(f"SELECT {self._cols('base_repeats')} FROM base_repeats "
                                    "ORDER BY run_id, prompt_id, repeat").df()
        return self.con.execute(f"SELECT {self._cols('base_repeats')} FROM base_repeats WHERE run_id = ? "
                                "ORDER BY prompt_id, repeat", [run_id]).df()
