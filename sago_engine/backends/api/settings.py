"""The ``[[models]]`` keys of the backends that send requests to a server: ``ServerSettings`` (where
and how to reach it: every server backend, ``hybrid``'s server included) and ``ApiSettings`` (the
API backends ``openai``, ``openai_compatible``, ``anthropic``, ``gemini``: log-probs, prices,
request parameters). Keys are never part of a config: ``api_key_env`` names their variable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from sago_engine.backends.api.errors import OMITTABLE_PARAMS
from sago_engine.backends.settings import BackendSettings, check_env_name, check_int, check_number, check_text

__all__ = ["ApiSettings", "ServerSettings"]


@dataclass(frozen=True)
class ServerSettings(BackendSettings):
    """Where a server is and how it is asked (``api_backend.ApiBackend``'s connection arguments)."""

    takes_run_seed: ClassVar[bool] = True

    base_url: str | None = None
    """API root; required for ``openai_compatible`` and ``hybrid`` (e.g. ``http://localhost:8000/v1``)."""
    api_key_env: str | None = None
    """Name of the environment variable holding the key (default: the provider's usual one).
    Keys are never read from the config file."""
    max_concurrency: int = 4
    """Parallel requests."""
    timeout_s: float = 60.0
    """Per-request timeout in seconds."""
    max_retries: int = 5
    """Retries per prompt after the first attempt (429 / 5xx / timeouts / connection errors)."""

    @classmethod
    def check_table(cls, t: dict[str, Any], backend: str, *, check_devices: bool = True) -> None:
        """base_url an http(s) URL, api_key_env a variable name, concurrency ≥ 1, retries ≥ 0, timeout > 0."""
        check_text(t, "base_url", "api_key_env")
        check_env_name(t)
        if "base_url" in t and not re.match(r"^https?://[^/\s]+", t["base_url"]):
            raise ValueError(f"base_url must be an http(s) URL, got {t['base_url']!r}")
        check_int(t, "max_concurrency", 1)
        check_int(t, "max_retries", 0)
        check_number(t, "timeout_s", 0, strict=True)


@dataclass(frozen=True)
class ApiSettings(ServerSettings):
    """An API model (``openai``, ``openai_compatible``, ``anthropic``, ``gemini``)."""

    label: ClassVar[str] = "API backends"

    api_version: str | None = None
    """``anthropic``: the ``anthropic-version`` header (``"2023-06-01"`` also sends temperature 0);
    ``gemini``: the API version path (default ``v1beta``)."""
    top_logprobs: int | None = None
    """k alternatives per token for the Δ-Ent approximation (0..20; 0 = Δ-Prob only). Default:
    20 for openai / openai_compatible, not requested for gemini; not allowed for anthropic."""
    price_in_per_mtok: float | None = None
    """USD per million prompt tokens (for the recorded cost; unset → cost unknown)."""
    price_out_per_mtok: float | None = None
    """USD per million completion tokens (reasoning/thinking tokens included: billed as output)."""
    price_cached_in_per_mtok: float | None = None
    """USD per million cached input tokens (unset → the input price)."""
    omit_params: tuple[str, ...] | None = None
    """Request parameters not sent, for models that reject them: any of ``temperature``,
    ``seed``, ``logprobs`` (``api_errors.OMITTABLE_PARAMS``). A model that rejects one stops the
    run with a message naming this setting."""
    thinking_budget: int | None = None
    """Hidden-reasoning token budget: gemini ``thinking_budget`` (0 = thinking off), anthropic
    extended thinking ``budget_tokens`` (≥ 1024, on top of max_new_tokens). Unset: the model's default."""
    reasoning_effort: str | None = None
    """openai / openai_compatible ``reasoning_effort`` (e.g. ``"none"``, ``"minimal"``, ``"low"``)."""

    @classmethod
    def check_table(cls, t: dict[str, Any], backend: str, *, check_devices: bool = True) -> None:
        """The server's checks, each key's backend (api_version: anthropic / gemini; top_logprobs:
        not anthropic; thinking_budget: gemini / anthropic; reasoning_effort: openai /
        openai_compatible), value ranges and both prices or neither; ``omit_params`` becomes a
        sorted tuple."""
        check_text(t, "api_version")
        super().check_table(t, backend, check_devices=check_devices)
        if backend == "openai_compatible" and "base_url" not in t:
            raise ValueError("the openai_compatible backend needs base_url "
                             "(e.g. \"http://localhost:8000/v1\" for a vLLM server)")
        if "api_version" in t and backend not in ("anthropic", "gemini"):
            raise ValueError("api_version applies to anthropic and gemini only")
        if "top_logprobs" in t:
            k = t["top_logprobs"]
            if backend == "anthropic":
                raise ValueError("the Anthropic Messages API returns no log-probs; remove top_logprobs")
            if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= 20:
                raise ValueError(f"top_logprobs must be an integer in 0..20, got {k!r}")
        for k in ("price_in_per_mtok", "price_out_per_mtok", "price_cached_in_per_mtok"):
            check_number(t, k, 0)
        if "omit_params" in t:
            op = t["omit_params"]
            if not isinstance(op, list) or any(p not in OMITTABLE_PARAMS for p in op):
                raise ValueError(f"omit_params must be a list of {', '.join(OMITTABLE_PARAMS)}, got {op!r}")
            t["omit_params"] = tuple(sorted(set(op)))
        if "thinking_budget" in t:
            if backend not in ("gemini", "anthropic"):
                raise ValueError("thinking_budget applies to gemini and anthropic (openai: reasoning_effort)")
            check_int(t, "thinking_budget", 0)
        if "reasoning_effort" in t and (backend not in ("openai", "openai_compatible")
                                        or not isinstance(t["reasoning_effort"], str)):
            raise ValueError("reasoning_effort is a string for openai / openai_compatible only")
        if ("price_in_per_mtok" in t) != ("price_out_per_mtok" in t):
            raise ValueError("give both price_in_per_mtok and price_out_per_mtok (USD per million tokens), "
                             "or neither (cost then stays unknown)")
