"""A model key → its description: a zoo key, a local model folder, or a Hub id cached locally."""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

from .entries import TINY_RANDOM, TINY_RANDOM_KEY, ZOO, LocalModel, ModelEntry, ModelUnavailableError, valid_keys

__all__ = ["is_hub_id", "hub_snapshot", "resolve_model"]


def is_hub_id(key: str) -> bool:
    """True for a Hugging Face Hub model id of the form ``org/name`` (e.g. ``Qwen/Qwen2.5-7B-Instruct``)."""
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
    from huggingface_hub import snapshot_download  # lazy: resolving a zoo key or a folder needs no hub client

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
