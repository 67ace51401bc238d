"""Measurement fidelity of local (hf_local) runs: raw replies and ids, neutral greedy decoding,
recorded chat templates, one (dtype, device) check, and the teacher-forced replay of a store."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from precompute.config import ConfigError, load_config
from tests.support.factories import tiny_toml

ROOT = Path(__file__).resolve().parents[3]

#: The issue's case: smollm2's reply to this variant (GLOBAL spacing noise with tabs, of
#: simpleqa_verified:537) is 12 word tokens then 36 tokens of spaces and tabs.
ARVIDA_VARIANT = ("The  \t  Arvida Theatre  , \t \t\t built   \t \t in  \t   \t1927  \t\t\tin  \t\tSaguenay, Québec \t  , "
                  "\t  was \t built \t\t  according    to \t the plans of \t\t\t\t \twhich \t  architect?")

#: Qwen3-style switch (the real Qwen3 template closes an empty think block when thinking is off).
THINK_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}{% endif %}"
)


def _tiny_folder(tmp_path, repetition_penalty=None, template=None) -> str:
    """tiny-random (seed 0) saved as a local model folder, optionally with a generation config
    penalty or another chat template (as a Hub model folder would ship them)."""
    from sago_engine.models import tiny_random_model

    model, tok, _ = tiny_random_model(0)
    if repetition_penalty is not None:
        model.generation_config.repetition_penalty = repetition_penalty
    if template is not None:
        tok.chat_template = template
    d = tmp_path / "tiny-folder"
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return str(d)


# ----------------------------------------------------------------------------- item 2: raw replies


def test_reply_is_exact_decode_of_emitted_ids(tiny_backend):
    """'Question number 22?' makes tiny-random emit a token of trailing spaces: kept, not stripped."""
    r = tiny_backend.generate(["Question number 22?"], max_new_tokens=3)[0]
    assert r.token_ids == [14530, 8719, 13617]
    assert r.text == " oct contributes\n" + " " * 35
    assert r.text == tiny_backend.tokenizer.decode(r.token_ids, skip_special_tokens=True)
    assert r.n_tokens == len(r.token_ids) == len(r.token_logprobs) == 3


def test_ids_end_at_first_eos_inclusive(tiny_backend):
    res = tiny_backend.generate([f"Question number {i}?" for i in range(16)], max_new_tokens=12)
    for r in res:
        eos = [k for k, t in enumerate(r.token_ids) if t in tiny_backend.eos_ids]
        assert eos == ([len(r.token_ids) - 1] if r.finish_reason == "stop" else [])
        assert r.text == tiny_backend.tokenizer.decode(r.token_ids, skip_special_tokens=True,
                                                       clean_up_tokenization_spaces=False)


@pytest.mark.slow
def test_smollm_mirrored_whitespace_is_kept(smollm_backend):
    r = smollm_backend.generate([ARVIDA_VARIANT], max_new_tokens=48)[0]
    assert r.n_tokens == len(r.token_ids) == 48
    assert r.text.rstrip() == "The  Arvida Theatre is a classic example of a"
    tail = r.text[len(r.text.rstrip()):]
    assert len(tail) >= 36 and set(tail) <= {" ", "\t"} and "\t" in tail  # the mirrored noise
    assert r.text == smollm_backend.tokenizer.decode(r.token_ids, skip_special_tokens=True)


# ----------------------------------------------------------------------------- item 3: neutral greedy


def test_folder_repetition_penalty_is_recorded_not_applied(tmp_path):
    """A model folder whose generation config sets repetition_penalty = 1.5 still gets the argmax
    of its logits at every step; the same folder's own config would not (checked too)."""
    import torch
    from transformers import GenerationConfig

    from sago_engine.backends.hf_local import HFLocalBackend

    folder = _tiny_folder(tmp_path, repetition_penalty=1.5)
    be = HFLocalBackend(folder, device="cpu", batch_size=4)
    prompts = ["Hello there", "Name a colour.", "Tell me a joke about cats and dogs please", "the the the the the"]
    res = be.generate(prompts, max_new_tokens=48)
    info = be.info()["decoding"]
    assert info["generation_config"]["repetition_penalty"] == 1.0
    assert info["generation_config"]["do_sample"] is False
    assert info["model_generation_config_ignored"]["repetition_penalty"] == 1.5
    gaps, folder_flips = [], 0
    for p, r in zip(prompts, res):
        ids = torch.tensor([be.encode_prompt(p) + r.token_ids])
        with torch.inference_mode():
            logits = be.model(input_ids=ids).logits[0, -len(r.token_ids) - 1 : -1].float()
        chosen = logits.gather(-1, torch.tensor(r.token_ids)[:, None])[:, 0]
        gaps.append(float((logits.max(-1).values - chosen).max()))  # 0 when the choice is the argmax
        own = be.model.generate(input_ids=ids[:, : ids.shape[1] - len(r.token_ids)], max_new_tokens=48,
                                generation_config=GenerationConfig.from_pretrained(folder), do_sample=False,
                                pad_token_id=be.pad_id, eos_token_id=be.eos_ids)
        own_new = own[0, ids.shape[1] - len(r.token_ids):].tolist()
        folder_flips += own_new[: len(r.token_ids)] != r.token_ids
    assert max(gaps) < 1e-4
    assert folder_flips >= 1  # the folder's penalty would have changed a reply


