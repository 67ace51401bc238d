"""Every behavioural axis described once: ``AxisSpec`` records in the ``AXIS_SPECS`` registry.

SAGO (arXiv 2610.01428) §Axes. An axis's name, display label, default normalizer R_X, unit,
range and direction of its raw Δ, what it needs from a backend, how it is computed and its
float-noise tolerance live here and nowhere else. The pages read labels and units, scoring the
default R_X, the row builders the unavailability reasons, the noise floor the Δ functions, the
verifier (``sago_engine.verify.replay``) the teacher-forced statistics; ``types.AXES`` and the other
per-axis tables are views of this registry. Registration order is the paper's axis order, the
order of every table and chart.

Option axes ``<base>@<option>`` are their base axis's measurement under one recorded alternative
choice (docs/METHOD.md "Axis options"). Each is one ``OptionAxisSpec`` in ``OPTION_AXIS_SPECS``:
its base axis, what it needs beyond its base axis's inputs, whether a run stores it unless its
config says otherwise, and the function that makes its values. Config validation, the row
builder (``sago_engine.measure.pipeline.compute_rows``), the run record, the pages' option
labels and the text-axis rescoring read that registry; the name helpers are in ``sago_engine.types``.
"""

from __future__ import annotations

from dataclasses import dataclass

from sago_engine.registry import Registry

__all__ = ["AXIS_SPECS", "NEEDS", "OPTION_AXIS_SPECS", "OPTION_NEEDS", "OPTION_SEP", "AxisSpec", "Need",
           "OptionAxisSpec", "register_axis", "register_option_axis"]

#: Separator between a base axis and its option in a stored axis name (``cos@user_mean``).
OPTION_SEP = "@"


@dataclass(frozen=True)
class Need:
    """One kind of input an axis needs from a backend, with the reasons stored when it is missing."""

    lacks: str
    """The ``deltas.reason`` of a backend without the capability (``Backend.capabilities``)."""
    missing: str
    """The reason stored when a reply of a capable backend lacks it."""
    log_probs: bool = False
    """Computed from the reply's token log-probs: invalid ones (``GenerationResult.logprob_issue``)
    make the axis unavailable."""


#: What an axis can need from a backend (``AxisSpec.needs``). ``text`` is every backend's: an
#: axis that needs only the reply text is unavailable only when a reply has no visible text.
NEEDS: dict[str, Need] = {
    "text": Need(lacks="", missing="no visible reply"),
    "hidden_states": Need(lacks="backend exposes no activations", missing="no hidden states returned"),
    "logprobs": Need(lacks="backend exposes no sequence log-prob", missing="no log-probs returned", log_probs=True),
    "entropies": Need(lacks="backend exposes no token distribution", missing="no entropies returned",
                      log_probs=True),
}


@dataclass(frozen=True)
class AxisSpec:
    """One axis of SAGO §Axes: its facts, read by every stage that shows, scores or checks it."""

    name: str
    """The store's short name (``deltas.axis``), e.g. ``"bleu"``."""
    label: str
    """The paper's label, shown by the pages, e.g. ``"Δ-BLEU"``."""
    normalizer: float
    """Default R_X (SAGO §Axes table): Δ̃ = clip(Δ / R_X, −1, 1); a run may override it (``[normalizers]``)."""
    unit: str
    """Unit of the raw Δ, e.g. ``"BLEU points"``."""
    value_range: tuple[float, float]
    """Range of the raw Δ (±inf where unbounded)."""
    direction: str
    """How to read the raw Δ (every axis: further from 0 = less stable)."""
    needs: str
    """What it needs from a backend: a key of ``NEEDS`` (``"text"``, ``"hidden_states"``,
    ``"logprobs"``, ``"entropies"``). An axis that needs more than text is white-box: a backend
    measures it only when its name is in ``Backend.capabilities``."""
    result_field: str | None
    """The ``GenerationResult`` attribute the Δ is computed from (None for text axes): a reply
    without it makes the axis unavailable."""
    definition: str
    """How it is computed, in one line (docs/METHOD.md "Axes" has the details)."""
    delta: str
    """``"module:function"`` of its Δ over (reply, base reply) pairs:
    ``f(replies, bases, variants=None) -> (n,) float64`` (``sago_engine.axes.pairs``)."""
    noise_tol: float
    """|Δ| below this is float noise of the axis's own computation and stored as exactly 0
    (``sago_engine.axes.noise.snap_noise``; raw Δ units)."""
    color: str
    """Its colour on charts coloured by axis (ColorBrewer Dark2: hues far apart, none a lighter twin of another)."""
    needs_variant: bool = False
    """Δ needs the variant's (F, u, s, p) and meta besides the replies (Δ-MR's target attribute);
    such an axis has no noise floor (a repeat of the base prompt has no variant)."""
    response_stat: str | None = None
    """The ``responses`` column (and ``GenerationResult`` property) the Δ is the difference of, for
    the axes scored under teacher forcing; the verifier recomputes it from the stored token ids."""

    @property
    def white_box(self) -> bool:
        """Needs model internals (hidden states or token distributions), not only the reply text."""
        return self.needs != "text"


