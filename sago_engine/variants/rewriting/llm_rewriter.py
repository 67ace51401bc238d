"""LLM rewriter for structural variants: length to a target ratio and interrogative ↔ imperative.

SAGO (arXiv 2610.01428) §Variants, family 3: the paper rewrote with GPT-4o-mini and did not
publish its prompt. ``LLMRewriter`` implements the ``Rewriter`` protocol through any
``Backend`` (greedy, T = 0) with one fixed, versioned prompt (``REWRITER_TEMPLATE_TEXT``, id
``REWRITER_TEMPLATE_ID`` = its ``stable_hash``). Outputs are cleaned (preambles such as
"Here is the rewritten prompt:", surrounding quotes) and checked: an empty, unchanged,
repetitive or wrong-direction rewrite gets a ``rewrite_issue`` in its meta, which the
semantic filter treats as a failure (the variant is stored with kept = False).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sago_engine.seeds import stable_hash, template_id
from sago_engine.variants._text import word_count
from sago_engine.variants.structural import mood_target

#: The rewrite prompt; ``instruction`` is one of ``INSTRUCTIONS`` (formatted), ``text`` the base prompt.
REWRITER_TEMPLATE = """Rewrite the prompt below. {instruction}
Keep its meaning: the same request, with the same facts, names and numbers. Do not answer it.
Reply with the rewritten prompt only: no introduction, no quotes, no explanation.

Prompt:
{text}

