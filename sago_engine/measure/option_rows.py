"""The values of the option axes ``<base>@<option>`` for one prompt's variants.

Each function here is the ``OptionAxisSpec.rows`` of some option axes (``sago_engine.axis_spec``):
``f(name, inputs) -> OptionValues``. ``pipeline.compute_rows`` calls it for every option axis a
run stores, after the six plain axes, and turns its values into ``deltas`` rows the same way as
the plain axes' (availability, R_X of the base axis, ``detector``). docs/METHOD.md "Axis options".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sago_engine.axes import COS_OPTION_SPECS, cosine_per_layer, delta_bert_rescaled, delta_cos_layers
from sago_engine.axes.confidence import base_reply_deltas
from sago_engine.axes.mirroring_code import code_delta_mr, measured_strength
from sago_engine.axes.mirroring_code import unavailable_reason as code_mr_reason
from sago_engine.types import Variant, base_axis, logprob_problem, option_of

__all__ = ["OptionInputs", "OptionValues", "base_reply", "bert_rescaled", "code_mr", "cos_option"]


@dataclass(frozen=True)
class OptionInputs:
    """What an option axis's values are made from, for one prompt (one ``pipeline.Unit``)."""

    unit: Any
    """A ``pipeline.Unit``: the base prompt, its variants, their replies and (when forced) the base
    reply teacher-forced (typed loosely: ``pipeline`` imports this module)."""
    plain: Mapping[str, Sequence[float]]
    """Raw Δ of each plain axis per variant (Δ-MR with the LLM judge's verdicts where a judge ran)."""
    labels: Mapping[str, Sequence[str | None]]
    """``deltas.detector`` of each plain axis per variant (Δ-BERT's window note, Δ-MR's detector)."""
    bert_baseline: float | None = None
    """b of ``bert@rescaled`` (the encoder's unrelated-text baseline); None = not given."""


@dataclass(frozen=True)
class OptionValues:
    """An option axis's raw Δ per variant, why a value is missing and its ``detector`` label."""

    values: Sequence[float]
    """Raw Δ per variant in the base axis's units, NaN where not measured."""
    why: Sequence[str | None] | None = None
    """Per variant the reason it is unavailable beyond the base axis's rules, None = no such reason."""
    labels: Sequence[str | None] | None = None
    """Per variant the ``deltas.detector`` of an available value; None = NULL."""


#: ``GenerationResult`` field holding the hidden states of each Δ-Cos position.
_COS_FIELDS = {"last": "hidden_last", "user_last": "hidden_user_last", "user_mean": "hidden_user_mean"}


def cos_option(name: str, inputs: OptionInputs) -> OptionValues:
    """``cos@<option>``: Δ-Cos at the option's position over its layer set (``COS_OPTION_SPECS``),
    in [−2, 0]; unavailable where either reply lacks that position's states (the user's text not
    located in the rendered prompt, or no hidden states)."""
    u = inputs.unit
    pos, layers = COS_OPTION_SPECS[option_of(name)]  # type: ignore[index]
    f = _COS_FIELDS[pos]
    b = getattr(u.base, f)
    values = [float(delta_cos_layers(cosine_per_layer(getattr(r, f), b), layers))
              if getattr(r, f) is not None and b is not None else float("nan") for r in u.results]
    missing = "user text not located in the rendered prompt" if f != "hidden_last" else "no hidden states returned"
    why = [missing if getattr(r, f) is None or b is None else None for r in u.results]
    return OptionValues(values, why)


def bert_rescaled(name: str, inputs: OptionInputs) -> OptionValues:
    """``bert@rescaled``: Δ-BERT / (1 − b) on bert-score's baseline-rescaled scale, labelled with b
    (and Δ-BERT's window note).

    Raises:
        ValueError: ``inputs.bert_baseline`` is None.
    """
    if inputs.bert_baseline is None:
        raise ValueError(f"{name} needs bert_baseline (the encoder's unrelated-text baseline)")
    b = float(inputs.bert_baseline)
    labels = [f"rescaled MiniLM: (F1 - b)/(1 - b), b = {b:.6g}" + (f"; {w}" if w else "")
              for w in inputs.labels["bert"]]
    return OptionValues(delta_bert_rescaled(inputs.plain["bert"], b), None, labels)


def base_reply(name: str, inputs: OptionInputs) -> OptionValues:
    """``prob@base_reply`` (Σ log p, nats) or ``ent@base_reply`` (mean entropy, nats): the base
    reply teacher-forced after each variant prompt minus after the base prompt (``Unit.forced``,
    ``Unit.forced_base``), with why a variant has none."""
    u = inputs.unit
    which = 0 if base_axis(name) == "prob" else 1
    n, nan = len(u.variants), float("nan")
    if not u.base.token_ids:
        return OptionValues([nan] * n, ["base reply has no token ids to teacher-force"] * n)
    if u.forced is None or u.forced_base is None:
        return OptionValues([nan] * n, ["base reply not teacher-forced after the prompts (the backend cannot "
                                        "teacher-force a given reply)"] * n)
    values, why = [], []
    for f in u.forced:
        bad = None if f is None else (logprob_problem(f[0]) or logprob_problem(u.forced_base[0]))
        if f is None or bad:
            values.append(nan)
            why.append("base reply not teacher-forced after this variant prompt" if f is None
                       else f"invalid teacher-forced log-probs: {bad}"[:300])
            continue
        values.append(base_reply_deltas(f, u.forced_base)[which])
        why.append(None)
    return OptionValues(values, why)


def _code_mr_label(option: str, v: Variant, plain: str | None, prompt_text: str | None) -> str | None:
    """``deltas.detector`` of an ``mr@…`` option value: which of the authors' rules gave it."""
    fam, sub = v.spec.family, v.spec.subtype
    if option != "length_fail" and fam == "surface_noise" and prompt_text is not None:
        return f"authors' pairwise rule, measured strength {measured_strength(sub, prompt_text, v.text):g}"
    if option != "length_fail" and fam == "social_register":
        return f"{plain}, pairwise: max(ΔMR, 0)"
    if option != "pairwise" and fam == "structural" and sub == "length":
        return "rules, length sign: m(y^v) − 1"
    return plain


def code_mr(name: str, inputs: OptionInputs) -> OptionValues:
    """``mr@<option>``: Δ-MR under the SAGO authors' rules (``axes.mirroring_code``) from the replies,
    the run's Δ-MR (``inputs.plain["mr"]``) and ``Unit.prompt_text``, labelled with the rule used."""
    u, opt = inputs.unit, option_of(name)
    texts = [r.text for r in u.results]
    values = code_delta_mr(opt, texts, list(u.variants), u.base.text, inputs.plain["mr"], u.prompt_text)
    why = [code_mr_reason(opt, v, u.prompt_text) for v in u.variants]
    labels = [_code_mr_label(opt, v, p, u.prompt_text) for v, p in zip(u.variants, inputs.labels["mr"])]  # type: ignore[arg-type]
    return OptionValues(values, why, labels)
