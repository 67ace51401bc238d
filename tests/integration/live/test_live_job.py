"""A Live demo that never stalls: the probe runs as a background job the page polls — status and elapsed
time from the click, the base reply first, the first variants one at a time, Δ columns first, a cancel
that frees the model within one forward pass, a partial probe that says what its radar rests on and is
saved as partial, and a second probe after a cancel that starts at once."""

from __future__ import annotations

import time

import pytest

from sago_engine.live import job as live_job
from sago_engine.live import loaded_models as live_models
from sago_engine.live import probe as live
from sago_engine.live import save as live_save
from sago_engine.types import AXES, AXIS_LABELS
from tests.integration.live.test_live import PROMPT, _page, store  # noqa: F401 - the module's store fixture

DELTAS = [AXIS_LABELS[a] for a in AXES]


def _probe(n: int = 5):
    return live.plan_probe(PROMPT, live.choose_specs(["social_register", "surface_noise"], max_variants=n))


def _forwards(backend, after: int, then) -> list:
    """Call ``then()`` at the ``after``-th forward pass of the backend's model (a pre-hook); the hook's handle."""
    seen = [0]

    def hook(module, args):
        seen[0] += 1
        if seen[0] == after:
            then()

    return [backend.model.register_forward_pre_hook(hook), seen]


def test_job_is_visible_from_the_start_and_reports_each_batch(tiny_backend):
    job = live_job.ProbeJob("tiny-random", _probe(), 4, backend_of=lambda m: tiny_backend)
    assert job.status()["state"] == "starting" and job.status()["elapsed_s"] >= 0
    dones: list[int] = []
    orig = job._snapshot
    job._snapshot = lambda res: (orig(res), dones.append(res.done))  # type: ignore[method-assign]
    job.start()
    assert job.wait(120)
    st = job.status()
    assert st["state"] == "done" and st["error"] is None and st["result"].complete
    assert dones[:2] == [1, 5]  # base + 1 variant first (a fast first result), then the rest in one batch
    assert st["elapsed_s"] == job.status()["elapsed_s"]  # frozen once it ended


def test_cancel_ends_the_generate_call_in_flight_and_frees_the_model_at_once(tiny_backend):
    probe = _probe()
    job = live_job.ProbeJob("tiny-random", probe, 48, cache={}, backend_of=lambda m: tiny_backend, first_batch=5)
    handle, seen = _forwards(tiny_backend, 3, job.cancel)  # mid-generation: the 3rd forward of the first batch
    try:
        job.start()
        assert job.wait(60)
    finally:
        handle.remove()
    assert job.status()["state"] == "cancelled" and job.status()["result"] is None
    assert seen[0] == 3  # no forward pass ran after the cancel
    lock = live_models.lock_for(tiny_backend)
    assert lock.acquire(timeout=0.5)  # the shared model is free for the next probe
    lock.release()
    second = live_job.ProbeJob("tiny-random", probe, 6, cache={}, backend_of=lambda m: tiny_backend).start()
    assert second.wait(120) and second.status()["state"] == "done"
    fresh = live.run_probe(tiny_backend, probe, 6, cache={})  # the cancelled call left nothing behind
    assert [r["response"] for r in second.status()["result"].rows.responses.to_dict("records")] == \
        [r["response"] for r in fresh.rows.responses.to_dict("records")]


def test_the_watch_only_stops_its_own_thread(tiny_backend):
    import threading

    stop = threading.Event()
    stop.set()
    with live_job.interruptible(tiny_backend, stop.is_set):
        with pytest.raises(live_job.ProbeCancelled):
            tiny_backend.generate([PROMPT], 2)
        out: list = []
        t = threading.Thread(target=lambda: out.append(tiny_backend.generate([PROMPT], 2)))  # another session
        t.start()
        t.join(60)
        assert out and out[0][0].error is None
    assert tiny_backend.generate([PROMPT], 2)[0].error is None  # outside the block: never stopped


# ---------------------------------------------------------------- through the page (AppTest)
def _status(at) -> str:
    return next(m.value for m in at.markdown if "**Done**" in m.value or "**Cancelled**" in m.value
                or "**Running**" in m.value or "**Failed**" in m.value)