Rewritten prompt:"""

#: Task instructions by kind. ``n_words``: words of the base prompt; ``target_words``: round(ratio × n_words).
INSTRUCTIONS: dict[str, str] = {
    "compress": "Make it shorter: about {target_words} words instead of {n_words}.",
    "expand": ("Make it longer: about {target_words} words instead of {n_words}, adding only neutral "
               "context (no new facts, no new questions)."),
    "question": "Turn it into a question (interrogative mood) that asks for the same thing.",
    "imperative": "Turn it into a command (imperative mood) that asks for the same thing; it must not be a question.",
}

#: The full stored template: the prompt and every instruction (what ``templates.text`` holds).
REWRITER_TEMPLATE_TEXT = REWRITER_TEMPLATE + "\n\n--- instructions ---\n" + "\n".join(
    f"{k}: {v}" for k, v in INSTRUCTIONS.items())
REWRITER_TEMPLATE_ID = template_id(REWRITER_TEMPLATE_TEXT)

#: Default decoding budget per rewrite (fixed, so a rewrite never depends on its batch-mates' lengths).
REWRITER_MAX_NEW_TOKENS = 160

_PREAMBLE = re.compile(
    r"^\s*(?:(?:sure|okay|ok|certainly|of course|absolutely)\b[!,.]*\s*)?"
    r"(?:(?:here(?:'s| is| are)\b[^\n:]{0,80}:)|(?:(?:the |a |my )?(?:rewritten|revised|shortened|"
    r"longer|shorter|expanded|compressed|new)\s+(?:prompt|version|text|request|question|command)[^\n:]{0,40}:)|"
    r"(?:rewritten prompt\s*:)|(?:prompt\s*:))\s*", re.IGNORECASE)
_TRAILER = re.compile(r"^\s*(?:\(?note\b|explanation\b|this (?:rewritten|version|rewrite|prompt)\b|"
                      r"i (?:have|made|kept|changed|removed|added)\b|i've\b|changes?\s*:)", re.IGNORECASE)
_QUOTES = (('"', '"'), ("'", "'"), ("“", "”"), ("‘", "’"), ("«", "»"), ("`", "`"))


def clean_output(raw: str, base: str | None = None) -> str:
    """The rewrite inside a model's raw answer.

    Strips surrounding whitespace, code fences, leading preambles ("Sure! Here is the
    rewritten prompt:", "Rewritten prompt:"), trailing explanation paragraphs ("Note: ...",
    "This version ...", "I removed ...") and one or more layers of matching surrounding quotes.
    A quote pair is a wrapper when the base prompt is not itself wrapped in it (with ``base``),
    else (no ``base``) only when the quote characters appear nowhere inside.

    Args:
        raw: the generated text (may be empty).
        base: the base prompt that was rewritten (optional; decides what a wrapper is).
    Returns:
        The cleaned text ("" when nothing is left).
    """
    t = (raw or "").strip()
    t = re.sub(r"^```[a-zA-Z]*\s*|\s*```$", "", t).strip()
    for _ in range(3):
        new = _PREAMBLE.sub("", t, count=1).strip()
        if new == t:
            break
        t = new
    paras = [p for p in re.split(r"\n\s*\n", t) if p.strip()]
    while len(paras) > 1 and _TRAILER.match(paras[-1]):
        paras.pop()
    t = "\n\n".join(p.strip() for p in paras).strip()
    changed = True
    while changed and len(t) >= 2:
        changed = False
        for a, b in _QUOTES:
            inner = t[1:-1]
            if not (t.startswith(a) and t.endswith(b)):
                continue
            b0 = (base or "").strip()
            wrapped_base = len(b0) >= 2 and b0.startswith(a) and b0.endswith(b)
            if (not wrapped_base) if base is not None else (a not in inner and b not in inner):
                t, changed = inner.strip(), True
                break
    return t


def _norm(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


def rewrite_issue(base: str, out: str, kind: str, arg: float | str, error: str | None = None) -> str | None:
    """Why a cleaned rewrite is degenerate, or None when it is usable.

    Args:
        base: the base prompt; out: the cleaned rewrite; kind: "length" | "mood";
        arg: the target ratio (length) or mood ("question" | "imperative"); error: the backend's.
    Returns:
        "backend error: …", "empty output", "unchanged (same words as the base prompt)",
        "repetitive output (…)", "length moved the wrong way (achieved r for target t)", or None.
    """
    if error:
        return f"backend error: {error[:200]}"
    if not out.strip():
        return "empty output"
    if _norm(out) == _norm(base):
        return "unchanged (same words as the base prompt)"
    words = _norm(out).split()
    if len(words) >= 6:
        w, c = Counter(words).most_common(1)[0]
        if c / len(words) > 0.5:
            return f"repetitive output ({w!r} is {c} of {len(words)} words)"
    if kind == "length":
        achieved = word_count(out) / max(1, word_count(base))
        ratio = float(arg)
        if (ratio < 1 and achieved >= 1) or (ratio > 1 and achieved <= 1):
            return f"length moved the wrong way (achieved {achieved:.2f} for target {ratio:g})"
    return None


def generator_id(model: str, settings: Mapping[str, Any] | None = None,
                 template_text: str = REWRITER_TEMPLATE_TEXT) -> str:
    """The rewriter's generator id: ``llm:<model>:<template_id>:<settings_id>``.

    ``settings_id`` = ``stable_hash(settings, length=8)`` of what else can change a rewrite
    (backend name, dtype, max_new_tokens …; not the device or batch size). The generator enters
    every variant's seed and id, so rewrites from another model, template or setting never
    share an id with these.
    """
    return f"llm:{model}:{template_id(template_text)}:{stable_hash(dict(settings or {}), length=8)}"


@dataclass(frozen=True)
class Rewrite:
    """One LLM rewrite with its evidence."""

    text: str
    """The cleaned rewrite (may be "" for a degenerate one)."""
    raw: str
    """The backend's raw text."""
    issue: str | None
    """``rewrite_issue`` of the cleaned text (None = usable)."""
    flags: tuple[str, ...] = ()
    """What the reply boundary changed in ``raw`` (``GenerationResult.flags``: ``replytext``)."""



class RewriterUnavailableError(RuntimeError):
    """The rewriter's backend failed transiently (429/5xx/timeout/connection, retries exhausted)."""

