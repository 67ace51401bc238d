"""The exact model input of a local model: a user prompt rendered and encoded, with the user's text as text.

A prompt is untrusted text. Tokenizing a rendered chat as one string turns any control-token
spelling in the user's text (``<|im_end|>``, ``<|im_start|>``, ``<|endoftext|>``, Gemma's
``<start_of_turn>``) into the control token itself: the user turn ends early and an assistant turn
is forged inside the prompt (transformers #29279; vLLM PR #31735 encodes user content apart).
``PromptRenderer`` keeps control tokens the *template* writes as tokens and encodes the same strings
inside the user's message as plain text (``<|im_end|>`` → ``<``, ``|``, ``im``, ``_``, ``end``,
``|``, ``>``), as transformers' ``apply_chat_template(..., sanitize_control_tokens=True)`` does.
Control tokens are the tokenizer's special tokens plus the added tokens the template's text uses
(transformers ``_get_control_tokens``); other added tokens (Gemma's newline runs and HTML tags)
stay the vocabulary items they are.

The rendered string is tokenized first; where no control token overlaps the user's characters,
those ids are the answer (transformers' sanitized encoding of a chat with nothing to sanitize is
that same call), so a prompt without control-token text encodes exactly as the rendered string does; otherwise the
ids come from transformers' sanitized encoding. ``tests/integration/backends/test_prompt_render.py`` checks on real
dataset prompts for smollm2, qwen2.5-coder-0.5b and gemma-3-270m that both give the same ids. A
base model (no template) gets its tokenizer's own added tokens (BOS) around the prompt, encoded the
same way.

Every chat render also gets a pinned clock (``template_clock.clock_variables``), so the same prompt
renders to the same ids on any day.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from .template_clock import clock_variables

__all__ = ["PromptRenderer", "USER_TEXT_RULE", "THINKING_SWITCHES", "template_records_match", "template_kwargs",
           "chat_template_of"]

#: How the user's text is encoded, as recorded in ``runs.decoding.chat_template["user_text"]``.
USER_TEXT_RULE = ("control tokens spelled in the user's text are encoded as text (special-token parsing off "
                  "inside the message: transformers apply_chat_template sanitize_control_tokens=True)")

#: The template a base model's prompt is encoded through: the prompt itself, nothing added.
_PLAIN_TEMPLATE = "{{ messages[0]['content'] }}"
#: A message that survives any template verbatim, used to find where the user's text starts.
_SENTINEL = "\u2063SAGO-USER-TEXT\u2063"


#: Chat-template variables that switch a reasoning trace on or off (Qwen3-style templates think
#: by default; ``enable_thinking=False`` makes them answer). Set to False unless the config says.
THINKING_SWITCHES: tuple[str, ...] = ("enable_thinking",)


def template_kwargs(template: str | None, given: dict[str, Any] | None = None) -> dict[str, Any]:
    """The extra variables the chat template is rendered with.

    Each of ``THINKING_SWITCHES`` that the template source mentions defaults to False (thinking
    off: the reply is an answer, not a reasoning trace); ``given`` (the config's
    ``chat_template_kwargs``) overrides and adds.

    Args:
        template: the chat template source (Jinja), or None for a model without one.
        given: explicit variables, or None.
    Returns:
        A new dict, sorted by name (``{}`` for a template without a switch and nothing given).
    Raises:
        ValueError: variables given for a model without a chat template, or a variable the
            template never mentions (it would be silently ignored).
    """
    given = dict(given or {})
    if template is None:
        if given:
            raise ValueError(f"chat_template_kwargs {sorted(given)} given, but the model has no chat template "
                             f"(base models get the plain prompt)")
        return {}
    unused = [k for k in given if not re.search(rf"\b{re.escape(k)}\b", template)]
    if unused:
        raise ValueError(f"chat_template_kwargs {unused} do not occur in the model's chat template "
                         f"(they would be ignored)")
    out = {k: False for k in THINKING_SWITCHES if re.search(rf"\b{k}\b", template)}
    out.update(given)
    return dict(sorted(out.items()))


def chat_template_of(tokenizer: Any, chat: bool, name: str = "model") -> str | None:
    """The chat template a chat model is rendered with (of named templates the one
    ``apply_chat_template`` uses by default), or None for a base model (``chat`` False).

    Raises:
        ValueError: ``chat`` but the tokenizer has no template (``name`` goes in the message).
    """
    if not chat:
        return None
    tmpl = getattr(tokenizer, "chat_template", None)
    if isinstance(tmpl, dict):
        tmpl = tmpl.get("default")
    if not tmpl:
        raise ValueError(f"model {name!r} is a chat model but its tokenizer has no chat template")
    return tmpl


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class PromptRenderer:
    """Render and encode user prompts for one tokenizer and chat template (no model needed).

    Args:
        tokenizer: a transformers tokenizer (fast or slow).
        template: the chat template source, or None for a base model (plain completion text).
        template_kwargs: the template variables (``hf_local.template_kwargs``); they override the
            pinned clock's variables.
        template_date: the day the template's clock reads (ISO ``YYYY-MM-DD``; None: the default,
            see ``template_clock``).
    Raises:
        ValueError: a bad ``template_date``; a base-model tokenizer whose added tokens around a
            text cannot be found.
    """

    def __init__(self, tokenizer: Any, template: str | None, template_kwargs: dict[str, Any] | None = None,
                 template_date: str | None = None) -> None:
        self.tokenizer = tokenizer
        self.template = template
        self.chat = template is not None
        self.template_kwargs = dict(template_kwargs or {})
        self._source, clock, self.clock_record = clock_variables(template, template_date)
        self._vars: dict[str, Any] = {"add_generation_prompt": True, **clock, **self.template_kwargs}
        self._user_prefix: str | None | bool = False  # False: not computed yet
        self._control_ids: frozenset[int] | None = None
        self._around: tuple[list[int], list[int]] = ([], []) if self.chat else self._special_around()

    # ------------------------------------------------------------------ record

    def template_record(self) -> dict[str, Any]:
        """What the model input is a pure function of, besides the prompt text.

        Returns:
            Base model: ``{"template": None, "user_text": USER_TEXT_RULE}``. Chat model:
            ``{"sha256": <hex of the template text>, "kwargs": <every variable passed to the render
            besides the messages and the pinned clock>, "special_tokens": <the tokenizer's special-token
            strings the template can use>, "uses_clock": <the template calls strftime_now>,
            "date_string", "clock", "template_date" (``template_clock.clock_variables``' record),
            "user_text": USER_TEXT_RULE}``.
        """
        if not self.chat:
            return {"template": None, "user_text": USER_TEXT_RULE}
        tok = self.tokenizer
        return {
            "sha256": hashlib.sha256(self.template.encode("utf-8")).hexdigest(),
            "kwargs": {"add_generation_prompt": True, **self.template_kwargs},
            "special_tokens": {k: getattr(tok, k, None) for k in ("bos_token", "eos_token", "pad_token", "unk_token")},
            "uses_clock": "strftime_now" in self.template,
            **self.clock_record,
            "date_string": self._vars.get("date_string"),  # the configured kwargs' own, where given
            "user_text": USER_TEXT_RULE,
        }

    # ------------------------------------------------------------------ text

    def format_prompt(self, prompt: str) -> str:
        """The rendered text: the chat template around one user message with
        ``add_generation_prompt=True``, the pinned clock and ``template_kwargs``; a base model's
        prompt itself. (Its control-token spellings are the user's text: see ``encode_prompt``.)"""
        if not self.chat:
            return prompt
        return self.tokenizer.apply_chat_template([{"role": "user", "content": prompt}], chat_template=self._source,
                                                  tokenize=False, **self._vars)

    def user_char_span(self, prompt: str, text: str | None = None) -> tuple[int, int] | None:
        """Character span [start, end) of the user's text inside ``format_prompt(prompt)`` (or ``text``).

        Base models: ``(0, len(prompt))``. Chat models: the rendered text before the user's message
        is the template rendered around a sentinel message; the user's text must follow it verbatim
        (or stripped of outer whitespace, for templates that trim the message: Llama-3, Gemma).
        None if it does not (a template that rewrites the message) or the text is empty.
        """
        text = self.format_prompt(prompt) if text is None else text
        if not self.chat:
            return (0, len(prompt)) if prompt else None
        if self._user_prefix is False:
            rendered = self.format_prompt(_SENTINEL)
            self._user_prefix = rendered.split(_SENTINEL, 1)[0] if _SENTINEL in rendered else None
        pre = self._user_prefix
        if pre is None or not text.startswith(pre):
            return None
        for cand in (prompt, prompt.strip()):
            if cand and text.startswith(cand, len(pre)):
                return len(pre), len(pre) + len(cand)
        return None

    # ------------------------------------------------------------------ ids

    def encode_prompt(self, prompt: str) -> list[int]:
        """Token ids fed to the model (``prompt_layout``'s ids; see the module doc: the user's text is
        encoded as text).

        Raises:
            ValueError: the tokenizer cannot encode one of the message's control-token spellings
                as text (transformers: "Can't sanitize …").
        """
        return self.prompt_layout(prompt)[0]

    def prompt_layout(self, prompt: str) -> tuple[list[int], tuple[int, int] | None]:
        """The ids fed to the model and the token span [a, b) of the user's text among them.

        The rendered string is tokenized as it stands, with offsets. Where no control token of it
        overlaps the user's characters (``user_char_span``) those are the ids (transformers' encoding
        of an unmarked chat is that same call), and the span is every token whose characters overlap
        the user's (a base model's ends at ``len(ids)``; only BOS is left out). Otherwise (the message
        spells a control token, or its characters cannot be located) the ids come from
        ``sanitized_ids``, and the span is what is left between the template's own text before and
        after the message, matched against the ids from either end. Returns ``(ids, None)`` where the
        user's text cannot be located (``user_char_span`` None, a tokenizer without offsets, nothing
        between). Source: transformers ``return_offsets_mapping``, ``sanitize_control_tokens``.

        Raises:
            ValueError: as ``encode_prompt``.
        """
        tok = self.tokenizer
        text = self.format_prompt(prompt)
        chars = self.user_char_span(prompt, text)
        try:
            enc = tok(text, add_special_tokens=not self.chat, return_offsets_mapping=True)
            plain, offsets = list(enc["input_ids"]), enc["offset_mapping"]
        except (NotImplementedError, ValueError, TypeError):  # slow tokenizer: no offsets
            plain, offsets = list(tok(text, add_special_tokens=not self.chat)["input_ids"]), None
        if chars is not None and offsets is not None:
            cs, ce = chars
            hit = [i for i, (a, b) in enumerate(offsets) if b > a and a < ce and b > cs]
            if not any(plain[i] in self.control_ids for i in hit):
                return plain, ((hit[0], hit[-1] + 1) if hit else None)
        ids = self.sanitized_ids(prompt)
        if chars is None or ids == plain:
            return ids, None
        cs, ce = chars
        if self.chat:
            before = list(tok(text[:cs], add_special_tokens=False)["input_ids"]) if cs else []
            after = list(tok(text[ce:], add_special_tokens=False)["input_ids"]) if ce < len(text) else []
        else:
            before, after = self._around
        a = _common_prefix(ids, before)
        b = len(ids) - _common_prefix(ids[::-1], after[::-1])
        return ids, ((a, b) if a < b else None)

    def spells_control_tokens(self, prompt: str) -> bool:
        """True when tokenizing ``format_prompt(prompt)`` as one string would not give
        ``encode_prompt``'s ids: the user's text spells a control token (a server that receives the
        rendered text, not ids, would read it as one)."""
        plain = self.tokenizer(self.format_prompt(prompt), add_special_tokens=not self.chat)["input_ids"]
        return list(plain) != self.encode_prompt(prompt)

    def sanitized_ids(self, prompt: str) -> list[int]:
        """The ids of transformers' ``apply_chat_template(..., tokenize=True,
        sanitize_control_tokens=True)``: control tokens inside the message encoded as text, the
        template's own as tokens (a base model: its BOS/EOS around the prompt, through a template that
        is the prompt itself). Equal to tokenizing the rendered string when the message spells no
        control token (tested on real prompts). Slower than ``prompt_layout``'s plain path (gemma-3:
        ≈ 0.2 s a prompt, its 6,000 added tokens are listed per call).

        Raises:
            ValueError: as ``encode_prompt``.
        """
        tok = self.tokenizer
        msgs = [{"role": "user", "content": prompt}]
        if self.chat:
            return list(tok.apply_chat_template(msgs, chat_template=self._source, tokenize=True, return_dict=False,
                                                sanitize_control_tokens=True, **self._vars))
        mid = tok.apply_chat_template(msgs, chat_template=_PLAIN_TEMPLATE, tokenize=True, return_dict=False,
                                      sanitize_control_tokens=True)
        before, after = self._around
        return [*before, *mid, *after]

    @property
    def control_ids(self) -> frozenset[int]:
        """Ids of the control tokens: what ``sanitized_ids`` encodes as text inside a message — the
        tokenizer's special tokens plus the added tokens the template's text uses (transformers
        ``_get_control_tokens``; special tokens only where the tokenizer lacks it)."""
        if self._control_ids is None:
            tok = self.tokenizer
            get = getattr(tok, "_get_control_tokens", None)
            names = (get(self._source or _PLAIN_TEMPLATE) if callable(get) else
                     [t.content for t in tok.added_tokens_decoder.values() if t.special])
            self._control_ids = frozenset(int(i) for i in tok.convert_tokens_to_ids(list(names)) if i is not None)
        return self._control_ids

    def _special_around(self) -> tuple[list[int], list[int]]:
        """The ids a base-model tokenizer adds before and after any text (BOS for gemma-3, none for
        qwen), found by encoding one probe text with and without special tokens."""
        tok = self.tokenizer
        probe = "sago probe text"
        bare = list(tok(probe, add_special_tokens=False)["input_ids"])
        full = list(tok(probe)["input_ids"])
        for k in range(len(full) - len(bare) + 1):
            if full[k:k + len(bare)] == bare:
                return full[:k], full[k + len(bare):]
        raise ValueError("the tokenizer's special tokens around a text could not be found (it changes the text's "
                         "own tokens when it adds them)")


def template_records_match(stored: Any, now: Any) -> bool:
    """Whether a run's recorded ``chat_template`` (``PromptRenderer.template_record()``, or an older
    record) renders prompts as ``now`` does.

    Both without a template (``"no template"`` or ``{"template": None, ...}``) match; otherwise the
    template's sha256 and variables must be equal, and a recorded ``date_string`` must be the one used
    now. A record of a clock-reading template with no ``date_string`` rendered on an unrecorded day and
    matches nothing.
    """
    def no_template(r: Any) -> bool:
        return r == "no template" or (isinstance(r, dict) and "sha256" not in r and r.get("template") is None)

    if no_template(stored) or no_template(now):
        return no_template(stored) and no_template(now)
    if not (isinstance(stored, dict) and isinstance(now, dict)):
        return False
    if stored.get("sha256") != now.get("sha256") or stored.get("kwargs") != now.get("kwargs"):
        return False
    if stored.get("date_string") is None:
        return not stored.get("uses_clock")
    return stored["date_string"] == now.get("date_string")
