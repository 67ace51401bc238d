"""The torch a model runs on: whether a (dtype, device) pair is usable here (the one check the config and
every load run), and the library versions recorded with a load."""

from __future__ import annotations

import re

__all__ = ["DTYPES", "DEVICES", "check_device", "torch_versions"]

#: Weight/compute dtypes ``check_device`` knows (whether one is usable depends on the device).
DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16")
#: Device names ``check_device`` knows, besides ``"cuda:N"``.
DEVICES: tuple[str, ...] = ("auto", "cpu", "cuda", "mps")


def check_device(dtype: str, device: str, here: bool = True) -> str:
    """Whether a (dtype, device) pair is usable on this machine; the one source of truth.

    The run config (``precompute.config``) calls this before any work, and every model load
    calls it again, so a setting that passed validation never fails at load time.

    Rules (torch's own reports, nothing guessed):

    * ``dtype``: one of ``DTYPES`` (``float32``, ``bfloat16``, ``float16``); ``float16`` needs
      an accelerator (``cuda``/``cuda:N``/``mps``: CPU kernels for fp16 are partial and slow);
      ``bfloat16`` on CUDA needs ``torch.cuda.is_bf16_supported()``.
    * ``device``: ``"auto"`` (``cuda`` when ``torch.cuda.is_available()``, else ``cpu``),
      ``"cpu"``, ``"cuda"`` (needs ``torch.cuda.is_available()``), ``"cuda:N"`` (needs
      ``N < torch.cuda.device_count()``) or ``"mps"`` (needs ``torch.backends.mps.is_available()``).

    Args:
        dtype: weights and compute dtype name.
        device: device name as above.
        here: False checks only what holds on any machine (the names, ``float16`` on an explicit
            ``cpu``) and returns ``device`` unresolved: for a launcher whose models run on other
            machines (``precompute.ray_launch``), where the model load checks the rest.
    Returns:
        The resolved torch device string (``"auto"`` resolved), e.g. ``"cpu"``, ``"cuda:1"``.
    Raises:
        ValueError: an unknown name, or a device/dtype torch does not offer here; the message
            says what torch reports and what is valid.
    """
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}. Valid: {', '.join(DTYPES)}")
    dev = str(device)
    m = re.fullmatch(r"cuda:(\d+)", dev)
    if dev not in DEVICES and not m:
        raise ValueError(f"unknown device {device!r}. Valid: {', '.join(DEVICES)}, cuda:N")
    if not here:
        if dtype == "float16" and dev == "cpu":
            raise ValueError("dtype='float16' needs a GPU (cuda, cuda:N or mps); use float32 or bfloat16 on CPU")
        return dev
    import torch  # lazy: the config checks names without torch (here=False)

    if dev == "auto":
        dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev.startswith("cuda"):
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            raise ValueError(f"device={device!r} requested but torch sees no CUDA device "
                             f"(torch.cuda.is_available() is False); use device = \"cpu\" or \"auto\"")
        if m and int(m.group(1)) >= n:
            raise ValueError(f"device={device!r} requested but torch sees {n} CUDA device(s) "
                             f"(valid: {', '.join(f'cuda:{i}' for i in range(n))})")
    if dev == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ValueError("device='mps' requested but torch.backends.mps.is_available() is False")
    if dtype == "float16" and dev == "cpu":
        raise ValueError(f"dtype='float16' needs a GPU (cuda, cuda:N or mps); device={device!r} resolves to "
                         f"cpu here — use float32 or bfloat16 on CPU")
    if dtype == "bfloat16" and dev.startswith("cuda") and not torch.cuda.is_bf16_supported():
        raise ValueError("dtype='bfloat16' requested but this CUDA device does not support it "
                         "(torch.cuda.is_bf16_supported() is False); use float16 or float32")
    return dev


def torch_versions() -> dict[str, str]:
    """``{"transformers": version, "torch": version}`` for a load's record (imports both)."""
    import torch  # lazy: importing the zoo never imports torch
    import transformers

    return {"transformers": transformers.__version__, "torch": torch.__version__}
