"""The CPU linear kernel choice (``sago_engine.runtime.kernels``): which kernel runs, that it is recorded,
and that oneDNN's products equal torch's within float noise on a real model's forward pass."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from sago_engine.models import load_model, tiny_random_model
from sago_engine.runtime.kernels import (
    KERNEL_ENV,
    PACK_ENV,
    PACK_MEMORY_FRACTION,
    OneDNNLinear,
    mkl_packed_usable,
    onednn_pack_usable,
    onednn_usable,
    pack_linear_weights,
    requested_kernel,
    use_linear_kernel,
)

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


# --------------------------------------------------------------------------- packed weights


def _ops_run(fn) -> set[str]:
    """Names of the operators ``fn()`` ran (torch.profiler, CPU)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return {e.key for e in prof.key_averages()}


def _packed_net(rows: int, memory_bytes: int = 10**12) -> tuple[nn.Module, dict | None]:
    torch.manual_seed(3)
    net = nn.Sequential(nn.Linear(96, 40), nn.Linear(40, 24, bias=False))
    use_linear_kernel(net, "float32", "cpu", kernel="onednn")
    return net, pack_linear_weights(net, rows, memory_bytes=memory_bytes)


def _assert_like_f_linear(net: nn.Module, x: torch.Tensor) -> None:
    with torch.inference_mode():
        got = net(x)
        want = F.linear(F.linear(x, net[0].weight, net[0].bias), net[1].weight)
    assert got.shape == want.shape
    assert (got - want).abs().max() <= KERNEL_RTOL * want.abs().max()


@needs_onednn
def test_packed_weights_run_mkl_for_the_pack_rows_and_onednn_otherwise(monkeypatch):
    """A call of exactly the pack's row count (here 2 × 3 positions) runs MKL's packed GEMM where
    usable, any other row count oneDNN's packed weight; both equal F.linear within float noise."""
    monkeypatch.delenv(PACK_ENV, raising=False)
    net, rec = _packed_net(rows=6)
    mkl = mkl_packed_usable()
    n_bytes = (96 * 40 + 40 * 24) * 4
    assert rec == {"rows": 6, "mkl": mkl, "onednn": onednn_pack_usable(), "bytes": n_bytes * (mkl + onednn_pack_usable()),
                   "memory_bytes": 10**12, "memory_source": "given"}
    g = torch.Generator().manual_seed(4)
    six, five = torch.randn(2, 3, 96, generator=g), torch.randn(5, 96, generator=g)
    ops = _ops_run(lambda: _assert_like_f_linear(net, six))
    assert ("mkl::_mkl_linear" in ops) == mkl
    ops = _ops_run(lambda: _assert_like_f_linear(net, five))
    assert "mkl::_mkl_linear" not in ops and "mkldnn::_linear_pointwise" in ops


