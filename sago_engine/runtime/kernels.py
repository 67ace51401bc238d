"""How a local model computes on CPU: the threads torch uses, and which kernel multiplies its ``nn.Linear`` layers.

Threads: ``set_threads`` applies ``sago_engine.runtime.threads``' choice — ``SAGO_THREADS`` if set, else the
CPUs this process may use (affinity mask, cgroup CPU quota) — recorded with every run as
``runs.decoding.threads`` and ``runs.decoding.thread_choice``.

Kernels: oneDNN or torch's default.

torch's CPU wheel runs a float32 ``nn.Linear`` through Intel MKL's sgemm. On AMD CPUs MKL does
not take its fastest code path: on a 2-core AMD EPYC with AVX-512 (benchmarks/README.md,
"Useful work, decode bandwidth, --model") a (56×576)·(576×49152) product — smollm2's LM head at batch 56 — ran at
≈ 100 GFLOP/s through MKL and ≈ 320 through oneDNN, a 2048² product at 205 vs 429. oneDNN ships
inside the same torch wheel (``torch.backends.mkldnn``); this module routes every plain
``nn.Linear`` of a loaded float32 CPU model through oneDNN's inner product
(``torch.ops.mkldnn._linear_pointwise``, the op torch's own Inductor CPU backend emits for
linear layers) — no reduced precision; with ``SAGO_PACK_WEIGHTS=0`` on the weights in place, with
no second copy (packing, below, keeps laid-out copies).

The products are float32 throughout; they differ from MKL's only in summation order (relative
≈ 1e-6, float noise): smollm2's logits and hidden states agree within 1e-4 of their magnitude
under both kernels (``tests/integration/runtime/test_kernels.py``), and ``benchmarks/precompute_speed.py`` checks
sago's greedy replies (oneDNN) against its naive loop's (torch's default kernel). Which kernel
ran is recorded with every run (``load_model``'s info → ``runs.decoding.linear_kernel``).

Choice (``SAGO_LINEAR_KERNEL``):

* ``onednn`` (default) — oneDNN where it applies: device cpu, dtype float32, torch built with
  oneDNN, and a start-up self-check that oneDNN's product equals ``F.linear`` within float
  noise on this machine; otherwise ``torch``.
* ``torch`` — torch's default kernel everywhere (MKL on x86 CPU wheels).

Packed weights (``SAGO_PACK_WEIGHTS``, on unless ``0``; ``pack_linear_weights``, called by
``HFLocalBackend`` with its batch size). Both libraries, called on a plain ``(out, in)`` weight,
re-lay it out into their blocked format on every call: at a decoding step's few rows that copy
is a large part of the product. Packing lays each weight out once, at load:

* **MKL's packed GEMM** (``cblas_sgemm_pack`` / ``cblas_sgemm_compute`` through
  ``torch.ops.mkl._mkl_linear``, the op torch's Inductor emits for float32 CPU linear layers) for
  calls whose rows (batch × positions) are exactly the pack's row count, the backend's batch
  size: a full batch's decoding steps (and, rarely, a prefill or teacher-forcing call of that
  many positions). MKL's packed format is defined for the row count it was packed for (its
  ``pack_get_size`` takes m, n, k), so other row counts never use it. Only on Intel CPUs, where
  MKL takes its fast path (see above), and after a self-check.
* **oneDNN's packed weight** (``torch.ops.mkldnn._reorder_linear_weight``) for every other call.

Measured on a 2-core Intel Xeon (CHANGELOG.md, "Benchmark history", 2026-12-01): one
decoding step's linear layers at 112 rows, weights streamed from memory, smollm2 oneDNN 118 ms → MKL packed
92 ms; the benchmark's forward time in one process, smollm2 11.8 → 10.9 s, qwen2.5-coder-0.5b
22.4 → 21.1 s, greedy replies identical. The products are float32 sums in another order (float
noise, as between the two kernels). What that adds: a full batch's decoding steps run another
kernel than a partial batch's, so a prompt's numbers move by float noise with the fullness of its
batch (smollm2, the same prompt in a batch of 8 vs 7: |Δ log-prob| ≤ 2.8e-5, |Δ hidden| ≤ 2e-4;
with packing off these were bit-identical) — far below ``scoring``'s noise floor; where a
chunk's rows fit one batch (demo.toml's 112), a base prompt and its variants share the kernel
at every step. The cost is memory: up to two
more copies of every linear weight (smollm2 + 1.1 GB), made only while the copies stay within
``PACK_MEMORY_FRACTION`` of the memory the process may use (physical, or the smallest limit of the
cgroups it runs in if lower, read up its cgroup path: ``sago_engine.runtime.memlimit``; fixed for the job, so
the choice is the same on every run there; the limit used is recorded). What was packed is recorded with
every run (``runs.decoding.packed_weights``). A weight changed in place (version counter) or
replaced (data pointer; the packs keep the packed-from storage alive, so its address cannot be
reused) after packing is noticed and its packs are dropped. A packed module pickles / deep-copies
without its packs. Weights that are inference tensors (a model built under
``torch.inference_mode``, which keeps no version counter) are not packed.
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass
from typing import Any

import psutil
import torch
import torch.nn.functional as F
from torch import nn

from sago_engine.runtime.memlimit import cgroup_memory_limit
from sago_engine.runtime.threads import THREADS_ENV, apply_threads

__all__ = ["THREADS_ENV", "set_threads", "KERNEL_ENV", "KERNELS", "PACK_ENV", "PACK_MEMORY_FRACTION", "OneDNNLinear",
           "mkl_packed_usable", "onednn_linear", "onednn_pack_usable", "onednn_usable", "pack_linear_weights",
           "packing_requested", "requested_kernel", "use_linear_kernel"]

#: Environment variable that chooses the kernel.
KERNEL_ENV = "SAGO_LINEAR_KERNEL"
#: Valid values of ``SAGO_LINEAR_KERNEL``.
KERNELS = ("onednn", "torch")
#: Largest relative difference between oneDNN's and ``F.linear``'s product on the self-check
#: probe that still counts as float noise (float32 sums of 256 terms: ≈ 1e-6 observed).
SELF_CHECK_RTOL = 1e-4
#: Environment variable that turns packed weights off (``0``); on otherwise.
PACK_ENV = "SAGO_PACK_WEIGHTS"
#: Largest share of the machine's physical memory that packed copies of a model's linear weights
#: may take (MKL's packs first, then oneDNN's; a kind that would pass it is not packed).
PACK_MEMORY_FRACTION = 0.25


def set_threads() -> int:
    """Apply ``threads.apply_threads``' choice (``SAGO_THREADS`` if set, else the CPUs this process
    may use) to ``torch.set_num_threads``; return the thread count (the choice: ``threads.last_choice``).

    Raises:
        ValueError: ``SAGO_THREADS`` is not a positive integer.
    """
    return apply_threads().threads


def onednn_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` computed by oneDNN's float32 inner product (no autograd).

    Args: x (..., in) float32 CPU; weight (out, in); bias (out,) or None. Returns (..., out).
    Raises: RuntimeError / AttributeError from torch when oneDNN's op is missing or rejects the input.
    """
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


