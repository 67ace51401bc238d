"""The CPU linear kernel choice (``sago_engine.kernels``): which kernel runs, that it is recorded,
and that oneDNN's products equal torch's within float noise on a real model's forward pass."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from sago_engine.kernels import KERNEL_ENV, OneDNNLinear, onednn_usable, requested_kernel, use_linear_kernel
from sago_engine.models import load_model, tiny_random_model

#: What counts as float noise between two float32 kernels: relative to the largest magnitude
#: compared (sums of ≤ 1536 products in another order: ≈ 1e-6 observed).
KERNEL_RTOL = 1e-4

needs_onednn = pytest.mark.skipif(not onednn_usable(), reason="torch without a usable oneDNN linear op")


def _linear_types(model: nn.Module) -> set[type]:
    return {type(m) for m in model.modules() if isinstance(m, nn.Linear)}


def test_requested_kernel_reads_the_env(monkeypatch):
    monkeypatch.delenv(KERNEL_ENV, raising=False)
    assert requested_kernel() == "onednn"
    monkeypatch.setenv(KERNEL_ENV, " Torch ")
    assert requested_kernel() == "torch"
    monkeypatch.setenv(KERNEL_ENV, "mkl")
    with pytest.raises(ValueError, match=KERNEL_ENV):
        requested_kernel()
    with pytest.raises(ValueError, match="unknown linear kernel 'blas'"):
        use_linear_kernel(nn.Sequential(nn.Linear(2, 2)), "float32", "cpu", kernel="blas")


@needs_onednn
def test_tiny_model_runs_onednn_and_records_it(monkeypatch):
    monkeypatch.delenv(KERNEL_ENV, raising=False)
    model, _, info = tiny_random_model(0)
    assert info["linear_kernel"] == "onednn"
    assert _linear_types(model) == {OneDNNLinear}
    monkeypatch.setenv(KERNEL_ENV, "torch")
    model, _, info = tiny_random_model(0)
    assert info["linear_kernel"] == "torch"
    assert _linear_types(model) == {nn.Linear}


def test_onednn_only_for_float32_on_cpu(monkeypatch):
    monkeypatch.delenv(KERNEL_ENV, raising=False)
    net = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))
    assert use_linear_kernel(net.to(torch.bfloat16), "bfloat16", "cpu") == "torch"
    assert _linear_types(net) == {nn.Linear}
    assert use_linear_kernel(net, "float16", "cuda") == "torch"


@needs_onednn
def test_switching_back_restores_plain_linear_and_keeps_weights():
    net = nn.Sequential(nn.Linear(8, 4), nn.Linear(4, 2, bias=False))
    before = {k: v.clone() for k, v in net.state_dict().items()}
    assert use_linear_kernel(net, "float32", "cpu", kernel="onednn") == "onednn"
    assert _linear_types(net) == {OneDNNLinear}
    assert use_linear_kernel(net, "float32", "cpu", kernel="torch") == "torch"
    assert _linear_types(net) == {nn.Linear}
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())


@needs_onednn
def test_onednn_linear_equals_f_linear_and_falls_back_under_autograd():
    g = torch.Generator().manual_seed(1)
    lin = nn.Linear(96, 40)
    use_linear_kernel(lin, "float32", "cpu", kernel="onednn")
    x = torch.randn(3, 5, 96, generator=g)
    with torch.inference_mode():
        got = lin(x)
        want = F.linear(x, lin.weight, lin.bias)
    assert got.shape == (3, 5, 40)
    assert (got - want).abs().max() <= KERNEL_RTOL * want.abs().max()
    # autograd recording: the stock op runs, so gradients exist (d sum(xWᵀ+b) / dx = Σ_rows W)
    xg = x.clone().requires_grad_(True)
    lin(xg).sum().backward()
    with torch.no_grad():
        want_grad = lin.weight.sum(0).expand_as(x)
    assert (xg.grad - want_grad).abs().max() <= KERNEL_RTOL * want_grad.abs().max()
    # a bfloat16 input never reaches oneDNN's float32 path
    with torch.inference_mode():
        lin_bf = nn.Linear(96, 40).to(torch.bfloat16)
        lin_bf.__class__ = OneDNNLinear
        assert lin_bf(x.to(torch.bfloat16)).dtype == torch.bfloat16


@needs_onednn
@pytest.mark.slow
def test_smollm2_forward_is_the_same_under_both_kernels(monkeypatch):
    """The real model: logits and every layer's hidden states of one prompt agree within float
    noise, and the greedy next token (a clear argmax) is the same, whichever kernel runs."""
    from sago_engine.models import ModelUnavailableError

    monkeypatch.setenv(KERNEL_ENV, "onednn")
    try:
        model, tok, info = load_model("smollm2-135m-instruct")
    except ModelUnavailableError as exc:
        pytest.skip(str(exc))
    assert info["linear_kernel"] == "onednn"
    ids = tok("What is the capital of Australia? Answer in one word.", return_tensors="pt").input_ids
    with torch.inference_mode():
        a = model(input_ids=ids, output_hidden_states=True)
        use_linear_kernel(model, "float32", "cpu", kernel="torch")
        b = model(input_ids=ids, output_hidden_states=True)
    scale = b.logits.abs().max()
    diff = (a.logits - b.logits).abs().max()
    assert diff <= KERNEL_RTOL * scale
    for ha, hb in zip(a.hidden_states, b.hidden_states):
        assert (ha - hb).abs().max() <= KERNEL_RTOL * hb.abs().max()
    top2 = b.logits[0, -1].topk(2).values
    assert top2[0] - top2[1] > 2 * KERNEL_RTOL * scale >= 2 * diff  # a clear argmax: the check below is not noise
    assert a.logits[0, -1].argmax() == b.logits[0, -1].argmax()
