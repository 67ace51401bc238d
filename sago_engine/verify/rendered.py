"""The rendered request of stored local replies: each prompt as the model read it, re-derived.

A local run stores its replies with their token ids; the model's input is a pure function of the
prompt text, the tokenizer's chat template, its variables and the pinned date (``PromptRenderer``).
For a store written before ``responses.request`` was filled, ``fill_requests`` renders it again
from the model's tokenizer (no weights loaded) when the template the run recorded is the one the
tokenizer carries now (``template_records_match``); otherwise the run is left alone and says why.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sago_engine.backends.hf_local.prompt_render import template_records_match
from sago_engine.backends.hf_local.prompt_side import load_prompt_side

__all__ = ["RenderResult", "fill_requests"]

#: The rescore record's rule name for a rendering.
RULE = "requests rendered from the model's chat template (tokenizer only, no weights)"


@dataclass
class RenderResult:
    """What ``fill_requests`` did for one run."""

    run_id: str
    model: str
    rendered: int = 0
    skipped: str | None = None
    """Why the run's requests were not rendered (not a local run, template changed), or None."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _decoding(store, run_id: str) -> dict[str, Any]:
    raw = store.con.execute("SELECT CAST(decoding AS VARCHAR) FROM runs WHERE run_id = ?", [run_id]).fetchall()
    return json.loads(raw[0][0]) if raw and raw[0][0] else {}


def fill_requests(path: str | Path, run_id: str | None = None) -> list[RenderResult]:
    """Render and store the request of every local reply (``backend = "hf_local"``) that has none.

    Args:
        path: a store (opened writable; ``responses.request`` NULL rows are filled, nothing else
            changes; each run's rescore record ``rescore:<run_id>`` notes it).
        run_id: one run, or None for every run.
    Returns:
        One ``RenderResult`` per run (``skipped`` names why a run was left alone).
    Raises:
        FileNotFoundError / StoreError: as ``open_store``.
    """
    from sago_engine.store import open_store

    out = []
    with open_store(path, read_only=False) as st:
        runs = st.runs()
        if run_id is not None:
            runs = runs[runs["run_id"] == run_id]
        for r in runs.itertuples(index=False):
            res = RenderResult(r.run_id, r.model)
            out.append(res)
            if r.backend != "hf_local":
                res.skipped = f"backend {r.backend}: the request is what the provider was sent, not re-derivable"
                continue
            todo = st.replies_without_request(r.run_id)
            if todo.empty:
                continue
            dec = _decoding(st, r.run_id)
            tmpl = dec.get("chat_template")
            kwargs = tmpl.get("kwargs") if isinstance(tmpl, dict) else None
            given = {k: v for k, v in (kwargs or {}).items() if k != "add_generation_prompt"} or None
            renderer, _ = load_prompt_side(r.model, given, dec.get("template_date"))
            if not template_records_match(tmpl, renderer.template_record()):
                res.skipped = "the tokenizer's chat template differs from the one the run recorded"
                continue
            rows = pd.DataFrame({"response_id": todo["response_id"], "run_id": r.run_id,
                                 "request": [renderer.format_prompt(t) for t in todo["text"]]})
            st.set_requests(rows, {"rule": RULE, "rendered": len(rows)})
            res.rendered = len(rows)
        st.checkpoint()
    return out