@dataclass
class _Packs:
    """A weight's packed copies (``pack_linear_weights``) and what they were made from."""

    rows: int  # the row count MKL's pack is for
    mkl: torch.Tensor | None  # MKL's packed B matrix (an opaque mkldnn tensor), or None
    onednn: torch.Tensor | None  # oneDNN's packed weight (an opaque mkldnn tensor), or None
    version: int  # weight._version when packed
    source: torch.Tensor  # the packed-from weight: its storage stays alive, so its address is never reused


class OneDNNLinear(nn.Linear):
    """An ``nn.Linear`` whose forward is oneDNN's float32 inner product (or MKL's packed GEMM).

    Same parameters, same state dict, same hooks as ``nn.Linear`` (``use_linear_kernel`` swaps
    the class of existing modules). Input (..., in_features) float32 on CPU → output
    (..., out_features). With packs (``pack_linear_weights``): a call of exactly the MKL pack's
    row count runs MKL's packed GEMM, any other oneDNN on the packed weight; packs made from a
    weight that has since changed (in place, or moved) are dropped and the plain weight used.
    Falls back to ``F.linear`` when autograd is recording (neither op has a backward) or the
    input is not a float32 CPU tensor.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        if (x.dtype != torch.float32 or x.device.type != "cpu"
                or (torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad))):
            return F.linear(x, self.weight, self.bias)
        packs: _Packs | None = self.__dict__.get("_packs")
        if packs is not None:
            w = self.weight
            if w._version != packs.version or w.data_ptr() != packs.source.data_ptr():
                self.__dict__["_packs"] = None  # stale: the weight changed after packing
            else:
                if packs.mkl is not None and x.numel() == packs.rows * x.shape[-1]:
                    return torch.ops.mkl._mkl_linear(x, packs.mkl, w, self.bias, packs.rows)
                if packs.onednn is not None:
                    return onednn_linear(x, packs.onednn, self.bias)
        return onednn_linear(x, self.weight, self.bias)

    def __getstate__(self) -> dict[str, Any]:
        # pickle / deepcopy / torch.save: the packs (opaque tensors) stay behind
        state = self.__dict__.copy()
        state.pop("_packs", None)
        return state


def requested_kernel() -> str:
    """The kernel ``SAGO_LINEAR_KERNEL`` asks for (``"onednn"`` when unset).

    Raises:
        ValueError: a value outside ``KERNELS``.
    """
    val = os.environ.get(KERNEL_ENV, "onednn").strip().lower() or "onednn"
    if val not in KERNELS:
        raise ValueError(f"{KERNEL_ENV} must be one of {', '.join(KERNELS)}, got {val!r}")
    return val


def _matches_f_linear(product) -> bool:
    """Whether ``product(x, w, b)`` equals ``F.linear(x, w, b)`` within ``SELF_CHECK_RTOL`` of the
    largest output on a seeded (8×256)·(256×64) float32 probe (False when the op is missing or
    rejects it)."""
    try:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(8, 256, generator=g)
        w = torch.randn(64, 256, generator=g)
        b = torch.randn(64, generator=g)
        with torch.inference_mode():
            got = product(x, w, b)
            want = F.linear(x, w, b)
    except (AttributeError, RuntimeError):
        return False
    return got.shape == want.shape and bool((got - want).abs().max() <= SELF_CHECK_RTOL * want.abs().max())


@functools.cache
def onednn_usable() -> bool:
    """Whether oneDNN's linear op exists in this torch and matches ``F.linear`` here (checked
    once per process, ``_matches_f_linear``)."""
    return torch.backends.mkldnn.is_available() and _matches_f_linear(onednn_linear)


def packing_requested() -> bool:
    """Whether ``SAGO_PACK_WEIGHTS`` asks for packed weights (anything but ``0``/``false``/``no``/``off``)."""
    return os.environ.get(PACK_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def _intel_cpu() -> bool:
    """Whether this machine's CPU vendor is Intel (``/proc/cpuinfo`` on Linux, else ``platform``)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return "GenuineIntel" in line
    except OSError:
        pass
    return "intel" in (platform.processor() or "").lower()


