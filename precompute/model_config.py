"""One ``[[models]]`` table → a ``ModelConfig``: the keys every entry has (``ModelEntry``) and the
keys of its backend's settings dataclass (``sago_engine.backends.base.SETTINGS``), validated
before any work (no network, no SDK or torch import)."""

from __future__ import annotations

import contextvars
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from precompute.config_errors import ConfigError, int_setting, unknown
from sago_engine.backends.base import BACKENDS, SETTINGS, settings_for
from sago_engine.backends.hf_local.settings import LocalSettings
from sago_engine.backends.settings import BackendSettings
from sago_engine.models import ZOO, is_hub_id
from sago_engine.types import DEFAULT_MAX_NEW_TOKENS

__all__ = ["CHECK_DEVICES_HERE", "ENTRY_KEYS", "ModelConfig", "ModelEntry", "check_model"]

#: Whether ``check_model`` checks devices against this machine (``load_config(check_devices=...)``).
CHECK_DEVICES_HERE: contextvars.ContextVar[bool] = contextvars.ContextVar("check_devices_here", default=True)


@dataclass(frozen=True)
class ModelEntry:
    """The keys of a ``[[models]]`` table whatever its backend."""

    key: str
    """``hf_local`` / ``hybrid``: a zoo key (sago_engine.models.ZOO), ``tiny-random``, a local folder
    with a HF model, or a Hugging Face Hub id (``org/name``; needs the weights in the local HF cache
    or hub access with ``HF_HUB_OFFLINE=0``). API backends: the provider's model name."""
    backend: str = "hf_local"
    """A registered backend name (``sago_engine.backends.BACKENDS``): ``hf_local``, ``openai``,
    ``openai_compatible``, ``anthropic``, ``gemini`` or ``hybrid``. Its settings dataclass
    (``SETTINGS``) says which further keys the table may hold."""
    base_repeats: int | None = None
    """How often the base prompt is asked (≥ 1); repeats beyond the first give the noise floor.
    Unset: 2 for API backends (not deterministic at T = 0), 1 for hf_local (greedy)."""
    label: str | None = None
    """Display name of the run: the ``runs.model`` the pages group by. Unset: ``key``. Lets one
    config hold two runs of the same model that differ in one setting (e.g. ``max_new_tokens``,
    labels ``smollm2-135m-instruct·cap48`` / ``…·cap128``); the real key stays in the run record
    (``config.run_model.key``). Enters the run id when set."""
    max_new_tokens: int | None = None
    """This model's reply cap in tokens (≥ 1). Unset: ``[run] max_new_tokens``. The effective cap
    (``RunConfig.max_new_tokens_for``) is recorded in ``runs.decoding`` and enters the run id."""
    samples: int = 1
    """Replies sampled per prompt and per variant (k ≥ 1). k > 1 needs sampled decoding
    (``temperature > 0``, hf_local). Sample 0 of the base and of each variant gives the ``deltas``;
    samples 1..k−1 are stored in ``samples``. Recorded in ``runs.decoding``; enters the run id
    when the run is sampled (``sampling``)."""

    @property
    def sampling(self) -> dict | None:
        """The sampled-decoding settings that enter the run id and ``runs.decoding["sampling"]``:
        ``{"temperature", "top_p", "top_k", "samples"}``, or None for greedy decoding
        (temperature 0 and one sample: the default, whose run ids and records are unchanged)."""
        t = float(getattr(self, "temperature", 0.0) or 0.0)
        if t == 0.0 and self.samples == 1:
            return None
        return {"temperature": t, "top_p": float(getattr(self, "top_p", 1.0)), "top_k": int(getattr(self, "top_k", 0)),
                "samples": int(self.samples)}

    @property
    def name(self) -> str:
        """The run's display name (``runs.model``): ``label`` when set, else ``key``."""
        return self.label or self.key

    @property
    def repeats(self) -> int:
        """``base_repeats`` or its backend default (2 for API models, 1 for hf_local)."""
        return self.base_repeats if self.base_repeats is not None else (2 if self.is_api else 1)

    @property
    def is_api(self) -> bool:
        """True for the API backends (everything but ``hf_local`` and ``hybrid``, whose record,
        dtype and chat template are the local copy's)."""
        return self.backend not in ("hf_local", "hybrid")

    @property
    def settings(self) -> BackendSettings:
        """This entry's backend settings (its backend's ``SETTINGS`` class)."""
        cls = settings_for(self.backend)
        return cls(**{k: getattr(self, k) for k in cls.keys()})


#: Keys of ``ModelEntry`` (every ``[[models]]`` table's).
ENTRY_KEYS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ModelEntry))


def _settings_fields() -> list[tuple]:
    """Every registered backend's settings fields, once each (a key two classes share must have one default)."""
    out: dict[str, dataclasses.Field] = {}
    for name in SETTINGS:
        for f in dataclasses.fields(SETTINGS[name]):
            prev = out.setdefault(f.name, f)
            if prev.default != f.default:
                raise TypeError(f"backend settings disagree on the default of {f.name!r}: "
                                f"{prev.default!r} vs {f.default!r}")
    return [(f.name, f.type, dataclasses.field(default=f.default)) for f in out.values()]