def test_page_shows_status_base_reply_first_and_delta_columns_first(store):  # noqa: F811
    at = _page(store)
    at.button(key="live_run").click().run()
    assert not at.exception, at.exception
    assert "**Done**" in _status(at) and "5/5 variants scored in" in _status(at)
    kinds = [type(e).__name__ for e in at.main]
    assert kinds.index("Block") < kinds.index("Dataframe")  # the base reply's block sits above the table
    assert at.code[0].value == at.session_state["live_result"][1].base.text
    cols = list(at.dataframe[0].value.columns)
    assert cols[0] == "label" and cols[1:1 + len(DELTAS)] == DELTAS  # Δ columns first


def test_cancelled_probe_says_what_its_radar_rests_on_saves_as_partial_and_a_rerun_finishes(
        store, tmp_path, monkeypatch):  # noqa: F811
    target = tmp_path / "probes.duckdb"
    monkeypatch.setenv("SAGO_USER_STORE", str(target))
    orig = live_job.ProbeJob._snapshot

    def cancel_after_first(self, res):  # the presenter presses Cancel once the first variant is in
        orig(self, res)
        self.cancel()

    monkeypatch.setattr(live_job.ProbeJob, "_snapshot", cancel_after_first)
    at = _page(store)
    at.button(key="live_run").click().run()
    assert not at.exception, at.exception
    assert "**Cancelled**" in _status(at) and "1/5 variants scored" in _status(at)
    assert any("radar rests on 1 of 5 variants" in w.value and "partial run" in w.value for w in at.warning)
    assert any("resting on 1 of 5 variants (partial probe)" in c.value for c in at.caption)
    save = at.button(key="live_save")
    assert save.label == "Save as partial run"
    save.click().run()
    assert any("status partial: 1 of 5 variants" in s.value for s in at.success), [e.value for e in at.error]
    from sago_engine.store import open_store

    with open_store(target) as st:
        assert st.runs()["status"].tolist() == ["partial"]
    monkeypatch.setattr(live_job.ProbeJob, "_snapshot", orig)
    t = time.perf_counter()
    at.button(key="live_run").click().run()  # a second probe after the cancel: starts and finishes
    assert not at.exception, at.exception
    assert "**Done**" in _status(at) and "5/5 variants scored" in _status(at), _status(at)
    assert not at.warning and at.button(key="live_save").label == "Save to store"
    assert time.perf_counter() - t < 120
    res = at.session_state["live_result"][1]
    assert res.complete and res.cached == 1  # the variant scored before the cancel is reused
    path, run_id = live_save.save_probe(res, tmp_path / "full.duckdb", at.session_state["live_result"][2])
    with open_store(path) as st:
        assert st.runs()["status"].tolist() == ["complete"]


# ---------------------------------------------------------------- real browser, real model
@pytest.mark.browser
def test_status_line_right_after_the_click_and_base_reply_before_the_full_table():
    """/live with smollm2-135m-instruct (4 variants, 16 new tokens): within 2 s of the click the status
    line says Running with its seconds; the base reply is on screen while variants are still pending."""
    from sago_engine.models import ModelUnavailableError, resolve_model
    from sago_engine.store.catalog import DEMO_STORE
    from tests.support.browser import browser_page, dashboard, fill_live_form, require_chromium

    require_chromium()
    try:
        resolve_model(live.DEFAULT_MODEL)
    except ModelUnavailableError as e:
        pytest.skip(str(e))
    with dashboard(DEMO_STORE) as url, browser_page(1440, 1800) as page:
        page.goto(f"{url}/live", wait_until="domcontentloaded")
        fill_live_form(page, PROMPT, 4, 16)  # a real model, a short probe
        page.get_by_role("button", name="Run probe").click()
        clicked = time.monotonic()
        status = page.locator("[data-testid='stMarkdown']", has_text="Running")
        status.first.wait_for(timeout=10_000)
        assert time.monotonic() - clicked < 2.5, "no status line right after the click"
        assert " s" in status.first.text_content()  # elapsed seconds shown
        page.get_by_text("Base response (").wait_for(timeout=300_000)
        # at the moment the base reply shows, the probe is still running and variants are pending
        seen = page.evaluate("""() => {
            const md = [...document.querySelectorAll('[data-testid="stMarkdown"]')].map(e => e.textContent);
            return md.some(t => t.includes('Running'));
        }""")
        assert seen, "the base reply appeared only with the full table"
        page.get_by_text("4/4 variants scored in").wait_for(timeout=300_000)
        assert page.locator("[data-testid='stException']").count() == 0
