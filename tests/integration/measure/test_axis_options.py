"""Axis options: cos@… positions / layer sets and bert@rescaled, stored as their own axes.

Tiny random Llama for the plumbing (user-span location, hidden states, rows), the real MiniLM
encoder for bert@rescaled, a synthetic store for the queries.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from sago_engine.axes import NOISE_TOL, cosine_per_layer
from sago_engine.filters import Filters
from sago_engine.measure.pipeline import Unit, compute_rows, option_axes_for
from sago_engine.scoring.scores import normalize, rms, sufficient_stats
from sago_engine.store import open_store
from sago_engine.types import (
    AXES,
    DEFAULT_NORMALIZERS,
    OPTION_AXES,
    GenerationResult,
    Variant,
    VariantSpec,
    axes_shown,
    axis_label,
    base_axis,
    is_option_axis,
    option_of,
)
from tests.support.factories import make_store

CAPS = frozenset({"cos", "prob", "ent"})
BASE = "What is the capital of France?"
VARIANT = "WHAT IS THE CAPITAL OF FRANCE, PLEASE?"


def _variant(pid: str, text: str, k: int = 0) -> Variant:
    return Variant(f"{pid}/v{k}", pid, VariantSpec("surface_noise", "case", 1.0, "GLOBAL"), text, seed=k)


def _full_states(be, prompt: str) -> torch.Tensor:
    """Hidden states (L+1, S, H) of one unpadded forward pass over the formatted prompt."""
    ids = torch.tensor([be.encode_prompt(prompt)])
    with torch.inference_mode():
        out = be.model(input_ids=ids, output_hidden_states=True)
    return torch.stack([h[0] for h in out.hidden_states]).float()


@pytest.fixture(scope="module")
def base_model_backend():
    """The tiny random Llama used as a base model: no chat template, the prompt is the whole input."""
    from sago_engine.backends.hf_local import HFLocalBackend

    be = HFLocalBackend("tiny-random", dtype="float32", device="cpu", batch_size=8)
    be.chat, be.template, be.template_kwargs = False, None, {}
    yield be
    be.close()


# ------------------------------------------------------------------ names


def test_axis_name_helpers():
    assert [base_axis(a) for a in ("cos", "cos@user_mean", "bert@rescaled")] == ["cos", "cos", "bert"]
    assert option_of("cos@user_last_blocks") == "user_last_blocks" and option_of("bleu") is None
    assert is_option_axis("bert@rescaled") and not any(is_option_axis(a) for a in AXES)
    assert axis_label("cos") == "Δ-Cos" and axis_label("bert@rescaled") == "Δ-BERT @ rescaled MiniLM"
    assert axes_shown(["mr", "cos"]) == list(AXES)
    assert axes_shown(["bert@rescaled", "cos@user_mean", "cos"]) == [*AXES, "cos@user_mean", "bert@rescaled"]
    with pytest.raises(ValueError):
        base_axis("foo@bar")
    assert option_axes_for(OPTION_AXES, frozenset({"prob"})) == ("bert@rescaled",)  # API-only: no cos@…
    with pytest.raises(ValueError):
        option_axes_for(["cos@nope"], CAPS)


# ------------------------------------------------------------------ user span


def test_user_span_under_chat_template(tiny_backend):
    ids, (a, b) = tiny_backend.prompt_layout(BASE)
    assert ids == tiny_backend.encode_prompt(BASE)
    tok = tiny_backend.tokenizer
    assert tok.decode(ids[a:b]) == BASE
    assert tok.decode(ids[b - 1]) == "?"  # the last piece of the user's text …
    assert b < len(ids) and "assistant" in tok.decode(ids[b:])  # … not the assistant header after it
    assert tok.decode(ids[-1]) != "?"
    # the states the backend returns are the full pass's at those positions
    [r] = tiny_backend.generate([BASE], max_new_tokens=2)
    h = _full_states(tiny_backend, BASE)
    np.testing.assert_allclose(r.hidden_user_last, h[:, b - 1].numpy(), atol=1e-4)
    np.testing.assert_allclose(r.hidden_user_mean, h[:, a:b].mean(dim=1).numpy(), atol=1e-4)
    np.testing.assert_allclose(r.hidden_last, h[:, -1].numpy(), atol=1e-4)
    assert not np.allclose(r.hidden_user_last, r.hidden_last, atol=1e-3)


def test_user_states_when_the_shared_prefix_covers_user_tokens(tiny_backend):
    """Prompts sharing their first words: the batch's shared prefix (prefilled once) reaches into
    the user's text; the states match each prompt run alone."""
    prompts = [f"Please tell me, in one short sentence, what the capital of {c} is?" for c in
               ("France", "Spain", "Italy")]
    n_shared = tiny_backend.shared_prefix([tiny_backend.encode_prompt(p) for p in prompts])
    a, _ = tiny_backend.prompt_layout(prompts[0])[1]
    assert n_shared > a  # the prefix does cover user tokens
    batch = tiny_backend.generate(prompts, max_new_tokens=2)
    for p, r in zip(prompts, batch):
        [alone] = tiny_backend.generate([p], max_new_tokens=2)
        np.testing.assert_allclose(r.hidden_user_mean, alone.hidden_user_mean, atol=1e-4)
        np.testing.assert_allclose(r.hidden_user_last, alone.hidden_user_last, atol=1e-4)


