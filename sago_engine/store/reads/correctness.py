"""Reads and writes of the ``correctness`` table (schema v5): the replies to score, the verdicts, and
the per-reply frame the comparisons of ``sago_engine.correctness.compare`` work on."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import duckdb
import pandas as pd

from sago_engine.store.errors import StoreError

#: The columns of a ``correctness`` row, in table order.
CORRECTNESS_COLUMNS = ("run_id", "response_id", "prompt_id", "variant_id", "repeat", "scorer", "scorer_version",
                       "verdict", "score", "reason", "raw")


def _in(column: str, values: Iterable[str] | None) -> tuple[str, list]:
    """`` AND column IN (?, …)`` and its parameters; ("", []) for None."""
    if values is None:
        return "", []
    vals = list(values)
    return (f" AND {column} IN ({', '.join('?' * len(vals))})", vals) if vals else (" AND FALSE", [])


def verdict_join(scorers: Mapping[str, str] | Iterable[tuple[str, str]], alias: str, run_col: str,
                 response_col: str) -> tuple[str, list]:
    """``LEFT JOIN (…) <alias> ON …``: the verdict (``<alias>.verdict``, ``<alias>.scorer``) of the reply
    ``response_col`` of run ``run_col`` under its dataset's scorer (``scorers``: dataset → scorer), and its
    parameters. Columns of ``alias``: run_id, response_id, scorer, verdict."""
    pairs = sorted(dict(scorers).items())
    if not pairs:
        return f"LEFT JOIN (SELECT NULL AS run_id, NULL AS response_id, NULL AS scorer, NULL AS verdict) {alias} " \
               "ON FALSE", []
    pick = " OR ".join("(s.dataset = ? AND c.scorer = ?)" for _ in pairs)
    sql = f"""LEFT JOIN (SELECT c.run_id, c.response_id, c.scorer, c.verdict FROM correctness c
                         JOIN prompts s ON s.prompt_id = c.prompt_id WHERE {pick}) {alias}
                     ON {alias}.run_id = {run_col} AND {alias}.response_id = {response_col}"""
    return sql, [x for d, sc in pairs for x in (d, sc)]


class CorrectnessQueries:
    """Correctness methods of ``Store`` (``self.con``; ``self.columns``: the known columns the file holds)."""

    con: duckdb.DuckDBPyConnection
    columns: dict[str, tuple[str, ...]]
    read_only: bool

    def has_correctness(self) -> bool:
        """Whether the store has a ``correctness`` table with at least one row."""
        if "correctness" not in self.columns:
            return False
        return bool(self.con.execute("SELECT count(*) FROM correctness").fetchone()[0])

    def replies_to_score(self, run_ids: Iterable[str] | None = None) -> pd.DataFrame:
        """Every stored reply with what a correctness scorer needs: base and variant replies
        (``responses``) and the base repeats (``base_repeats``).

        Columns: run_id, response_id, prompt_id, variant_id (NULL for a base reply or a repeat),
        repeat (NULL for responses rows; k ≥ 1 for a base repeat), dataset, question (the base prompt's
        text), reference (JSON text), prompt_meta (JSON text; NULL where the store has no
        ``prompts.meta``), response, error; sorted by run, prompt, variant (base first), repeat.
        ``run_ids`` restricts to these runs (None: all).
        """
        meta = "CAST(p.meta AS VARCHAR)" if "meta" in self.columns.get("prompts", ()) else "CAST(NULL AS VARCHAR)"
        cond, params = _in("x.run_id", run_ids)
        repeats = ""
        if "base_repeats" in self.columns:
            repeats = f"""UNION ALL
                SELECT x.run_id, x.response_id, x.prompt_id, CAST(NULL AS VARCHAR), x.repeat, x.response, x.error
                FROM base_repeats x WHERE TRUE{cond}"""
            params = params + params
        return self.con.execute(f"""
            WITH r AS (
                SELECT x.run_id, x.response_id, x.prompt_id, x.variant_id, CAST(NULL AS INTEGER) AS repeat,
                       x.response, x.error
                FROM responses x WHERE TRUE{cond}
                {repeats})
            SELECT r.run_id, r.response_id, r.prompt_id, r.variant_id, r.repeat, p.dataset, p.text AS question,
                   CAST(p.reference AS VARCHAR) AS reference, {meta} AS prompt_meta, r.response, r.error
            FROM r JOIN prompts p USING (prompt_id)
            ORDER BY r.run_id, r.prompt_id, r.variant_id NULLS FIRST, r.repeat NULLS FIRST""", params).df()

    def prompts_without_meta(self) -> pd.DataFrame:
        """Prompts whose ``meta`` is NULL: prompt_id, dataset, source_id, text (empty when the store has no ``prompts.meta``)."""
        if "meta" not in self.columns.get("prompts", ()):
            return pd.DataFrame(columns=["prompt_id", "dataset", "source_id", "text"])
        return self.con.execute("""SELECT prompt_id, dataset, source_id, text FROM prompts WHERE meta IS NULL
                                   ORDER BY prompt_id""").df()

    def set_prompt_meta(self, rows: pd.DataFrame) -> int:
        """Fill ``prompts.meta`` where it is NULL from ``rows`` (prompt_id, meta as JSON text); returns rows set.

        Raises:
            StoreError: a read-only store.
        """
        if self.read_only:
            raise StoreError("the store is open read-only; a rescore needs a writable open")
        if rows.empty:
            return 0
        self.con.register("_sago_meta", rows[["prompt_id", "meta"]])
        try:
            n = self.con.execute("""UPDATE prompts SET meta = CAST(m.meta AS JSON) FROM _sago_meta m
                                    WHERE prompts.prompt_id = m.prompt_id AND prompts.meta IS NULL""").fetchone()[0]
        finally:
            self.con.unregister("_sago_meta")
        return int(n)

    def write_correctness(self, rows: pd.DataFrame) -> int:
        """Insert or replace ``correctness`` rows keyed (run_id, response_id, scorer): a rescore with
        another scorer version replaces the earlier verdict. Returns the rows written.

        Args:
            rows: a frame with ``CORRECTNESS_COLUMNS``.
        Raises:
            StoreError: a read-only store; ValueError: a missing column.
        """
        if self.read_only:
            raise StoreError("the store is open read-only; a rescore needs a writable open")
        missing = [c for c in CORRECTNESS_COLUMNS if c not in rows.columns]
        if missing:
            raise ValueError(f"correctness rows lack columns {missing}")
        if rows.empty:
            return 0
        cols = ", ".join(CORRECTNESS_COLUMNS)
        self.con.register("_sago_corr", rows[list(CORRECTNESS_COLUMNS)])
        try:
            self.con.execute(f"INSERT OR REPLACE INTO correctness ({cols}) SELECT {cols} FROM _sago_corr")
        finally:
            self.con.unregister("_sago_corr")
        return len(rows)

    def correctness_scorers(self) -> pd.DataFrame:
        """The scorers with stored verdicts: dataset, scorer, scorer_version, n (rows); sorted."""
        if "correctness" not in self.columns:
            return pd.DataFrame(columns=["dataset", "scorer", "scorer_version", "n"])
        return self.con.execute("""SELECT p.dataset, c.scorer, c.scorer_version, count(*)::BIGINT AS n
                                   FROM correctness c JOIN prompts p USING (prompt_id)
                                   GROUP BY ALL ORDER BY ALL""").df()

    def scorers_not_run(self) -> pd.DataFrame:
        """The scorers stored without a single decided or undecided verdict, each with the reason of its
        rows (an Inspect task's scorer sago could not run: "not run: …"; the ``none`` scorer): dataset,
        scorer, reason (the first by text), n (rows); sorted."""
        cols = ["dataset", "scorer", "reason", "n"]
        if "correctness" not in self.columns:
            return pd.DataFrame(columns=cols)
        return self.con.execute("""SELECT p.dataset, c.scorer, min(c.reason) AS reason, count(*)::BIGINT AS n
                                   FROM correctness c JOIN prompts p USING (prompt_id)
                                   GROUP BY p.dataset, c.scorer HAVING bool_and(c.verdict = 'unavailable')
                                   ORDER BY p.dataset, c.scorer""").df()

    def correctness_frame(self, scorers: Iterable[str] | None = None, *, repeats: bool = False) -> pd.DataFrame:
        """Per stored verdict, with the run's model and the variant's (F, u, s, p).

        Args:
            scorers: read only these scorers (None: every stored scorer; a reply then has one row per scorer).
            repeats: also the base-repeat rows (``repeat`` ≥ 1); default: base and variant replies only.
        Returns:
            Columns: run_id, model, dataset, prompt_id, variant_id (NULL: the base reply), repeat,
            family, subtype, strength, position, kept (NULL for a base reply), scorer,
            scorer_version, verdict, score, reason; sorted by model, prompt, variant (base first),
            scorer. Empty (those columns) when the store has no verdicts.
        """
        cols = ["run_id", "model", "dataset", "prompt_id", "variant_id", "repeat", "family", "subtype", "strength",
                "position", "kept", "scorer", "scorer_version", "verdict", "score", "reason"]
        if not self.has_correctness():
            return pd.DataFrame(columns=cols)
        cond, params = _in("c.scorer", scorers)
        rep = "" if repeats else " AND c.repeat IS NULL"
        return self.con.execute(f"""
            SELECT c.run_id, r.model, p.dataset, c.prompt_id, c.variant_id, c.repeat, v.family, v.subtype,
                   v.strength, v.position, v.kept, c.scorer, c.scorer_version, c.verdict, c.score, c.reason
            FROM correctness c JOIN runs r USING (run_id) JOIN prompts p USING (prompt_id)
                 LEFT JOIN variants v ON v.variant_id = c.variant_id
            WHERE TRUE{cond}{rep}
            ORDER BY r.model, c.prompt_id, c.variant_id NULLS FIRST, c.repeat NULLS FIRST, c.scorer""", params).df()