# ----------------------------------------------------------------------------- item 4: templates


def test_template_kwargs_rules():
    from sago_engine.backends.hf_local import template_kwargs

    assert template_kwargs(THINK_TEMPLATE) == {"enable_thinking": False}
    assert template_kwargs(THINK_TEMPLATE, {"enable_thinking": True}) == {"enable_thinking": True}
    assert template_kwargs("{{ messages }}") == {}
    with pytest.raises(ValueError, match="do not occur"):
        template_kwargs("{{ messages }}", {"enable_thinking": False})
    with pytest.raises(ValueError, match="no chat template"):
        template_kwargs(None, {"enable_thinking": False})
    assert template_kwargs(None) == {}


def test_thinking_template_is_switched_off_and_recorded(tmp_path):
    from sago_engine.backends.hf_local import HFLocalBackend

    folder = _tiny_folder(tmp_path, template=THINK_TEMPLATE)
    be = HFLocalBackend(folder, device="cpu")
    assert be.format_prompt("Hi") == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    rec = be.info()["chat_template"]
    assert rec["sha256"] == hashlib.sha256(THINK_TEMPLATE.encode()).hexdigest()
    assert rec["kwargs"] == {"add_generation_prompt": True, "enable_thinking": False}
    assert rec["uses_clock"] is False
    on = HFLocalBackend(folder, device="cpu", chat_template_kwargs={"enable_thinking": True})
    assert on.format_prompt("Hi") == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert on.info()["chat_template"]["kwargs"]["enable_thinking"] is True


def test_base_model_records_no_template(tiny_backend):
    from sago_engine.backends.hf_local.prompt_render import USER_TEXT_RULE, PromptRenderer

    base = PromptRenderer(tiny_backend.tokenizer, None)
    assert base.template_record() == {"template": None, "user_text": USER_TEXT_RULE}
    assert tiny_backend.template_record()["kwargs"] == {"add_generation_prompt": True}  # smollm2 ChatML: no switch


# ----------------------------------------------------------------------------- item 8: dtype/device


def _cfg(tmp_path, extra: str) -> Path:
    p = tmp_path / "c.toml"
    p.write_text(tiny_toml().format(store=tmp_path / "s.duckdb", data=ROOT / "data" / "datasets")
                 .replace('key = "tiny-random"', 'key = "tiny-random"\n' + extra))
    return p


