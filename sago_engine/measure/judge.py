"""LLM judge for social-register mirroring: does a response mirror the variant's register? (SAGO §Axes, Δ-MR).

The paper judged social-register mirroring with GPT-4o-mini and did not publish the prompt or
the temperature (a reviewer's complaint). sago fixes one versioned prompt template
(``JUDGE_TEMPLATE``, id ``JUDGE_TEMPLATE_ID`` = ``stable_hash`` of its text), decodes greedily
(T = 0) through any ``Backend`` and stores every raw answer next to the offline heuristic's
verdict, so a judged Δ-MR can always be audited and recomputed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sago_engine.axes.mirroring import detector_kind, mirrors
from sago_engine.seeds import template_id
from sago_engine.types import Variant

#: The judge prompt (SAGO §Axes, Δ-MR for social register). Placeholders: ``register``
#: (what the variant's framing is), ``subtype``, ``strength``, ``base_prompt``,
#: ``variant_prompt``, ``response``. Changing one character changes ``JUDGE_TEMPLATE_ID``,
#: and with it the run id of every judged run.
JUDGE_TEMPLATE = """You are rating the tone of a chatbot reply.

Original request: {base_prompt}
Rephrased request: {variant_prompt}
The rephrased request has this social register: {register} (subtype {subtype}, strength {strength}).
Chatbot reply: {response}

Does the chatbot reply itself show that register ({register})? \
Judge only the tone and framing of the reply, not whether it is correct.
Answer with exactly one word: YES or NO."""


JUDGE_TEMPLATE_ID = template_id(JUDGE_TEMPLATE)

#: Register label (``social_phrases.REGISTERS``) → what the judge is told to look for.
REGISTER_DESCRIPTIONS: dict[str, str] = {
    "rude": "rude, insulting or hostile",
    "impatient": "impatient, hurried or irritated",
    "dismissive": "dismissive or curt",
    "negative": "negative, hostile or demeaning framing",
    "neutral": "neutral, neither polite nor rude",
    "polite": "polite and courteous",
    "greeting": "opens with a greeting",
    "gratitude": "expresses gratitude or thanks",
    "hedging": "hedged, tentative or uncertain",
    "direct": "blunt and direct, no pleasantries or filler",
}

#: Default decoding budget of the judge: room for "YES"/"NO" plus a stray token or two.
JUDGE_MAX_NEW_TOKENS = 4

#: A final "Answer: YES|NO" line (markdown emphasis allowed), the template's explicit form.
_ANSWER_LINE = re.compile(r"^[\s*_`>#-]*answer[\s*_`]*:[\s*_`]*(yes|no)[\s*_`]*[.!]?[\s*_`]*$", re.IGNORECASE)
#: The answer opens with the verdict word, followed by the end or punctuation (not by more prose:
#: "No rudeness here" is a sentence, not a verdict).
_LEADING = re.compile(r"^[\s*_`\"'“‘(\[]*(yes|no)(?![a-z])[*_`\"'”’)\]]*(?=\s*(?:$|[.,!;:\-–—]))", re.IGNORECASE)
_ANY = re.compile(r"(?<![a-z])(yes|no)(?![a-z])", re.IGNORECASE)


def parse_verdict(text: str | None) -> int | None:
    """The verdict in a judge's raw answer, only when it is unambiguous under ``JUDGE_TEMPLATE``
    ("Answer with exactly one word: YES or NO").

    Accepted, case-insensitive: (a) a last non-empty line ``Answer: YES`` / ``Answer: NO``;
    (b) an answer that opens with YES or NO followed by the end or punctuation (``"NO."``,
    ``"**Yes**, it does"``), and in which the other verdict word does not appear later.
    Anything else — a verdict word inside prose ("There is no", "No rudeness here. YES"),
    both words, none — is None; the caller then falls back to the offline heuristic and the
    run counts it (``Store.judge_parse_counts``).

    Args:
        text: the raw generated text (may be None or empty).
    Returns:
        1 for YES, 0 for NO, None when there is no unambiguous verdict. " yes." → 1, "NO.\n" → 0,
        "No, yes" → None, "There is no" → None, "yesterday" → None.
    """
    if not text or not text.strip():
        return None
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    m = _ANSWER_LINE.match(lines[-1])
    if m is None:
        m = _LEADING.match(text.strip())
        if m is None:
            return None
        rest = text.strip()[m.end():]
        if any(w.group(1).lower() != m.group(1).lower() for w in _ANY.finditer(rest)):
            return None  # "No, yes": contradicts itself
    return 1 if m.group(1).lower() == "yes" else 0


def describe_register(variant: Variant) -> str:
    """The register description the judge gets for a social-register variant.

    Uses ``meta["register"]`` (see ``REGISTER_DESCRIPTIONS``), falling back to the subtype name.
    """
    reg = str((variant.meta or {}).get("register") or variant.spec.subtype)
    return REGISTER_DESCRIPTIONS.get(reg, reg.replace("_", " "))


@dataclass(frozen=True)
class JudgeItem:
    """One judgement: does ``response`` mirror the register of ``variant``?"""

    variant: Variant
    """A social_register variant (its spec, meta["register"] and text go into the prompt)."""
    base_prompt: str
    """The base prompt x_i the variant was made from."""
    response: str
    """The reply to judge: the variant's reply (for m(y^(v), v)) or the base reply (for m(y, v))."""


