"""Core records shared by every stage: variant specs, variants, generation results, axes.

SAGO (arXiv 2610.01428) §Variants: a variant is v = (F, u, s, p) — family, subtype, strength,
position — applied to a base prompt x_i with a recorded seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sago_engine.axis_spec import AXIS_SPECS, OPTION_AXIS_SPECS, OPTION_SEP, AxisSpec
from sago_engine.replytext import clean_reply, clean_value

#: Positions a variant may edit (SAGO §Variants). PREFIX / SUFFIX edit only the start / end
#: region of the prompt, GLOBAL may touch the whole prompt.
POSITIONS: tuple[str, ...] = ("PREFIX", "SUFFIX", "GLOBAL")

#: The six behavioural axes, in the paper's order, with the store's short names
#: (the names of ``axis_spec.AXIS_SPECS``, where each axis is described).
AXES: tuple[str, ...] = AXIS_SPECS.names()

#: Display labels in the paper's terms (``AxisSpec.label``).
AXIS_LABELS: dict[str, str] = {a: AXIS_SPECS[a].label for a in AXES}

#: Default normalizers R_X (``AxisSpec.normalizer``; SAGO §Axes table); configurable per run and stored with it.
DEFAULT_NORMALIZERS: dict[str, float] = {a: AXIS_SPECS[a].normalizer for a in AXES}

#: Axes that need white-box access to the model (hidden states / token distributions; ``AxisSpec.white_box``).
WHITE_BOX_AXES: frozenset[str] = frozenset(a for a in AXES if AXIS_SPECS[a].white_box)

# ---------------------------------------------------------------------------------------------
# Axis options: SAGO's open choices, each stored as its own axis ``<base>@<option>``.
# The six plain names above keep exactly the paper's definitions; an option axis is the same
# measurement under one recorded alternative choice (docs/METHOD.md, "Axis options"). Each is
# one ``OptionAxisSpec`` in ``axis_spec.OPTION_AXIS_SPECS``; the tuples below are its views.

#: Every option axis sago can compute, in display order (``OPTION_AXIS_SPECS``).
ALL_OPTION_AXES: tuple[str, ...] = OPTION_AXIS_SPECS.names()
#: The option axes a run stores unless its config says otherwise (``OptionAxisSpec.opt_in`` False).
OPTION_AXES: tuple[str, ...] = tuple(n for n in ALL_OPTION_AXES if not OPTION_AXIS_SPECS[n].opt_in)

#: Words of the options sago does not compute but stores for imported runs (``axis_label``).
_IMPORTED_OPTION_LABELS: dict[str, str] = {
    "authors": "authors' released values",
    "leaked": "on the released replies (leaked prompt tails kept)",
}

#: Option of the axes an imported run of the SAGO authors' released rows is stored under
#: (``cos@authors`` … ``mr@authors``): their numbers under their own definitions
#: (``sago_engine.external.authors_format.AUTHORS_DEFINITIONS``), never a plain axis.
AUTHORS_OPTION = "authors"


def base_axis(name: str) -> str:
    """The plain axis an axis name belongs to: ``"cos@user_last"`` → ``"cos"``, ``"bleu"`` → ``"bleu"``.

    Raises:
        ValueError: the base is not one of ``AXES`` (e.g. ``"foo@x"``, ``""``).
    """
    base = str(name).split(OPTION_SEP, 1)[0]
    if base not in AXES:
        raise ValueError(f"unknown axis {name!r}: the base must be one of {', '.join(AXES)}")
    return base


def option_of(name: str) -> str | None:
    """The option part of an axis name (``"cos@user_mean"`` → ``"user_mean"``), None for a plain axis."""
    parts = str(name).split(OPTION_SEP, 1)
    return parts[1] if len(parts) == 2 else None


def is_option_axis(name: str) -> bool:
    """True for a stored option axis ``<base>@<option>``, False for the six plain axes."""
    return option_of(name) is not None


def axis_label(name: str) -> str:
    """Display label of any axis name: the paper's label for plain axes (``"Δ-Cos"``), the base
    label with the option for option axes (``"Δ-Cos @ last user token"``, ``"Δ-BERT @ rescaled
    MiniLM"``); an unknown option is shown by its name. Raises ValueError for an unknown base."""
    base = base_axis(name)
    opt = option_of(name)
    if opt is None:
        return AXIS_SPECS[base].label
    spec = OPTION_AXIS_SPECS.get(str(name))
    words = spec.label if spec is not None else _IMPORTED_OPTION_LABELS.get(opt, opt)
    return f"{AXIS_SPECS[base].label} @ {words}"


def spec_of(name: str) -> AxisSpec:
    """The ``AxisSpec`` of any axis name; an option axis ``<base>@<option>`` has its base axis's
    (label, unit, R_X, needs). Raises ValueError for an unknown base."""
    return AXIS_SPECS[base_axis(name)]


def axis_sort_key(name: str) -> tuple[int, int, str]:
    """Sort key: paper's axis order, the plain axis before its options, options in ``ALL_OPTION_AXES`` order."""
    base = base_axis(name)
    if not is_option_axis(name):
        return (AXES.index(base), -1, name)
    return (AXES.index(base), ALL_OPTION_AXES.index(name) if name in ALL_OPTION_AXES else len(ALL_OPTION_AXES), name)


def axes_shown(names: Any) -> list[str]:
    """The columns/rows a table over axes shows: the six plain axes (always, paper's order), then
    the option axes among ``names`` (any iterable of axis names), sorted by ``axis_sort_key``.
    With only plain names this is exactly ``list(AXES)``."""
    opts = sorted({str(n) for n in names if is_option_axis(str(n))}, key=axis_sort_key)
    return [*AXES, *opts]


def normalizer_for(name: str, normalizers: dict[str, float] | Any) -> float:
    """R_X of any axis name: every option axis uses its base axis's R_X (R_cos for every ``cos@…``,
    R_bert for ``bert@rescaled``; docs/METHOD.md "Axis options"). Raises KeyError if the base
    axis has no entry in ``normalizers``, ValueError for an unknown base."""
    return float(normalizers[base_axis(name)])


@dataclass(frozen=True, order=True)
class VariantSpec:
    """The (F, u, s, p) tuple of a variant (SAGO §Variants)."""

    family: str
    """Family name, e.g. ``"social_register"``, ``"surface_noise"``, ``"structural"``."""
    subtype: str
    """Subtype within the family, e.g. ``"politeness"``, ``"case"``, ``"length"``."""
    strength: float
    """Strength; its scale is the family's (politeness −5..+5, noise 1..3, length ratio 0.5..2.0)."""
    position: str
    """One of ``POSITIONS``."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "subtype": self.subtype,
            "strength": float(self.strength),
            "position": self.position,
        }

    def label(self) -> str:
        s = f"{self.strength:g}"
        return f"{self.family}/{self.subtype}/{s}/{self.position}"


@dataclass(frozen=True)
class Variant:
    """One perturbed prompt x_i^(v) = T_v(x_i) with everything needed to reproduce it."""

    variant_id: str
    """Deterministic key: hash of (prompt_id, spec, seed, generator)."""
    prompt_id: str
    """The base prompt's id (unique across datasets)."""
    spec: VariantSpec
    """(F, u, s, p)."""
    text: str
    """The variant prompt text."""
    seed: int
    """The 63-bit seed the transform's rng was built from."""
    generator: str = "rules-v1"
    """Which implementation produced the text (offline rules, or an LLM rewriter id)."""
    meta: dict[str, Any] = field(default_factory=dict, compare=False)
    """Family-specific facts, e.g. ``{"achieved_ratio": 0.52}`` for length, or the target
    attribute the mirroring detector looks for (``{"target": "upper"}``)."""


#: The default reply cap: new tokens per prompt, the EOS token counted (a run config's
#: ``max_new_tokens`` overrides it; the Live page starts from it).
DEFAULT_MAX_NEW_TOKENS = 48

#: Log-prob values at or below this are placeholders, not measurements: OpenAI documents ``-9999.0``
#: for "a token not within the top 20" (chat completions ``logprobs.content[].logprob``), and vLLM
#: returns it for an end-of-text entry it cannot detokenize (PR #17637).
LOGPROB_SENTINEL = -9999.0
#: Largest log-prob accepted as rounding of 0 (a probability cannot exceed 1; servers that compute
#: in float16/bfloat16 return values such as ``+1.2e-07`` for a certain token).
LOGPROB_POSITIVE_TOL = 1e-6


def logprob_problem(values) -> str | None:
    """Why a sequence of a reply's per-token log-probs (natural log, each ≤ 0) cannot be summed, or None.

    A value is invalid when it is NaN, ±inf, a placeholder ≤ ``LOGPROB_SENTINEL`` or above
    ``LOGPROB_POSITIVE_TOL`` (togethercomputer/openapi #5: a positive first ``token_logprob``;
    openvinotoolkit/model_server PR #4522: a backend's sentinel ``1.0`` for "no log-prob").

    Args:
        values: the T log-probs (any sequence of numbers; None entries count as NaN).
    Returns:
        None when all are valid, else e.g. ``"+0.6997 at token 0 (a log-prob is at most 0)"``
        (the first invalid value, and how many there are when more than one).
    """
    a = (values.astype(np.float64, copy=False) if isinstance(values, np.ndarray)
         else np.asarray([np.nan if v is None else v for v in values], dtype=np.float64))
    bad = ~np.isfinite(a) | (a <= LOGPROB_SENTINEL) | (a > LOGPROB_POSITIVE_TOL)
    if not bad.any():
        return None
    idx = np.flatnonzero(bad)
    v = float(a[idx[0]])
    if np.isnan(v):
        val, why = "NaN", "not a number"
    elif np.isinf(v):
        val, why = f"{v:+}", "a produced token's probability is neither 0 nor above 1"
    elif v <= LOGPROB_SENTINEL:
        val, why = f"{v:g}", "a placeholder, not a log-prob"
    else:
        val, why = f"{v:+.4g}", "a log-prob is at most 0"
    more = f"; {len(idx)} invalid values in all" if len(idx) > 1 else ""
    return f"{val} at token {int(idx[0])} ({why}){more}"


@dataclass
class GenerationResult:
    """What a backend returns for one prompt (SAGO §Axes needs all of it).

    Shapes: ``token_logprobs`` and ``token_entropies`` are float64 arrays of shape (T,), T the
    number of response tokens (including the end-of-sequence token when the model emitted
    one); ``hidden_last`` is float32 (L+1, H): the hidden state of the last non-padding input
    token at the embedding output and after every layer, or ``None`` where the backend cannot
    expose activations. Log-probs are natural-log, entropies in nats; an entropy is NaN at a
    position where the backend had no distribution (an API position without top-k alternatives),
    and ``mean_entropy`` averages the other positions. ``hidden_user_last`` /
    ``hidden_user_mean`` are float32 (L+1, H) like ``hidden_last``, at the last token of the
    user's text and averaged over the user's text tokens (the ``cos@user_*`` options; None
    where the backend exposes no activations or could not locate the user's text).
    """

    text: str
    n_tokens: int = 0
    token_logprobs: np.ndarray | None = None
    token_entropies: np.ndarray | None = None
    hidden_last: np.ndarray | None = None
    hidden_user_last: np.ndarray | None = None
    hidden_user_mean: np.ndarray | None = None
    finish_reason: str = "stop"
    latency_s: float = 0.0
    error: str | None = None
    token_ids: list[int] | None = None
    """Generated token ids (the scored ones), so a teacher-forced pass can re-score them."""
    meta: dict[str, Any] | None = None
    """Backend-specific facts about this response (API backends: the model string the API
    returned, prompt/completion token counts, cache hit, attempts, raw stop reason); None for
    local models. ``meta["flags"]``: what ``replytext.clean_reply`` changed in the reply (e.g.
    ``["surrogates_replaced"]``), stored in ``responses.flags``."""

    def __post_init__(self) -> None:
        # The one boundary every reply crosses: text that any UTF-8 writer accepts (replytext).
        self.text, flags = clean_reply(self.text)
        if self.error is not None:
            self.error = clean_reply(self.error, max_chars=2000)[0]
        if self.meta:
            self.meta = clean_value(self.meta)
        if flags:
            old = list((self.meta or {}).get("flags") or [])
            self.meta = {**(self.meta or {}), "flags": old + [f for f in flags if f not in old]}

    @property
    def flags(self) -> list[str]:
        """What was changed in this reply at the boundary (``meta["flags"]``; ``[]`` when nothing)."""
        return list((self.meta or {}).get("flags") or [])

    @property
    def logprob_issue(self) -> str | None:
        """Why this result's log-probs cannot be used, or None: the reason an API backend recorded
        when it set them aside (``meta["invalid_logprobs"]``, "invalid log-probs from server: …"),
        else ``logprob_problem`` of ``token_logprobs`` ("invalid log-probs: …")."""
        if self.token_logprobs is None:
            why = (self.meta or {}).get("invalid_logprobs")
            return str(why) if why else None
        why = logprob_problem(self.token_logprobs)
        return None if why is None else f"invalid log-probs: {why}"

    @property
    def seq_logprob(self) -> float | None:
        """Sum of token log-probs (not length-normalized), or None if unavailable or invalid
        (``logprob_issue``: a sentinel, positive or non-finite value is never summed)."""
        if self.token_logprobs is None or self.logprob_issue is not None:
            return None
        return float(np.sum(np.minimum(self.token_logprobs, 0.0)))

    @property
    def mean_entropy(self) -> float | None:
        """Mean per-token predictive entropy in nats over the positions that have one (NaN
        positions skipped), 0.0 for an empty reply; None if unavailable, if no position has one,
        if one is infinite, or if the log-probs are invalid (``logprob_issue``)."""
        if self.token_entropies is None:
            return None
        if len(self.token_entropies) == 0:
            return 0.0
        e = np.asarray(self.token_entropies, dtype=np.float64)
        if self.logprob_issue is not None or np.isinf(e).any():
            return None
        e = e[np.isfinite(e)]
        return float(np.mean(e)) if len(e) else None
