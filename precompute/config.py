"""Run configuration read from TOML into frozen dataclasses, validated before any work starts."""

from __future__ import annotations

import contextvars
import difflib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sago_engine.datasets import DATASETS
from sago_engine.scoring import resolve_normalizers
from sago_engine.types import DEFAULT_MAX_NEW_TOKENS


class ConfigError(ValueError):
    """A config that names something unknown or invalid; the message lists what is valid."""


def _unknown(kind: str, name: str, valid) -> ConfigError:
    valid = list(valid)
    close = difflib.get_close_matches(str(name), [str(v) for v in valid], n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return ConfigError(f"unknown {kind} {name!r}.{hint} Valid: {', '.join(map(str, valid))}")


@dataclass(frozen=True)
class ModelConfig:
    """One model to run."""

    key: str
    """``hf_local``: a zoo key (sago_engine.models.ZOO), ``tiny-random``, a local folder with a HF
    model, or a Hugging Face Hub id (``org/name``; needs the weights in the local HF cache or
    hub access with ``HF_HUB_OFFLINE=0``). API backends: the provider's model name."""
    backend: str = "hf_local"
    """Backend name: ``hf_local``, ``openai``, ``openai_compatible``, ``anthropic``, ``gemini`` or
    ``hybrid`` (replies from a vLLM/OpenAI-compatible server at ``base_url``, white-box statistics
    from the local copy ``key``; takes the hf_local fields and ``HYBRID_SERVER_FIELDS``)."""
    dtype: str = "float32"
    """``float32``, ``bfloat16`` or ``float16`` (hf_local only; ``float16`` needs a GPU). Whether
    the pair (dtype, device) works here is decided by ``sago_engine.models.check_device``."""
    device: str = "auto"
    """``auto`` (GPU when present), ``cpu``, ``cuda``, ``cuda:N`` or ``mps`` (hf_local only)."""
    batch_size: int = 8
    """Prompts per generate call (hf_local only)."""
    chat_template_kwargs: dict[str, Any] | None = None
    """hf_local only: extra variables for the chat template, e.g. ``{enable_thinking = true}``.
    None: the template's own thinking switch (``enable_thinking``), where it has one, is set to
    false (see ``sago_engine.backends.hf_local.template_kwargs``). Enters the run id when set."""
    template_date: str | None = None
    """hf_local (and hybrid's local copy): the day a chat template that reads the clock sees, ISO
    ``YYYY-MM-DD``. None: the template's own fallback date where it has one (Llama-3.x "26 Jul 2024"),
    else 2024-07-26 (``sago_engine.backends.hf_local.template_clock``). Recorded in
    ``runs.decoding.chat_template``; enters the run id when set."""
    # ---- API backends only (see sago_engine.backends.api_common.ApiBackend) ----
    base_url: str | None = None
    """API root; required for ``openai_compatible`` (e.g. ``http://localhost:8000/v1``)."""
    api_key_env: str | None = None
    """Name of the environment variable holding the key (default: the provider's usual one).
    Keys are never read from the config file."""
    api_version: str | None = None
    """``anthropic``: the ``anthropic-version`` header (``"2023-06-01"`` also sends temperature 0);
    ``gemini``: the API version path (default ``v1beta``)."""
    top_logprobs: int | None = None
    """k alternatives per token for the Δ-Ent approximation (0..20; 0 = Δ-Prob only). Default:
    20 for openai / openai_compatible, not requested for gemini; not allowed for anthropic."""
    max_concurrency: int = 4
    """Parallel requests."""
    timeout_s: float = 60.0
    """Per-request timeout in seconds."""
    max_retries: int = 5
    """Retries per prompt after the first attempt (429 / 5xx / timeouts / connection errors)."""
    price_in_per_mtok: float | None = None
    """USD per million prompt tokens (for the recorded cost; unset → cost unknown)."""
    price_out_per_mtok: float | None = None
    """USD per million completion tokens (reasoning/thinking tokens included: billed as output)."""
    price_cached_in_per_mtok: float | None = None
    """USD per million cached input tokens (unset → the input price)."""
    omit_params: tuple[str, ...] | None = None
    """Request parameters not sent, for models that reject them: any of ``temperature``,
    ``seed``, ``logprobs`` (``api_common.OMITTABLE_PARAMS``). A model that rejects one stops the
    run with a message naming this setting."""
    thinking_budget: int | None = None
    """Hidden-reasoning token budget: gemini ``thinking_budget`` (0 = thinking off), anthropic
    extended thinking ``budget_tokens`` (≥ 1024, on top of max_new_tokens). Unset: the model's default."""
    reasoning_effort: str | None = None
    """openai / openai_compatible ``reasoning_effort`` (e.g. ``"none"``, ``"minimal"``, ``"low"``)."""
    # ---- hybrid only (sago_engine.backends.hybrid.HybridBackend) ----
    server_model: str | None = None
    """The model name the server serves (vLLM ``--served-model-name``); unset: ``key``."""
    logprob_tol: float | None = None
    """Tolerance (nats, > 0) on max |server − local| token log-prob per reply; replies beyond it
    are counted and warned about. Unset: 0.05."""
    server_extra_body: dict[str, Any] | None = None
    """Extra request fields; unset: vLLM's (token ids, neutral repetition_penalty/top_k/min_p);
    ``{}`` for a server that rejects unknown fields (ids are then re-tokenized)."""
    # ---- every backend ----
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


#: ModelConfig fields that only API backends take.
API_FIELDS: tuple[str, ...] = ("base_url", "api_key_env", "api_version", "top_logprobs", "max_concurrency",
                               "timeout_s", "max_retries", "price_in_per_mtok", "price_out_per_mtok",
                               "price_cached_in_per_mtok", "omit_params", "thinking_budget", "reasoning_effort")
#: ModelConfig fields that only hf_local takes.
LOCAL_FIELDS: tuple[str, ...] = ("dtype", "device", "batch_size", "chat_template_kwargs", "template_date")
#: ModelConfig fields that only ``hybrid`` takes, and the API fields it takes for its server.
HYBRID_FIELDS: tuple[str, ...] = ("server_model", "logprob_tol", "server_extra_body")
HYBRID_SERVER_FIELDS: tuple[str, ...] = ("base_url", "api_key_env", "max_concurrency", "timeout_s", "max_retries")

#: Whether ``_check_model`` checks devices against this machine (``load_config(check_devices=...)``).
_CHECK_DEVICES_HERE: contextvars.ContextVar[bool] = contextvars.ContextVar("check_devices_here", default=True)


def _number(m: dict, key: str, lo: float, *, strict: bool = False) -> None:
    v = m.get(key)
    if v is None:
        return
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (v <= lo if strict else v < lo):
        raise ConfigError(f"models.{key} must be a number {'>' if strict else '≥'} {lo:g}, got {v!r}")


def _check_model(m: dict, base: Path) -> ModelConfig:
    """Validate one [[models]] table and build its ModelConfig (no network, no SDK import)."""
    from sago_engine.backends.base import BACKENDS
    from sago_engine.models import ZOO, check_device, is_hub_id

    backend = m.get("backend", "hf_local")
    if backend not in BACKENDS:
        raise _unknown("backend", backend, sorted(BACKENDS))
    m = dict(m)
    if "base_repeats" in m:
        _int(m, "base_repeats", 1, lo=1)
    key = m["key"]
    if not isinstance(key, str) or not key.strip():
        raise ConfigError(f"models.key must be a non-empty string, got {key!r}")
    if "max_new_tokens" in m:
        try:
            _int(m, "max_new_tokens", DEFAULT_MAX_NEW_TOKENS, lo=1)
        except ConfigError as e:
            raise ConfigError(f"model {key!r}: {e}") from None
    if "label" in m and (not isinstance(m["label"], str) or not m["label"].strip()):
        raise ConfigError(f"model {key!r}: label must be a non-empty string, got {m['label']!r}")
    if backend == "hybrid":
        return _check_hybrid(m, base)
    bad = [k for k in HYBRID_FIELDS if k in m]
    if bad:
        raise ConfigError(f"model {key!r}: {', '.join(bad)} only apply to the hybrid backend, not {backend}")
    if backend == "hf_local":
        bad = [k for k in API_FIELDS if k in m]
        if bad:
            raise ConfigError(f"model {key!r}: {', '.join(bad)} only apply to API backends "
                              f"(openai, openai_compatible, anthropic, gemini), not hf_local")
        _int(m, "batch_size", 8, lo=1)
        mc = ModelConfig(**m)
        if (mc.key not in ZOO and mc.key != "tiny-random" and not (base / mc.key).is_dir()
                and not Path(mc.key).is_dir() and not is_hub_id(mc.key)):
            err = _unknown("model", mc.key, [*ZOO, "tiny-random", "<a local folder with config.json>",
                                             "<a Hugging Face Hub id org/name>"])
            raise ConfigError(f"{err} (for an API model set backend = \"openai\", \"anthropic\", \"gemini\" "
                              f"or \"openai_compatible\")")
        try:  # the backend decides what runs here (the same check runs again at load time)
            check_device(mc.dtype, mc.device, here=_CHECK_DEVICES_HERE.get())
        except ValueError as e:
            raise ConfigError(f"model {key!r}: {e}") from None
        ctk = mc.chat_template_kwargs
        if ctk is not None and (not isinstance(ctk, dict) or not all(
                isinstance(k, str) and isinstance(v, (str, int, float, bool)) for k, v in ctk.items())):
            raise ConfigError(f"model {key!r}: chat_template_kwargs must be a table of names to strings, numbers "
                              f"or booleans, e.g. {{enable_thinking = false}}, got {ctk!r}")
        if mc.template_date is not None:
            from sago_engine.backends.hf_local.template_clock import parse_template_date

            try:
                parse_template_date(mc.template_date)
            except ValueError as e:
                raise ConfigError(f"model {key!r}: {e}") from None
        return mc
    bad = [k for k in LOCAL_FIELDS if k in m]
    if bad:
        raise ConfigError(f"model {key!r}: {', '.join(bad)} only apply to hf_local, not the {backend} backend")
    for k in ("base_url", "api_key_env", "api_version"):
        if k in m and (not isinstance(m[k], str) or not m[k].strip()):
            raise ConfigError(f"model {key!r}: {k} must be a non-empty string, got {m[k]!r}")
    if "api_key_env" in m and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", m["api_key_env"]):
        raise ConfigError(f"model {key!r}: api_key_env must be the NAME of an environment variable "
                          f"(e.g. \"MY_SERVER_KEY\"), never the key itself")
    if "base_url" in m and not re.match(r"^https?://[^/\s]+", m["base_url"]):
        raise ConfigError(f"model {key!r}: base_url must be an http(s) URL, got {m['base_url']!r}")
    if backend == "openai_compatible" and "base_url" not in m:
        raise ConfigError(f"model {key!r}: the openai_compatible backend needs base_url "
                          f"(e.g. \"http://localhost:8000/v1\" for a vLLM server)")
    if "api_version" in m and backend not in ("anthropic", "gemini"):
        raise ConfigError(f"model {key!r}: api_version applies to anthropic and gemini only")
    if "top_logprobs" in m:
        k = m["top_logprobs"]
        if backend == "anthropic":
            raise ConfigError(f"model {key!r}: the Anthropic Messages API returns no log-probs; remove top_logprobs")
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= 20:
            raise ConfigError(f"model {key!r}: top_logprobs must be an integer in 0..20, got {k!r}")
    _int(m, "max_concurrency", 4, lo=1)
    _int(m, "max_retries", 5, lo=0)
    _number(m, "timeout_s", 0, strict=True)
    _number(m, "price_in_per_mtok", 0)
    _number(m, "price_out_per_mtok", 0)
    _number(m, "price_cached_in_per_mtok", 0)
    if "omit_params" in m:
        from sago_engine.backends.api_common import OMITTABLE_PARAMS

        op = m["omit_params"]
        if not isinstance(op, list) or any(p not in OMITTABLE_PARAMS for p in op):
            raise ConfigError(f"model {key!r}: omit_params must be a list of {', '.join(OMITTABLE_PARAMS)}, got {op!r}")
        m["omit_params"] = tuple(sorted(set(op)))
    if "thinking_budget" in m:
        if backend not in ("gemini", "anthropic"):
            raise ConfigError(f"model {key!r}: thinking_budget applies to gemini and anthropic "
                              f"(openai: reasoning_effort)")
        _int(m, "thinking_budget", 0, lo=0)
    if "reasoning_effort" in m and (backend not in ("openai", "openai_compatible")
                                    or not isinstance(m["reasoning_effort"], str)):
        raise ConfigError(f"model {key!r}: reasoning_effort is a string for openai / openai_compatible only")
    if ("price_in_per_mtok" in m) != ("price_out_per_mtok" in m):
        raise ConfigError(f"model {key!r}: give both price_in_per_mtok and price_out_per_mtok (USD per million "
                          f"tokens), or neither (cost then stays unknown)")
    return ModelConfig(**m)


def _check_hybrid(m: dict, base: Path) -> ModelConfig:
    """Validate a ``backend = "hybrid"`` table: its local part as an hf_local model, its server
    part as an openai_compatible one (``base_url`` required), plus ``HYBRID_FIELDS``."""
    key = m["key"]
    allowed = ("key", "backend", "base_repeats", "label", "max_new_tokens", *LOCAL_FIELDS, *HYBRID_SERVER_FIELDS,
               *HYBRID_FIELDS)
    bad = [k for k in m if k not in allowed]
    if bad:
        raise ConfigError(f"model {key!r}: {', '.join(bad)} do not apply to the hybrid backend (it takes "
                          f"{', '.join(a for a in allowed if a not in ('key', 'backend'))})")
    if "base_url" not in m:
        raise ConfigError(f"model {key!r}: the hybrid backend needs base_url (the server, e.g. "
                          f"\"http://localhost:8000/v1\" for vLLM)")
    sm = m.get("server_model", key)
    if not isinstance(sm, str) or not sm.strip():
        raise ConfigError(f"model {key!r}: server_model must be a non-empty string, got {sm!r}")
    _number(m, "logprob_tol", 0, strict=True)
    if "server_extra_body" in m and not isinstance(m["server_extra_body"], dict):
        raise ConfigError(f"model {key!r}: server_extra_body must be a table, got {m['server_extra_body']!r}")
    _check_model({k: m[k] for k in ("key", *LOCAL_FIELDS) if k in m}, base)  # the local copy
    _check_model({"key": sm, "backend": "openai_compatible", **{k: m[k] for k in HYBRID_SERVER_FIELDS if k in m}},
                 base)  # the server
    return ModelConfig(**m)


def missing_api_keys(models, environ=None) -> list[str]:
    """Environment variables the API models need but that are unset, one entry per variable.

    Returns:
        e.g. ``["OPENAI_API_KEY (gpt-5.4)", "GEMINI_API_KEY (or GOOGLE_API_KEY) (gemini-2.5-flash)"]``;
        ``[]`` when every key is present (an openai_compatible server at a local base_url needs none).
    """
    from sago_engine.backends.api_common import missing_key_vars

    need: dict[str, list[str]] = {}
    for m in models:
        if m.is_api or m.backend == "hybrid":  # hybrid: its server's key, as openai_compatible
            be = "openai_compatible" if m.backend == "hybrid" else m.backend
            for var in missing_key_vars(be, m.api_key_env, m.base_url, environ):
                need.setdefault(var, []).append(m.key)
    return [f"{var} ({', '.join(keys)})" for var, keys in need.items()]


def llm_key_holders(*sections: tuple[str, dict | None]) -> list:
    """``[judge]`` / ``[rewriter]`` sections as key holders for ``check_api_keys`` (an API judge
    needs its key as much as an API model does). ``sections``: ``(name, validated section|None)``."""
    from types import SimpleNamespace

    return [SimpleNamespace(key=f"[{name}] {sec['model']}", backend=sec["backend"], is_api=sec["backend"] != "hf_local",
                            api_key_env=sec["kwargs"].get("api_key_env"), base_url=sec["kwargs"].get("base_url"))
            for name, sec in sections if sec is not None]


def run_key_holders(cfg: "RunConfig", only_models=None) -> list:
    """What a run of ``cfg`` needs keys for: its models (or those in ``only_models``) and an
    API ``[judge]`` / ``[rewriter]`` (``llm_key_holders``)."""
    return ([m for m in cfg.models if not only_models or m.key in only_models or m.name in only_models]
            + llm_key_holders(("judge", cfg.judge), ("rewriter", cfg.rewriter)))


def check_run_keys(cfg: "RunConfig", only_models=None, environ=None) -> None:
    """``check_api_keys`` over ``run_key_holders(cfg, only_models)``: call before any work."""
    check_api_keys(run_key_holders(cfg, only_models), environ)


def check_api_keys(models, environ=None) -> None:
    """Raise ConfigError listing every missing API key variable (call before any work).

    ``models``: ModelConfigs and/or ``llm_key_holders`` entries.

    Raises:
        ConfigError: "missing API keys: set OPENAI_API_KEY (gpt-5.4), ... in the environment".
    """
    missing = missing_api_keys(models, environ)
    if missing:
        raise ConfigError("missing API keys: " + "; ".join(
            m if m.startswith("api_key_env") else f"set {m} in the environment" for m in missing)
            + " (keys are read from environment variables only, never from the config)")


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines a precompute run (recorded with every run)."""

    store: str
    """Path of the DuckDB store to write."""
    seed: int
    """Run seed; every variant's seed is derived from it by hashing."""
    max_new_tokens: int
    """Greedy decoding budget per response."""
    data_dir: str
    """Folder with <dataset>.jsonl files."""
    datasets: tuple[str, ...]
    """Datasets to use (SAGO §Datasets)."""
    n_prompts: int
    """Prompts per dataset (the first n in file order; files are pre-shuffled)."""
    families: tuple[str, ...]
    """Variant families."""
    per_family: dict[str, int] | None
    """Sampled grid: specs per family per prompt; None = the full grid."""
    filter: dict[str, Any] | None
    """Semantic filter settings (threshold, scale, level); None = no filter
    (``[semantic_filter] enabled = false``: every variant kept, as the SAGO authors' code)."""
    normalizers: dict[str, float]
    """R_X per axis."""
    models: tuple[ModelConfig, ...]
    """Models to run."""
    grid_filter: dict[str, tuple] = field(default_factory=dict)
    """Optional restriction of the grid: ``subtypes``, ``strengths``, ``positions`` → allowed values."""
    chunk_prompts: int = 4
    """Prompts per committed unit batch (a kill loses at most this much work)."""
    judge: dict[str, Any] | None = None
    """``[judge]``: LLM judge for social-register Δ-MR (``llm_section`` shape), None = the
    offline heuristic only. Enters the run id."""
    rewriter: dict[str, Any] | None = None
    """``[rewriter]``: LLM rewriter for structural variants (``llm_section`` shape), None = the
    offline rules. Its generator id enters the variant ids (hence the run id)."""
    axis_options: tuple[str, ...] = ()
    """``run.axis_options``: option axes stored besides the six (``types.ALL_OPTION_AXES`` names;
    docs/METHOD.md "Axis options"). ``load_config`` defaults to ``types.OPTION_AXES`` (the
    base-reply and authors' Δ-MR options are opt-in); ``[]`` = none.
    The ``cos@…`` ones need activations, so API-only runs store none of them. Not part of the
    run id (the six axes' numbers do not depend on it); recorded in the run's ``config``."""
    raw: dict[str, Any] = field(default_factory=dict, compare=False)
    """The TOML as read (stored with the run)."""

    def max_new_tokens_for(self, m: ModelConfig) -> int:
        """The reply cap of model ``m`` in tokens: its own ``max_new_tokens``, else ``[run]``'s."""
        return m.max_new_tokens if m.max_new_tokens is not None else self.max_new_tokens


def _int(section: dict, key: str, default: int, lo: int) -> int:
    """An integer setting ≥ ``lo``; raises ConfigError naming the key otherwise."""
    v = section.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ConfigError(f"{key} must be an integer ≥ {lo}, got {v!r}")
    return v


_TOP = {"run", "data", "variants", "semantic_filter", "normalizers", "models", "judge", "rewriter"}

#: Keys of ``[judge]`` / ``[rewriter]`` that are not passed to the backend's constructor.
_LLM_OWN_KEYS = ("backend", "model", "max_new_tokens")


def llm_section(raw: dict, name: str, default_max_new_tokens: int, base: Path) -> dict[str, Any] | None:
    """Validate an optional ``[judge]`` / ``[rewriter]`` section: an LLM used by the runner.

    Keys: ``backend`` (a registered backend name, default ``"hf_local"``), ``model`` (required;
    for hf_local a zoo key, ``tiny-random`` or a local model folder), ``max_new_tokens``
    (integer ≥ 1), and any further keys, passed through to the backend's constructor
    (hf_local: ``dtype``, ``device``, ``batch_size``, ``seed``); their values must be strings,
    numbers or booleans.

    Returns:
        None when the section is absent, else ``{"backend", "model", "max_new_tokens",
        "kwargs"}`` (``kwargs``: the passthrough keys, sorted).
    Raises:
        ConfigError: not a table, unknown backend or model, a missing model, bad values.
    """
    from sago_engine.backends.base import BACKENDS
    from sago_engine.models import ZOO

    if name not in raw:
        return None
    sec = raw[name]
    if not isinstance(sec, dict):
        raise ConfigError(f"[{name}] must be a table of settings, got {type(sec).__name__}")
    backend = sec.get("backend", "hf_local")
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise _unknown(f"[{name}] backend", backend, sorted(BACKENDS))
    if backend == "hybrid":
        raise ConfigError(f"[{name}] needs text only: use backend = \"openai_compatible\" for a model on a server")
    model = sec.get("model")
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"[{name}] needs model = \"...\" (a model key"
                          f"{', e.g. one of ' + ', '.join([*ZOO, 'tiny-random']) if backend == 'hf_local' else ''})")
    try:
        mnt = _int(sec, "max_new_tokens", default_max_new_tokens, lo=1)
    except ConfigError as e:
        raise ConfigError(f"[{name}] {e}") from None
    kwargs = {k: v for k, v in sorted(sec.items()) if k not in _LLM_OWN_KEYS}
    for k, v in kwargs.items():
        if not isinstance(v, (str, int, float, bool)):
            raise ConfigError(f"[{name}] {k} must be a string, number or boolean, got {type(v).__name__}")
    if backend == "hf_local":
        allowed = ("dtype", "device", "batch_size", "seed")
        for k in kwargs:
            if k not in allowed:
                raise _unknown(f"[{name}] key", k, [*_LLM_OWN_KEYS, *allowed])
        try:  # the same checks as an hf_local [[models]] entry (model, dtype, device, batch_size)
            _check_model({"key": model, "backend": backend, **{k: v for k, v in kwargs.items() if k != "seed"}}, base)
            if "seed" in kwargs:
                _int(kwargs, "seed", 0, lo=0)
        except ConfigError as e:
            raise ConfigError(f"[{name}] {e}") from None
    else:  # an API backend: the same keys and checks as an API [[models]] entry
        for k in kwargs:
            if k not in API_FIELDS:
                raise _unknown(f"[{name}] key", k, [*_LLM_OWN_KEYS, *API_FIELDS])
        try:
            _check_model({"key": model, "backend": backend, **kwargs}, base)
        except ConfigError as e:
            raise ConfigError(f"[{name}] {e}") from None
    return {"backend": backend, "model": model, "max_new_tokens": mnt, "kwargs": kwargs}