def test_base_model_user_last_is_last(base_model_backend):
    be = base_model_backend
    ids, (a, b) = be.prompt_layout(BASE)
    assert be.format_prompt(BASE) == BASE and b == len(ids)  # user text = whole input (BOS left out)
    assert be.tokenizer.decode(ids[a:b]) == BASE
    base, var = be.generate([BASE, VARIANT], max_new_tokens=3)
    assert np.array_equal(base.hidden_user_last, base.hidden_last)
    assert np.array_equal(var.hidden_user_last, var.hidden_last)
    _, d = compute_rows("r", [Unit("p", "ds", base, [_variant("p", VARIANT)], [var])], DEFAULT_NORMALIZERS, CAPS,
                        options=("cos@user_last", "cos@user_last_blocks", "cos@last_blocks"))
    by = d.set_index("axis")
    assert by.loc["cos", "delta"] != 0
    assert by.loc["cos@user_last", "delta"] == by.loc["cos", "delta"]  # exactly: the same states
    assert by.loc["cos@user_last_blocks", "delta"] == by.loc["cos@last_blocks", "delta"]


# ------------------------------------------------------------------ rows


def test_cos_user_mean_hand_computed(tiny_backend):
    base, var = tiny_backend.generate([BASE, VARIANT], max_new_tokens=3)
    _, d = compute_rows("r", [Unit("p", "ds", base, [_variant("p", VARIANT)], [var])], DEFAULT_NORMALIZERS, CAPS,
                        options=OPTION_AXES[:5])
    by = d.set_index("axis")

    def mean_state(p):
        a, b = tiny_backend.prompt_layout(p)[1]
        return _full_states(tiny_backend, p)[:, a:b].mean(dim=1).double().numpy()

    hb, hv = mean_state(BASE), mean_state(VARIANT)
    cos = (hv * hb).sum(-1) / (np.linalg.norm(hv, axis=-1) * np.linalg.norm(hb, axis=-1))  # (L+1,)
    want_all, want_blocks = float(np.mean(cos - 1)), float(np.mean(cos[1:] - 1))
    assert want_all < -1e-3  # a real difference, far above float noise
    assert by.loc["cos@user_mean", "delta"] == pytest.approx(want_all, abs=1e-5)
    assert by.loc["cos@user_mean_blocks", "delta"] == pytest.approx(want_blocks, abs=1e-5)
    assert by.loc["cos@user_mean", "delta_norm"] == pytest.approx(want_all / DEFAULT_NORMALIZERS["cos"], abs=1e-5)
    # the plain axis is untouched by the options: same row as without them
    _, plain = compute_rows("r", [Unit("p", "ds", base, [_variant("p", VARIANT)], [var])], DEFAULT_NORMALIZERS, CAPS)
    pd.testing.assert_frame_equal(d[~d["axis"].map(is_option_axis)].reset_index(drop=True), plain)
    # blocks-only = the stored per-layer cosines without layer 0
    layers = cosine_per_layer(var.hidden_last, base.hidden_last)
    assert by.loc["cos@last_blocks", "delta"] == pytest.approx(float(np.mean(layers[1:] - 1)), abs=NOISE_TOL["cos"])