@dataclass(frozen=True)
class Verdict:
    """The judge's answer on one ``JudgeItem``."""

    verdict: int | None
    """1 (YES, mirrors), 0 (NO), or None when the answer had no usable YES/NO (or errored)."""
    raw: str
    """The generated text as returned by the backend (kept for audit; "" on error)."""
    judge_model: str
    """The judge backend's model id (``backend.info()["model_id"]``, else ``backend.model_id``)."""
    template_id: str
    """Id of the template that built the prompt (``template_id(template)``)."""
    error: str | None = None
    """The backend's error for this item, if any (then ``verdict`` is None)."""
    flags: tuple[str, ...] = ()
    """What the reply boundary changed in ``raw`` (``GenerationResult.flags``: ``replytext``)."""


class Judge:
    """A mirroring judge over any ``Backend`` (SAGO §Axes, Δ-MR; paper: GPT-4o-mini).

    Decoding is the backend's: sago backends are greedy (T = 0), so the same item gives the
    same verdict. Use ``render`` to see the exact prompt of an item.
    """

    def __init__(self, backend, template: str = JUDGE_TEMPLATE, max_new_tokens: int = JUDGE_MAX_NEW_TOKENS) -> None:
        """
        Args:
            backend: any object with the ``Backend`` protocol (``generate``, ``info``, ``model_id``).
            template: the prompt template (placeholders as ``JUDGE_TEMPLATE``).
            max_new_tokens: decoding budget per judgement (≥ 1).
        Raises:
            ValueError: max_new_tokens < 1, or a template that does not format with the
                ``JUDGE_TEMPLATE`` placeholders.
        """
        if int(max_new_tokens) < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        try:
            template.format(register="", subtype="", strength="", base_prompt="", variant_prompt="", response="")
        except (KeyError, IndexError, ValueError) as e:
            raise ValueError(f"judge template does not format with the JUDGE_TEMPLATE placeholders: {e!r}") from None
        self.backend = backend
        self.template = template
        self.template_id = template_id(template)
        self.max_new_tokens = int(max_new_tokens)
        self.model = str(backend.info().get("model_id") or backend.model_id)

    @property
    def label(self) -> str:
        """The ``deltas.detector`` label of a Δ-MR decided by this judge: ``"judge:<model>"``."""
        return f"judge:{self.model}"

    def render(self, item: JudgeItem) -> str:
        """The exact prompt sent to the backend for ``item``."""
        v = item.variant
        return self.template.format(
            register=describe_register(v), subtype=v.spec.subtype, strength=f"{v.spec.strength:g}",
            base_prompt=item.base_prompt, variant_prompt=v.text, response=item.response,
        )

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        """Judge every item in one batched ``backend.generate`` call.

        Args:
            items: n JudgeItems.
        Returns:
            n Verdicts in the order of ``items`` (an empty list for no items, without calling
            the backend). An item the backend failed on has verdict None and its ``error``.
        Raises:
            RuntimeError: the backend returned a different number of results than prompts.
        """
        if not items:
            return []
        prompts = [self.render(it) for it in items]
        results = self.backend.generate(prompts, self.max_new_tokens)
        if len(results) != len(prompts):
            raise RuntimeError(f"judge backend returned {len(results)} results for {len(prompts)} prompts")
        out = []
        for r in results:
            raw = r.text or ""
            out.append(Verdict(None if r.error else parse_verdict(raw), raw, self.model, self.template_id,
                               r.error, tuple(r.flags)))
        return out

    def close(self) -> None:
        """Close the backend."""
        self.backend.close()


@dataclass(frozen=True)
class JudgedMR:
    """Δ-MR of one social-register variant with both detectors' evidence."""

    delta: float
    """ΔMR = m(y^(v), v) − m(y, v) ∈ {−1, 0, 1} from the detector in ``detector``."""
    detector: str
    """``judge:<model>`` when both judge verdicts were usable, else ``"heuristic"`` (``detector_kind``)."""
    variant: Verdict
    """The judge on the variant's reply y^(v)."""
    base: Verdict
    """The judge on the base reply y (same variant, same register)."""
    heuristic_variant: int
    """The offline heuristic's m(y^(v), v) (``axes.mirroring.mirrors``)."""
    heuristic_base: int
    """The offline heuristic's m(y, v)."""


def judged_delta_mr(judge: Judge, variants: Sequence[Variant], base_prompts: Sequence[str],
                    responses: Sequence[str], base_responses: Sequence[str]) -> list[JudgedMR]:
    """Δ-MR of social-register variants decided by ``judge``, falling back to the heuristic.

    Both terms of ΔMR = m(y^(v), v) − m(y, v) are judged (2n prompts, one batched call). When
    either verdict is None (no usable YES/NO, or a backend error), both terms come from the
    offline heuristic instead, so a delta never mixes detectors.

    Args:
        judge: the judge; variants: n social_register variants; base_prompts, responses,
            base_responses: per variant, its base prompt, its reply and the base reply.
    Returns:
        n JudgedMR, in order.
    Raises:
        ValueError: sequences of different lengths.
    Source: SAGO (arXiv 2610.01428) §Axes (Δ-MR, judge for social register).
    """
    n = len(variants)
    if not (len(base_prompts) == len(responses) == len(base_responses) == n):
        raise ValueError("variants, base_prompts, responses and base_responses must have the same length")
    items = [JudgeItem(v, b, r) for v, b, r in zip(variants, base_prompts, responses)]
    items += [JudgeItem(v, b, y) for v, b, y in zip(variants, base_prompts, base_responses)]
    verdicts = judge.judge(items)
    out = []
    for k, v in enumerate(variants):
        jv, jb = verdicts[k], verdicts[n + k]
        hv, hb = mirrors(responses[k], v, base_responses[k]), mirrors(base_responses[k], v, base_responses[k])
        if jv.verdict is not None and jb.verdict is not None:
            delta, det = float(jv.verdict - jb.verdict), judge.label
        else:
            delta, det = float(hv - hb), detector_kind(v)
        out.append(JudgedMR(delta, det, jv, jb, hv, hb))
    return out