#: The one registry of axes, in the paper's order.
AXIS_SPECS: Registry[AxisSpec] = Registry("axis")


def register_axis(spec: AxisSpec) -> AxisSpec:
    """Add ``spec`` to ``AXIS_SPECS`` under its name (appended: the last axis of every table).

    Raises:
        ValueError: the name is taken, contains ``OPTION_SEP``, or ``needs`` is not a key of ``NEEDS``.
    """
    if OPTION_SEP in spec.name:
        raise ValueError(f"axis name {spec.name!r} must not contain {OPTION_SEP!r} (the option separator)")
    if spec.needs not in NEEDS:
        raise ValueError(f"axis {spec.name!r}: needs must be one of {sorted(NEEDS)}, got {spec.needs!r}")
    AXIS_SPECS.register(spec.name, spec)
    return spec


_PAIRS = "sago_engine.axes.pairs"

register_axis(AxisSpec(
    name="cos", label="Δ-Cos", normalizer=2.0, unit="cosine", value_range=(-2.0, 0.0),
    direction="≤ 0; 0 = the same hidden-state directions, lower = less stable",
    needs="hidden_states", result_field="hidden_last",
    definition="mean over the embedding output and every layer of cos(h_l(x^v), h_l(x)) − 1, last input token",
    delta=f"{_PAIRS}:cos_pairs",
    # float64 cosines of fp32 hidden states: identical states give |Δ| ~1e-16; fp32 rounding of
    # the states (2^-24 relative) moves a cosine by ≲1e-7.
    noise_tol=1e-6, color="#1B9E77"))
register_axis(AxisSpec(
    name="bleu", label="Δ-BLEU", normalizer=100.0, unit="BLEU points", value_range=(-100.0, 0.0),
    direction="≤ 0; 0 = the same reply, lower = less stable",
    needs="text", result_field=None,
    definition="sacrebleu sentence BLEU(y^v, ref = y) − 100, tokenizer chosen per pair from its script",
    delta=f"{_PAIRS}:bleu_pairs",
    # sacrebleu, float64 over integer n-gram counts: identical token sequences give 100 up to
    # ~1e-13 (exp of a mean of logs; measured 100.00000000000004).
    noise_tol=1e-9, color="#D95F02"))
register_axis(AxisSpec(
    name="bert", label="Δ-BERT", normalizer=1.0, unit="BERTScore F1", value_range=(-1.0, 0.0),
    direction="≤ 0; 0 = the same meaning, lower = less stable",
    needs="text", result_field=None,
    definition="BERTScore-F1(y^v, y) − 1 with the offline MiniLM encoder (uncased)",
    delta=f"{_PAIRS}:bert_pairs",
    # fp32 BERTScore-F1 of 384-dim unit vectors: a text against itself measured |1 − F1| ≤ 1.2e-7
    # (one fp32 ulp at 1); one changed word piece in 500 moves F1 by ≥ ~1e-4.
    noise_tol=1e-6, color="#7570B3"))
register_axis(AxisSpec(
    name="prob", label="Δ-Prob", normalizer=250.0, unit="nats", value_range=(float("-inf"), float("inf")),
    direction="signed; further from 0 = less stable",
    needs="logprobs", result_field="seq_logprob",
    definition="Σ log p of the model's own greedy reply tokens under teacher forcing, variant − base",
    delta=f"{_PAIRS}:prob_pairs",
    # summed fp32 token log-probs: 2^-24 relative of |log p| ≤ ~250 nats ≈ 1.5e-5 nats.
    noise_tol=1e-4, color="#E7298A", response_stat="seq_logprob"))