def test_cos_options_unavailable_without_user_states():
    """A result without the user's states (text not located) stores the options as unavailable, never 0."""
    h = np.random.default_rng(0).normal(size=(3, 8)).astype(np.float32)
    base = GenerationResult("a", 1, hidden_last=h)
    var = GenerationResult("b", 1, hidden_last=h * 2 + 1)
    _, d = compute_rows("r", [Unit("p", "ds", base, [_variant("p", "x")], [var])], DEFAULT_NORMALIZERS, CAPS,
                        options=("cos@user_last", "cos@last_blocks"))
    by = d.set_index("axis")
    assert by.loc["cos@last_blocks", "available"] and by.loc["cos", "available"]
    assert not by.loc["cos@user_last", "available"] and pd.isna(by.loc["cos@user_last", "delta"])
    assert "not located" in by.loc["cos@user_last", "reason"]


def test_bert_rescaled_from_the_same_f1s():
    texts = ["Paris is the capital of France.", "The capital is Paris.",
             "Bananas are yellow and grow in bunches on large plants.", ""]
    base = GenerationResult("Paris is the capital of France.", 7)
    res = [GenerationResult(t, 5) for t in texts]
    vs = [_variant("p", f"v{k}", k) for k in range(len(texts))]
    b = 0.1206
    _, d = compute_rows("r", [Unit("p", "ds", base, vs, res)], DEFAULT_NORMALIZERS, frozenset(),
                        options=OPTION_AXES, bert_baseline=b)
    assert not d["axis"].str.startswith("cos@").any()  # no activations: no cos@ option rows at all
    bert = d[d["axis"] == "bert"].set_index("variant_id")
    resc = d[d["axis"] == "bert@rescaled"].set_index("variant_id")
    assert resc["available"].all() and len(resc) == len(texts)
    np.testing.assert_array_equal(resc["delta"].to_numpy(), bert["delta"].to_numpy() / (1 - b))
    np.testing.assert_array_equal(resc["delta_norm"].to_numpy(), np.clip(resc["delta"].to_numpy(), -1, 1))
    assert resc.loc["p/v0", "delta"] == 0.0  # identical reply: exactly 0
    assert resc.loc["p/v3", "delta_norm"] == -1.0  # empty vs non-empty: F1 0 → −1/(1−b), clipped to −1
    assert resc["detector"].str.contains("rescaled MiniLM").all()
    with pytest.raises(ValueError):
        compute_rows("r", [Unit("p", "ds", base, vs, res)], DEFAULT_NORMALIZERS, frozenset(), options=OPTION_AXES)


# ------------------------------------------------------------------ store


def _with_option_rows(path):
    """Add option-axis rows (cos@user_mean: the cos rows scaled by 0.7; bert@rescaled: bert / (1 − b)) to a store."""
    with open_store(path, read_only=False) as st:
        d = st.con.execute("SELECT * FROM deltas WHERE axis IN ('cos', 'bert')").df()
        extra = []
        for axis, src, k in (("cos@user_mean", "cos", 0.7), ("bert@rescaled", "bert", 1 / (1 - 0.1206))):
            e = d[d["axis"] == src].copy()
            e["axis"] = axis
            e["delta"] = e["delta"] * k
            e["delta_norm"] = normalize(e["delta"].to_numpy(), DEFAULT_NORMALIZERS[src])
            extra.append(e)
        st.insert_df("deltas", pd.concat(extra, ignore_index=True))
        return pd.concat(extra, ignore_index=True)


