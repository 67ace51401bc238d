"""The prompt side of a local model without its weights: the tokenizer, chat template and context length.

``python -m precompute --plan`` lists the prompts whose tokens plus the reply cap exceed a model's
context; that needs each prompt encoded exactly as ``HFLocalBackend`` encodes it
(``PromptRenderer``) and the model's config, but never its weights: the tokenizer comes from
``models.load_tokenizer`` (cached on disk), the config from the dequantized model's cache folder,
the GGUF's metadata or the model folder.
"""

from __future__ import annotations

from typing import Any

from transformers import AutoConfig

from ...models import LocalModel, cache_root, load_tokenizer, resolve_model, tiny_random_config
from ...models.digests import checked_digest
from ...models.gguf import gguf_path, source_files
from ..context import context_length
from .prompt_render import PromptRenderer, chat_template_of, template_kwargs

__all__ = ["load_prompt_side", "load_prompt_side_config", "model_config"]


def model_config(key: str) -> tuple[Any, Any, bool]:
    """``(tokenizer, config, chat)`` of a local model key, weights not loaded.

    Args:
        key: a zoo key, ``"tiny-random"``, a model folder or a cached Hub id (``models.resolve_model``).
    Returns:
        The tokenizer (as ``load_model`` prepares it), a ``transformers.PretrainedConfig`` and
        whether the model is prompted through its chat template.
    Raises:
        ValueError / ModelUnavailableError: as ``models.resolve_model`` / ``models.load_tokenizer``.
    """
    m = resolve_model(key)
    if isinstance(m, LocalModel):
        tok = load_tokenizer(str(m.path))
        chat = m.chat if m.chat is not None else bool(getattr(tok, "chat_template", None))
        return tok, AutoConfig.from_pretrained(m.path), chat
    if m.source == "random":
        tok = load_tokenizer("smollm2-135m-instruct")
        return tok, tiny_random_config(tok), True
    tok = load_tokenizer(m.key)
    sha = checked_digest(m, source_files(m))
    for d in sorted(cache_root().glob(f"{m.key}-{sha[:12]}-*")):
        if (d / "config.json").is_file():
            return tok, AutoConfig.from_pretrained(d), m.chat
    gguf = gguf_path(m)
    return tok, AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name), m.chat


def load_prompt_side(key: str, chat_template_kwargs: dict[str, Any] | None = None,
                     template_date: str | None = None) -> tuple[PromptRenderer, int | None]:
    """The renderer ``HFLocalBackend(key, chat_template_kwargs=..., template_date=...)`` would use, and
    the model's context length (``context.context_length``; None: unknown), without the weights.

    Raises:
        ValueError / ModelUnavailableError: as ``model_config``; ValueError also as ``template_kwargs``
            (variables the template lacks) and for a bad ``template_date``.
    """
    renderer, context, _ = load_prompt_side_config(key, chat_template_kwargs, template_date)
    return renderer, context


def load_prompt_side_config(key: str, chat_template_kwargs: dict[str, Any] | None = None,
                            template_date: str | None = None) -> tuple[PromptRenderer, int | None, Any]:
    """``load_prompt_side``'s renderer and context, and the model's ``transformers`` config (for
    ``--plan``'s memory estimate). Raises as ``load_prompt_side``."""
    tok, config, chat = model_config(key)
    tmpl = chat_template_of(tok, chat, key)
    renderer = PromptRenderer(tok, tmpl, template_kwargs(tmpl, chat_template_kwargs), template_date)
    return renderer, context_length(config), config
