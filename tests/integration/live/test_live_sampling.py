"""Live's "samples" setting: seeded sampled replies as the runner's, the dice beside the rephrasing, saving."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from sago_engine.live import probe as live
from sago_engine.live import save as live_save
from sago_engine.measure.sample_deltas import SAMPLED_AXES
from sago_engine.measure.step import generate, prepare
from sago_engine.types import AXIS_LABELS
from tests.support.factories import make_store

ROOT = Path(__file__).resolve().parents[3]
PROMPT = "What is the capital of Australia?"
SAMPLED = live.Sampling(temperature=0.9, samples=3)


def _replies(res: live.ProbeResult) -> dict[tuple[str | None, int], tuple[str, tuple[int, ...]]]:
    """(variant id or None, sample) → (text, token ids) of every reply of a probe."""
    out = {}
    for vid, text, ids in zip(res.rows.responses["variant_id"], res.rows.responses["response"],
                              res.rows.responses["token_ids"]):
        out[(vid if isinstance(vid, str) else None, 0)] = (text, tuple(ids))
    for vid, k, text, ids in zip(res.rows.samples["variant_id"], res.rows.samples["sample"],
                                 res.rows.samples["response"], res.rows.samples["token_ids"]):
        out[(vid if isinstance(vid, str) else None, int(k))] = (text, tuple(ids))
    return out


def test_the_setting_is_checked():
    assert live.GREEDY.greedy and live.GREEDY.record() is None
    assert SAMPLED.record() == {"temperature": 0.9, "top_p": 1.0, "top_k": 0, "samples": 3}
    with pytest.raises(live.LiveError, match="needs temperature > 0"):
        live.Sampling(0.0, 2)
    with pytest.raises(live.LiveError, match="k must be a whole number"):
        live.Sampling(0.7, 0)
    with pytest.raises(live.LiveError, match="temperature must be"):
        live.Sampling(-0.5, 1)


def test_same_seed_same_sampled_replies_in_any_batches_and_as_the_runner(tiny_backend):
    from sago_engine.backends import get_backend

    probe = live.plan_probe(PROMPT, live.choose_specs(["surface_noise", "social_register"], max_variants=4), seed=5)
    one = live.run_probe(tiny_backend, probe, 6, cache={}, sampling=SAMPLED, first_batch=1, batch_size=1)
    two = live.run_probe(tiny_backend, probe, 6, cache={}, sampling=SAMPLED, first_batch=3, batch_size=8)
    assert tiny_backend.sampling.greedy  # the shared backend samples only inside the probe's generate calls
    a, b = _replies(one), _replies(two)
    n = 1 + one.done
    assert len(a) == n * SAMPLED.samples and a == b  # same seed: identical replies, whatever the batches
    greedy = live.run_probe(tiny_backend, probe, 6, cache={})
    g = {(v if isinstance(v, str) else None): t for v, t in zip(greedy.rows.responses["variant_id"],
                                                                greedy.rows.responses["response"])}
    assert any(a[(v, 0)][0] != t for v, t in g.items())  # sampled, not greedy

    # the runner's call for this prompt and its variants (precompute.runner: generate(..., samples=k,
    # seed=run seed)) on a backend built as the runner builds a sampled model's
    runner_be = get_backend({"name": "hf_local", "model": "tiny-random", "dtype": "float32", "device": "cpu",
                             "batch_size": 8, "temperature": SAMPLED.temperature})
    try:
        item = prepare(runner_be, probe.prompt_id, live.LIVE_DATASET, probe.text,
                       [v for v in probe.variants if v.variant_id not in one.skipped])
        [ans] = generate(runner_be, [item], 6, samples=SAMPLED.samples, seed=probe.seed)
    finally:
        runner_be.close()
    runner = {(None, 0): ans.base, **{(v.variant_id, 0): r for v, r in zip(item.variants, ans.results)},
              **{(x.variant_id, x.sample): x.reply for x in ans.samples}}
    assert {k: (r.text, tuple(r.token_ids)) for k, r in runner.items()} == a


def test_dice_beside_rephrasing_and_a_sampled_probe_saves_as_a_sampled_run(tiny_backend, tmp_path):
    from sago_engine.store import open_store
    from sago_engine.views.sampling import separation_view

    probe = live.plan_probe(PROMPT, live.choose_specs(["surface_noise"], max_variants=3))
    res = live.run_probe(tiny_backend, probe, 6, cache={}, sampling=SAMPLED)
    move = live.probe_movement(res)
    assert list(move["axis"]) == list(SAMPLED_AXES)
    assert (move["n_floor"] <= SAMPLED.samples - 1).all() and (move["n_move"] <= res.done * SAMPLED.samples).all()
    assert move["p"].between(0, 1).all()
    assert live.probe_movement(live.run_probe(tiny_backend, probe, 6, cache={})).empty  # greedy: no dice

    path, run_id = live_save.save_probe(res, tmp_path / "user.duckdb", tiny_backend.info())
    greedy = live.run_probe(tiny_backend, probe, 6, cache={})
    assert live_save.probe_run_id(greedy) != run_id
    with open_store(path) as st:
        counts = st.counts()
        replies = st.sample_replies()
        run = st.runs().iloc[0]
        view = separation_view(st)["prompts"]
    assert counts["responses"] == 1 + res.done and len(replies) == (1 + res.done) * SAMPLED.samples
    assert sorted(replies["sample"].unique()) == list(range(SAMPLED.samples))
    assert run["run_id"] == run_id
    import json

    dec = run["decoding"] if isinstance(run["decoding"], dict) else json.loads(run["decoding"])
    assert dec["greedy"] is False and dec["sampling"]["samples"] == 3 and "seed_rule" in dec["sampling"]
    # the Significance page's numbers for the saved run are the ones the Live page shows
    cols = ["axis", "n_floor", "floor", "n_move", "move", "share", "p"]
    got = move.set_index("axis")[cols[1:]]
    want = view.set_index("axis").loc[got.index, cols[1:]]
    np.testing.assert_allclose(got.to_numpy(float), want.to_numpy(float), rtol=0, atol=1e-12)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return make_store(tmp_path_factory.mktemp("live_samples") / "s.duckdb")


def _page(store_path) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["app_store_custom"] = str(store_path)
    at.switch_page("pages/live.py")
    at.run()
    at.text_area(key="live_prompt").input(PROMPT)
    at.selectbox(key="live_model").select("tiny-random")
    at.multiselect(key="live_families").set_value(["surface_noise"])
    at.number_input(key="live_max_variants").set_value(3)
    at.number_input(key="live_max_new").set_value(6)
    return at


def test_live_page_samples_setting(store):
    at = _page(store)
    at.number_input(key="live_samples").set_value(2)
    at.button(key="live_run").click().run()
    assert not at.exception, at.exception
    assert any("needs temperature > 0" in e.value.replace("\\", "") for e in at.error), [e.value for e in at.error]
    at.number_input(key="live_temperature").set_value(0.8)
    at.button(key="live_run").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any(h.value == "The dice and the rephrasing" for h in at.subheader)
    [movement] = [d.value for d in at.dataframe if "rephrasing + dice" in d.value.columns]
    assert list(movement["axis"]) == [AXIS_LABELS[a] for a in SAMPLED_AXES]
    at.number_input(key="live_temperature").set_value(0.0)
    at.number_input(key="live_samples").set_value(1)
    at.button(key="live_run").click().run()  # greedy again: the page as it always was, no dice table
    assert not at.exception and not at.error
    assert not any(h.value == "The dice and the rephrasing" for h in at.subheader)