register_axis(AxisSpec(
    name="ent", label="Δ-Ent", normalizer=10.0, unit="nats", value_range=(float("-inf"), float("inf")),
    direction="signed; further from 0 = less stable",
    needs="entropies", result_field="mean_entropy",
    definition="mean over reply tokens of the predictive distribution's entropy, variant − base",
    delta=f"{_PAIRS}:ent_pairs",
    # mean fp32 per-token entropy ≤ ln(vocab) ≈ 12 nats: 2^-24 relative ≈ 7e-7 nats.
    noise_tol=1e-5, color="#66A61E", response_stat="mean_entropy"))
register_axis(AxisSpec(
    name="mr", label="Δ-MR", normalizer=1.0, unit="mirroring indicator", value_range=(-1.0, 1.0),
    direction="in {−1, 0, 1}; ±1 = the reply's mirroring of the variant's attribute changed",
    needs="text", result_field=None,
    definition="m(y^v, v) − m(y, v): rule detectors of the variant's target attribute (or the LLM judge)",
    delta=f"{_PAIRS}:mr_pairs",
    # integers in {−1, 0, 1}: exact.
    noise_tol=0.0, color="#A6761D", needs_variant=True))


# ---------------------------------------------------------------------------------------------
# Option axes


#: What an option axis can need beyond its base axis's inputs (``OptionAxisSpec.needs``), each
#: with what it is. A row builder without the input stores the option unavailable, with a reason.
OPTION_NEEDS: dict[str, str] = {
    "hidden_states": "per-layer hidden states of the prompt (the backend's \"cos\" capability); a run whose "
                     "backend lacks them stores no row of the option at all",
    "user_span": "the token span of the user's text in the rendered prompt (GenerationResult.hidden_user_last / "
                 "hidden_user_mean)",
    "bert_baseline": "b, the encoder's unrelated-text baseline (the run's semantic_filter.b_enc), recorded with "
                     "the run",
    "forced_base_reply": "the base reply's token ids teacher-forced after the base prompt and after every variant "
                         "prompt, with their token log-probs and entropies (one extra pass per prompt; "
                         "measure.force_base_replies)",
    "prompt_text": "the base prompt's text (the pairwise surface-noise rule measures a variant's strength from x "
                   "and x^v)",
    "mr_verdicts": "the run's Δ-MR of each variant (the offline detectors' or the LLM judge's verdicts)",
}


@dataclass(frozen=True)
class OptionAxisSpec:
    """One option axis ``<base>@<option>``: read by config validation, the row builder, the run
    record, the pages and the rescoring of text axes."""

    base: str
    """The plain axis it is an option of (a name of ``AXIS_SPECS``); its R_X, unit, range and
    availability rules are the base axis's."""
    option: str
    """The text after ``OPTION_SEP``, e.g. ``"user_mean"``."""
    label: str
    """The option's words on the pages, e.g. ``"mean over user tokens"`` (``types.axis_label``)."""
    needs: tuple[str, ...]
    """Keys of ``OPTION_NEEDS``: what it needs beyond its base axis's inputs."""
    opt_in: bool
    """False: stored by every run unless its config says otherwise (``types.OPTION_AXES``); True:
    stored only when a config lists it (it costs an extra pass, or it is the authors' rule)."""
    rows: str
    """``"module:function"`` making its values for one prompt's variants,
    ``f(name, inputs) -> OptionValues`` (``sago_engine.measure.option_rows``)."""
    definition: str
    """How it is computed, in one line (docs/METHOD.md "Axis options" has the details)."""
    base_rules: bool = True
    """The base axis's availability rules apply (a generation error, no visible reply, a backend
    without the capability, invalid log-probs of either reply); False: only a generation error,
    the option's own reasons say the rest (the base-reply options read no variant statistic)."""

    @property
    def name(self) -> str:
        """The stored axis name, ``<base>@<option>`` (``deltas.axis``)."""
        return f"{self.base}{OPTION_SEP}{self.option}"

    @property
    def stored_without_hidden_states(self) -> bool:
        """Whether a run whose backend has no hidden states stores it (as rows, available or not)."""
        return "hidden_states" not in self.needs


