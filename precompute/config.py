"""Run configuration read from TOML into frozen dataclasses, validated before any work starts."""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sago_engine.datasets import DATASETS
from sago_engine.scoring import resolve_normalizers


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
    """A zoo key (sago_engine.models.ZOO), ``tiny-random``, or a local folder with a HF model."""
    backend: str = "hf_local"
    """Backend name (``hf_local``)."""
    dtype: str = "float32"
    """``float32`` or ``bfloat16``."""
    device: str = "auto"
    """``auto`` (GPU when present), ``cpu`` or ``cuda``."""
    batch_size: int = 8
    """Prompts per generate call."""


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
    filter: dict[str, Any]
    """Semantic filter settings (threshold, scale, level)."""
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
    raw: dict[str, Any] = field(default_factory=dict, compare=False)
    """The TOML as read (stored with the run)."""


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
        if model not in ZOO and model != "tiny-random" and not (base / model).is_dir() and not Path(model).is_dir():
            raise _unknown(f"[{name}] model", model, [*ZOO, "tiny-random", "<a local folder with config.json>"])
        if kwargs.get("dtype", "float32") not in ("float32", "bfloat16", "float16"):
            raise _unknown(f"[{name}] dtype", kwargs["dtype"], ["float32", "bfloat16", "float16"])
        dev = str(kwargs.get("device", "auto"))
        if dev not in ("auto", "cpu", "cuda") and not dev.startswith("cuda:"):
            raise _unknown(f"[{name}] device", dev, ["auto", "cpu", "cuda", "cuda:N"])
        for k in ("batch_size", "seed"):
            if k in kwargs:
                try:
                    _int(kwargs, k, 0, lo=1 if k == "batch_size" else 0)
                except ConfigError as e:
                    raise ConfigError(f"[{name}] {e}") from None
    return {"backend": backend, "model": model, "max_new_tokens": mnt, "kwargs": kwargs}


def llm_backend_spec(section: dict[str, Any]) -> dict[str, Any]:
    """The ``get_backend`` spec of a validated ``[judge]`` / ``[rewriter]`` section."""
    return {"backend": section["backend"], "model": section["model"], **section["kwargs"]}


def load_config(path: str | Path, base_dir: str | Path | None = None) -> RunConfig:
    """Read and validate a TOML config. Relative paths resolve against ``base_dir`` (default: cwd).

    Raises:
        FileNotFoundError: no such file.
        ConfigError: unknown sections, keys, datasets, families, models, dtypes, or bad values
            — with the valid choices listed (``[judge]`` / ``[rewriter]``: see ``llm_section``).
    """
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
    _int(run, "max_new_tokens", 48, lo=1)
    _int(run, "chunk_prompts", 4, lo=1)
    _int(data, "n_prompts", 16, lo=1)
    for sec, allowed in ((run, {"store", "seed", "max_new_tokens", "chunk_prompts"}),
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
        if k not in ("threshold", "scale", "level"):
            raise _unknown("semantic_filter key", k, ["threshold", "scale", "level"])
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
            raise ConfigError(f"a [[models]] entry has no key; give key = one of {', '.join([*ZOO, 'tiny-random'])}")
        _int(m, "batch_size", 8, lo=1)
        mc = ModelConfig(**m)
        if mc.device not in ("auto", "cpu", "cuda") and not str(mc.device).startswith("cuda:"):
            raise _unknown("device", mc.device, ["auto", "cpu", "cuda", "cuda:N"])
        if mc.key not in ZOO and mc.key != "tiny-random" and not (base / mc.key).is_dir() and not Path(mc.key).is_dir():
            raise _unknown("model", mc.key, [*ZOO, "tiny-random", "<a local folder with config.json>"])
        if mc.dtype not in ("float32", "bfloat16", "float16"):
            raise _unknown("dtype", mc.dtype, ["float32", "bfloat16", "float16"])
        if mc.backend != "hf_local":
            raise _unknown("backend", mc.backend, ["hf_local"])
        models.append(mc)
    if not models:
        raise ConfigError(f"{path}: no [[models]] given")
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
    store = run.get("store")
    if not store:
        raise ConfigError("run.store is required (path of the DuckDB file to write)")
    return RunConfig(
        store=str(base / store),
        seed=int(run.get("seed", 0)),
        max_new_tokens=int(run.get("max_new_tokens", 48)),
        data_dir=data_dir,
        datasets=datasets,
        n_prompts=n_prompts,
        families=fams,
        per_family=dict(per_family) if per_family else None,
        grid_filter=grid_filter,
        filter=filt,
        normalizers=normalizers,
        models=tuple(models),
        chunk_prompts=int(run.get("chunk_prompts", 4)),
        judge=judge,
        rewriter=rewriter,
        raw=raw,
    )
