"""Shard merge (``python -m precompute merge``) and per-table fingerprints (identity of two stores)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import pandas as pd

from sago_engine.store import suffstats
from sago_engine.store.facade import open_store
from sago_engine.store.layout import rewrite_file
from sago_engine.store.schema import EXTRA_TABLES, TABLES

#: Columns ignored when comparing two stores for identity (wall-clock facts, not results).
VOLATILE_COLUMNS = {"runs": ("started_at", "finished_at", "status"), "units": ("finished_at",),
                    "responses": ("latency_s",)}


def merge_stores(out: str | Path, inputs: Sequence[str | Path], overwrite: bool = False) -> dict[str, int]:
    """Merge shard stores into one (``python -m precompute merge``).

    Rows are keyed deterministically, so ``INSERT OR IGNORE`` of every table of every input
    gives the same rows as one unsharded run. Run records keep the earliest start, the latest
    finish, and status ``complete`` when the merged units cover every prompt (else ``partial``).
    The merged file is written with its per-prompt tables in prompt order (``layout.rewrite_file``),
    as the runner's final publish writes a store.

    Args:
        out: the merged store to create.
        inputs: shard stores (each must be a sago store of this schema version).
        overwrite: replace ``out`` if it exists (otherwise refuse: nothing is overwritten unasked).
    Returns:
        Row counts per table of the merged store.
    Raises:
        FileExistsError: ``out`` exists and ``overwrite`` is False.
        StoreError / FileNotFoundError: an input is not a readable sago store.
    """
    out = Path(out)
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} exists; pass --force to overwrite it")
    for p in inputs:  # validate every input before writing anything
        open_store(p, read_only=True).close()
    tmp = out.with_name(f".{out.name}.merging")
    tmp.unlink(missing_ok=True)
    with open_store(tmp, read_only=False, create=True) as st:
        for i, p in enumerate(inputs):
            st.con.execute(f"ATTACH '{str(Path(p)).replace(chr(39), chr(39) * 2)}' AS src{i} (READ_ONLY)")
            with st.transaction():
                src_tables = {r[0] for r in st.con.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_catalog = ?", [f"src{i}"]).fetchall()}
                for t in TABLES + tuple(t for t in EXTRA_TABLES if t in src_tables):
                    if t in ("runs", "run_usage"):
                        continue
                    st.con.execute(f"INSERT OR IGNORE INTO {t} BY NAME SELECT * FROM src{i}.{t}")
                if "run_usage" in src_tables:  # shards of one API run: usage adds up
                    st.con.execute(f"""
                        INSERT INTO run_usage BY NAME SELECT * FROM src{i}.run_usage s
                        ON CONFLICT (run_id) DO UPDATE SET
                            requests = run_usage.requests + excluded.requests,
                            cache_hits = run_usage.cache_hits + excluded.cache_hits,
                            retries = run_usage.retries + excluded.retries,
                            errors = run_usage.errors + excluded.errors,
                            prompt_tokens = run_usage.prompt_tokens + excluded.prompt_tokens,
                            completion_tokens = run_usage.completion_tokens + excluded.completion_tokens,
                            reasoning_tokens = run_usage.reasoning_tokens + excluded.reasoning_tokens,
                            cached_tokens = run_usage.cached_tokens + excluded.cached_tokens,
                            cache_write_tokens = run_usage.cache_write_tokens + excluded.cache_write_tokens,
                            cost_usd = run_usage.cost_usd + excluded.cost_usd,
                            models_returned = CAST(list_sort(list_distinct(list_concat(
                                CAST(run_usage.models_returned AS VARCHAR[]),
                                CAST(excluded.models_returned AS VARCHAR[])))) AS JSON),
                            updated_at = greatest(run_usage.updated_at, excluded.updated_at)""")
                st.con.execute(f"""
                    INSERT INTO runs BY NAME SELECT * FROM src{i}.runs s
                    ON CONFLICT (run_id) DO UPDATE SET
                        started_at = least(runs.started_at, excluded.started_at),
                        finished_at = greatest(runs.finished_at, excluded.finished_at)""")
            st.con.execute(f"DETACH src{i}")
        st.con.execute("""UPDATE runs SET status = CASE
            WHEN (SELECT count(*) FROM units u WHERE u.run_id = runs.run_id) = (SELECT count(*) FROM prompts)
            THEN 'complete' ELSE 'partial' END""")
        with st.transaction():  # the statistics of the merged deltas, rebuilt in one pass
            suffstats.materialise(st.con)
        counts = st.counts()
        st.checkpoint()
    rewrite_file(tmp)  # the merged store in prompt order (store.layout)
    os.replace(tmp, out)
    return counts


def table_fingerprints(path: str | Path) -> dict[str, str]:
    """sha256 per table over all rows (sorted, volatile columns dropped): equal ⇔ identical results."""
    import hashlib

    out = {}
    with open_store(path, read_only=True) as st:
        for t in TABLES + tuple(t for t in EXTRA_TABLES if st._has_table(t)):
            cols = [r[0] for r in st.con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
                [t]).fetchall() if r[0] not in VOLATILE_COLUMNS.get(t, ())]
            sel = ", ".join(f'"{c}"' for c in cols)
            df = st.con.execute(f"SELECT {sel} FROM {t} ORDER BY ALL").df()
            out[t] = hashlib.sha256(pd.util.hash_pandas_object(df.astype(str), index=False).values.tobytes()).hexdigest()
            out[t + ".rows"] = str(len(df))
    return out
