"""Reads of reply health beyond ``Browse.reply_health``: replies cut at the reply cap per run and dataset."""

from __future__ import annotations

import duckdb
import pandas as pd

from sago_engine.store.schema import has_table


class HealthQueries:
    """Reply-health methods of ``Store`` (``self.con``: a DuckDB connection)."""

    con: duckdb.DuckDBPyConnection

    def cut_replies(self) -> pd.DataFrame:
        """Per run and dataset: replies that stopped at the reply cap (``max_new_tokens``).

        A reply hit the cap when it has no error and its finish reason is ``"length"`` (local
        backends: no EOS within the cap; APIs: their length finish reason). Base and variant
        replies of ``responses`` and the base repeats count. Returns one row per (run, dataset):
        run_id, model, dataset, replies, cut (≤ replies), sorted by model, dataset.
        """
        rep = ("UNION ALL SELECT run_id, prompt_id, finish_reason, error FROM base_repeats"
               if has_table(self.con, "base_repeats") else "")
        return self.con.execute(f"""
            WITH r AS (SELECT run_id, prompt_id, finish_reason, error FROM responses {rep})
            SELECT r.run_id, any_value(ru.model) AS model, p.dataset, count(*) AS replies,
                   count(*) FILTER (WHERE r.error IS NULL AND r.finish_reason = 'length') AS cut
            FROM r JOIN prompts p USING (prompt_id) LEFT JOIN runs ru USING (run_id)
            GROUP BY r.run_id, p.dataset ORDER BY model, p.dataset""").df()

    def cut_pairs(self) -> pd.DataFrame:
        """Per run and dataset: (base, variant) reply pairs of kept variants and those whose two
        replies both stopped at the reply cap (no error, finish reason ``"length"``; the ``hit_cap``
        flag). Such a pair has equal lengths by construction: Δ-MR's length rule and Δ-BLEU compare
        cut text there. A mark read from the stored replies; no stored value changes.

        Returns one row per (run, dataset): run_id, model, dataset, pairs, both_cut (≤ pairs).
        """
        return self.con.execute("""
            WITH r AS (SELECT run_id, prompt_id, variant_id,
                              (error IS NULL AND finish_reason = 'length') AS cut FROM responses)
            SELECT v.run_id, any_value(ru.model) AS model, p.dataset, count(*) AS pairs,
                   count(*) FILTER (WHERE v.cut AND b.cut) AS both_cut
            FROM r v JOIN r b ON b.run_id = v.run_id AND b.prompt_id = v.prompt_id AND b.variant_id IS NULL
                 JOIN variants va ON va.variant_id = v.variant_id AND va.kept
                 JOIN prompts p ON p.prompt_id = v.prompt_id LEFT JOIN runs ru ON ru.run_id = v.run_id
            WHERE v.variant_id IS NOT NULL
            GROUP BY v.run_id, p.dataset ORDER BY model, p.dataset""").df()

    def filter_counts(self, variant_ids: list[str] | None = None) -> dict[str, int]:
        """How many variants (of ``variant_ids``; None = all) the semantic filter scored and how many
        it rejected: scored = a semantic score stored; rejected = not kept for the filter's reasons
        (below the threshold, the prompt-level rule, a degenerate rewrite), no-ops (``skip_reason``)
        left out. Returns ``{"variants_scored": n, "variants_rejected": k}``."""
        has_skip = "skip_reason" in getattr(self, "columns", {}).get("variants", ("skip_reason",))
        noop = "v.skip_reason IS NULL" if has_skip else "TRUE"
        sel = "" if variant_ids is None else "WHERE list_contains(?, v.variant_id)"
        row = self.con.execute(f"""
            SELECT count(*) FILTER (WHERE v.semantic_score IS NOT NULL),
                   count(*) FILTER (WHERE NOT v.kept AND {noop})
            FROM variants v {sel}""", [] if variant_ids is None else [list(variant_ids)]).fetchone()
        return {"variants_scored": int(row[0]), "variants_rejected": int(row[1])}
