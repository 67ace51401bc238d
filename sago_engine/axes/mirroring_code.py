"""Δ-MR under the rules of the SAGO authors' code, as option axes beside the paper text's Δ-MR.

The paper's text defines ΔMR = m(y^v, v) − m(y, v): each reply is judged alone for the variant's
target attribute (``sago_engine.axes.mirroring``). The authors' code
(``Mahmoudbj48/Styled-Prompts-Shifted-Behavior-v2``, ``utils/compute_surface_mirroring.py``
``detect_mirroring``; ``utils/metrics.py`` ``build_mirroring_prompt_politeness``; the released
length rows) computes it differently; docs/METHOD.md "The authors' code as options" compares them:

* **pairwise** (``mr@pairwise``): one verdict on the pair — did y^v gain the variant's noise over
  y? — minus the same verdict on the baseline pair (y, y), which is 0. Surface noise: the increase
  of a noise count from y to y^v and its rate in y^v must both reach thresholds that grow with the
  strength, on the authors' strength scale (spaces added, marks added, % of letters upper-cased);
  sago's variants have their own grid, so the strength is **measured** from the prompt pair
  (``measured_strength``). Social register: 1 when y^v shows the variant's register and y does
  not (the paper text's two verdicts, read as a comparison: the authors' judge answered "is y^v
  clearly more / less polite than y"). Structural length keeps the paper text's rule; form (mood)
  has no Δ-MR in their code: unavailable.
* **length_fail** (``mr@length_fail``): for length variants m(y^v, v) − 1 ∈ {−1, 0} — their
  baseline row always "scales" (ratio 1 = target 1), so every reply that misses its target scores
  −1 where the paper's text scores a reply that hits it +1. Other variants: the paper text's ΔMR.
* **paper_code** (``mr@paper_code``): both, as their code has it — pairwise surface noise and
  register, the length sign, no Δ-MR for form.

Values in {−1, 0, 1} (R_X = R_mr = 1), NaN where a rule has no verdict (stored as unavailable with
the reason ``unavailable_reason`` gives).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from sago_engine.axes.mirroring import mirrors
from sago_engine.types import Variant

__all__ = ["CODE_MR_OPTIONS", "abnormal_case_pct", "code_delta_mr", "extra_punctuation", "extra_spaces",
           "measured_strength", "noise_mirrors_pair", "unavailable_reason"]

#: The Δ-MR options of this module (the text after ``mr@``).
CODE_MR_OPTIONS: tuple[str, ...] = ("pairwise", "length_fail", "paper_code")

_SPACE_RUN = re.compile(r" {2,}")
#: (pattern, characters of a run that are not noise): "!!!" has 2 extra marks, "....." 2 (an
#: ellipsis of three dots is normal text).
_PUNCT_RUNS: tuple[tuple[re.Pattern, int], ...] = (
    (re.compile(r"!{2,}"), 1), (re.compile(r"\?{2,}"), 1), (re.compile(r"\.{4,}"), 3),
    (re.compile(r",{2,}"), 1), (re.compile(r";{2,}"), 1),
)
_WORDS = re.compile(r"\b\w+\b")
#: Upper bound of each strength band (inclusive) → (least increase, least rate in % of y^v's
#: characters); above the last band the last pair applies. Strength on the authors' scale.
_SPACING_BANDS = ((20, 3, 5), (50, 5, 8), (float("inf"), 10, 12))
_PUNCT_BANDS = ((5, 2, 3), (10, 4, 5), (float("inf"), 6, 8))
#: Letter case: (upper bound of % upper-cased, least abnormal-case % in y^v); the increase must be ≥ 5 points.
_CASE_BANDS = ((25, 8), (50, 15), (float("inf"), 25))
_CASE_MIN_INCREASE = 5.0
_PUNCT_CHARS = frozenset(".,!?;:'\"()[]{}-…")


def extra_spaces(text: str) -> int:
    """Spaces beyond the first in every run of two or more spaces (tabs and newlines not counted)."""
    return sum(len(m.group()) - 1 for m in _SPACE_RUN.finditer(text))


def extra_punctuation(text: str) -> int:
    """Marks beyond the normal in repeated ``!``, ``?``, ``,``, ``;`` (beyond 1) and ``.`` (beyond 3)."""
    return sum(len(m.group()) - keep for pat, keep in _PUNCT_RUNS for m in pat.finditer(text))


def _abnormal(word: str) -> bool:
    letters = [c for c in word if c.isalpha()]
    if len(letters) <= 1 or word.islower() or (word[0].isupper() and word[1:].islower()):
        return False
    if word.isupper():
        return len(letters) > 4  # an acronym of up to 4 letters is normal
    return any(c.isupper() for c in letters) and any(c.islower() for c in letters)


def abnormal_case_pct(text: str) -> float:
    """% of the letters of ``text`` (over words ``\\b\\w+\\b``) that sit in abnormally cased words:
    all caps with more than 4 letters, or mixed case other than Title case. 0.0 without letters."""
    total = abnormal = 0
    for w in _WORDS.findall(text):
        n = sum(c.isalpha() for c in w)
        total += n
        abnormal += n if n and _abnormal(w) else 0
    return 100.0 * abnormal / total if total else 0.0


def measured_strength(subtype: str, base_prompt: str, variant_prompt: str) -> float:
    """The strength of a surface-noise variant on the authors' scale, measured from the two prompts.

    Args:
        subtype: ``"spacing"`` | ``"punctuation"`` | ``"case"``.
        base_prompt, variant_prompt: x and x^v.
    Returns:
        spacing: characters added (len(x^v) − len(x), at least 0: spaces and tabs inserted);
        punctuation: punctuation marks added (count in x^v − count in x, at least 0);
        case: % of x's letters that are lower case in x and upper case in x^v (0–100; the
        variant's case edits keep every character in place).
    Raises:
        ValueError: another subtype.
    """
    if subtype == "spacing":
        return float(max(len(variant_prompt) - len(base_prompt), 0))
    if subtype == "punctuation":
        count = lambda t: sum(c in _PUNCT_CHARS for c in t)  # noqa: E731
        return float(max(count(variant_prompt) - count(base_prompt), 0))
    if subtype == "case":
        letters = sum(c.isalpha() for c in base_prompt)
        if not letters:
            return 0.0
        raised = sum(a.islower() and b.isupper() for a, b in zip(base_prompt, variant_prompt))
        return 100.0 * raised / letters
    raise ValueError(f"no measured strength for surface-noise subtype {subtype!r}")


def _band(bands, strength: float):
    return next(b[1:] for b in bands if strength <= b[0])


def noise_mirrors_pair(subtype: str, base_reply: str, reply: str, strength: float) -> int:
    """The pairwise verdict of the authors' surface-noise rule: 1 when ``reply`` (y^v) gained the
    noise over ``base_reply`` (y) by the thresholds of ``strength`` (authors' scale), else 0.

    spacing: increase of ``extra_spaces`` ≥ a and ``extra_spaces(y^v)`` / len(y^v) · 100 ≥ b with
    (a, b) = (3, 5) up to 20 spaces, (5, 8) up to 50, else (10, 12); punctuation: the same with
    ``extra_punctuation`` and (2, 3) up to 5 marks, (4, 5) up to 10, else (6, 8); case: increase
    of ``abnormal_case_pct`` ≥ 5 points and the pct of y^v ≥ 8 up to 25 %, 15 up to 50 %, else 25.
    Raises ValueError for another subtype.
    """
    if subtype in ("spacing", "punctuation"):
        count = extra_spaces if subtype == "spacing" else extra_punctuation
        inc_min, rate_min = _band(_SPACING_BANDS if subtype == "spacing" else _PUNCT_BANDS, strength)
        pert = count(reply)
        rate = 100.0 * pert / max(len(reply), 1)
        return int(pert - count(base_reply) >= inc_min and rate >= rate_min)
    if subtype == "case":
        (pct_min,) = _band(_CASE_BANDS, strength)
        p = abnormal_case_pct(reply)
        return int(p - abnormal_case_pct(base_reply) >= _CASE_MIN_INCREASE and p >= pct_min)
    raise ValueError(f"no pairwise rule for surface-noise subtype {subtype!r}")


def unavailable_reason(option: str, variant: Variant, base_prompt: str | None) -> str | None:
    """Why ``mr@<option>`` has no value for ``variant``, or None when it has one."""
    fam, sub = variant.spec.family, variant.spec.subtype
    if option in ("pairwise", "paper_code") and fam == "structural" and sub == "mood":
        return "the authors' code has no Δ-MR for form (interrogative ↔ imperative)"
    if option in ("pairwise", "paper_code") and fam == "surface_noise" and base_prompt is None:
        return "base prompt text not given (the pairwise rule's strength is measured from it)"
    return None


def code_delta_mr(option: str, responses: Sequence[str], variants: Sequence[Variant], base_response: str,
                  plain: Sequence[float], base_prompt: str | None) -> np.ndarray:
    """``mr@<option>`` of each variant of one prompt.

    Args:
        option: one of ``CODE_MR_OPTIONS``.
        responses: y^v per variant; variants: the variants (same order); base_response: y.
        plain: the paper text's ΔMR of each variant as the run computed it (the offline detectors,
            or the LLM judge's verdicts where a judge ran): kept where the option keeps the paper
            text's rule, and read as a comparison for social register (max(ΔMR, 0)).
        base_prompt: x (for the measured strength of surface noise); None = not known.
    Returns:
        (n,) float64 in {−1, 0, 1}; NaN where ``unavailable_reason`` gives a reason.
    Raises:
        ValueError: an unknown option or lengths that differ.
    Source: the SAGO authors' code (module docstring); SAGO (arXiv 2610.01428) §Axes for the plain rule.
    """
    if option not in CODE_MR_OPTIONS:
        raise ValueError(f"unknown Δ-MR option {option!r}; valid: {', '.join(CODE_MR_OPTIONS)}")
    if not (len(responses) == len(variants) == len(plain)):
        raise ValueError(f"{len(responses)} responses, {len(variants)} variants, {len(plain)} plain values")
    out = np.empty(len(variants), dtype=np.float64)
    for j, (y_v, v, p) in enumerate(zip(responses, variants, plain)):
        fam, sub = v.spec.family, v.spec.subtype
        pair = option in ("pairwise", "paper_code")
        if unavailable_reason(option, v, base_prompt):
            out[j] = np.nan
        elif pair and fam == "surface_noise":
            out[j] = noise_mirrors_pair(sub, base_response, y_v, measured_strength(sub, base_prompt, v.text))
        elif pair and fam == "social_register":
            out[j] = max(float(p), 0.0)
        elif option != "pairwise" and fam == "structural" and sub == "length":
            out[j] = mirrors(y_v, v, base_response) - 1
        else:
            out[j] = float(p)
    return out