def test_store_plain_numbers_unchanged_and_option_queries(tmp_path):
    path = make_store(tmp_path / "s.duckdb", missing_axes={"model-b": ["cos"]})
    f = Filters(families=("social_register", "structural"))

    def plain(st):
        return {"prompt_scores": st.prompt_scores(), "fine": st.prompt_scores(f), "total": st.view("sgs_total"),
                "cells": st.cell_prompt_scores(), "avail": st.axis_availability(), "q": st.delta_abs_quantiles(),
                "matrix": st.delta_matrix(), "abl": st.ablation_frame()["cells"], "raw": st.deltas(),
                "rescaled": st.prompt_scores_rescaled(normalizers=tuple(DEFAULT_NORMALIZERS.items()))}

    with open_store(path, read_only=True) as st:
        before = plain(st)
    extra = _with_option_rows(path)
    with open_store(path, read_only=True) as st:
        after = plain(st)
        for k in before:
            pd.testing.assert_frame_equal(before[k], after[k], obj=k)
        assert set(after["prompt_scores"]["axis"]) == set(AXES)
        # the same score queries, given option axis names
        opts = ("cos@user_mean", "bert@rescaled")
        ps = st.prompt_scores(axes=opts)
        assert set(ps["axis"]) == set(opts)
        assert "model-b" not in set(ps.loc[ps["axis"] == "cos@user_mean", "model"])  # cos unavailable there
        ref = sufficient_stats(extra.merge(st.runs()[["run_id", "model"]], on="run_id"),
                               group=("model", "dataset", "prompt_id", "axis"))
        got = ps.merge(ref, on=["model", "dataset", "prompt_id", "axis"])
        assert len(got) == len(ps) == len(ref.dropna())
        np.testing.assert_allclose(got["s"], rms(got["n"], got["sum_sq"]), rtol=1e-12)
        tot = st.view("sgs_total", axes=opts)
        assert set(tot["axis"]) == set(opts) and tot["sgs"].between(0, 1).all()
        both = st.prompt_scores(f, axes=("cos", "cos@user_mean"))
        assert set(both["axis"]) == {"cos", "cos@user_mean"}
        assert len(st.delta_matrix(axes=opts)) == len(extra)
        assert set(st.axis_availability(axes=opts)["axis"]) == set(opts)
        assert set(st.ablation_frame(axes=opts)["cells"]["axis"]) == set(opts)
    # a store read without the statistics tables (computed on the fly) answers the same
    with open_store(path, read_only=True) as st:
        st.stats_materialised = False
        pd.testing.assert_frame_equal(st.prompt_scores(axes=opts), ps)
        pd.testing.assert_frame_equal(st.prompt_scores(), after["prompt_scores"])


def test_report_tables_label_option_axes(tmp_path):
    from sago_engine.views import report

    path = make_store(tmp_path / "s.duckdb")
    _with_option_rows(path)
    with open_store(path, read_only=True) as st:
        scores = st.prompt_scores(axes=(*AXES, "cos@user_mean", "bert@rescaled"))
    tab = report.score_tables(scores)["total"]
    wide = report.wide_cells(tab, ["model"])
    assert list(wide.columns[1:]) == [axis_label(a) for a in (*AXES, "cos@user_mean", "bert@rescaled")]
    rc = report.rejection_counts(report.significance_table(scores, 0.05))
    assert list(rc["axis"]) == [*AXES, "cos@user_mean", "bert@rescaled"]
    assert rc["axis_label"].notna().all()
    plain = report.wide_cells(report.score_tables(scores[~scores["axis"].map(is_option_axis)])["total"], ["model"])
    assert list(plain.columns[1:]) == [axis_label(a) for a in AXES]