def llm_backend_spec(section: dict[str, Any]) -> dict[str, Any]:
    """The ``get_backend`` spec of a validated ``[judge]`` / ``[rewriter]`` section."""
    return {"backend": section["backend"], "model": section["model"], **section["kwargs"]}


def load_config(path: str | Path, base_dir: str | Path | None = None, check_keys: bool = True,
                check_devices: bool = True) -> RunConfig:
    """Read and validate a TOML config. Relative paths resolve against ``base_dir`` (default: cwd).

    Nothing is loaded or contacted: API backends are checked by name and settings only.

    Args:
        check_keys: also require the API keys of every API model in the environment
            (``check_api_keys``); the CLI passes False and checks only the models it will run.
        check_devices: check each local model's (dtype, device) against this machine
            (``sago_engine.models.check_device``); False checks only the names, for a launcher
            whose models run on other machines (``--ray``), where each model load checks them.
    Raises:
        FileNotFoundError: no such file.
        ConfigError: unknown sections, keys, datasets, families, models, backends, dtypes, bad
            values — with the valid choices listed (``[judge]`` / ``[rewriter]``: see
            ``llm_section``) — or missing API key variables (all listed).
    """
    token = _CHECK_DEVICES_HERE.set(check_devices)
    try:
        return _load_config(path, base_dir, check_keys)
    finally:
        _CHECK_DEVICES_HERE.reset(token)


