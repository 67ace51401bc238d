"""The Live page: plan → batched run → Δ rows → s_X radar, the session cache, input limits, save to a user store."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from sago_engine.live import probe as live
from sago_engine.live import save as live_save
from tests.support.factories import make_store

ROOT = Path(__file__).resolve().parents[3]
PROMPT = "What is the capital of Australia?"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return make_store(tmp_path_factory.mktemp("live") / "s.duckdb")


def count_generate(monkeypatch, backend) -> list[int]:
    """Count ``backend.generate`` calls: the returned list grows by one per call."""
    calls: list[int] = []
    orig = backend.generate

    def generate(*a, **kw):
        calls.append(1)
        return orig(*a, **kw)

    monkeypatch.setattr(backend, "generate", generate)
    return calls


def _page(store_path, prompt: str | None = PROMPT, model: str = "tiny-random"):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.session_state["app_store_custom"] = str(store_path)
    at.switch_page("pages/live.py")
    at.run()
    assert not at.exception, at.exception
    if prompt is not None:
        at.text_area(key="live_prompt").input(prompt)
    at.selectbox(key="live_model").select(model)
    at.multiselect(key="live_families").set_value(["social_register", "surface_noise"])
    at.number_input(key="live_max_variants").set_value(5)
    at.number_input(key="live_max_new").set_value(6)
    at.run()
    assert not at.exception, at.exception
    return at


def test_variants_appear_before_any_run(store):
    at = _page(store)
    table = at.dataframe[0].value
    assert len(table) == 5 and set(table["family"]) == {"social_register", "surface_noise"}
    assert {"family", "subtype", "strength", "position", "text"} <= set(table.columns)


def test_run_fills_deltas_then_second_run_hits_the_cache(store, monkeypatch):
    at = _page(store)
    calls = count_generate(monkeypatch, live.shared_backend("tiny-random"))  # the page's backend
    at.button(key="live_run").click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    res = at.dataframe[0].value
    assert len(res) == 5 and (res["status"] == "done").all()
    assert res["Δ-BLEU"].notna().all() and res["Δ-Cos"].notna().all()
    assert set(res["mirroring"]) <= {"no change", "starts mirroring", "stops mirroring", "n/a"}
    assert len(at.get("plotly_chart")) == 1  # the s_X radar
    n = len(calls)
    assert n > 0
    at.button(key="live_run").click().run()  # same probe again: served from this session's cache
    assert not at.exception
    assert len(calls) == n
    pd.testing.assert_frame_equal(at.dataframe[0].value, res)


@pytest.mark.parametrize("prompt,env,message", [
    ("   ", None, "The prompt is empty"),
    ("x" * 41, "40", "at most 40"),
])
def test_bad_prompt_gives_clear_error(store, monkeypatch, prompt, env, message):
    if env:
        monkeypatch.setenv("SAGO_LIVE_MAX_CHARS", env)
    at = _page(store, prompt=prompt)
    at.button(key="live_run").click().run()
    assert not at.exception
    assert any(message in e.value for e in at.error), [e.value for e in at.error]
    assert not at.get("plotly_chart")


def test_model_that_fails_to_load_gives_clear_error(store, tmp_path):
    at = _page(store)
    at.text_input(key="live_model_path").input(str(tmp_path / "no-such-model"))
    at.button(key="live_run").click().run()
    assert not at.exception
    assert any("Cannot load the model" in e.value for e in at.error), [e.value for e in at.error]


# ---------------------------------------------------------------- engine
def test_batches_and_spec_sampling():
    # the base prompt and one variant first (a fast first result), then the rest in one decoding batch
    assert [s.stop - s.start for s in live.batch_slices(24)] == [1, 23]
    assert live.batch_slices(24, 3, 8) == [slice(0, 3), slice(3, 11), slice(11, 19), slice(19, 24)]
    # the ramp: the first variants one or two at a time, then full batches
    assert [s.stop - s.start for s in live.batch_slices(24, 1, 8, ramp=True)] == [1, 2, 4, 8, 8, 1]
    assert live.batch_slices(24, 3, 8, ramp=True) == [slice(0, 3), slice(3, 9), slice(9, 17), slice(17, 24)]
    assert live.batch_slices(0) == [] and live.batch_slices(5, 0, 8) == [slice(0, 5)]
    specs = live.choose_specs(["social_register", "surface_noise", "structural"], max_variants=24)
    by = pd.Series([s.family for s in specs]).value_counts().to_dict()
    assert len(specs) == 24 and by["structural"] == 5 and set(by) == {"social_register", "surface_noise", "structural"}
    with pytest.raises(live.LiveError, match="No variant matches"):
        live.choose_specs(["structural"], positions=["PREFIX"])
    with pytest.raises(live.LiveError, match="at least one"):
        live.choose_specs([])


def test_cache_is_per_caller_and_save_goes_to_a_user_store(tiny_backend, tmp_path, monkeypatch):
    specs = live.choose_specs(["surface_noise"], max_variants=3)
    probe = live.plan_probe(PROMPT, specs)
    mine, theirs = {}, {}
    seen = []
    r1 = live.run_probe(tiny_backend, probe, 4, cache=mine, on_batch=lambda r: seen.append(r.done), first_batch=1,
                        batch_size=2)
    assert seen == [1, 3] and r1.complete
    calls = count_generate(monkeypatch, tiny_backend)
    live.run_probe(tiny_backend, probe, 4, cache=mine)  # the same session again: every reply from its cache
    assert calls == []
    live.run_probe(tiny_backend, probe, 4, cache=theirs)  # another session: its own cache, so it generates
    assert len(calls) == 2  # base + 1 variant, then the other 2 (batch_slices)
    stopped = live.run_probe(tiny_backend, probe, 4, cache={}, should_stop=lambda: True)
    assert stopped.cancelled and stopped.done == 0

    from sago_engine.store import open_store
    from sago_engine.store.catalog import DEMO_STORE

    with pytest.raises(live.LiveError, match="demo store"):
        live_save.save_probe(r1, DEMO_STORE)
    path, run_id = live_save.save_probe(r1, tmp_path / "user.duckdb", tiny_backend.info())
    live_save.save_probe(r1, path, tiny_backend.info())  # idempotent
    with open_store(path) as st:
        scores = st.prompt_scores()
        assert set(scores["run_id"]) == {run_id} and set(scores["dataset"]) == {"live"}
        assert st.counts()["responses"] == 4  # base + 3 variants
    prof = live.prompt_profile(r1).set_index("axis")
    merged = scores.set_index("axis")["s"]
    for a in merged.index:
        assert prof.loc[a, "s"] == pytest.approx(merged[a], abs=1e-9)


# ---------------------------------------------------------------- variants that do not vary
NO_CASE = {"arabic": "ما هي عاصمة فرنسا؟", "chinese": "法国的首都是哪里？", "hebrew": "מהי בירת צרפת?",
           "thai": "ราชธานีของฝรั่งเศสคืออะไร", "devanagari": "फ्रांस की राजधानी क्या है?"}
#: A Llama-3-style chat template: the user's message is trimmed (``| trim``), as Llama-3's and Gemma's are.
TRIM_TEMPLATE = ("{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
                 "'<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
                 "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")


def test_case_noise_on_arabic_is_skipped_not_scored_as_stable(tiny_backend, monkeypatch):
    specs = live.choose_specs(["surface_noise"], subtypes=["case"])  # strengths 1–3 × PREFIX/SUFFIX/GLOBAL
    assert len(specs) == 9
    probe = live.plan_probe(NO_CASE["arabic"], specs)
    assert [v.text for v in probe.variants] == [probe.text] * 9
    assert set(probe.skipped) == {v.variant_id for v in probe.variants}
    assert set(probe.skipped.values()) == {"no-op: nothing to change for surface_noise · case"}
    calls = count_generate(monkeypatch, tiny_backend)
    res = live.run_probe(tiny_backend, probe, max_new_tokens=8)
    assert len(calls) == 1 and res.base is not None  # the base prompt only
    assert res.done == 0 and res.complete
    table = live.result_table(res)
    assert (table["status"] == "skipped").all() and not table["kept"].any()
    assert (table["skip_reason"] == "no-op: nothing to change for surface_noise · case").all()
    assert table[[c for c in table.columns if c.startswith("Δ-")]].isna().all().all()  # no Δ = 0
    prof = live.prompt_profile(res)
    assert prof["s"].isna().all() and (prof["n_variants"] == 0).all()  # not s = 0.0 over 9 variants


def test_live_page_shows_noop_variants_as_skipped(store):
    at = _page(store, prompt=NO_CASE["arabic"])
    at.multiselect(key="live_families").set_value(["surface_noise"])
    at.run()
    at.multiselect(key="live_subtypes").set_value(["case"])
    at.number_input(key="live_max_variants").set_value(9)
    at.run()
    before = at.dataframe[0].value
    assert len(before) == 9 and before["skip_reason"].notna().all()
    at.button(key="live_run").click().run()
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    assert (table["status"] == "skipped").all() and table["Δ-BLEU"].isna().all()
    assert any("No variant changes what the model reads" in i.value for i in at.info)
    assert not at.get("plotly_chart")  # no radar of s = 0


@pytest.mark.parametrize("script", ["chinese", "hebrew", "thai", "devanagari"])
def test_case_noise_on_other_scripts_without_case_is_a_noop(script):
    probe = live.plan_probe(NO_CASE[script], live.choose_specs(["surface_noise"], subtypes=["case"]))
    assert len(probe.skipped) == len(probe.variants) == 9
    assert not live.variant_table(probe)["changed"].any()
    mixed = live.plan_probe(NO_CASE[script] + " (Paris?)", live.choose_specs(["surface_noise"], subtypes=["case"]))
    assert not mixed.skipped  # a Latin word gives case noise something to change


def test_variant_with_the_same_model_input_is_skipped_per_model(tiny_backend, tmp_path):
    """A variant that only adds whitespace at the message's edges reads the same token ids under a template
    that trims the message: skipped for that model (not generated, no Δ), run under one that does not."""
    from dataclasses import replace

    from sago_engine.backends.hf_local import HFLocalBackend
    from sago_engine.variants.noop import MODEL_INPUT_NOOP

    probe = live.plan_probe(PROMPT, live.choose_specs(["surface_noise"], subtypes=["spacing"], positions=["SUFFIX"]))
    edge = replace(probe.variants[0], variant_id="edge-whitespace", text=PROMPT + " \n")
    probe = replace(probe, variants=(*probe.variants, edge))
    trim = HFLocalBackend("tiny-random", dtype="float32", device="cpu", batch_size=8, pack_weights=False)
    try:
        trim.template = TRIM_TEMPLATE
        assert trim.encode_prompt(edge.text) == trim.encode_prompt(PROMPT)
        assert tiny_backend.encode_prompt(edge.text) != tiny_backend.encode_prompt(PROMPT)  # ChatML keeps it
        res = live.run_probe(trim, probe, max_new_tokens=4, semantic_filter=False)
        assert res.skipped == {"edge-whitespace": MODEL_INPUT_NOOP} and res.complete
        assert res.done == len(probe.variants) - 1 and "edge-whitespace" not in res.measured
        row = live.result_table(res).set_index("label").iloc[-1]
        assert row["status"] == "skipped" and row["skip_reason"] == MODEL_INPUT_NOOP
        assert (live.prompt_profile(res)["n_variants"] == res.done).all()
        plain = live.run_probe(tiny_backend, probe, max_new_tokens=4, semantic_filter=False)
        assert not plain.skipped and plain.done == len(probe.variants)
        path, run_id = live_save.save_probe(res, tmp_path / "user.duckdb", trim.info())
    finally:
        trim.close()
    from sago_engine.store import open_store

    with open_store(path) as st:  # stored as the runner stores it: unavailable rows, no reply, in no score
        d = st.deltas(kept_only=False)
        skipped = d[d["variant_id"] == "edge-whitespace"]
        assert len(skipped) == 6 and not skipped["available"].any() and set(skipped["reason"]) == {MODEL_INPUT_NOOP}
        assert st.con.execute("SELECT count(*) FROM responses WHERE variant_id = 'edge-whitespace'").fetchall() == [(0,)]
        assert (st.prompt_scores()["n_variants"] == res.done).all()
        counts = st.noop_counts()
        assert counts[["model", "subtype", "position", "reason", "n"]].values.tolist() == [
            ["tiny-random", "spacing", "SUFFIX", MODEL_INPUT_NOOP, 1]]


# ---------------------------------------------------------------- real browser, real model
@pytest.mark.browser
def test_live_page_in_a_real_browser_with_smollm():
    """Type the prompt on /live with smollm2-135m-instruct (8 variants, 16 new tokens: the real model
    through the real page, kept short), run, wait for the radar, screenshot."""
    from sago_engine.models import ModelUnavailableError, resolve_model
    from sago_engine.store.catalog import DEMO_STORE
    from tests.support.browser import browser_page, dashboard, fill_live_form, require_chromium, screenshot_dir

    require_chromium()
    try:
        resolve_model(live.DEFAULT_MODEL)
    except ModelUnavailableError as e:
        pytest.skip(str(e))
    with dashboard(DEMO_STORE) as url, browser_page(1400, 2200) as page:
        page.goto(f"{url}/live", wait_until="domcontentloaded")
        fill_live_form(page, PROMPT, 8, 16)  # a real model, a short probe
        page.get_by_role("button", name="Run probe").click()
        page.locator("[data-testid='stPlotlyChart'] .main-svg").first.wait_for(timeout=300_000)  # 2 cores under load: generation can take minutes
        page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=60_000)
        page.wait_for_timeout(800)
        assert page.locator("[data-testid='stException']").count() == 0
        assert page.get_by_text("8/8 variants scored").count() == 1
        legend = page.locator(".js-plotly-plot .legend").first.text_content()
        assert "this prompt" in legend and live.DEFAULT_MODEL in legend  # the demo store has smollm's profile
        page.screenshot(path=str(screenshot_dir() / "live.png"), full_page=True)


# ---------------------------------------------------------------- background loading at dashboard start
def test_background_warmup_loads_once_and_reports_progress():
    from sago_engine.live import probe as live

    if live.warmup_status()["state"] != "idle":
        pytest.skip("a warm-up already ran in this process")
    assert live.start_warmup("tiny-random") is True
    assert live.start_warmup("tiny-random") is False  # once per process
    assert live.warmup_status()["state"] in ("loading", "ready")
    be = live.shared_backend("tiny-random")  # waits for the warm-up instead of loading a second copy
    st = live.warmup_status()
    assert st["state"] == "ready" and st["step"] == "ready" and st["error"] is None and st["ready_s"] > 0
    assert live.shared_backend("tiny-random") is be
    probe = live.plan_probe("What is the capital of Australia?",
                            live.choose_specs(["social_register"], max_variants=2, prompt_id="warm"))
    res = live.run_probe(be, probe, 4)
    assert res.complete and res.done == 2


# ---------------------------------------------------------------- "Save to store" through the page, local and --share --live
def _probe_and_save(store_path) -> AppTest:
    at = _page(store_path)
    at.button(key="live_run").click().run()
    assert not at.exception, at.exception
    shown = at.dataframe[0].value
    assert (shown["status"] == "done").all()
    at.button(key="live_save").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("Saved as run" in s.value for s in at.success)
    return at


def _saved_equals_the_page(saved, at) -> None:
    from sago_engine.store import open_store

    with open_store(saved) as st:
        runs, scores, counts = st.runs(), st.prompt_scores(), st.counts()
    assert len(runs) == 1 and runs.loc[0, "model"] == "tiny-random" and set(scores["dataset"]) == {"live"}
    assert counts["responses"] == 1 + 5  # the base reply and one per variant
    [fig] = at.get("plotly_chart")
    import json

    radar = json.loads(fig.proto.spec)["data"]
    [mine] = [t for t in radar if t.get("name") == "this prompt: s_X"]
    got = {lab: r for lab, r in zip(mine["theta"], mine["r"]) if r is not None}
    from sago_engine.types import AXIS_LABELS

    stored = {AXIS_LABELS[a]: s for a, s in zip(scores["axis"], scores["s"])}
    assert got and set(got) <= set(stored)
    for lab, r in got.items():  # the saved run's s_X are the ones the page drew
        assert r == pytest.approx(stored[lab], abs=1e-9), lab


def test_live_save_writes_the_probe_to_the_user_store(store, tmp_path, monkeypatch):
    target = tmp_path / "mine" / "probes.duckdb"
    monkeypatch.setenv("SAGO_USER_STORE", str(target))
    at = _probe_and_save(store)
    _saved_equals_the_page(target, at)


def test_share_live_saves_inside_the_shared_folder_and_share_alone_offers_no_save(tmp_path, monkeypatch):
    share = tmp_path / "meet"
    share.mkdir()
    meeting = make_store(share / "meeting.duckdb")
    home = tmp_path / "home" / "probes.duckdb"
    monkeypatch.setenv("SAGO_USER_STORE", str(home))
    monkeypatch.setenv("SAGO_SHARE_DIR", str(share))
    monkeypatch.setenv("SAGO_LIVE", "1")
    before = meeting.read_bytes()
    at = _probe_and_save("meeting.duckdb")
    _saved_equals_the_page(share / "probes.duckdb", at)
    assert not home.exists() and meeting.read_bytes() == before  # never outside DIR, never the shown store
    monkeypatch.delenv("SAGO_LIVE")  # --share without --live: no Live page, so nothing to save
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    assert "Live" not in [p.proto.label for p in at.get("page_link")]


# ---------------------------------------------------------------- the semantic filter, before generation
UNRELATED = "Bananas grow in warm tropical climates and ripen yellow while monkeys eat them eagerly."


def _probe_with_an_unrelated_rewrite():
    """Structural variants of PROMPT, one of them replaced by unrelated text: it fails the filter, and
    under the prompt-level rule (SAGO §Variants) its family's other variants are not kept either."""
    from dataclasses import replace

    probe = live.plan_probe(PROMPT, live.choose_specs(["structural"], max_variants=4))
    bad = replace(probe.variants[0], variant_id="unrelated", text=UNRELATED)
    return replace(probe, variants=(bad, *probe.variants[1:]))


