"""Which kernel multiplies a local model's ``nn.Linear`` layers on CPU: oneDNN or torch's default.

torch's CPU wheel runs a float32 ``nn.Linear`` through Intel MKL's sgemm. On AMD CPUs MKL does
not take its fastest code path: on a 2-core AMD EPYC with AVX-512 (benchmarks/README.md,
"Useful work, decode bandwidth, --model") a (56×576)·(576×49152) product — smollm2's LM head at batch 56 — ran at
≈ 100 GFLOP/s through MKL and ≈ 320 through oneDNN, a 2048² product at 205 vs 429. oneDNN ships
inside the same torch wheel (``torch.backends.mkldnn``); this module routes every plain
``nn.Linear`` of a loaded float32 CPU model through oneDNN's inner product
(``torch.ops.mkldnn._linear_pointwise``, the op torch's own Inductor CPU backend emits for
linear layers) on the weights in place — no second copy of the weights, no reduced precision.

The products are float32 throughout; they differ from MKL's only in summation order (relative
≈ 1e-6, float noise): smollm2's logits and hidden states agree within 1e-4 of their magnitude
under both kernels (``tests/test_kernels.py``), and ``benchmarks/precompute_speed.py`` checks
sago's greedy replies (oneDNN) against its naive loop's (torch's default kernel). Which kernel
ran is recorded with every run (``load_model``'s info → ``runs.decoding.linear_kernel``).

Choice (``SAGO_LINEAR_KERNEL``):

* ``onednn`` (default) — oneDNN where it applies: device cpu, dtype float32, torch built with
  oneDNN, and a start-up self-check that oneDNN's product equals ``F.linear`` within float
  noise on this machine; otherwise ``torch``.
* ``torch`` — torch's default kernel everywhere (MKL on x86 CPU wheels).
"""

from __future__ import annotations

import functools
import os

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["KERNEL_ENV", "KERNELS", "OneDNNLinear", "onednn_linear", "requested_kernel", "onednn_usable",
           "use_linear_kernel"]

#: Environment variable that chooses the kernel.
KERNEL_ENV = "SAGO_LINEAR_KERNEL"
#: Valid values of ``SAGO_LINEAR_KERNEL``.
KERNELS = ("onednn", "torch")
#: Largest relative difference between oneDNN's and ``F.linear``'s product on the self-check
#: probe that still counts as float noise (float32 sums of 256 terms: ≈ 1e-6 observed).
SELF_CHECK_RTOL = 1e-4


def onednn_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` computed by oneDNN's float32 inner product (no autograd).

    Args: x (..., in) float32 CPU; weight (out, in); bias (out,) or None. Returns (..., out).
    Raises: RuntimeError / AttributeError from torch when oneDNN's op is missing or rejects the input.
    """
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


class OneDNNLinear(nn.Linear):
    """An ``nn.Linear`` whose forward is oneDNN's float32 inner product.

    Same parameters, same state dict, same hooks as ``nn.Linear`` (``use_linear_kernel`` swaps
    the class of existing modules). Input (..., in_features) float32 on CPU → output
    (..., out_features). Falls back to ``F.linear`` when autograd is recording (oneDNN's op
    has no backward) or the input is not a float32 CPU tensor.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        if (x.dtype != torch.float32 or x.device.type != "cpu"
                or (torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad))):
            return F.linear(x, self.weight, self.bias)
        return onednn_linear(x, self.weight, self.bias)


def requested_kernel() -> str:
    """The kernel ``SAGO_LINEAR_KERNEL`` asks for (``"onednn"`` when unset).

    Raises:
        ValueError: a value outside ``KERNELS``.
    """
    val = os.environ.get(KERNEL_ENV, "onednn").strip().lower() or "onednn"
    if val not in KERNELS:
        raise ValueError(f"{KERNEL_ENV} must be one of {', '.join(KERNELS)}, got {val!r}")
    return val


@functools.cache
def onednn_usable() -> bool:
    """Whether oneDNN's linear op exists in this torch and matches ``F.linear`` here (checked
    once per process).

    The self-check multiplies a seeded (8×256)·(256×64) float32 product both ways and accepts
    oneDNN when the largest difference is within ``SELF_CHECK_RTOL`` of the largest output.
    """
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(8, 256, generator=g)
        w = torch.randn(64, 256, generator=g)
        b = torch.randn(64, generator=g)
        with torch.inference_mode():
            got = onednn_linear(x, w, b)
            want = F.linear(x, w, b)
    except (AttributeError, RuntimeError):
        return False
    return got.shape == want.shape and bool((got - want).abs().max() <= SELF_CHECK_RTOL * want.abs().max())


def use_linear_kernel(model: nn.Module, dtype: str, device: str, kernel: str | None = None) -> str:
    """Route a loaded model's plain ``nn.Linear`` layers through a kernel.

    Args:
        model: a loaded model (modified in place: the class of every module whose type is
            exactly ``nn.Linear`` becomes ``OneDNNLinear``, or back).
        dtype: the model's dtype name (``"float32"``, ``"bfloat16"``, ``"float16"``).
        device: the resolved device (``"cpu"``, ``"cuda"``, ``"cuda:N"``, ``"mps"``).
        kernel: ``"onednn"`` or ``"torch"``; None = ``requested_kernel()`` (``SAGO_LINEAR_KERNEL``).
    Returns:
        the kernel in use, for the run record: ``"onednn"`` or ``"torch"`` (``"onednn"`` only
        where it applies: cpu, float32, ``onednn_usable()``).
    Raises:
        ValueError: an unknown kernel name (argument or ``SAGO_LINEAR_KERNEL``).
    """
    kernel = requested_kernel() if kernel is None else kernel
    if kernel not in KERNELS:
        raise ValueError(f"unknown linear kernel {kernel!r}; valid: {', '.join(KERNELS)}")
    if kernel == "onednn" and not (device == "cpu" and dtype == "float32" and onednn_usable()):
        kernel = "torch"
    src, dst = (nn.Linear, OneDNNLinear) if kernel == "onednn" else (OneDNNLinear, nn.Linear)
    for mod in model.modules():
        if type(mod) is src:
            mod.__class__ = dst
    return kernel
