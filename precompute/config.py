"""Run configuration read from TOML into frozen dataclasses, validated before any work starts
(one ``[[models]]`` table: ``model_config``; errors: ``config_errors``)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from precompute.config_errors import ConfigError, int_setting, non_finite, unknown
from precompute.data_config import check_data, config_path
from precompute.model_config import CHECK_DEVICES_HERE, ModelConfig, check_model
from sago_engine.backends.api.keys import missing_key_vars
from sago_engine.backends.base import BACKENDS, settings_for
from sago_engine.scoring.scores import resolve_normalizers
from sago_engine.types import DEFAULT_MAX_NEW_TOKENS


def missing_api_keys(models, environ=None) -> list[str]:
    """Environment variables the API models need but that are unset, one entry per variable.

    Returns:
        e.g. ``["OPENAI_API_KEY (gpt-5.4)", "GEMINI_API_KEY (or GOOGLE_API_KEY) (gemini-2.5-flash)"]``;
        ``[]`` when every key is present (an openai_compatible server at a local base_url needs none).
    """
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


def run_key_holders(cfg: RunConfig, only_models=None) -> list:
    """What a run of ``cfg`` needs keys for: its models (or those in ``only_models``) and an
    API ``[judge]`` / ``[rewriter]`` (``llm_key_holders``)."""
    return ([m for m in cfg.models if not only_models or m.key in only_models or m.name in only_models]
            + llm_key_holders(("judge", cfg.judge), ("rewriter", cfg.rewriter)))


def check_run_keys(cfg: RunConfig, only_models=None, environ=None) -> None:
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
    """Datasets to use from ``data_dir`` (SAGO §Datasets; none by default when ``sources`` are given)."""
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
    """``run.axis_options``: option axes stored besides the six (``axis_spec.OPTION_AXIS_SPECS`` names;
    docs/METHOD.md "Axis options"). ``load_config`` defaults to ``types.OPTION_AXES`` (the
    base-reply and authors' Δ-MR options are opt-in); ``[]`` = none.
    The ``cos@…`` ones need activations, so API-only runs store none of them. Not part of the
    run id (the six axes' numbers do not depend on it); recorded in the run's ``config``."""
    sources: tuple[dict[str, Any], ...] = ()
    """``[[data.sources]]``: prompt files, Hugging Face datasets, Inspect tasks with their field
    mapping (``precompute.data_config.check_source``; read by ``sago_engine.sources.load_source``)."""
    raw: dict[str, Any] = field(default_factory=dict, compare=False)
    """The TOML as read (stored with the run)."""

    def max_new_tokens_for(self, m: ModelConfig) -> int:
        """The reply cap of model ``m`` in tokens: its own ``max_new_tokens``, else ``[run]``'s."""
        return m.max_new_tokens if m.max_new_tokens is not None else self.max_new_tokens


#: The sections of a config file.
SECTIONS: tuple[str, ...] = ("run", "data", "variants", "semantic_filter", "normalizers", "models", "judge", "rewriter")

#: The keys of the plain sections (``[normalizers]``: the axis names; ``[[models]]``: ``ModelConfig``;
#: ``[judge]`` / ``[rewriter]``: ``LLM_OWN_KEYS`` and their backend's keys).
SECTION_KEYS: dict[str, tuple[str, ...]] = {
    "run": ("store", "seed", "max_new_tokens", "chunk_prompts", "axis_options"),
    "data": ("dir", "datasets", "n_prompts", "sources", "correctness"),
    "variants": ("families", "per_family", "subtypes", "strengths", "positions"),
    "semantic_filter": ("threshold", "scale", "level", "score", "enabled"),
}

#: Keys of ``[judge]`` / ``[rewriter]`` that are not passed to the backend's constructor.
LLM_OWN_KEYS: tuple[str, ...] = ("backend", "model", "max_new_tokens")
#: The further keys a ``[judge]`` / ``[rewriter]`` on ``hf_local`` takes (an API backend: its settings' keys).
LLM_LOCAL_KEYS: tuple[str, ...] = ("dtype", "device", "batch_size", "seed")


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
    from sago_engine.models import ZOO

    if name not in raw:
        return None
    sec = raw[name]
    if not isinstance(sec, dict):
        raise ConfigError(f"[{name}] must be a table of settings, got {type(sec).__name__}")
    backend = sec.get("backend", "hf_local")
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise unknown(f"[{name}] backend", backend, sorted(BACKENDS))
    if backend == "hybrid":
        raise ConfigError(f"[{name}] needs text only: use backend = \"openai_compatible\" for a model on a server")
    model = sec.get("model")
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"[{name}] needs model = \"...\" (a model key"
                          f"{', e.g. one of ' + ', '.join([*ZOO, 'tiny-random']) if backend == 'hf_local' else ''})")
    try:
        mnt = int_setting(sec, "max_new_tokens", default_max_new_tokens, lo=1)
    except ConfigError as e:
        raise ConfigError(f"[{name}] {e}") from None
    kwargs = {k: v for k, v in sorted(sec.items()) if k not in LLM_OWN_KEYS}
    for k, v in kwargs.items():
        if not isinstance(v, (str, int, float, bool)):
            raise ConfigError(f"[{name}] {k} must be a string, number or boolean, got {type(v).__name__}")
    if backend == "hf_local":
        allowed = LLM_LOCAL_KEYS
        for k in kwargs:
            if k not in allowed:
                raise unknown(f"[{name}] key", k, [*LLM_OWN_KEYS, *allowed])
        try:  # the same checks as an hf_local [[models]] entry (model, dtype, device, batch_size)
            check_model({"key": model, "backend": backend, **{k: v for k, v in kwargs.items() if k != "seed"}}, base)
            if "seed" in kwargs:
                int_setting(kwargs, "seed", 0, lo=0)
        except ConfigError as e:
            raise ConfigError(f"[{name}] {e}") from None
    else:  # an API backend: the same keys and checks as its [[models]] entry
        api_keys = settings_for(backend).keys()
        for k in kwargs:
            if k not in api_keys:
                raise unknown(f"[{name}] key", k, [*LLM_OWN_KEYS, *api_keys])
        try:
            check_model({"key": model, "backend": backend, **kwargs}, base)
        except ConfigError as e:
            raise ConfigError(f"[{name}] {e}") from None
    return {"backend": backend, "model": model, "max_new_tokens": mnt, "kwargs": kwargs}


def llm_backend_spec(section: dict[str, Any]) -> dict[str, Any]:
    """The ``get_backend`` spec of a validated ``[judge]`` / ``[rewriter]`` section."""
    return {"backend": section["backend"], "model": section["model"], **section["kwargs"]}


def correctness_scorers(table: Any, datasets: tuple[str, ...]) -> dict[str, str]:
    """Validate ``[data] correctness``: a table dataset → correctness scorer (``sago_engine.correctness.scorers``).

    Returns:
        The declarations as a dict (the run records them in its config; ``rescore --correctness`` reads them).
    Raises:
        ConfigError: not a table, a dataset not in ``datasets``, or an unknown scorer (valid ones listed).
    """
    from sago_engine.correctness.scorers import SCORER_NAMES

    if not isinstance(table, dict):
        raise ConfigError(f"data.correctness must be a table of dataset = \"scorer\", got {table!r}")
    for d, name in table.items():
        if d not in datasets:
            raise unknown("data.correctness dataset", d, list(datasets))
        if name not in SCORER_NAMES:
            raise unknown(f"data.correctness scorer for {d}", name, list(SCORER_NAMES))
    return {str(d): str(n) for d, n in table.items()}


def load_config(path: str | Path, base_dir: str | Path | None = None, check_keys: bool = True,
                check_devices: bool = True) -> RunConfig:
    """Read and validate a TOML config. Relative paths in it (``run.store``, ``data.dir``,
    ``[[data.sources]]`` ``path`` / ``hf`` folders / ``inspect`` files) resolve against ``base_dir``,
    by default the folder of the config file itself — so a config works from any working folder
    (docs/CONFIG.md, "Paths").

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
    token = CHECK_DEVICES_HERE.set(check_devices)
    try:
        return _load_config(path, base_dir, check_keys)
    finally:
        CHECK_DEVICES_HERE.reset(token)


def _load_config(path: str | Path, base_dir: str | Path | None, check_keys: bool) -> RunConfig:
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
    bad = non_finite(raw)
    if bad:  # TOML has nan and inf: no setting of sago takes them
        raise ConfigError(f"{path}: {bad[0]} = {bad[1]!r}: every number in a config must be finite "
                          "(TOML's nan and inf are refused)")
    for k in raw:
        if k not in SECTIONS:
            raise unknown("config section", k, sorted(SECTIONS))
    for k in ("run", "data", "variants", "semantic_filter", "normalizers"):
        if k in raw and not isinstance(raw[k], dict):
            raise ConfigError(f"[{k}] must be a table of settings, got {type(raw[k]).__name__}")
    if "models" in raw and not (isinstance(raw["models"], list) and all(isinstance(m, dict) for m in raw["models"])):
        raise ConfigError("models must be given as [[models]] tables")
    run, data, var = raw.get("run", {}), raw.get("data", {}), raw.get("variants", {})
    int_setting(run, "seed", 0, lo=0)
    int_setting(run, "max_new_tokens", DEFAULT_MAX_NEW_TOKENS, lo=1)
    int_setting(run, "chunk_prompts", 4, lo=1)
    int_setting(data, "n_prompts", 16, lo=1)
    for sec, allowed in ((run, SECTION_KEYS["run"]), (data, SECTION_KEYS["data"]), (var, SECTION_KEYS["variants"])):
        for k in sec:
            if k not in allowed:
                raise unknown("key", k, sorted(allowed))
    base = Path(base_dir) if base_dir else path.resolve().parent
    data_dir, datasets, sources = check_data(data, base)
    correctness_scorers(data.get("correctness", {}), (*datasets, *(s["name"] for s in sources)))
    fams = tuple(var.get("families", list_families()))
    for f in fams:
        if f not in list_families():
            raise unknown("variant family", f, list_families())
    from sago_engine.variants import full_grid

    cells = full_grid(fams)
    grid_filter: dict[str, tuple] = {}
    for key, attr in (("subtypes", "subtype"), ("strengths", "strength"), ("positions", "position")):
        if key in var:
            valid = sorted({getattr(c, attr) for c in cells}, key=lambda x: (str(type(x)), x))
            for val in var[key]:
                if val not in valid:
                    raise unknown(key[:-1] if key != "strengths" else "strength", val, valid)
            grid_filter[key] = tuple(var[key])
    if grid_filter and not any(all(getattr(c, a) in grid_filter.get(k, (getattr(c, a),))
                                   for k, a in (("subtypes", "subtype"), ("strengths", "strength"), ("positions", "position")))
                               for c in cells):
        raise ConfigError(f"variants: no (family, subtype, strength, position) cell matches {grid_filter}")
    per_family = var.get("per_family")
    if per_family is not None:
        for f, k in per_family.items():
            if f not in fams:
                raise unknown("family in per_family", f, fams)
            if not isinstance(k, int) or k < 1:
                raise ConfigError(f"per_family.{f} must be a positive integer, got {k!r}")
    filt = {"threshold": 0.85, "scale": "roberta-large", "level": "prompt", **raw.get("semantic_filter", {})}
    for k in filt:
        if k not in SECTION_KEYS["semantic_filter"]:
            raise unknown("semantic_filter key", k, list(SECTION_KEYS["semantic_filter"]))
    enabled = filt.pop("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigError(f"semantic_filter.enabled must be true or false, got {enabled!r}")
    try:  # the filter's own checks (threshold range, scale, level, score), with the config's key names
        from sago_engine.variants.semantic_filter import FilterConfig

        FilterConfig(**filt)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"[semantic_filter]: {e}") from e
    try:
        normalizers = resolve_normalizers(raw.get("normalizers"))
    except ValueError as e:
        raise ConfigError(str(e)) from e
    models = []
    for m in raw.get("models", []):
        models.append(check_model(m, base))
    if not models:
        raise ConfigError(f"{path}: no [[models]] given")
    names = [m.name for m in models]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:  # pages group runs by runs.model: two runs under one name would be pooled
        raise ConfigError(f"{path}: several [[models]] entries are named {', '.join(map(repr, dup))}; give each "
                          f"run of the same model a distinct label (e.g. label = \"{dup[0]}·cap128\")")
    from sago_engine.measure.judge import JUDGE_MAX_NEW_TOKENS
    from sago_engine.variants.rewriting.llm_rewriter import REWRITER_MAX_NEW_TOKENS

    judge = llm_section(raw, "judge", JUDGE_MAX_NEW_TOKENS, base)
    rewriter = llm_section(raw, "rewriter", REWRITER_MAX_NEW_TOKENS, base)
    if rewriter is not None and "structural" not in fams:
        raise ConfigError("[rewriter] rewrites structural variants, but variants.families has no 'structural'")
    if judge is not None and "social_register" not in fams:
        raise ConfigError("[judge] judges social_register variants, but variants.families has no 'social_register'")
    n_prompts = int(data.get("n_prompts", 16))
    if n_prompts < 1:
        raise ConfigError("data.n_prompts must be ≥ 1")
    from sago_engine.axis_spec import OPTION_AXIS_SPECS
    from sago_engine.types import OPTION_AXES

    opts = run.get("axis_options", list(OPTION_AXES))
    if not (isinstance(opts, list) and all(isinstance(o, str) for o in opts)):
        raise ConfigError(f"run.axis_options must be a list of option axis names, got {opts!r}")
    for o in opts:
        if o not in OPTION_AXIS_SPECS:
            raise unknown("axis option", o, list(OPTION_AXIS_SPECS.names()))
    store = run.get("store")
    if not store:
        raise ConfigError("run.store is required (path of the DuckDB file to write)")
    cfg = RunConfig(
        store=str(config_path(base, store)),
        seed=int(run.get("seed", 0)),
        max_new_tokens=int(run.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)),
        data_dir=data_dir,
        datasets=datasets,
        sources=sources,
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
        axis_options=tuple(o for o in OPTION_AXIS_SPECS.names() if o in opts),
        raw=raw,
    )
    if check_keys:
        check_run_keys(cfg)
    return cfg
