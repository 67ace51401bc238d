"""Backend protocol, decoding settings, the registry of backends and a lazy factory (no torch or SDK import at module load)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sago_engine.backends.api.backend import ApiBackend

from ..registry import Registry
from ..types import DEFAULT_MAX_NEW_TOKENS
from .caching import CachingBackend, ReplyCache, default_cache_dir
from .protocol import Backend
from .settings import BackendSettings

__all__ = [
    "Backend",
    "DecodingConfig",
    "BACKENDS",
    "SETTINGS",
    "register_backend",
    "settings_for",
    "get_backend",
]


@dataclass(frozen=True)
class DecodingConfig:
    """Decoding settings that can change a response; recorded with every run.

    SAGO (arXiv 2610.01428) §Decoding: deterministic (greedy, T=0) for all models.
    """

    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    """Upper bound on generated tokens per prompt (the EOS token counts as one)."""
    greedy: bool = True
    """Greedy decoding (``do_sample=False``). Only True is supported by ``hf_local``, which passes
    a neutral ``GenerationConfig`` (``hf_local.generation.neutral_generation_config``: no penalties or token
    rules; the model folder's own generation defaults are recorded, never applied)."""
    batch_size: int = 8
    """Prompts per forward/generate call (does not change greedy outputs beyond float noise)."""

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for run records."""
        return asdict(self)


#: Backend name → its class, as ``"module:Class"`` (relative to ``sago_engine.backends``), imported
#: when ``get_backend`` first builds one.
BACKENDS: Registry[type] = Registry("backend", package=__package__)
BACKENDS.register("hf_local", ".hf_local:HFLocalBackend")
BACKENDS.register("openai", ".api.openai_api:OpenAIBackend")
BACKENDS.register("openai_compatible", ".api.openai_api:OpenAICompatibleBackend")
BACKENDS.register("anthropic", ".api.anthropic_api:AnthropicBackend")
BACKENDS.register("gemini", ".api.gemini_api:GeminiBackend")
BACKENDS.register("hybrid", ".hybrid.backend:HybridBackend")  # server replies + local teacher-forced statistics

#: Backend name → the settings dataclass its ``[[models]]`` tables are validated against
#: (``settings.BackendSettings``; torch- and SDK-free modules), imported on first access.
SETTINGS: Registry[type] = Registry("backend", package=__package__)
SETTINGS.register("hf_local", ".hf_local.settings:HFLocalSettings")
for _api in ("openai", "openai_compatible", "anthropic", "gemini"):
    SETTINGS.register(_api, ".api.settings:ApiSettings")
SETTINGS.register("hybrid", ".hybrid.settings:HybridSettings")


def register_backend(name: str, target: str, settings: str | type = ".settings:BackendSettings") -> None:
    """Add a backend to the factory.

    Args:
        name: backend name (``spec["name"]``).
        target: ``"package.module:Class"`` (or ``".module:Class"`` relative to this package);
            imported only when ``get_backend`` is called with that name.
        settings: its settings dataclass (a ``settings.BackendSettings`` subclass, or its
            ``"module:Class"`` path): the keys a ``[[models]]`` table of this backend may hold
            (default: none beyond the ones every entry has).
    Raises:
        ValueError: the name is already registered (duplicates are refused, never overwritten).
    """
    BACKENDS.register(name, target)
    SETTINGS.register(name, settings)


def settings_for(name: str) -> type[BackendSettings]:
    """The settings dataclass of backend ``name``: its ``SETTINGS`` entry, or ``BackendSettings``
    (no keys of its own) for a backend registered in ``BACKENDS`` without one."""
    return SETTINGS[name] if name in SETTINGS else BackendSettings


def _default_reply_cache() -> ReplyCache:
    # Imported here, not at the top: the store package loads duckdb and pandas, which importing the
    # backend factory must not (start-up time of every process that only needs the factory).
    from sago_engine.store.sidecar.reply_cache import ResponseCache

    return ResponseCache(default_cache_dir() / "responses.sqlite3")


def get_backend(spec: dict[str, Any], reply_cache: ReplyCache | None = None) -> Backend:
    """Build a backend from a spec dict; the backend's module is imported only here.

    Args:
        spec: ``{"name": <backend name>, **constructor kwargs}``; for ``hf_local`` e.g.
            ``{"name": "hf_local", "model": "smollm2-135m-instruct", "dtype": "float32",
            "device": "auto", "batch_size": 8}``; for the API backends (``openai``,
            ``openai_compatible``, ``anthropic``, ``gemini``) e.g. ``{"name": "openai", "model":
            "gpt-4o-mini", "top_logprobs": 20, "max_concurrency": 4}`` (see
            ``api_backend.ApiBackend``; keys come from the environment only). API backends
            come wrapped in ``caching.CachingBackend`` (reply cache) unless the spec has
            ``"cache": False``.
        reply_cache: the ``caching.ReplyCache`` an API backend's replies go to; None = the
            on-disk table ``default_cache_dir()/responses.sqlite3`` (``store.reply_cache``).
    Returns:
        The constructed backend.
    Raises:
        ValueError: no ``name`` in the spec, or an unknown name (``UnknownNameError``: the message
            lists the known ones and suggests close matches).
    """
    spec = dict(spec)
    name = spec.pop("name", None) or spec.pop("backend", None)
    if not name:
        raise ValueError(f"backend spec needs a 'name' (one of {sorted(BACKENDS)}): {spec}")
    cls = BACKENDS[name]
    cache = spec.pop("cache", True)
    backend = cls(**spec)
    if cache and isinstance(backend, ApiBackend):  # API replies cost money and time: cached
        return CachingBackend(backend, reply_cache if reply_cache is not None else _default_reply_cache())
    return backend
