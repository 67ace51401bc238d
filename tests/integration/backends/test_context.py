"""T2: a prompt whose tokens plus the reply cap exceed the model's context is an error row with the
reason — unavailable on every axis, counted in the run summary, listed by ``--plan``, refused on the
Live page — never a normal reply."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[3]

#: T2's long prompt: 5,931 tokens for smollm2's tokenizer (tiny-random: 2,048 positions).
LONG = "Summarize: " + " ".join(f"word{i}" for i in range(1400)) + ". What is the first word?"
SHORT = "What is the capital of Peru?"
REASON = "prompt of 5931 tokens + reply cap 4 exceeds the model's context of 2048 tokens"
#: A dataset line within the loader's 4,000-character limit that is 3,645 tokens (one per digit).
DIGITS = "Add up the digits of this number: " + "31415926535897932384" * 180 + ". What is the sum?"


def test_t2_long_prompt_is_an_error_row_not_a_reply(tiny_backend):
    be = tiny_backend
    assert be.info()["context_length"] == 2048 == be.context_length
    assert len(be.encode_prompt(LONG)) == 5931
    long, short = be.generate([LONG, SHORT], max_new_tokens=4)
    assert long.error == REASON and long.text == "" and long.n_tokens == 0 and long.finish_reason == "error"
    assert long.meta["over_context"] == {"prompt_tokens": 5931, "max_new_tokens": 4, "context": 2048}
    assert long.token_logprobs is None and long.hidden_last is None
    assert short.error is None and short.n_tokens == 4 and set(short.meta or {}) <= {"request"}
    assert be.context_error(LONG, 4) == REASON and be.context_error(SHORT, 4) is None


def test_t2_the_cap_counts_to_the_last_position(tiny_backend):
    """A prompt of n tokens runs with a cap of exactly 2048 − n and is refused with one more."""
    be = tiny_backend
    text = " ".join(["cat"] * 2010)
    n = len(be.encode_prompt(text))
    assert 2000 < n < 2046
    fits, over = be.generate([text], max_new_tokens=2048 - n)[0], be.generate([text], max_new_tokens=2049 - n)[0]
    assert fits.error is None and fits.n_tokens >= 1
    assert over.error == f"prompt of {n} tokens + reply cap {2049 - n} exceeds the model's context of 2048 tokens"


def test_t2_error_row_is_unavailable_on_every_axis(tiny_backend):
    from sago_engine.measure.pipeline import Unit, compute_rows
    from sago_engine.types import AXES, DEFAULT_NORMALIZERS, Variant, VariantSpec

    base, var = tiny_backend.generate([SHORT, LONG], max_new_tokens=4)
    v = Variant("p/v", "p", VariantSpec("structural", "length", 2.0, "GLOBAL"), LONG, 0, "test")
    resp, d = compute_rows("r", [Unit("p", "ds", base, [v], [var])], DEFAULT_NORMALIZERS,
                           frozenset(tiny_backend.capabilities), options=("cos@user_last", "cos@user_mean"))
    assert set(AXES) <= set(d["axis"]) and not d["available"].any()
    assert d["reason"].str.contains("exceeds the model's context of 2048 tokens").all()
    assert resp.set_index("variant_id").loc["p/v", "error"] == REASON


def test_check_context_and_context_length_rules():
    from sago_engine.backends.context import check_context, context_length

    assert check_context(10, 4, 14) is None and check_context(10, 4, None) is None
    assert check_context(11, 4, 14) == "prompt of 11 tokens + reply cap 4 exceeds the model's context of 14 tokens"
    cfg = SimpleNamespace
    assert context_length(cfg(max_position_embeddings=8192)) == 8192
    assert context_length(cfg()) is None
    # Qwen2.5's long-context recipe: yarn ×4 over 32,768 trained positions
    yarn = cfg(max_position_embeddings=32768,
               rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})
    assert context_length(yarn) == 131072
    # Llama-3.1's llama3 table states the scaled length as its max positions already
    llama31 = cfg(max_position_embeddings=131072, rope_parameters={
        "rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192})
    assert context_length(llama31) == 131072
    assert context_length(cfg(max_position_embeddings=2048, rope_scaling={"type": "linear", "factor": 2.0})) == 4096
    # gemma-3: one table per layer type, sliding window 512 — the context is still the max positions
    gemma = cfg(max_position_embeddings=32768, sliding_window=512, rope_parameters={
        "full_attention": {"rope_type": "default", "rope_theta": 1e6},
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}})
    assert context_length(gemma) == 32768
    assert context_length(cfg(n_positions=1024)) == 1024  # GPT-2 style


def _data_with_long_prompt(tmp_path: Path) -> Path:
    """data/datasets' truthfulqa and alpaca, with ``DIGITS`` first in truthfulqa."""
    d = tmp_path / "data"
    d.mkdir()
    shutil.copy(ROOT / "data" / "datasets" / "alpaca.jsonl", d / "alpaca.jsonl")
    lines = (ROOT / "data" / "datasets" / "truthfulqa.jsonl").read_text().splitlines()
    (d / "truthfulqa.jsonl").write_text("\n".join([json.dumps({"id": "long-1", "prompt": DIGITS}), *lines]) + "\n")
    return d


