"""``--plan``'s numbers: reply counts, tokens, cost, memory, time; the paper presets' counts, fast."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from precompute import plan_estimate as pe
from precompute.__main__ import main as cli_main
from precompute.config import load_config
from precompute.plan import make_plan
from tests.support.factories import tiny_toml

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def tiny_plan(tmp_path_factory):
    d = tmp_path_factory.mktemp("plan")
    conf = d / "c.toml"
    conf.write_text(tiny_toml(n_prompts=3).format(store=d / "s.duckdb", data=ROOT / "data" / "datasets"))
    cfg = load_config(conf, check_keys=False)
    return cfg, make_plan(cfg, run_filter=False), conf


def test_reply_counts_split_new_and_stored_and_count_judge_calls(tiny_plan):
    _, plan, _ = tiny_plan
    ids = [p.prompt_id for p in plan.prompts]
    per = {pid: 1 + len(plan.to_generate(pid)) for pid in ids}
    c = pe.reply_counts(plan, 1, ids, done={ids[0]}, judge=False)
    assert (c.prompts_new, c.replies_new, c.replies_stored, c.judge_calls) == (5, sum(per.values()) - per[ids[0]],
                                                                                per[ids[0]], 0)
    twice = pe.reply_counts(plan, 2, ids, done=(), judge=True)
    assert twice.replies_new == sum(per.values()) + len(ids)  # one more base per prompt
    social = sum(v.spec.family == "social_register" for pid in ids for v in plan.to_generate(pid))
    assert twice.judge_calls == 2 * social > 0


def test_input_tokens_from_a_tokenizer_sample_and_from_characters():
    texts = ["abcd" * k for k in range(1, 41)]  # 40 inputs, 4..160 characters

    def encode(t):  # a template of 5 tokens, one token per 2 characters
        return [0] * (5 + len(t) // 2)

    exact = sum(len(encode(t)) for t in texts)
    n, how = pe.input_tokens(texts, encode, sample=10)
    assert n == exact and "tokenizer on 10 of 40 inputs" == how
    n, how = pe.input_tokens(texts, None)
    assert n == sum(len(t) for t in texts) // 4 and "4 characters per token" in how


def test_cost_only_where_prices_are_set():
    class M:
        price_in_per_mtok, price_out_per_mtok = 2.0, 10.0

    assert pe.plan_cost(1_000_000, 100_000, M()) == pytest.approx(3.0)
    assert pe.plan_cost(1_000_000, 100_000, object()) is None


def test_parameter_count_matches_the_model_built_on_the_meta_device():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(hidden_size=576, num_hidden_layers=30, intermediate_size=1536, num_attention_heads=9,
                      num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=True)  # smollm2-135m's shape
    with torch.device("meta"):
        real = sum(p.numel() for p in LlamaForCausalLM(cfg).parameters())
    assert abs(pe.parameter_count(cfg) - real) / real < 0.01
    need = pe.memory_need(cfg, "bfloat16", 8, 100, 48)
    assert need.weights == pe.parameter_count(cfg) * 2
    assert need.kv_cache == 2 * 30 * 3 * 64 * 2 * 8 * 148


def test_plan_warns_when_a_model_needs_more_memory_than_available(tiny_plan, monkeypatch, capsys):
    from precompute import plan_report

    monkeypatch.setattr(plan_report, "memory_available", lambda device: (1e9, "available RAM"))
    _, _, conf = tiny_plan
    assert cli_main(["--config", str(conf), "--plan"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"memory: ≈ \d+\.\d GiB \(weights .* of 0\.9 GiB available RAM — warning: may not fit", out)


def test_plan_prints_counts_tokens_and_a_stated_rate(tiny_plan, capsys):
    cfg, plan, conf = tiny_plan
    n = sum(1 + len(plan.to_generate(p.prompt_id)) for p in plan.prompts)
    assert cli_main(["--config", str(conf), "--plan", "--rate", "2"]) == 0
    out = capsys.readouterr().out
    assert f"replies: {n} to generate (6 prompts × (base × 1 + their variants)), 0 already stored" in out
    assert re.search(r"tokens: ≈ [\d,]+ in \(tokenizer on \d+ of \d+ inputs\), at most [\d,]+ out \(reply cap 6\)", out)
    assert f"time: ≈ {n // 2} s at the stated rate of 2 replies/s" in out
    assert f"total: {n} replies to generate" in out


def test_calibrate_and_rate_need_plan(tiny_plan, capsys):
    _, _, conf = tiny_plan
    assert cli_main(["--config", str(conf), "--calibrate"]) == 2
    assert cli_main(["--config", str(conf), "--plan", "--rate", "0"]) == 2
    assert "--rate must be > 0" in capsys.readouterr().err


def test_calibration_times_one_batch_and_scales(tiny_plan):
    from precompute.calibrate import calibrate

    cfg, plan, _ = tiny_plan
    m = cfg.models[0]
    cal = calibrate(cfg, m, plan, [p.prompt_id for p in plan.prompts])
    assert cal.replies >= 4 and cal.load_s > 0 and cal.seconds > 0  # batch_size 4: one prompt's 6 replies
    assert cal.estimate_s(100) == pytest.approx(cal.load_s + 100 * cal.seconds / cal.replies)
    assert cal.estimate_s(0) == 0.0


def test_a_load_that_builds_the_model_cache_is_not_counted_in_the_estimate(tiny_plan, tmp_path, monkeypatch):
    """The first load of a model de-quantizes and caches it (minutes for a GGUF, once): the run reads the
    cache, so the estimate leaves that load out and the plan says so; a load from the cache is counted."""
    from precompute.calibrate import Calibration, calibrate
    from precompute.plan_report import model_lines

    cfg, plan, _ = tiny_plan
    m = cfg.models[0]
    monkeypatch.setenv("SAGO_CACHE_DIR", str(tmp_path / "empty_cache"))
    ids = [p.prompt_id for p in plan.prompts]
    first, again = calibrate(cfg, m, plan, ids), calibrate(cfg, m, plan, ids)
    assert first.cache_built and not again.cache_built
    built = Calibration(load_s=300.0, replies=8, seconds=16.0, cache_built=True)
    assert built.estimate_s(10) == pytest.approx(20.0)
    assert Calibration(load_s=300.0, replies=8, seconds=16.0).estimate_s(10) == pytest.approx(320.0)
    text = "\n".join(model_lines(cfg, m, plan, ids, set(), None, built)[0])
    assert "load 300 s, once: it built the model cache, which a run reads, not counted" in text


@pytest.mark.parametrize("preset, replies", [("paper.toml", 117_504), ("paper_code.toml", 48_384)])
def test_paper_presets_plan_their_replies_in_seconds(preset, replies, monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)  # from another folder: the preset's paths resolve against its own folder
    t0 = time.perf_counter()
    assert cli_main(["--config", str(ROOT / "precompute" / "configs" / preset), "--plan",
                     "--store", str(tmp_path / "none.duckdb")]) == 0
    took = time.perf_counter() - t0
    out = capsys.readouterr().out
    assert f"total: {replies:,} replies to generate" in out
    assert took < 120, f"--plan took {took:.0f} s"  # < 30 s on a quiet machine; this one is shared


@pytest.fixture(scope="module")
def sampled_plan(tmp_path_factory):
    from tests.conftest import TINY_SAMPLED

    d = tmp_path_factory.mktemp("plan_sampled")
    conf = d / "c.toml"
    conf.write_text(tiny_toml(n_prompts=3).format(store=d / "s.duckdb", data=ROOT / "data" / "datasets") + TINY_SAMPLED)
    cfg = load_config(conf, check_keys=False)
    return cfg, make_plan(cfg, run_filter=False), conf


def test_reply_counts_of_a_sampled_run_count_k_per_prompt_and_variant(tiny_plan):
    _, plan, _ = tiny_plan
    ids = [p.prompt_id for p in plan.prompts]
    per = {pid: 1 + len(plan.to_generate(pid)) for pid in ids}
    c = pe.reply_counts(plan, 1, ids, done={ids[0]}, judge=False, samples=4)
    assert (c.replies_new, c.replies_stored) == (4 * (sum(per.values()) - per[ids[0]]), 4 * per[ids[0]])
    assert pe.reply_counts(plan, 2, ids, done=(), judge=False, samples=4).replies_new == 4 * sum(per.values()) + len(ids)
    texts = {p.prompt_id: p.text for p in plan.prompts}
    asks = {pid: [texts[pid]] + [v.text for v in plan.to_generate(pid)] for pid in ids}
    assert pe.input_texts(plan, 2, ids, samples=4) == [t for pid in ids for t in [texts[pid]] + asks[pid] * 4]


def test_plan_of_a_sampled_run_counts_replies_tokens_time_and_rows(sampled_plan, tiny_plan, capsys):
    from precompute.plan_report import duration

    cfg, plan, conf = sampled_plan
    n = sum(1 + len(plan.to_generate(p.prompt_id)) for p in plan.prompts)
    assert cli_main(["--config", str(conf), "--plan", "--rate", "2"]) == 0
    out = capsys.readouterr().out
    assert f"replies: {4 * n} to generate (6 prompts × 4 samples × (base + their variants)), 0 already stored" in out
    assert f"at most {4 * n * 6} out (reply cap 6)" in out
    assert f"time: ≈ {duration(4 * n / 2)} at the stated rate of 2 replies/s" in out
    assert "at batch 4 (≈ 1 inputs × 4 samples)" in out
    tokens_in = re.search(r"tokens: ≈ ([\d,]+) in \(tokenizer on \d+ of \d+ inputs, each input once for its samples", out)
    assert cli_main(["--config", str(tiny_plan[2]), "--plan"]) == 0  # the same inputs decoded greedily
    greedy = re.search(r"tokens: ≈ ([\d,]+) in", capsys.readouterr().out)
    assert tokens_in and greedy and tokens_in.group(1) == greedy.group(1)  # one shared prefill per input


def test_demo_plan_counts_the_sampled_runs_replies(capsys, tmp_path):
    assert cli_main(["--config", str(ROOT / "precompute" / "configs" / "demo.toml"), "--plan", "--store",
                     str(tmp_path / "none.duckdb"), "--model", "smollm2-135m-instruct·T0.7"]) == 0
    out = capsys.readouterr().out
    assert "replies: 5,376 to generate (96 prompts × 4 samples × (base + their variants)), 0 already stored" in out
    assert "total: 5,376 replies to generate" in out


def test_calibration_of_a_sampled_model_times_k_samples_per_input(sampled_plan):
    from precompute.calibrate import calibrate

    cfg, plan, _ = sampled_plan
    cal = calibrate(cfg, cfg.models[0], plan, [p.prompt_id for p in plan.prompts])
    assert cal.replies >= 4 and cal.replies % 4 == 0 and cal.seconds > 0
