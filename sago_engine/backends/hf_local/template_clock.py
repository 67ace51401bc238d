"""A pinned clock for chat templates, so a rendered prompt is a pure function of the run record.

Some chat templates read today's date: Llama-3.1/3.2 fall back to ``strftime_now("%d %b %Y")``
when no ``date_string`` is given (transformers registers ``strftime_now`` as
``datetime.now().strftime``, ``transformers.utils.chat_template_utils``); Granite and SmolLM3
call ``strftime_now`` directly. Rendered on another day, the same prompt gives other token ids, so
a resumed, sharded or rebuilt run would not reproduce an uninterrupted one. Every render therefore
gets a pinned day:

* the variable ``date_string``: the template's own fallback literal where it has one (Llama-3.x:
  ``{% set date_string = "26 Jul 2024" %}``), else the pinned day as ``"%d %b %Y"``;
* for a template that calls ``strftime_now`` (transformers passes no callable into a render, its
  inputs are rebuilt from JSON types), a macro ``strftime_now(fmt)`` defined ahead of the template
  text shadows the global: it returns the pinned day (00:00:00) formatted by each format the template
  spells as a literal (``strftime_now("%d %b %Y")``), looked up in the variable
  ``sago_pinned_clock``, and ``""`` for any other format, whatever the wall clock says.

The pinned day is ``DEFAULT_TEMPLATE_DATE`` unless a run configures ``template_date``; a configured
day also sets ``date_string``. Explicit ``chat_template_kwargs`` (e.g. ``date_string``) still win.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

__all__ = ["DEFAULT_TEMPLATE_DATE", "DATE_STRING_FORMAT", "template_fallback_date", "parse_template_date",
           "clock_variables"]

#: The day a template's clock reads when none is configured (ISO): the date of Llama-3.x's own
#: fallback ``"26 Jul 2024"``, so a clock-reading template renders as Meta's does without a clock.
DEFAULT_TEMPLATE_DATE = "2024-07-26"
#: ``date_string`` format when the template has no fallback literal (Llama-3.x's ``strftime_now`` format).
DATE_STRING_FORMAT = "%d %b %Y"

_FALLBACK = re.compile(r"""\bset\s+date_string\s*=\s*(["'])(?P<date>[^"'\n{}%]{1,40})\1""")


def template_fallback_date(template: str | None) -> str | None:
    """The literal a template assigns to ``date_string`` itself (``{% set date_string = "26 Jul 2024" %}``),
    or None when it assigns none (or there is no template)."""
    if not template:
        return None
    m = _FALLBACK.search(template)
    return m.group("date") if m else None


def parse_template_date(value: str | None) -> dt.date:
    """The pinned day: ``value`` as an ISO date ``YYYY-MM-DD``, or ``DEFAULT_TEMPLATE_DATE`` when None.

    Raises:
        ValueError: ``value`` is not an ISO calendar date (message names it).
    """
    text = DEFAULT_TEMPLATE_DATE if value is None else value
    if not isinstance(text, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        raise ValueError(f"template_date must be an ISO date YYYY-MM-DD, got {value!r}")
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"template_date must be an ISO date YYYY-MM-DD, got {value!r}") from None


#: Literal format arguments of ``strftime_now`` calls in a template source.
_STRFTIME_CALL = re.compile(r"""\bstrftime_now\(\s*(["'])(?P<fmt>[^"'\n]{0,40})\1\s*\)""")
#: The macro that shadows transformers' ``strftime_now`` global (a template-level name wins in Jinja).
_CLOCK_MACRO = ("{%- macro strftime_now(fmt) -%}{{ sago_pinned_clock[fmt] if fmt in sago_pinned_clock else '' }}"
                "{%- endmacro -%}")


def clock_variables(template: str | None, template_date: str | None = None
                    ) -> tuple[str | None, dict[str, Any], dict[str, Any]]:
    """The template to render, the render variables that pin its clock, and their record.

    Args:
        template: the chat template source (None: a base model, nothing to pin).
        template_date: the configured day (ISO ``YYYY-MM-DD``) or None (``DEFAULT_TEMPLATE_DATE``,
            and ``date_string`` = the template's own fallback where it has one).
    Returns:
        ``(source, variables, record)``: ``source`` the template, preceded by the ``strftime_now``
        macro when it calls ``strftime_now`` (None without a template); ``variables`` =
        ``{"date_string": str}`` plus ``{"sago_pinned_clock": {format: text}}`` for such a template
        (``{}`` without a template); ``record`` = ``{"date_string", "clock": ISO day the clock reads,
        "template_date": the configured value or None}`` (``{}`` without a template).
    Raises:
        ValueError: ``template_date`` is not an ISO date.
    """
    day = parse_template_date(template_date)
    if template is None:
        return None, {}, {}
    fallback = template_fallback_date(template)
    date_string = fallback if (template_date is None and fallback) else day.strftime(DATE_STRING_FORMAT)
    variables: dict[str, Any] = {"date_string": date_string}
    source = template
    if "strftime_now" in template:
        moment = dt.datetime(day.year, day.month, day.day)
        variables["sago_pinned_clock"] = {m.group("fmt"): moment.strftime(m.group("fmt"))
                                          for m in _STRFTIME_CALL.finditer(template)}
        source = _CLOCK_MACRO + template
    return source, variables, {"date_string": date_string, "clock": day.isoformat(), "template_date": template_date}