@functools.cache
def mkl_packed_usable() -> bool:
    """Whether MKL's packed GEMM is used here: torch built with MKL and its ``mkl::_mkl_linear``
    op, an Intel CPU (MKL's fast code paths are Intel's; on AMD MKL is slower than oneDNN, see the
    module doc), and a start-up self-check (``_matches_f_linear``, packed for the probe's 8 rows).
    Checked once per process."""
    return (torch.backends.mkl.is_available() and _intel_cpu() and _matches_f_linear(
        lambda x, w, b: torch.ops.mkl._mkl_linear(x, torch.ops.mkl._mkl_reorder_linear_weight(w, 8), w, b, 8)))


@functools.cache
def onednn_pack_usable() -> bool:
    """Whether oneDNN's weight packing op exists and its product matches ``F.linear`` here
    (``_matches_f_linear``; checked once per process)."""
    return onednn_usable() and _matches_f_linear(
        lambda x, w, b: onednn_linear(x, torch.ops.mkldnn._reorder_linear_weight(w, 8), b))


def _read_text(path: str) -> str | None:
    """The text of ``path`` or None (absent, unreadable, or a mocked file system that has no such file)."""
    try:
        with open(path, encoding="ascii") as f:
            return f.read()
    except (OSError, ValueError, KeyError):
        return None


