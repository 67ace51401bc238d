"""The ``[[models]]`` keys of ``hybrid``: its local copy's (``LocalSettings``), its server's
(``ServerSettings``, ``base_url`` required) and its own (served name, log-prob tolerance,
extra request fields)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sago_engine.backends.api.settings import ServerSettings
from sago_engine.backends.hf_local.settings import LocalSettings
from sago_engine.backends.settings import check_number

__all__ = ["HybridSettings"]


@dataclass(frozen=True)
class HybridSettings(LocalSettings, ServerSettings):
    """Replies from a vLLM / OpenAI-compatible server, white-box statistics from the local copy."""

    server_model: str | None = None
    """The model name the server serves (vLLM ``--served-model-name``); unset: ``key``."""
    logprob_tol: float | None = None
    """Tolerance (nats, > 0) on max |server − local| token log-prob per reply; replies beyond it
    are counted and warned about. Unset: 0.05."""
    server_extra_body: dict[str, Any] | None = None
    """Extra request fields; unset: vLLM's (token ids, neutral repetition_penalty/top_k/min_p);
    ``{}`` for a server that rejects unknown fields (ids are then re-tokenized)."""

    @classmethod
    def check_table(cls, t: dict[str, Any], backend: str, *, check_devices: bool = True) -> None:
        """base_url given; server_model a non-empty string; logprob_tol > 0; server_extra_body a
        table; then the local copy's checks and the server's."""
        if "base_url" not in t:
            raise ValueError("the hybrid backend needs base_url (the server, e.g. "
                             "\"http://localhost:8000/v1\" for vLLM)")
        if "server_model" in t and (not isinstance(t["server_model"], str) or not t["server_model"].strip()):
            raise ValueError(f"server_model must be a non-empty string, got {t['server_model']!r}")
        check_number(t, "logprob_tol", 0, strict=True)
        if "server_extra_body" in t and not isinstance(t["server_extra_body"], dict):
            raise ValueError(f"server_extra_body must be a table, got {t['server_extra_body']!r}")
        LocalSettings.check_table({k: t[k] for k in LocalSettings.keys() if k in t}, backend,
                                  check_devices=check_devices)
        ServerSettings.check_table({k: t[k] for k in ServerSettings.keys() if k in t}, "openai_compatible",
                                   check_devices=check_devices)
