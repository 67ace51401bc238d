"""The local transformers backend (``HFLocalBackend``), one module per concept.

``backend``          the class: loading, the run record, prompt encoding, ``generate`` / ``teacher_force``
``generation``       one decoding batch: the batched greedy loop, finished rows leaving the batch
``prefill``          before the first decoding step: a shared prefix once, own tokens in length buckets
``kvcache``          a KV cache layer written in place (no copy of the cache per step)
``statistics``       token log-probs / entropies per step, hidden states at the user's text
``teacher``          teacher forcing over given reply tokens
``prompt_render``    a prompt → the model's input ids (chat template, the user's text as text, its span)
``template_clock``   the pinned date every chat template render sees
``prompt_side``      tokenizer, template and context of a local model without its weights
``settings``         its ``[[models]]`` keys (``LocalSettings``), torch-free

The CPU threads and linear kernels are ``sago_engine.runtime.kernels`` (the zoo's loader uses them too).
"""

import importlib
from typing import Any

# Lazy (PEP 562): the config and replay import this package's torch-free modules (prompt_render,
# template_clock) without loading torch; each name below imports its module on first use.
_EXPORTS = {
    "HFLocalBackend": ".backend",
    "set_threads": "...runtime.kernels",
    "token_stats": ".statistics",
    "neutral_generation_config": ".generation",
    "NEUTRAL_DECODING": ".generation",
    "attention_window": ".prefill",
    "template_kwargs": ".prompt_render",
    "THINKING_SWITCHES": ".prompt_render",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
