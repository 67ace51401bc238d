"""The ``[[models]]`` keys of ``hf_local`` (and of ``hybrid``'s local copy): dtype, device, batch
size and the chat template's variables and date. Nothing here loads torch or a model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...models import check_device
from ..settings import BackendSettings, check_int
from .template_clock import parse_template_date

__all__ = ["LocalSettings"]


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
