"""The bundled demo store is what the README says it is: schema 4, replies
with token ids (replayed in test_fidelity_local), three models of three sizes and one of them sampled at T = 0.7, the open Δ-Cos /
Δ-BERT choices stored as option axes beside the six plain axes, published in prompt order."""

import json

import pandas as pd

from sago_engine.store import open_store
from sago_engine.store.catalog import DEMO_STORE
from sago_engine.store.layout import LAYOUT_VERSION
from sago_engine.store.schema import SCHEMA_VERSION
from sago_engine.types import AXES, option_of

MODELS = {"smollm2-135m-instruct", "gemma-3-270m", "qwen2.5-coder-0.5b-instruct", "smollm2-135m-instruct·T0.7"}


def test_demo_store_schema_models_and_option_axes():
    with open_store(DEMO_STORE) as st:
        meta = st.meta()
        runs = st.runs()
        names = st.axis_names()
        stats = st.prompt_stats(axes=tuple(names))
        plain = st.prompt_stats()
    assert int(meta["schema_version"]) == SCHEMA_VERSION and meta["layout_version"] == str(LAYOUT_VERSION)
    assert set(runs["model"]) == MODELS and (runs["status"] == "complete").all()
    base = runs.set_index("model")
    from sago_engine.backends.hf_local.prompt_render import template_records_match

    no_template = {"template": None}  # a base model (older records: "no template")
    assert template_records_match(json.loads(base.loc["gemma-3-270m", "decoding"])["chat_template"], no_template)
    for m in ("smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct", "smollm2-135m-instruct·T0.7"):
        assert "sha256" in json.loads(base.loc[m, "decoding"])["chat_template"]
    per_run = stats.groupby("run_id")["axis"].agg(set)
    for run_id, axes in per_run.items():
        assert set(AXES) <= axes, run_id
        assert len({a for a in axes if a.startswith("cos@")}) >= 2, run_id
        assert "bert@rescaled" in axes, run_id
    assert set(plain["axis"]) == set(AXES) and all(option_of(a) is None for a in plain["axis"])
    # each model's prompts: 16 per dataset × 6 datasets
    assert (plain.groupby(["model", "axis"])["prompt_id"].nunique() == 96).all()


def test_no_reply_with_characters_is_unavailable_as_no_visible_reply(store=DEMO_STORE):
    # "no visible reply" is for a reply of no characters (or hidden reasoning); a reply of whitespace is measured
    text_axes = ["bleu", "bert", "mr", "bert@rescaled"]
    with open_store(store) as st:
        d = st.deltas(kept_only=False, axes=text_axes)
        replies = pd.concat([st.stored_replies(r).assign(run_id=r) for r in st.runs()["run_id"]])
    var = replies[replies["variant_id"].notna()].set_index(["run_id", "variant_id"])["response"]
    base = replies[replies["variant_id"].isna()].set_index(["run_id", "prompt_id"])["response"]
    no_visible = d[~d["available"] & d["reason"].fillna("").str.startswith("no visible reply")]
    has_chars = [var[(r.run_id, r.variant_id)] != "" and base[(r.run_id, r.prompt_id)] != ""
                 for r in no_visible.itertuples(index=False)]
    assert not any(has_chars), no_visible[has_chars][["model", "variant_id", "axis", "reason"]].head()
    # the replies this guards: gemma-3-270m answered 40 spacing variants with tabs, spaces and newlines only
    blank = var[(var != "") & (var.str.strip() == "")]
    assert len(blank) == 40
    rows = d.set_index(["run_id", "variant_id"]).loc[blank.index]
    assert len(rows) == 4 * 40 and rows["available"].all() and (rows["family"] == "surface_noise").all()


def test_every_demo_reply_stores_the_request_the_model_read():
    """The rendered model input of every reply: the chat template applied for the two instruct models,
    the text itself for the base model (gemma-3-270m, no template)."""
    import duckdb

    con = duckdb.connect(str(DEMO_STORE), read_only=True)
    try:
        rows = con.execute("""SELECT r.model, x.request, coalesce(v.text, p.text) AS text FROM responses x
                              JOIN runs r USING (run_id) JOIN prompts p USING (prompt_id)
                              LEFT JOIN variants v USING (variant_id)""").df()
    finally:
        con.close()
    assert rows["request"].notna().all()
    chat = rows[rows["model"] != "gemma-3-270m"]
    assert chat["request"].str.startswith("<|im_start|>").all()
    assert all(t in q and q.rstrip().endswith("assistant") for t, q in zip(chat["text"], chat["request"]))
    base = rows[rows["model"] == "gemma-3-270m"]
    assert (base["request"] == base["text"]).all()