ModelConfig = dataclasses.make_dataclass("ModelConfig", _settings_fields(), bases=(ModelEntry,), frozen=True)
ModelConfig.__module__ = __name__  # pickled by name (Ray tasks get the config)
ModelConfig.__doc__ = (
    "One model to run: the keys every entry has (``ModelEntry``) and, flat, every key of the "
    "registered backends' settings with its default (``SETTINGS``); ``settings`` is its own backend's.")


def _owners(key: str) -> str:
    """The backends whose settings hold ``key``, as a message names them ("the hybrid backend",
    "hf_local and hybrid", "API backends (openai, …) and hybrid")."""
    by_cls: dict[type, list[str]] = {}
    for name in SETTINGS:
        if key in SETTINGS[name].keys():
            by_cls.setdefault(SETTINGS[name], []).append(name)
    parts = [f"{cls.label} ({', '.join(names)})" if len(names) > 1 else names[0] for cls, names in by_cls.items()]
    if len(parts) == 1 and sum(map(len, by_cls.values())) == 1:
        return f"the {parts[0]} backend"
    return " and ".join(parts)


def _check_local_key(key: str, base: Path) -> None:
    """A local model's key names a zoo entry, the tiny random model, a model folder or a Hub id."""
    if (key not in ZOO and key != "tiny-random" and not (base / key).is_dir()
            and not Path(key).is_dir() and not is_hub_id(key)):
        err = unknown("model", key, [*ZOO, "tiny-random", "<a local folder with config.json>",
                                     "<a Hugging Face Hub id org/name>"])
        raise ConfigError(f"{err} (for an API model set backend = \"openai\", \"anthropic\", \"gemini\" "
                          f"or \"openai_compatible\")")


def check_model(m: dict, base: Path) -> ModelConfig:
    """Validate one ``[[models]]`` table and build its ModelConfig.

    Checks, in order: every key is a ``ModelConfig`` key (else the close name); ``key`` is given;
    the backend is registered; the keys every entry has; each key belongs to this backend's
    settings (else which backends take it); a local copy's ``key`` names a model here; the
    settings' own checks (``BackendSettings.check_table``; devices against this machine unless
    ``CHECK_DEVICES_HERE`` is False).

    Raises:
        ConfigError: the message names the model, the key and what is valid.
    """
    for k in m:
        if k not in ModelConfig.__dataclass_fields__:
            raise unknown("model key", k, list(ModelConfig.__dataclass_fields__))
    if "key" not in m:
        raise ConfigError(f"a [[models]] entry has no key; give key = one of {', '.join([*ZOO, 'tiny-random'])} "
                          f"(hf_local) or the provider's model name (API backends)")
    backend = m.get("backend", "hf_local")
    if backend not in BACKENDS:
        raise unknown("backend", backend, sorted(BACKENDS))
    if "base_repeats" in m:
        int_setting(m, "base_repeats", 1, lo=1)
    key = m["key"]
    if not isinstance(key, str) or not key.strip():
        raise ConfigError(f"models.key must be a non-empty string, got {key!r}")
    if "max_new_tokens" in m:
        try:
            int_setting(m, "max_new_tokens", DEFAULT_MAX_NEW_TOKENS, lo=1)
        except ConfigError as e:
            raise ConfigError(f"model {key!r}: {e}") from None
    if "samples" in m:
        try:
            int_setting(m, "samples", 1, lo=1)
        except ConfigError as e:
            raise ConfigError(f"model {key!r}: {e}") from None
    if "label" in m and (not isinstance(m["label"], str) or not m["label"].strip()):
        raise ConfigError(f"model {key!r}: label must be a non-empty string, got {m['label']!r}")
    cls = settings_for(backend)
    own = (*ENTRY_KEYS, *cls.keys())
    bad = [k for k in m if k not in own]
    if bad:
        by_owner: dict[str, list[str]] = {}
        for k in bad:
            by_owner.setdefault(_owners(k), []).append(k)
        raise ConfigError(f"model {key!r}: {', '.join(bad)} do not apply to the {backend} backend (it takes "
                          f"{', '.join(a for a in own if a not in ('key', 'backend'))}); "
                          + "; ".join(f"{', '.join(ks)} only apply to {who}" for who, ks in by_owner.items()))
    if issubclass(cls, LocalSettings):  # hf_local, and hybrid's local copy
        _check_local_key(key, base)
    try:
        settings = cls.from_table({k: m[k] for k in cls.keys() if k in m}, backend,
                                  check_devices=CHECK_DEVICES_HERE.get())
    except ValueError as e:
        raise ConfigError(f"model {key!r}: {e}") from None
    if m.get("samples", 1) > 1 and not getattr(settings, "temperature", 0.0):
        raise ConfigError(f"model {key!r}: samples = {m['samples']} needs sampled decoding: set temperature > 0 "
                          f"(hf_local; greedy replies would all be the same)"
                          + ("" if "temperature" in cls.keys() else
                             f" — the {backend} backend offers no sampled decoding in this version"))
    return ModelConfig(**{k: m[k] for k in ENTRY_KEYS if k in m},
                       **{k: getattr(settings, k) for k in cls.keys()})