def test_float16_and_cuda_n_rejected_by_config_on_cpu(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    with pytest.raises(ConfigError, match=r"float16' needs a GPU.*resolves to cpu"):
        load_config(_cfg(tmp_path, 'dtype = "float16"'))
    with pytest.raises(ConfigError, match=r"cuda:1'.*no CUDA device"):
        load_config(_cfg(tmp_path, 'device = "cuda:1"'))
    with pytest.raises(ConfigError, match=r"unknown device 'tpu'"):
        load_config(_cfg(tmp_path, 'device = "tpu"'))


def test_float16_and_cuda_n_accepted_where_torch_has_them(tmp_path, monkeypatch):
    import torch

    from sago_engine.models import check_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    cfg = load_config(_cfg(tmp_path, 'dtype = "float16"\ndevice = "cuda:1"'))
    assert (cfg.models[0].dtype, cfg.models[0].device) == ("float16", "cuda:1")
    assert check_device("float16", "auto") == "cuda"
    assert check_device("bfloat16", "cuda:0") == "cuda:0"
    with pytest.raises(ValueError, match=r"2 CUDA device\(s\) \(valid: cuda:0, cuda:1\)"):
        check_device("float32", "cuda:2")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    with pytest.raises(ValueError, match="is_bf16_supported"):
        check_device("bfloat16", "cuda")


def test_chat_template_kwargs_config_enters_run_id(tmp_path):
    from dataclasses import replace

    from precompute.runner import backend_spec, make_plan, run_id_for

    cfg = load_config(_cfg(tmp_path, "chat_template_kwargs = { enable_thinking = true }"))
    m = cfg.models[0]
    assert m.chat_template_kwargs == {"enable_thinking": True}
    assert backend_spec(cfg, m)["chat_template_kwargs"] == {"enable_thinking": True}
    plan = make_plan(cfg)
    assert run_id_for(cfg, m, plan) != run_id_for(cfg, replace(m, chat_template_kwargs=None), plan)
    with pytest.raises(ConfigError, match="chat_template_kwargs must be a table"):
        load_config(_cfg(tmp_path, 'chat_template_kwargs = "x"'))


# ----------------------------------------------------------------------------- replay of stored ids


def _check_replay(df, n_runs: int, per_run: int) -> None:
    from sago_engine.verify.replay import REPLAYED_AXES, replay_tol

    assert len(df) == n_runs * per_run
    assert REPLAYED_AXES == ("prob", "ent")
    for a in REPLAYED_AXES:
        over = df[f"err_{a}"] > df["n_tokens"].map(lambda n, a=a: replay_tol(a, n))
        assert not over.any(), df[over].to_dict("records")
    assert df["text_is_decode"].all()
    assert df["template_match"].all()
    assert (df["n_tokens"] > 0).all()


def test_replay_reproduces_tiny_store(tiny_store):
    """The runner's stored ids, teacher-forced, give back the stored seq_logprob / mean_entropy;
    the run record holds the neutral decoding and the template hash."""
    import json

    from sago_engine.store import open_store
    from sago_engine.verify.replay import replay_token_stats

    df = replay_token_stats(tiny_store, per_run=10, seed=3)
    _check_replay(df, 1, 10)
    with open_store(tiny_store) as st:
        dec = json.loads(st.runs().loc[0, "decoding"])
        chat = st.templates("chat_template")
    assert dec["generation_config"]["repetition_penalty"] == 1.0 and dec["greedy"] is True
    assert dec["chat_template"]["kwargs"] == {"add_generation_prompt": True}
    # the template text itself is stored, under the sha256 the run records
    assert chat["template_id"].tolist() == [dec["chat_template"]["sha256"]]
    assert hashlib.sha256(chat["text"][0].encode()).hexdigest() == dec["chat_template"]["sha256"]


class _NoClose:
    """A session backend lent to the runner (which closes what it is given)."""

    def __init__(self, be):
        self._be = be

    def __getattr__(self, k):
        return getattr(self._be, k)

    def close(self):
        pass


@pytest.mark.slow
def test_replay_reproduces_smollm_store(tmp_path, smollm_backend):
    from precompute.runner import run
    from sago_engine.verify.replay import replay_token_stats

    text = (tiny_toml(seed=5, chunk_prompts=2, n_prompts=1, batch_size=8)
            .replace('key = "tiny-random"', 'key = "smollm2-135m-instruct"')
            .replace("max_new_tokens = 6", "max_new_tokens = 24"))
    p = tmp_path / "s.toml"
    p.write_text(text.format(store=tmp_path / "s.duckdb", data=ROOT / "data" / "datasets"))
    run(load_config(p), progress=False, backend_factory=lambda spec: _NoClose(smollm_backend))
    df = replay_token_stats(tmp_path / "s.duckdb", per_run=12, backend_for=lambda run, kw: smollm_backend)
    _check_replay(df, 1, 12)


@pytest.mark.slow
def test_replay_reproduces_given_store():
    """The bundled demo store (or any store: SAGO_REPLAY_STORE=path [SAGO_REPLAY_PER_RUN=8]
    pytest -m slow tests/integration/verify/test_fidelity_local.py -k given_store): teacher-forcing the stored
    token ids of every local run gives back its stored seq_logprob / mean_entropy, and the
    stored reply is the exact decode of its ids."""
    from sago_engine.store import open_store
    from sago_engine.verify.replay import replay_token_stats

    path = os.environ.get("SAGO_REPLAY_STORE") or str(ROOT / "data" / "sago_demo.duckdb")
    per_run = int(os.environ.get("SAGO_REPLAY_PER_RUN", "4"))
    with open_store(path) as st:
        n_runs = int((st.runs()["backend"] == "hf_local").sum())
    df = replay_token_stats(path, per_run=per_run)
    assert not df.empty, "no hf_local run with stored token_ids in this store"
    _check_replay(df, n_runs, per_run)