@needs_onednn
def test_packs_of_a_changed_weight_are_dropped(monkeypatch):
    """A weight changed in place after packing (no_grad arithmetic, load_state_dict) is used as it
    is now, never through its stale packs."""
    monkeypatch.delenv(PACK_ENV, raising=False)
    net, _ = _packed_net(rows=5)
    x = torch.randn(5, 96, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        net[0].weight.mul_(-2.0)
    _assert_like_f_linear(net, x)
    assert net[0].__dict__["_packs"] is None and net[1].__dict__["_packs"] is not None
    state = {k: v * 3 for k, v in net.state_dict().items()}
    net.load_state_dict(state)
    _assert_like_f_linear(net, x)
    assert net[1].__dict__["_packs"] is None


@needs_onednn
def test_packs_of_a_replaced_weight_are_dropped(monkeypatch):
    """A weight whose tensor is replaced (``.data =``, a dtype round trip) gets a new address —
    the packs keep the old storage alive, so it cannot be reused — and is used as it is now."""
    monkeypatch.delenv(PACK_ENV, raising=False)
    x = torch.randn(5, 96, generator=torch.Generator().manual_seed(6))
    for _ in range(10):  # an address reused by chance would show in some round
        net, _ = _packed_net(rows=5)
        old = net[0].weight.data
        net[0].weight.data = old * 0 + 1  # the old tensor's storage is free to reuse...
        del old
        net[0].weight.data = torch.randn(40, 96)  # ...by this one, were it not held by the packs
        _assert_like_f_linear(net, x)
        net.to(torch.bfloat16).to(torch.float32)
        _assert_like_f_linear(net, x)


@needs_onednn
def test_packed_modules_copy_and_pickle_without_their_packs(monkeypatch):
    import copy
    import pickle

    monkeypatch.delenv(PACK_ENV, raising=False)
    net, _ = _packed_net(rows=5)
    x = torch.randn(5, 96, generator=torch.Generator().manual_seed(7))
    for other in (copy.deepcopy(net), pickle.loads(pickle.dumps(net))):
        assert other[0].__dict__.get("_packs") is None and type(other[0]) is OneDNNLinear
        _assert_like_f_linear(other, x)
    assert net[0].__dict__["_packs"] is not None  # the original keeps its own


@needs_onednn
def test_inference_tensor_weights_are_not_packed(monkeypatch):
    """A model built under inference_mode has weights without a version counter: nothing to
    watch, so nothing is packed (and building the backend does not fail)."""
    from sago_engine.backends.hf_local import HFLocalBackend

    monkeypatch.delenv(PACK_ENV, raising=False)
    with torch.inference_mode():
        be = HFLocalBackend("tiny-random", dtype="float32", device="cpu", batch_size=2)
        assert be.info()["packed_weights"] is None
        assert len(be.generate(["hi", "Name three colours."], max_new_tokens=3)) == 2


@needs_onednn
def test_packing_follows_the_env_and_the_memory_cap(monkeypatch):
    monkeypatch.delenv(PACK_ENV, raising=False)
    size = (96 * 40 + 40 * 24) * 4  # float32 bytes of the two weights
    full = size / PACK_MEMORY_FRACTION  # memory at which one packed copy just fits
    mkl, dnn = mkl_packed_usable(), onednn_pack_usable()
    _, rec = _packed_net(rows=4, memory_bytes=int(full))
    assert rec == {"rows": 4, "mkl": mkl, "onednn": dnn and not mkl, "bytes": size if (mkl or dnn) else 0,
                   "memory_bytes": int(full), "memory_source": "given"}
    _, rec = _packed_net(rows=4, memory_bytes=int(full) - 8)
    assert rec == {"rows": 4, "mkl": False, "onednn": False, "bytes": 0, "memory_bytes": int(full) - 8,
                   "memory_source": "given"}
    monkeypatch.setenv(PACK_ENV, "0")
    net, rec = _packed_net(rows=4)
    assert rec is None and net[0].__dict__["_packs"] is None
    _assert_like_f_linear(net, torch.randn(4, 96))
    with pytest.raises(ValueError, match="rows must be >= 1"):
        pack_linear_weights(net, 0)


@needs_onednn
def test_backend_packs_for_its_batch_size_and_records_it(monkeypatch):
    from sago_engine.backends.hf_local import HFLocalBackend
    from sago_engine.runrecord import local_decoding_record

    monkeypatch.delenv(PACK_ENV, raising=False)
    monkeypatch.delenv(KERNEL_ENV, raising=False)
    be = HFLocalBackend("tiny-random", dtype="float32", device="cpu", batch_size=5)
    rec = be.info()["packed_weights"]
    assert rec["rows"] == 5 and rec["onednn"] == onednn_pack_usable() and rec["mkl"] == mkl_packed_usable()
    assert rec["memory_bytes"] > 0 and rec["memory_source"]  # the limit the packs were measured against
    assert local_decoding_record(be.info(), 8, 5)["packed_weights"] == rec
    packs = [m.__dict__.get("_packs") for m in be.model.modules() if isinstance(m, nn.Linear)]
    assert packs and all(p is not None and p.rows == 5 for p in packs)
    # the Live page's models are not packed (they stay loaded for the server's life)
    from sago_engine.live.probe import load_backend

    live = load_backend("tiny-random", batch_size=5)
    assert live.info()["packed_weights"] is None
    assert all(m.__dict__.get("_packs") is None for m in live.model.modules() if isinstance(m, nn.Linear))
    monkeypatch.setenv(KERNEL_ENV, "torch")
    be = HFLocalBackend("tiny-random", dtype="float32", device="cpu", batch_size=5)
    assert be.info()["packed_weights"] is None
    assert "packed_weights" not in local_decoding_record(be.info(), 8, 5)


@needs_onednn
@pytest.mark.slow
def test_smollm_replies_are_the_same_with_packed_weights(smollm_backend, monkeypatch):
    """Real model, a full batch of 8 (its decoding steps run MKL's packed GEMM where usable): the
    same greedy replies as on plain weights, log-probs / entropies / hidden states within float noise."""
    from tests.integration.backends.test_backend import PROMPTS
    from tests.integration.backends.test_prefill import _compare

    be = smollm_backend
    prompts = PROMPTS[:8]
    monkeypatch.delenv(PACK_ENV, raising=False)
    assert pack_linear_weights(be.model, 8)["rows"] == 8
    a: list = []
    ops_a = _ops_run(lambda: a.extend(be.generate(prompts, max_new_tokens=16)))
    assert ("mkl::_mkl_linear" in ops_a) == mkl_packed_usable()
    monkeypatch.setenv(PACK_ENV, "0")
    try:
        assert pack_linear_weights(be.model, 8) is None
        b = be.generate(prompts, max_new_tokens=16)
    finally:
        monkeypatch.delenv(PACK_ENV)
        pack_linear_weights(be.model, 8)  # the session's backend as it was built
    for x, y in zip(a, b):
        _compare(x, y)