class LLMRewriter:
    """``Rewriter`` through any ``Backend`` (SAGO §Variants family 3; paper: GPT-4o-mini).

    Greedy decoding (T = 0), so the same (model, template, prompt) gives the same rewrite; the
    ``rng`` of the protocol is not used. Call ``prefetch`` with every request first to batch
    them into one ``backend.generate`` call; a request not prefetched is generated on its own.
    """

    def __init__(self, backend, model: str | None = None, settings: Mapping[str, Any] | None = None,
                 max_new_tokens: int = REWRITER_MAX_NEW_TOKENS) -> None:
        """
        Args:
            backend: any object with the ``Backend`` protocol.
            model: the model label in the generator id (default ``backend.model_id``).
            settings: decoding/back-end settings hashed into the generator id (see ``generator_id``).
            max_new_tokens: decoding budget per rewrite (≥ 1).
        Raises:
            ValueError: max_new_tokens < 1.
        """
        if int(max_new_tokens) < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        self.backend = backend
        self.model = str(model or backend.model_id)
        self.max_new_tokens = int(max_new_tokens)
        self.template_id = REWRITER_TEMPLATE_ID
        self.name = generator_id(self.model, settings)
        self._done: dict[tuple[str, str, Any], Rewrite] = {}

    @staticmethod
    def render(kind: str, text: str, arg: float | str) -> str:
        """The exact prompt for a request: kind "length" (arg = ratio) or "mood" (arg = target mood).

        Raises:
            ValueError: unknown kind or mood, or a ratio ≤ 0.
        """
        if kind == "length":
            ratio = float(arg)
            if ratio <= 0:
                raise ValueError(f"ratio must be > 0, got {arg}")
            n = word_count(text)
            key = "compress" if ratio < 1 else "expand"
            instr = INSTRUCTIONS[key].format(n_words=n, target_words=max(1, int(ratio * n + 0.5)))
        elif kind == "mood":
            if arg not in ("question", "imperative"):
                raise ValueError(f"target must be 'question' or 'imperative', got {arg!r}")
            instr = INSTRUCTIONS[str(arg)]
        else:
            raise ValueError(f"kind must be 'length' or 'mood', got {kind!r}")
        return REWRITER_TEMPLATE.format(instruction=instr, text=text)

    @staticmethod
    def request(subtype: str, text: str, strength: float) -> tuple[str, str, Any]:
        """The (kind, text, arg) request that ``Structural.apply`` makes for (subtype, strength)."""
        if subtype == "length":
            return ("length", text, float(strength))
        return ("mood", text, mood_target(text))

    def prefetch(self, requests: Iterable[tuple[str, str, Any]]) -> int:
        """Generate every new (kind, text, arg) request in one batched call; returns how many.

        Raises:
            RewriterUnavailableError: an API request failed transiently (retries ran out) — a
                permanent failure is recorded as the rewrite's issue instead.
        """
        todo = list(dict.fromkeys(r for r in requests if r not in self._done))
        if not todo:
            return 0
        results = self.backend.generate([self.render(*r) for r in todo], self.max_new_tokens)
        if len(results) != len(todo):
            raise RuntimeError(f"rewriter backend returned {len(results)} results for {len(todo)} prompts")
        transient = [r for r in results if (r.meta or {}).get("retryable")]
        if transient:  # never store an outage as a rejected rewrite: it would be permanent
            raise RewriterUnavailableError(
                f"the rewriter's API failed transiently for {len(transient)} of {len(todo)} rewrites (retries ran "
                f"out: {transient[0].error[:200]}); nothing was stored — rerun the same command to retry "
                f"(successful replies are cached)")
        for (kind, text, arg), res in zip(todo, results):
            raw = res.text or ""
            out = "" if res.error else clean_output(raw, text)
            self._done[(kind, text, arg)] = Rewrite(out, raw, rewrite_issue(text, out, kind, arg, res.error),
                                                    tuple(res.flags))
        return len(todo)

    def get(self, kind: str, text: str, arg: float | str) -> Rewrite:
        """The rewrite of one request (generated now if it was not prefetched)."""
        key = (kind, text, float(arg) if kind == "length" else arg)
        if key not in self._done:
            self.prefetch([key])
        return self._done[key]

    def rewrite_length(self, text: str, ratio: float, rng: random.Random | None = None) -> str:
        """``text`` compressed (ratio < 1) or expanded (ratio > 1) by the LLM; ``rng`` unused."""
        return self.get("length", text, float(ratio)).text

    def rewrite_mood(self, text: str, target: str, rng: random.Random | None = None) -> str:
        """``text`` turned into ``target`` mood ("question" | "imperative") by the LLM; ``rng`` unused."""
        return self.get("mood", text, target).text

    def rewrite_meta(self, kind: str, text: str, arg: float | str) -> dict[str, Any]:
        """Extra variant meta: ``template_id``, ``rewrite_issue`` (None = usable) and
        ``raw_output`` (the first 500 chars of the raw answer, only when cleaning changed it),
        ``reply_flags`` (``Rewrite.flags``, only when the reply boundary changed the answer)."""
        r = self.get(kind, text, arg)
        meta: dict[str, Any] = {"template_id": self.template_id, "rewrite_issue": r.issue}
        if r.raw.strip() != r.text:
            meta["raw_output"] = r.raw[:500]
        if r.flags:
            meta["reply_flags"] = list(r.flags)
        return meta

    def close(self) -> None:
        """Close the backend."""
        self.backend.close()
