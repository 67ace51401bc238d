"""Leaked prompt tails in replies decoded from left-padded batches.

A decoder-only model generating a left-padded batch returns, per row, ``[pads | prompt | new
tokens]``, all rows as long as the longest prompt plus the new tokens. Slicing a row at its own
prompt length (the number of non-pad tokens) instead of the padded length keeps the last
``pad_count`` prompt tokens in front of the reply: the reply then starts with the end of the
rendered prompt — the user's text and the chat template's closing tokens, special tokens removed by
``skip_special_tokens`` — e.g. ``"…in 1925?assistant\\n\\nI am unable to verify…"`` (Llama 3) or
``"Royal Flash?\\nmodel\\nThere is no…"`` (Gemma). The longest prompt of a batch has no pads and no
leak; a leak of one or two template tokens that decode to whitespace is invisible once the reply
is stripped.

Detection needs only the row: the prompt text it answered and the reply. A reply leaks when a
prefix of it ends with the template's last visible token (``marker``, e.g. ``assistant``) followed
by the template's trailing whitespace (or the end of the reply), and that prefix, whitespace
removed, is the end of the rendered prompt (head + prompt + tail, whitespace removed) — or ends
with the whole prompt and tail (a leak reaching into the template's head, whose text can vary,
e.g. Llama 3.2's date line). Whitespace is ignored in the comparison because chat templates trim
the message and decoding may re-space punctuation. Of several such prefixes the longest is the
leak, so a prompt that itself contains the marker word (``"Which assistant…"``) is not cut short.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class TemplateText:
    """A chat template as its decoded text reads with special tokens skipped.

    ``head`` is the text before the user's message, ``tail`` the text after it (ending with the
    generation prompt), ``marker`` the last visible token of ``tail`` (what a leak always ends with,
    before the tail's trailing whitespace).
    """

    name: str
    head: str
    tail: str
    marker: str

    @property
    def after_marker(self) -> str:
        """The tail's text after the marker (whitespace, e.g. ``"\\n\\n"``)."""
        return self.tail[self.tail.rindex(self.marker) + len(self.marker):]


#: Decoded chat templates of the models the SAGO authors evaluated (read off their released rows,
#: where the leaked text shows them; special tokens such as ``<start_of_turn>`` are skipped).
TEMPLATES: dict[str, TemplateText] = {
    "gemma": TemplateText("gemma", "user\n", "\nmodel\n", "model"),
    "llama3": TemplateText(
        "llama3", "system\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nuser\n\n",
        "assistant\n\n", "assistant"),
    "qwen2.5": TemplateText(
        "qwen2.5", "system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\nuser\n",
        "\nassistant\n", "assistant"),
    "qwen3.5-thinking": TemplateText("qwen3.5-thinking", "user\n", "\nassistant\n<think>\n", "<think>"),
}

#: The authors' model keys → their decoded template (Qwen3.5 was run with thinking on: the
#: generation prompt ends with ``<think>``, which is not a special token and stays in the text).
MODEL_TEMPLATES: dict[str, str] = {
    "L3.2-3B": "llama3", "L3.1-8B": "llama3",
    "G-2B": "gemma", "G-7B": "gemma", "G4-E4B": "gemma",
    "Q2.5-1.5B": "qwen2.5", "Q2.5-7B": "qwen2.5",
    "Q3.5-9B": "qwen3.5-thinking",
}


@dataclass(frozen=True)
class Leak:
    """The leak found in one reply: ``leaked`` (the prompt text at the start, "" if none),
    ``cleaned`` (the reply without it, leading whitespace removed) and ``template`` (its name)."""

    leaked: str
    cleaned: str
    template: str | None = None

    @property
    def found(self) -> bool:
        return bool(self.leaked)


def squash(text: str) -> str:
    """``text`` with every whitespace character removed (the comparison ignores spacing)."""
    return "".join(text.split())


def _leak_end(reply: str, prompt: str, t: TemplateText) -> int:
    """End index of the longest leaked prefix of ``reply`` under template ``t``, 0 if none."""
    full = squash(t.head + prompt + t.tail)
    body = squash(prompt + t.tail)
    after = t.after_marker
    best = 0
    for m in re.finditer(re.escape(t.marker), reply):
        end = m.end()
        rest = reply[end:]
        if rest and not rest.startswith(after):
            continue
        q = squash(reply[:end])
        if q and (full.endswith(q) or q.endswith(body)):
            best = end + len(after) if rest else end
    return best


def find_leak(reply: str | None, prompt: str | None, templates: Iterable[TemplateText]) -> Leak:
    """The leaked prompt tail at the start of ``reply``, if any (module docstring has the rule).

    Args:
        reply: the reply as released (None / NaN-like non-strings count as "").
        prompt: the prompt text that reply answered (the row's base or variant prompt).
        templates: the decoded templates to try (the model's own, or every known one); the longest
            leak over them wins.
    Returns:
        ``Leak``; ``cleaned == reply`` and ``leaked == ""`` when nothing leaked.
    """
    text = reply if isinstance(reply, str) else ""
    p = prompt if isinstance(prompt, str) else ""
    best, name = 0, None
    for t in templates:
        end = _leak_end(text, p, t)
        if end > best:
            best, name = end, t.name
    if not best:
        return Leak("", text, None)
    return Leak(text[:best], text[best:].lstrip(), name)


def templates_for(model_key: str, known: Mapping[str, str] = MODEL_TEMPLATES) -> tuple[TemplateText, ...]:
    """The templates to try for one of the authors' model keys: its own when known, else every one."""
    name = known.get(model_key)
    return (TEMPLATES[name],) if name else tuple(TEMPLATES.values())
