"""The precompute benchmark's ForwardMeter counts useful work exactly.

Tiny random Llama, 2 prompts of different length, one of which is made to finish early (its
second greedy token is declared an EOS id, after which it leaves the decoding batch): every
useful/executed token count and FLOP count is known in closed form.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.integration.backends.test_backend import LOGPROB_ATOL

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("precompute_speed", ROOT / "benchmarks/precompute_speed.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("buckets", [True, False], ids=["bucketed-prefill", "one-prefill"])
def test_meter_counts_useful_tokens_and_flops(bench, tiny_backend, decode_path, buckets):
    be = tiny_backend
    eos_before = be.eos_ids
    decode_path(be, one_prefill=not buckets)
    try:
        _check(bench, be, buckets)
    finally:
        be.eos_ids = eos_before  # the session's backend, as it was


def _check(bench, be, buckets: bool) -> None:
    prompts = ["What is the capital of France? Answer in one short sentence, please.", "Hi"]
    max_new = 6
    first = be.generate(prompts, max_new)
    toks0, toks1 = first[0].token_ids, first[1].token_ids
    assert len(toks0) == len(toks1) == max_new  # the tiny model never emits its own EOS
    # row 0 stops at its 2nd token: that token must not occur earlier in row 0 nor in row 1
    stop = toks0[1]
    assert stop != toks0[0] and stop not in toks1
    be.eos_ids = sorted({*be.eos_ids, stop})

    meter = bench.ForwardMeter(be.model, be.eos_ids)
    res = be.generate(prompts, max_new)
    meter.remove()
    assert [r.n_tokens for r in res] == [2, max_new] and res[0].finish_reason == "stop"
    assert res[0].token_ids == toks0[:2] and res[1].token_ids == toks1  # same greedy tokens
    # the token statistics taken at each step, across the generate call that drops row 0, are
    # what teacher forcing gives for the same tokens
    for r, (lp, ent) in zip(res, be.teacher_force(prompts, [r.token_ids for r in res])):
        np.testing.assert_allclose(r.token_logprobs, lp, atol=LOGPROB_ATOL)
        np.testing.assert_allclose(r.token_entropies, ent, atol=LOGPROB_ATOL)

    lens = [len(be.encode_prompt(p)) for p in prompts]
    n_shared = be.shared_prefix([be.encode_prompt(p) for p in prompts])
    assert n_shared > 0 and lens[0] != lens[1]
    own = [n - n_shared for n in lens]
    pre, dec = meter.phase["prefill"], meter.phase["decode"]
    # prefill: the shared prefix once (batch 1), then the rows' own tokens, left-padded to the
    # longest; left padding executed, not useful. Bucketed (hf_local.prefill.bucketed_prefill; two rows
    # are one bucket) it prefills all but each row's last token and keeps no logits; generate's
    # first decode step then feeds every row's last prompt token.
    fed_last = 1 if buckets else 0
    assert pre["useful_tokens"] == n_shared + sum(own) - 2 * fed_last
    assert pre["tokens"] == n_shared + 2 * (max(own) - fed_last)
    # decode: max_new - 1 steps (+ 1 when bucketed) at batch 2 while row 0 is unfinished (its 1st
    # reply token as input is useful); once row 0 has emitted its EOS it leaves the batch
    # (HFLocalBackend.DROP_FINISHED_FRACTION): row 1 decodes the other max_new - 2 steps alone
    steps = max_new - 1 + fed_last
    batch_rows = [2] * (1 + fed_last) + [1] * (max_new - 2)
    assert len(batch_rows) == steps
    assert dec["tokens"] == sum(batch_rows)
    assert dec["useful_tokens"] == dec["tokens"]  # every row fed is unfinished and real
    assert meter.calls == 2 + steps

    # attention: 4·heads·head_dim FLOPs per (query, key) pair per layer. Executed: every row ×
    # query × mask column; useful: each real query with the real keys at or before it.
    cfg = be.model.config
    f_pair = 4 * cfg.num_attention_heads * (cfg.hidden_size // cfg.num_attention_heads) * cfg.num_hidden_layers
    kv_lens = [n_shared + max(own) - fed_last + k for k in range(1, steps + 1)]  # mask columns per decode step
    rows_at = [[0, 1]] * (1 + fed_last) + [[1]] * (max_new - 2)  # rows present at each decode step
    dec_attn_exec = f_pair * sum(L * len(r) for L, r in zip(kv_lens, rows_at))
    dec_attn_useful = f_pair * sum(n_shared + own[b] - fed_last + k
                                   for k, r in enumerate(rows_at, start=1) for b in r)
    W = max(own) - fed_last  # own columns of the prefill call
    pre_attn_exec = f_pair * (n_shared * (n_shared + 1) // 2 + 2 * W * (n_shared + W))  # prefix call: causal
    pre_attn_useful = f_pair * (n_shared * (n_shared + 1) // 2
                                + sum(n_shared + j for b in (0, 1) for j in range(1, own[b] - fed_last + 1)))
    assert (meter.attn_flops, meter.attn_useful_flops) == (pre_attn_exec + dec_attn_exec,
                                                           pre_attn_useful + dec_attn_useful)

    # FLOPs: per token, every Linear's 2·in·out; the LM head sees one position per row in generate's calls
    lin = [m for m in be.model.modules() if isinstance(m, torch.nn.Linear)]
    head = be.model.get_output_embeddings()
    f_head = 2 * head.in_features * head.out_features
    f_body = sum(2 * m.in_features * m.out_features for m in lin) - f_head
    assert dec["useful_flops"] == dec["useful_tokens"] * (f_body + f_head) + dec_attn_useful
    assert dec["flops"] == dec["tokens"] * (f_body + f_head) + dec_attn_exec
    own_head = 0 if buckets else 2 * f_head  # the bucketed prefill keeps no logits: no LM head
    prefix_head = pre["flops"] - (pre["tokens"] * f_body + own_head) - pre_attn_exec
    assert prefix_head % f_head == 0 and prefix_head // f_head in (1, n_shared)  # prefix call's LM head rows
    assert pre["useful_flops"] == pre["useful_tokens"] * f_body + own_head + prefix_head + pre_attn_useful
    assert meter.useful_flops == pre["useful_flops"] + dec["useful_flops"]
    assert meter.unmatched_linear_calls == 0

    # decode bytes: weights once per step (tied embedding = LM head) + the KV cache read
    wbytes = sum({p.data_ptr(): p.numel() * p.element_size() for m in lin for p in (m.weight, m.bias) if p is not None}.values())
    assert meter.weight_bytes == wbytes
    kv = 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * (cfg.hidden_size // cfg.num_attention_heads) * 4
    assert dec["bytes"] == steps * wbytes + sum(kv * L * b for L, b in zip(kv_lens, batch_rows))
