"""The ``[[models]]`` keys of ``hf_local`` (and of ``hybrid``'s local copy): dtype, device, batch
size and the chat template's variables and date; ``hf_local``'s own sampled-decoding keys
(temperature, top-p, top-k). Nothing here loads torch or a model."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ...models import check_device
from ..settings import BackendSettings, check_int
from .template_clock import parse_template_date

__all__ = ["LocalSettings", "HFLocalSettings", "check_sampling"]


@dataclass(frozen=True)
class LocalSettings(BackendSettings):
    """A local transformers model (``HFLocalBackend``'s constructor arguments)."""

    dtype: str = "float32"
    """``float32``, ``bfloat16`` or ``float16`` (``float16`` needs a GPU). Whether the pair (dtype,
    device) works here is decided by ``sago_engine.models.check_device``."""
    device: str = "auto"
    """``auto`` (GPU when present), ``cpu``, ``cuda``, ``cuda:N`` or ``mps``."""
    batch_size: int = 8
    """Prompts per generate call (``hybrid``: rows per teacher-forced pass)."""
    chat_template_kwargs: dict[str, Any] | None = None
    """Extra variables for the chat template, e.g. ``{enable_thinking = true}``. None: the
    template's own thinking switch (``enable_thinking``), where it has one, is set to false (see
    ``sago_engine.backends.hf_local.template_kwargs``). Enters the run id when set."""
    template_date: str | None = None
    """The day a chat template that reads the clock sees, ISO ``YYYY-MM-DD``. None: the template's
    own fallback date where it has one (Llama-3.x "26 Jul 2024"), else 2024-07-26
    (``sago_engine.backends.hf_local.template_clock``). Recorded in ``runs.decoding.chat_template``;
    enters the run id when set."""

    @classmethod
    def check_table(cls, t: dict[str, Any], backend: str, *, check_devices: bool = True) -> None:
        """batch_size ≥ 1; (dtype, device) usable (here, with ``check_devices``; else by name);
        chat_template_kwargs a table of scalars; template_date an ISO date."""
        check_int(t, "batch_size", 1)
        # the backend decides what runs here (the same check runs again at load time)
        check_device(t.get("dtype", "float32"), t.get("device", "auto"), here=check_devices)
        ctk = t.get("chat_template_kwargs")
        if ctk is not None and (not isinstance(ctk, dict) or not all(
                isinstance(k, str) and isinstance(v, (str, int, float, bool)) for k, v in ctk.items())):
            raise ValueError(f"chat_template_kwargs must be a table of names to strings, numbers or booleans, "
                             f"e.g. {{enable_thinking = false}}, got {ctk!r}")
        if t.get("template_date") is not None:
            parse_template_date(t["template_date"])


def check_sampling(t: dict[str, Any]) -> None:
    """``temperature`` a finite number in [0, 100]; ``top_p`` a finite number in (0, 1]; ``top_k`` an
    integer ≥ 0 (0: off); ``top_p`` / ``top_k`` set away from their neutral value only with
    ``temperature > 0`` (greedy decoding would ignore them).

    Raises:
        ValueError: the message names the key, the value and what is valid.
    """
    for key, lo, hi, lo_open in (("temperature", 0.0, 100.0, False), ("top_p", 0.0, 1.0, True)):
        if key not in t:
            continue
        v = t[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v > hi or (
                v <= lo if lo_open else v < lo):
            raise ValueError(f"{key} must be a finite number in {'(' if lo_open else '['}{lo:g}, {hi:g}], got {v!r}")
        t[key] = float(v)
    check_int(t, "top_k", 0)
    if t.get("temperature", 0.0) == 0.0:
        on = [k for k, neutral in (("top_p", 1.0), ("top_k", 0)) if t.get(k, neutral) != neutral]
        if on:
            raise ValueError(f"{', '.join(on)} only apply to sampled decoding: set temperature > 0 "
                             f"(temperature 0, the default, is greedy decoding)")


@dataclass(frozen=True)
class HFLocalSettings(LocalSettings):
    """``hf_local``: a local model's settings plus sampled decoding (``hf_local.sampling``). The
    defaults are greedy decoding, SAGO (arXiv 2610.01428) §Decoding."""

    temperature: float = 0.0
    """Softmax temperature of sampled decoding, in [0, 100]; 0 (default) = greedy decoding (the
    paper's setting). > 0: each reply is sampled with a seeded generator of its own
    (``[[models]] samples`` replies per prompt and per variant). Enters the run id when > 0."""
    top_p: float = 1.0
    """Nucleus sampling: keep the most probable tokens whose probabilities sum to at least
    ``top_p``, in (0, 1]; 1 = off. Needs ``temperature > 0``."""
    top_k: int = 0
    """Keep only the ``top_k`` most probable tokens (integer ≥ 0; 0 = off). Needs ``temperature > 0``."""

    @classmethod
    def check_table(cls, t: dict[str, Any], backend: str, *, check_devices: bool = True) -> None:
        """``LocalSettings.check_table`` and ``check_sampling``."""
        super().check_table(t, backend, check_devices=check_devices)
        check_sampling(t)