def test_filter_verdicts_are_known_before_the_first_reply(tiny_backend):
    probe = _probe_with_an_unrelated_rewrite()
    first = []
    res = live.run_probe(tiny_backend, probe, 4, cache={}, first_batch=1, batch_size=1,
                         on_batch=lambda r: first.append(dict(r.kept)) if not first else None)
    assert first[0] == res.kept and set(res.kept) == {v.variant_id for v in probe.variants}
    assert not any(res.kept.values())  # the whole structural group of the prompt is rejected
    table = live.result_table(res)
    assert (table["status"] == "done").all() and not table["kept"].any()  # answered all the same, as precompute
    assert live.prompt_profile(res)["s"].isna().all()  # no kept variant: no s_X
    calls = [0]
    stopped = live.run_probe(tiny_backend, probe, 4, cache={}, first_batch=1, batch_size=1,
                             should_stop=lambda: (calls.__setitem__(0, calls[0] + 1) or calls[0] > 1))
    assert stopped.cancelled and stopped.done == 1
    assert stopped.kept == res.kept  # the verdicts of the whole planned group, not of what finished


def test_saved_probe_records_each_variants_own_filter_verdict(tiny_backend, tmp_path):
    from sago_engine.store import open_store

    probe = _probe_with_an_unrelated_rewrite()
    res = live.run_probe(tiny_backend, probe, 4, cache={})
    path, _ = live_save.save_probe(res, tmp_path / "user.duckdb", tiny_backend.info())
    with open_store(path) as st:
        v = st.con.execute("SELECT variant_id, semantic_score, passes_filter, kept FROM variants").df()
    v = v.set_index("variant_id")
    assert not v["kept"].any()
    assert not v.loc["unrelated", "passes_filter"] and v.drop(index="unrelated")["passes_filter"].all()
    assert v["semantic_score"].notna().all()
