"""The ``Backend`` protocol: what every model backend provides, each optional ability declared with its default."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..types import GenerationResult

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Backend", "OPTIONAL_ABILITIES"]


@runtime_checkable
class Backend(Protocol):
    """What every model backend provides (docs/ARCHITECTURE.md; after lm-eval's ``LM`` and HELM's ``Client``).

    A backend answers a batch of prompts in input order, declares which white-box axes it can
    measure (an axis it lacks is stored as unavailable, never 0), and describes itself fully
    for the run record.

    Below the three required members, every optional ability is declared with the default a
    backend without it has (``None``: not available). A backend class subclasses ``Backend``
    to inherit those defaults and overrides what it can do; callers use the members directly,
    never ``getattr`` probes.
    """

    name: str
    """Backend name as used by ``get_backend``, e.g. ``"hf_local"``."""
    model_id: str
    """The model key or path the backend serves."""
    capabilities: frozenset[str]
    """Which white-box axes of {"cos", "prob", "ent"} it can measure. The response-based
    axes (bleu, bert, mr) only need text and are always available."""

    def info(self) -> dict[str, Any]:
        """Everything for the run record: weights hash, dtype, device, versions, decoding."""
        raise NotImplementedError

    def generate(self, prompts: list[str], max_new_tokens: int) -> list[GenerationResult]:
        """Answer each prompt greedily.

        Args:
            prompts: raw user prompts (the backend applies a chat template where the model
                has one).
            max_new_tokens: upper bound on generated tokens per prompt.
        Returns:
            One ``GenerationResult`` per prompt, in input order. A failure of one item is a
            result with ``error`` set (text ``""``), not an exception, where feasible.
        """
        raise NotImplementedError

    def close(self) -> None:
        """Release the model / connections. Idempotent (default: nothing to release)."""
        return None

    # ------------------------------------------------------------ optional abilities (defaults)

    template: str | None = None
    """The chat template text prompts are rendered with (local models; None: none, or not visible)."""
    context_length: int | None = None
    """Tokens of prompt + reply the model's positions cover (None: unknown)."""
    model: Any = None
    """The local torch module (a Live probe's cancel hook sits on its forward; None: no local model)."""
    thread_choice: dict[str, Any] | None = None
    """The CPU thread choice of a local model (``threads.ThreadChoice.record()``; None: not local)."""
    sampling: Any = None
    """How replies are decoded (``hf_local.sampling.SamplingParams``; settable for a Live probe); None: the
    backend decodes greedily only."""

    def encode_prompt(self, prompt: str) -> list[int] | None:
        """The model's input ids of ``prompt`` (chat template rendered and tokenised); None where the
        rendering is not visible (API backends): no model-input no-ops are found then."""
        return None

    def context_error(self, prompt: str, max_new_tokens: int) -> str | None:
        """Why ``prompt`` cannot run with reply cap ``max_new_tokens`` (over the context), or None."""
        return None

    def teacher_force(self, prompts: list[str],
                      responses: list[list[int] | str]) -> list[tuple[np.ndarray, np.ndarray]] | None:
        """Per prompt ``(logprobs, entropies)`` of the given response under teacher forcing; None:
        the backend cannot teacher-force (API backends)."""
        return None

    def take_usage(self) -> dict[str, Any] | None:
        """Usage counters since the last call, then reset (API backends); None: no usage is counted."""
        return None

    def totals(self) -> dict[str, Any] | None:
        """Usage counters since the start (API backends); None: no usage is counted."""
        return None

    def cache_key(self, prompt: str, max_new_tokens: int, repeat: int = 0) -> str | None:
        """The reply-cache key of one request; None: ``CachingBackend``'s key from ``info()``."""
        return None

    def result_from_cache(self, value: dict) -> GenerationResult | None:
        """A result from a reply cached in the backend's own format; None: not one."""
        return None

    def logprob_check(self) -> dict[str, Any] | None:
        """The server-vs-local log-prob agreement so far (hybrid); None: nothing to check."""
        return None


#: The optional abilities ``Backend`` declares with a default (what a wrapper forwards by name).
OPTIONAL_ABILITIES: tuple[str, ...] = (
    "template", "context_length", "model", "thread_choice", "sampling", "encode_prompt", "context_error", "teacher_force",
    "take_usage", "totals", "cache_key", "result_from_cache", "logprob_check")
