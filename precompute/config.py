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
    raw: dict[str, Any] = field(default_factory=dict, compare=False)
    """The TOML as read (stored with the run)."""


def _int(section: dict, key: str, default: int, lo: int) -> int:
    """An integer setting ≥ ``lo``; raises ConfigError naming the key otherwise."""
    v = section.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ConfigError(f"{key} must be an integer ≥ {lo}, got {v!r}")
    return v


_TOP = {"run", "data", "variants", "semantic_filter", "normalizers", "models"}


def load_config(path: str | Path, base_dir: str | Path | None = None) -> RunConfig:
    """Read and validate a TOML config. Relative paths resolve against ``base_dir`` (default: cwd).

    Raises:
        FileNotFoundError: no such file.
        ConfigError: unknown sections, keys, datasets, families, models, dtypes, or bad values
            — with the valid choices listed.
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
        raw=raw,
    )