def _load_config(path: str | Path, base_dir: str | Path | None, check_keys: bool) -> RunConfig:
    from sago_engine.models import ZOO
    from sago_engine.variants import list_families

    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not a UTF-8 text file ({e.reason})") from e
    except IsADirectoryError:
        raise ConfigError(f"{path} is a directory, not a TOML config file") from None
    for k in raw:
        if k not in _TOP:
            raise _unknown("config section", k, sorted(_TOP))
    for k in ("run", "data", "variants", "semantic_filter", "normalizers"):
        if k in raw and not isinstance(raw[k], dict):
            raise ConfigError(f"[{k}] must be a table of settings, got {type(raw[k]).__name__}")
    if "models" in raw and not (isinstance(raw["models"], list) and all(isinstance(m, dict) for m in raw["models"])):
        raise ConfigError("models must be given as [[models]] tables")
    run, data, var = raw.get("run", {}), raw.get("data", {}), raw.get("variants", {})
    _int(run, "seed", 0, lo=0)
    _int(run, "max_new_tokens", DEFAULT_MAX_NEW_TOKENS, lo=1)
    _int(run, "chunk_prompts", 4, lo=1)
    _int(data, "n_prompts", 16, lo=1)
    for sec, allowed in ((run, {"store", "seed", "max_new_tokens", "chunk_prompts", "axis_options"}),
                         (data, {"dir", "datasets", "n_prompts"}),
                         (var, {"families", "per_family", "subtypes", "strengths", "positions"})):
        for k in sec:
            if k not in allowed:
                raise _unknown("key", k, sorted(allowed))
    base = Path(base_dir) if base_dir else Path.cwd()
    datasets = tuple(data.get("datasets", DATASETS))
    data_dir = str((base / data.get("dir", "data/datasets")))
    for d in datasets:
        if not (Path(data_dir) / f"{d}.jsonl").exists():
            raise _unknown("dataset", d, [p.stem for p in sorted(Path(data_dir).glob("*.jsonl"))] or DATASETS)
    fams = tuple(var.get("families", list_families()))
    for f in fams:
        if f not in list_families():
            raise _unknown("variant family", f, list_families())
    from sago_engine.variants import full_grid

    cells = full_grid(fams)
    grid_filter: dict[str, tuple] = {}
    for key, attr in (("subtypes", "subtype"), ("strengths", "strength"), ("positions", "position")):
        if key in var:
            valid = sorted({getattr(c, attr) for c in cells}, key=lambda x: (str(type(x)), x))
            for val in var[key]:
                if val not in valid:
                    raise _unknown(key[:-1] if key != "strengths" else "strength", val, valid)
            grid_filter[key] = tuple(var[key])
    if grid_filter and not any(all(getattr(c, a) in grid_filter.get(k, (getattr(c, a),))
                                   for k, a in (("subtypes", "subtype"), ("strengths", "strength"), ("positions", "position")))
                               for c in cells):
        raise ConfigError(f"variants: no (family, subtype, strength, position) cell matches {grid_filter}")
    per_family = var.get("per_family")
    if per_family is not None:
        for f, k in per_family.items():
            if f not in fams:
                raise _unknown("family in per_family", f, fams)
            if not isinstance(k, int) or k < 1:
                raise ConfigError(f"per_family.{f} must be a positive integer, got {k!r}")
    filt = {"threshold": 0.85, "scale": "roberta-large", "level": "prompt", **raw.get("semantic_filter", {})}
    for k in filt:
        if k not in ("threshold", "scale", "level", "enabled"):
            raise _unknown("semantic_filter key", k, ["threshold", "scale", "level", "enabled"])
    enabled = filt.pop("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigError(f"semantic_filter.enabled must be true or false, got {enabled!r}")
    try:
        normalizers = resolve_normalizers(raw.get("normalizers"))
    except ValueError as e:
        raise ConfigError(str(e)) from e
    models = []
    for m in raw.get("models", []):
        for k in m:
            if k not in ModelConfig.__dataclass_fields__:
                raise _unknown("model key", k, list(ModelConfig.__dataclass_fields__))
        if "key" not in m:
            raise ConfigError(f"a [[models]] entry has no key; give key = one of {', '.join([*ZOO, 'tiny-random'])} "
                              f"(hf_local) or the provider's model name (API backends)")
        models.append(_check_model(m, base))
    if not models:
        raise ConfigError(f"{path}: no [[models]] given")
    names = [m.name for m in models]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:  # pages group runs by runs.model: two runs under one name would be pooled
        raise ConfigError(f"{path}: several [[models]] entries are named {', '.join(map(repr, dup))}; give each "
                          f"run of the same model a distinct label (e.g. label = \"{dup[0]}·cap128\")")
    from sago_engine.judge import JUDGE_MAX_NEW_TOKENS
    from sago_engine.variants.llm_rewriter import REWRITER_MAX_NEW_TOKENS

    judge = llm_section(raw, "judge", JUDGE_MAX_NEW_TOKENS, base)
    rewriter = llm_section(raw, "rewriter", REWRITER_MAX_NEW_TOKENS, base)
    if rewriter is not None and "structural" not in fams:
        raise ConfigError("[rewriter] rewrites structural variants, but variants.families has no 'structural'")
    if judge is not None and "social_register" not in fams:
        raise ConfigError("[judge] judges social_register variants, but variants.families has no 'social_register'")
    n_prompts = int(data.get("n_prompts", 16))
    if n_prompts < 1:
        raise ConfigError("data.n_prompts must be ≥ 1")
    from sago_engine.types import ALL_OPTION_AXES, OPTION_AXES

    opts = run.get("axis_options", list(OPTION_AXES))
    if not (isinstance(opts, list) and all(isinstance(o, str) for o in opts)):
        raise ConfigError(f"run.axis_options must be a list of option axis names, got {opts!r}")
    for o in opts:
        if o not in ALL_OPTION_AXES:
            raise _unknown("axis option", o, list(ALL_OPTION_AXES))
    store = run.get("store")
    if not store:
        raise ConfigError("run.store is required (path of the DuckDB file to write)")
    cfg = RunConfig(
        store=str(base / store),
        seed=int(run.get("seed", 0)),
        max_new_tokens=int(run.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)),
        data_dir=data_dir,
        datasets=datasets,
        n_prompts=n_prompts,
        families=fams,
        per_family=dict(per_family) if per_family else None,
        grid_filter=grid_filter,
        filter=filt if enabled else None,
        normalizers=normalizers,
        models=tuple(models),
        chunk_prompts=int(run.get("chunk_prompts", 4)),
        judge=judge,
        rewriter=rewriter,
        axis_options=tuple(o for o in ALL_OPTION_AXES if o in opts),
        raw=raw,
    )
    if check_keys:
        check_run_keys(cfg)
    return cfg