def test_t2_runner_counts_and_plan_lists_over_context_prompts(tmp_path, capsys):
    """A dataset line of 3,645 tokens on tiny-random (2,048 positions): ``--plan`` lists it (and its
    variants) from the tokenizer alone; the run stores error rows for exactly those inputs, counts
    them in its summary and records the context."""
    import re

    from precompute.__main__ import main
    from precompute.config import load_config
    from precompute.runner import run
    from sago_engine.store import open_store
    from tests.support.factories import tiny_toml

    data = _data_with_long_prompt(tmp_path)
    cfg_path = tmp_path / "c.toml"
    cfg_path.write_text(tiny_toml(n_prompts=1).format(store=tmp_path / "s.duckdb", data=data))
    assert main(["--config", str(cfg_path), "--plan"]) == 0
    out = capsys.readouterr().out
    m = re.search(r"over the context: (\d+) of 12 inputs \(context 2048 tokens, reply cap 6; tokenizer only, "
                  r"weights not loaded\)", out)
    assert m, out
    k = int(m.group(1))
    assert 1 <= k <= 6 and "truthfulqa:long-1 base: prompt of 3645 tokens + reply cap 6 > 2048" in out
    [summary] = run(load_config(cfg_path), progress=False)
    assert summary["over_context"] == k == summary["errors"] and summary["status"] == "complete"
    with open_store(tmp_path / "s.duckdb") as st:
        resp = st.con.execute("SELECT prompt_id, variant_id, error, n_tokens FROM responses WHERE error IS NOT NULL").df()
        d = st.con.execute("SELECT variant_id, available, reason FROM deltas WHERE prompt_id = 'truthfulqa:long-1'").df()
        dec = json.loads(st.runs().loc[0, "decoding"])
    assert len(resp) == k and (resp["prompt_id"] == "truthfulqa:long-1").all() and (resp["n_tokens"] == 0).all()
    assert resp["variant_id"].isna().sum() == 1  # the base
    assert resp["error"].str.match(r"prompt of \d+ tokens \+ reply cap 6 exceeds the model's context of 2048 tokens$").all()
    assert len(d) and not d["available"].any() and d["reason"].str.contains("exceeds the model's context").all()
    assert dec["context_length"] == 2048


def test_t2_live_page_refuses_a_prompt_longer_than_the_context(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from tests.support.factories import make_store

    monkeypatch.setenv("SAGO_LIVE_MAX_CHARS", "20000")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["app_store_custom"] = str(make_store(tmp_path / "s.duckdb"))
    at.switch_page("pages/live.py")
    at.run()
    at.text_area(key="live_prompt").input(LONG)
    at.selectbox(key="live_model").select("tiny-random")
    at.multiselect(key="live_families").set_value(["surface_noise"])
    at.number_input(key="live_max_variants").set_value(2)
    at.number_input(key="live_max_new").set_value(4)
    at.run()
    at.button(key="live_run").click().run()
    assert not at.exception, at.exception
    msgs = [e.value for e in at.error]
    assert any(REASON in m and "Shorten the prompt" in m for m in msgs), msgs
    assert not at.get("plotly_chart")