def _memory_limit() -> tuple[int, str]:
    """The memory this process may use, in bytes, and where that number comes from: physical memory
    (psutil), or the smallest limit of the cgroups it runs in when lower (``memlimit.cgroup_memory_limit``:
    the process's own cgroup from ``/proc/self/cgroup`` and every level up to the mount root, v1 and v2).

    Returns:
        ``(bytes, source)``: source ``"physical memory"`` or the cgroup file holding the limit.
    """
    total = int(psutil.virtual_memory().total)
    limit, where = cgroup_memory_limit(_read_text)
    if limit is not None and limit < total:
        return limit, str(where)
    return total, "physical memory"


def _total_memory() -> int:
    """The memory this process may use, in bytes (``_memory_limit``)."""
    return _memory_limit()[0]


def pack_linear_weights(model: nn.Module, rows: int, *, memory_bytes: int | None = None) -> dict[str, Any] | None:
    """Pack every ``OneDNNLinear`` weight of ``model`` once (see the module doc), for the run record.

    Args:
        model: a model after ``use_linear_kernel`` (modules that are not ``OneDNNLinear`` — the
            ``torch`` kernel, bf16, GPU — are left alone; packs replace earlier ones).
        rows: the row count of MKL's pack (≥ 1): the decoding batch size (``HFLocalBackend``'s
            ``batch_size``); a call with exactly this many rows (batch × positions) runs MKL's
            packed GEMM, any other oneDNN's packed weight.
        memory_bytes: the memory the packed copies are measured against (default: the machine's
            physical memory, or the smallest limit of the cgroups the process runs in if lower,
            ``_memory_limit``); copies are made only while their total stays within
            ``PACK_MEMORY_FRACTION`` of it, MKL's first (it speeds up most), then oneDNN's.
    Returns:
        None when packing is off (``SAGO_PACK_WEIGHTS=0``) or does not apply (no ``OneDNNLinear``
        module whose weight is a normal tensor); else ``{"rows": rows, "mkl": bool, "onednn":
        bool, "bytes": extra bytes held, "memory_bytes": the memory measured against,
        "memory_source": "physical memory" | the cgroup file of the limit | "given"}`` (bytes: the
        packed copies, counted as float32 weights; both False and 0 bytes when the memory cap left
        nothing packed).
    Raises:
        ValueError: ``rows`` < 1.
    """
    if rows < 1:
        raise ValueError(f"rows must be >= 1, got {rows}")
    mods = [m for m in model.modules() if type(m) is OneDNNLinear]
    for m in mods:
        m.__dict__["_packs"] = None
    mods = [m for m in mods if not m.weight.is_inference()]  # no version counter to watch
    if not mods or not packing_requested():
        return None
    size = sum(m.weight.numel() * m.weight.element_size() for m in mods)
    memory, source = _memory_limit() if memory_bytes is None else (int(memory_bytes), "given")
    budget = PACK_MEMORY_FRACTION * memory
    use_mkl = mkl_packed_usable() and size <= budget
    use_dnn = onednn_pack_usable() and size * (1 + use_mkl) <= budget
    rows = int(rows)
    if use_mkl or use_dnn:
        with torch.no_grad():
            for m in mods:
                w = m.weight.detach()
                m.__dict__["_packs"] = _Packs(
                    rows=rows,
                    mkl=torch.ops.mkl._mkl_reorder_linear_weight(w, rows) if use_mkl else None,
                    onednn=torch.ops.mkldnn._reorder_linear_weight(w, rows) if use_dnn else None,
                    version=m.weight._version, source=w)
    return {"rows": rows, "mkl": use_mkl, "onednn": use_dnn, "bytes": int(size * (use_mkl + use_dnn)),
            "memory_bytes": int(memory), "memory_source": source}


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
            mod.__dict__.pop("_packs", None)
    return kernel
