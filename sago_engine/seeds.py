"""Deterministic seeds and keys derived by hashing (never Python's salted ``hash()``)."""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any


def _canonical(part: Any) -> str:
    if isinstance(part, str):
        return part
    return json.dumps(part, sort_keys=True, separators=(",", ":"), default=str)


def stable_hash(*parts: Any, length: int = 16) -> str:
    """Hex digest (``length`` chars, 1..64) of the sha256 of the parts, joined canonically.

    Strings are used as they are; anything else is JSON-encoded with sorted keys, so dicts
    and dataclass-like records hash the same on every machine and Python version.
    """
    if not 1 <= length <= 64:
        raise ValueError(f"length must be in 1..64, got {length}")
    h = hashlib.sha256()
    for p in parts:
        b = _canonical(p).encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(8, "big"))
        h.update(b)
    return h.hexdigest()[:length]


def derive_seed(*parts: Any) -> int:
    """A 63-bit non-negative integer seed derived from the parts by sha256 (see ``stable_hash``)."""
    return int(stable_hash(*parts, length=16), 16) & ((1 << 63) - 1)


def make_rng(*parts: Any) -> random.Random:
    """A private ``random.Random`` seeded by ``derive_seed(*parts)``; never the module-level one."""
    return random.Random(derive_seed(*parts))


def template_id(text: str) -> str:
    """A prompt template's id (LLM judge / rewriter): ``stable_hash(text, length=12)``; same text → same id."""
    return stable_hash(text, length=12)


#: How ``sample_seed`` derives a sampled reply's seed (recorded in ``runs.decoding["sampling"]``).
SAMPLE_SEED_RULE = "sha256(run seed, prompt_id, variant_id or '<base>', sample index) -> 63-bit int"


def sample_seed(run_seed: int, prompt_id: str, variant_id: str | None, sample: int) -> int:
    """The seed of sample ``sample`` (0-based) of a reply to the base prompt (``variant_id`` None)
    or a variant, in a run with seed ``run_seed``: ``derive_seed`` of those four (``SAMPLE_SEED_RULE``),
    so a sampled reply depends on nothing else (not batch, chunk or order). A 63-bit integer ≥ 0."""
    return derive_seed("sample", int(run_seed), prompt_id, variant_id or "<base>", int(sample))


def repeat_seed(run_seed: int, prompt_id: str, repeat: int) -> int:
    """The seed of base repeat ``repeat`` (≥ 1, the noise floor) of a sampled run: ``derive_seed``
    of ("repeat", run seed, prompt_id, repeat), apart from every ``sample_seed``."""
    return derive_seed("repeat", int(run_seed), prompt_id, int(repeat))