#: The one registry of option axes, keyed by stored name, in display order (by base axis in the
#: paper's order, the always-stored options of a base before its opt-in ones).
OPTION_AXIS_SPECS: Registry[OptionAxisSpec] = Registry("axis option")


def register_option_axis(spec: OptionAxisSpec) -> OptionAxisSpec:
    """Add ``spec`` to ``OPTION_AXIS_SPECS`` under ``spec.name`` (appended).

    Raises:
        ValueError: the name is taken, the base is not a registered axis, the option is empty or
            contains ``OPTION_SEP``, a need is not a key of ``OPTION_NEEDS``, or ``rows`` is not
            ``"module:function"``.
    """
    if spec.base not in AXIS_SPECS:
        raise ValueError(f"option axis {spec.name!r}: base must be one of {list(AXIS_SPECS.names())}")
    if not spec.option or OPTION_SEP in spec.option:
        raise ValueError(f"option axis {spec.name!r}: the option must be non-empty and without {OPTION_SEP!r}")
    bad = [n for n in spec.needs if n not in OPTION_NEEDS]
    if bad:
        raise ValueError(f"option axis {spec.name!r}: needs must be keys of {sorted(OPTION_NEEDS)}, got {bad}")
    if spec.rows.count(":") != 1:
        raise ValueError(f"option axis {spec.name!r}: rows must be 'module:function', got {spec.rows!r}")
    OPTION_AXIS_SPECS.register(spec.name, spec)
    return spec


_ROWS = "sago_engine.measure.option_rows"

for _opt, _label, _needs, _definition in (
    ("user_last", "last user token", ("hidden_states", "user_span"),
     "Δ-Cos at the last token of the user's text, embedding output + every layer"),
    ("user_mean", "mean over user tokens", ("hidden_states", "user_span"),
     "Δ-Cos of the mean hidden state over the user's text tokens, embedding output + every layer"),
    ("last_blocks", "last token, blocks only", ("hidden_states",),
     "Δ-Cos at the last input token, transformer blocks only (layers 1..L)"),
    ("user_last_blocks", "last user token, blocks only", ("hidden_states", "user_span"),
     "Δ-Cos at the last token of the user's text, transformer blocks only"),
    ("user_mean_blocks", "mean over user tokens, blocks only", ("hidden_states", "user_span"),
     "Δ-Cos of the mean over the user's text tokens, transformer blocks only"),
    ("last_layer", "last token, last layer only", ("hidden_states",),
     "Δ-Cos at the last input token, the last hidden-state output only (the SAGO authors' code)"),
):
    register_option_axis(OptionAxisSpec(base="cos", option=_opt, label=_label, needs=_needs, opt_in=False,
                                        rows=f"{_ROWS}:cos_option", definition=_definition))
register_option_axis(OptionAxisSpec(
    base="bert", option="rescaled", label="rescaled MiniLM", needs=("bert_baseline",), opt_in=False,
    rows=f"{_ROWS}:bert_rescaled",
    definition="the same MiniLM F1s on bert-score's baseline-rescaled scale: Δ-BERT / (1 − b)"))
for _base, _what in (("prob", "Σ log p"), ("ent", "mean entropy")):
    register_option_axis(OptionAxisSpec(
        base=_base, option="base_reply", label="the base reply teacher-forced", needs=("forced_base_reply",),
        opt_in=True, rows=f"{_ROWS}:base_reply", base_rules=False,
        definition=f"{_what} of the BASE reply's tokens teacher-forced after x^v minus after x (the SAGO authors' code)"))
for _opt, _label, _needs, _definition in (
    ("pairwise", "pairwise rules (authors' code)", ("prompt_text", "mr_verdicts"),
     "the authors' pairwise rules: surface noise and register judged on the pair (y, y^v)"),
    ("length_fail", "length reply not scaling = −1", ("mr_verdicts",),
     "length variants m(y^v, v) − 1 ∈ {−1, 0}, else Δ-MR"),
    ("paper_code", "the authors' code's rules", ("prompt_text", "mr_verdicts"),
     "both rules, and no Δ-MR for form, as the authors' code"),
):
    register_option_axis(OptionAxisSpec(
        base="mr", option=_opt, label=_label, needs=_needs, opt_in=True,
        rows=f"{_ROWS}:code_mr", definition=_definition))
