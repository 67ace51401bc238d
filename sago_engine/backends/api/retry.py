"""How long to wait before an API request is sent again: the server's hint, in each provider's form, and the backoff.

A server's hint is input like any other. ``retry_hint`` reads it where each SDK's error object
carries it (openai 3.x and anthropic 2.x: ``APIStatusError.response.headers``; google-genai:
``errors.APIError.details``, the parsed JSON error body, and ``.response.headers``):

- ``retry-after-ms`` (milliseconds; OpenAI, Anthropic, and proxies such as LiteLLM) and
  ``Retry-After`` (delta-seconds or an HTTP date, RFC 9110 §10.2.3);
- OpenAI's ``x-ratelimit-reset-requests`` / ``x-ratelimit-reset-tokens`` (a duration such as
  ``"20ms"``, ``"1s"`` or ``"6m0s"``; a bare number is seconds, as Azure OpenAI sends);
- Anthropic's ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-reset`` (an
  RFC 3339 time);
- Gemini's ``google.rpc.RetryInfo`` in the error details (``"retryDelay": "12s"``, a
  ``google.protobuf.Duration`` in JSON form).

The first usable value in that order is the hint. A reset header counts only for a limit whose
``…-remaining…`` header is 0 or absent (when only one limit is exhausted, its reset is the
wait; anthropics/anthropic-sdk-typescript #357). A value ≤ 0, a time in the past, NaN or inf
or one that does not parse is **unusable**: it is skipped, never read as "retry now" — a zero
``Retry-After`` turned kubescape/kubevuln's retries into a hot loop (#754: 25,216 requests in
2 s), and kubernetes/kubernetes #27965 waits a minimum instead.

``RetryPolicy.delay`` then waits ``max(hint, backoff)`` for a usable hint up to
``max_retry_after_s`` and the backoff otherwise. A hint beyond ``max_retry_after_s`` is not
waited out: the prompt is not retried now (its unit stays pending, a rerun retries it), as
openai-python's ``_should_retry`` refuses a ``Retry-After`` above ``MAX_RETRY_AFTER_DELAY``.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import math
import random
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_RETRY_AFTER_S", "RetryPolicy", "parse_retry_after", "retry_hint", "retry_info_delay"]

#: Longest server-directed wait honoured, in seconds: openai-python's ``MAX_RETRY_AFTER_DELAY``
#: (2 minutes, ``openai/_constants.py``). It covers the per-minute windows of OpenAI, Anthropic
#: and Gemini; a longer hint means a quota measured in hours or days (Gemini's per-day quota
#: answers ``retryDelay: "52758s"``), which waiting prompt by prompt would turn into hours of
#: idle threads.
MAX_RETRY_AFTER_S = 120.0

#: (remaining, reset) header pairs of the provider rate limits, OpenAI then Anthropic.
_RESET_HEADERS: tuple[tuple[str, str], ...] = (
    ("x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"),
    ("x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"),
    *((f"anthropic-ratelimit-{k}-remaining", f"anthropic-ratelimit-{k}-reset")
      for k in ("requests", "tokens", "input-tokens", "output-tokens")),
)

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def _usable(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) and v > 0 else None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _duration(text: str) -> float | None:
    """Seconds of ``"6m0s"`` / ``"20ms"`` / ``"1.5s"`` / ``"12"`` (bare: seconds), or None."""
    s = text.strip()
    if (v := _number(s)) is not None:
        return v
    pos, total = 0, 0.0
    for m in _DURATION_PART.finditer(s):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * _UNIT_S[m.group(2)]
        pos = m.end()
    return total if pos == len(s) and pos > 0 else None


def _until(text: str, now: dt.datetime) -> float | None:
    """Seconds from ``now`` to an HTTP date or an RFC 3339 time, or None."""
    s = text.strip()
    when = None
    try:
        when = dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(s)
        except (TypeError, ValueError, IndexError):
            return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return (when - now).total_seconds()


def parse_retry_after(headers: Any, now: dt.datetime | None = None) -> float | None:
    """Seconds the response headers ask to wait before a retry (see the module docstring).

    Args:
        headers: any mapping with ``.get`` (httpx headers, dict); each name is tried lower-case
            and title-case.
        now: the current time for dates (default: now, UTC).
    Returns:
        A positive finite number of seconds, or None when no header gives a usable value
        (absent, ≤ 0, in the past, NaN/inf or unparseable).
    """
    if headers is None:
        return None
    now = now or dt.datetime.now(dt.UTC)

    def get(name: str) -> str | None:
        try:
            v = headers.get(name)
            return headers.get(name.title()) if v is None else v
        except Exception:
            return None

    ms = get("retry-after-ms")
    if ms and (v := _usable(None if (x := _number(ms)) is None else x / 1000.0)):
        return v
    ra = get("retry-after")
    if ra:
        x = _number(ra)
        if v := _usable(x if x is not None else _until(ra, now)):
            return v
    resets = []
    for rem_name, reset_name in _RESET_HEADERS:
        reset = get(reset_name)
        if not reset:
            continue
        remaining = _number(get(rem_name) or "")
        if remaining is not None and remaining > 0:
            continue  # this limit is not the one exhausted
        v = _duration(reset) if reset_name.startswith("x-") else _until(reset, now)
        if v is None and not reset_name.startswith("x-"):
            v = _number(reset)
        if v := _usable(v):
            resets.append(v)
    return max(resets) if resets else None


def retry_info_delay(body: Any) -> float | None:
    """Seconds of a ``google.rpc.RetryInfo`` ``retryDelay`` in an error body, or None.

    Args:
        body: the parsed error JSON — ``{"error": {"details": [...]}}``, its inner dict, a
            one-element list of either (google-genai ``APIError.details``), or anything else.
    Returns:
        The delay ("12s", "0.5s", or ``{"seconds": 12, "nanos": 0}``) as a positive number of
        seconds, or None when absent or unusable.
    """
    if isinstance(body, list) and len(body) == 1:
        body = body[0]
    if not isinstance(body, dict):
        return None
    inner = body.get("error") if isinstance(body.get("error"), dict) else body
    details = inner.get("details")
    if not isinstance(details, list):
        return None
    for d in details:
        if not isinstance(d, dict) or not str(d.get("@type", "")).endswith("google.rpc.RetryInfo"):
            continue
        delay = d.get("retryDelay")
        if isinstance(delay, str) and delay.strip().endswith("s"):
            v = _number(delay.strip()[:-1])
        elif isinstance(delay, dict):
            v = (_number(str(delay.get("seconds", 0))) or 0.0) + (_number(str(delay.get("nanos", 0))) or 0.0) / 1e9
        else:
            v = None
        if v := _usable(v):
            return v
    return None


def retry_hint(exc: BaseException, now: dt.datetime | None = None) -> float | None:
    """The wait a failed request's server asked for, from the SDK exception (module docstring).

    Args:
        exc: an SDK or transport exception (``response.headers``, ``details`` / ``body`` read
            when present).
        now: the current time for dates (default: now, UTC).
    Returns:
        A positive finite number of seconds, or None when the server gave no usable hint.
    """
    headers = getattr(getattr(exc, "response", None), "headers", None)
    v = parse_retry_after(headers, now)
    if v is not None:
        return v
    for attr in ("details", "body"):
        v = retry_info_delay(getattr(exc, attr, None))
        if v is not None:
            return v
    return None


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff with full jitter above a floor, honouring the server's hint.

    Retry ``a`` (0-based) backs off ``uniform(floor_s, min(cap_s, base_s · 2^a))`` seconds, with
    ``floor_s = base_s / 2`` (full jitter, "Exponential Backoff And Jitter", AWS Architecture
    Blog 2015, kept off zero so that no retry follows at once). With a usable hint ``h``
    (``retry_hint``) it waits ``max(h, backoff)``, at most ``max_retry_after_s``; a hint above
    that is not waited out (``delay`` returns None).
    """

    max_retries: int = 5
    """Retries after the first attempt (so at most ``max_retries + 1`` requests per prompt)."""
    base_s: float = 0.5
    cap_s: float = 30.0
    max_retry_after_s: float = MAX_RETRY_AFTER_S

    @property
    def floor_s(self) -> float:
        """The shortest wait before any retry, in seconds."""
        return self.base_s / 2.0

    def backoff(self, retry: int, rng: random.Random) -> float:
        """Seconds of full-jitter backoff before retry number ``retry`` (0-based), ≥ ``floor_s``."""
        hi = min(self.cap_s, self.base_s * 2.0 ** min(max(0, int(retry)), 60))
        lo = min(self.floor_s, hi)
        return rng.uniform(lo, hi)

    def delay(self, retry: int, retry_after: float | None, rng: random.Random) -> float | None:
        """Seconds to sleep before retry number ``retry`` (0-based), or None: do not retry now.

        Args:
            retry: 0-based retry number.
            retry_after: the server's hint in seconds (None, ≤ 0, NaN or inf: no usable hint).
            rng: the jitter's generator.
        Returns:
            ``backoff`` without a usable hint; ``max(hint, backoff)`` for a hint up to
            ``max_retry_after_s``; None for a longer hint.
        """
        b = self.backoff(retry, rng)
        h = _usable(retry_after)
        if h is None:
            return b
        if h > self.max_retry_after_s:
            return None
        return max(h, b)

    def give_up(self, attempts: int, retry_after: float | None) -> str:
        """Why a retryable failure after ``attempts`` requests is not retried (the error's prefix)."""
        h = _usable(retry_after)
        if attempts <= self.max_retries and h is not None and h > self.max_retry_after_s:
            return (f"not retried: the server asks to wait {h:.0f} s, more than the {self.max_retry_after_s:.0f} s "
                    f"sago waits (rerun later to retry)")
        return f"retries exhausted after {attempts} attempts"
