"""What a Live probe is asked: the prompt check, the (F, u, s, p) cells, and how replies are decoded.

SAGO (arXiv 2610.01428) §Variants. ``sago_engine.live.probe`` runs what these describe.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from sago_engine.backends.hf_local.settings import check_sampling
from sago_engine.types import VariantSpec
from sago_engine.variants import full_grid, sample_grid

__all__ = ["LIVE_DATASET", "LIVE_RUN", "DEFAULT_MAX_CHARS", "LiveError", "max_prompt_chars", "check_prompt",
           "choose_specs", "Selection", "Sampling", "GREEDY"]

#: Dataset name under which live probes are stored.
LIVE_DATASET = "live"
#: Run id of a probe's rows until it is saved (``live_save.probe_run_id`` keys them then).
LIVE_RUN = "live"
#: Default cap on the prompt length (characters); override with ``SAGO_LIVE_MAX_CHARS``.
DEFAULT_MAX_CHARS = 2000


class LiveError(ValueError):
    """A probe that cannot run (empty or too long prompt, no variant selected); the message is for the user."""


def max_prompt_chars() -> int:
    """The prompt length cap: ``$SAGO_LIVE_MAX_CHARS`` or ``DEFAULT_MAX_CHARS``."""
    try:
        return max(1, int(os.environ.get("SAGO_LIVE_MAX_CHARS", DEFAULT_MAX_CHARS)))
    except ValueError:
        return DEFAULT_MAX_CHARS


def check_prompt(text: str | None, max_chars: int | None = None) -> str:
    """The prompt stripped of surrounding whitespace.

    Raises:
        LiveError: empty / whitespace-only, or longer than ``max_chars`` (default ``max_prompt_chars()``).
    """
    t = (text or "").strip()
    cap = max_prompt_chars() if max_chars is None else max_chars
    if not t:
        raise LiveError("The prompt is empty: type a prompt (or pick one from a dataset) first.")
    if len(t) > cap:
        raise LiveError(f"The prompt has {len(t):,} characters; the live page accepts at most {cap:,} "
                        "(set SAGO_LIVE_MAX_CHARS to change the limit).")
    return t


def choose_specs(families: Iterable[str], subtypes: Iterable[str] | None = None,
                 strengths: Iterable[float] | None = None, positions: Iterable[str] | None = None,
                 max_variants: int | None = None, prompt_id: str = "live", seed: int = 0) -> list[VariantSpec]:
    """The (F, u, s, p) cells of the chosen families that match the selections (empty/None = all).

    When more than ``max_variants`` cells match, a deterministic stratified sample
    (``variants.sample_grid``) of about max_variants/len(families) per family is taken, so every
    family is represented.

    Raises:
        LiveError: no family chosen, or no cell matches the selections.
    """
    fams = list(dict.fromkeys(families))
    if not fams:
        raise LiveError("Choose at least one variant family.")
    su = set(subtypes) if subtypes else None
    st = {float(s) for s in strengths} if strengths else None
    po = set(positions) if positions else None

    def keep(s: VariantSpec) -> bool:
        return (su is None or s.subtype in su) and (st is None or s.strength in st) and (po is None or s.position in po)

    grid = [s for s in full_grid(fams) if keep(s)]
    if not grid:
        raise LiveError("No variant matches the chosen families, subtypes, strengths and positions.")
    if max_variants is None or len(grid) <= max_variants:
        return grid
    sizes = {f: sum(1 for s in grid if s.family == f) for f in fams}
    present = [f for f in fams if sizes[f]]
    # share max_variants across the families present; a small family gives its unused share to the others
    per: dict[str, int] = {}
    left, todo = int(max_variants), sorted(present, key=lambda f: sizes[f])
    while todo:
        f = todo.pop(0)
        per[f] = min(sizes[f], left // (len(todo) + 1))
        left -= per[f]
    return sample_grid(prompt_id, per, seed, families=present, keep=keep)


@dataclass(frozen=True)
class Selection:
    """The page's choice of cells (``choose_specs``' arguments), drawn per prompt by ``plan_probe``."""

    families: tuple[str, ...]
    subtypes: tuple[str, ...] = ()
    strengths: tuple[float, ...] = ()
    positions: tuple[str, ...] = ()
    max_variants: int | None = None
    seed: int = 0
    """Seed of the stratified sample (``choose_specs``)."""

    def specs(self, prompt_id: str) -> list[VariantSpec]:
        """``choose_specs`` for ``prompt_id`` (raises LiveError as it does)."""
        return choose_specs(self.families, self.subtypes, self.strengths, self.positions, self.max_variants,
                            prompt_id=prompt_id, seed=self.seed)


@dataclass(frozen=True)
class Sampling:
    """The page's "samples" setting: how each reply is decoded, as a run's ``[[models]] temperature``,
    ``top_p``, ``top_k`` and ``samples`` (``precompute.model_config.ModelEntry``).

    Greedy (temperature 0, one sample) is the default. With temperature > 0 the base prompt and
    every variant are answered ``samples`` (k) times, sample s of each drawn with the seed
    ``seeds.sample_seed(probe seed, prompt id, variant id, s)`` — the runner's derivation, so a probe
    and a run with the same seed give the same replies to the same prompt and variant (one seeded
    generator per reply: the probe's batches do not change them).

    Raises:
        LiveError: temperature outside [0, 100], top_p outside (0, 1], top_k < 0, top_p / top_k away
            from neutral with temperature 0 (``hf_local.settings.check_sampling``), k < 1, or k > 1
            with temperature 0 (greedy decoding gives k equal replies).
    """

    temperature: float = 0.0
    samples: int = 1
    top_p: float = 1.0
    top_k: int = 0

    def __post_init__(self) -> None:
        try:
            check_sampling({"temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k})
        except ValueError as e:
            raise LiveError(f"Samples: {e}.") from None
        if isinstance(self.samples, bool) or not isinstance(self.samples, int) or self.samples < 1:
            raise LiveError(f"Samples: k must be a whole number >= 1, got {self.samples!r}.")
        if self.samples > 1 and self.temperature == 0.0:
            raise LiveError("Samples: k > 1 needs temperature > 0 (greedy decoding gives the same reply every time).")

    @property
    def greedy(self) -> bool:
        """Temperature 0 (then k = 1): plain greedy decoding, the default."""
        return self.temperature == 0.0

    def record(self) -> dict | None:
        """``{"temperature", "top_p", "top_k", "samples"}`` as ``ModelEntry.sampling`` gives it (the run id's
        and ``runs.decoding["sampling"]``'s), or None for greedy decoding."""
        if self.greedy:
            return None
        return {"temperature": float(self.temperature), "top_p": float(self.top_p), "top_k": int(self.top_k),
                "samples": int(self.samples)}


#: Greedy decoding, one reply per input (the page's default).
GREEDY = Sampling()
