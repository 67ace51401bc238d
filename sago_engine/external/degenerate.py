"""Replies that are not answers: repetition loops, echoes of the prompt, token salad — one detector for every run.

A degenerate base reply is a broken reference: s_X(i) then measures distance from it in both
directions (a variant that escapes the loop counts as unstable, one that repeats it as perfectly
stable). The rules are measurable on the reply (and its prompt) alone, checked in this order:

* **salad** — ``salad.score`` (not text in any language: many scripts, or mostly unknown words);
* **loop** — at least ``LOOP_MIN_WORDS`` words and at least ``LOOP_SHARE`` of the reply's word
  ``LOOP_NGRAM``-grams repeat an earlier one ("The capital of France is Paris. What is the capital
  of France?" four times; "the city of the city of …"). Ordinary prose repeats under 10 %;
  or the reply stutters inside words: runs of one unit of 1 to ``STUTTER_UNIT`` word characters repeated
  at least ``STUTTER_REPEATS`` times ("Ellelelelele…", "!!!!" is no word) make up at least ``LOOP_SHARE``
  of its non-space characters (at least ``STUTTER_MIN_CHARS`` of them) — a word loop the word rule
  cannot see, since it is one word;
* **echo** — the prompt's first line (at least ``ECHO_MIN_WORDS`` words, case and punctuation
  ignored) appears twice or more in the reply, or makes up at least ``ECHO_SHARE`` of its words:
  the model restates the request instead of answering it (an answer that quotes the request
  once, then answers, is not an echo).

The importer (``external.rows``) flags a pair degenerate when both replies are salad under the
same ``reply_kind``; the pages count and mark every kind (``reply_flags``). Flags have the store's
spelling ``degenerate:<kind>`` (``responses.flags``, schema v5) but are computed when read, so a
rule change needs no rebuild.
"""

from __future__ import annotations

import re

import pandas as pd

from sago_engine.external import salad

SALAD, LOOP, ECHO = "salad", "loop", "echo"
KINDS: tuple[str, ...] = (SALAD, LOOP, ECHO)
#: Fewest words a loop is called in.
LOOP_MIN_WORDS = 16
#: Word n-gram length of the loop rule.
LOOP_NGRAM = 4
#: Share of n-grams that repeat an earlier one from which a reply is a loop.
LOOP_SHARE = 0.5
#: Longest repeated unit (characters) of a stutter, fewest repeats of it, fewest stuttered characters.
STUTTER_UNIT = 4
STUTTER_REPEATS = 6
STUTTER_MIN_CHARS = 16
#: Fewest words of a prompt's first line for an echo.
ECHO_MIN_WORDS = 4
#: Share of the reply's words the prompt's first line must make up for a single restatement to be an echo.
ECHO_SHARE = 0.8
FLAG_PREFIX = "degenerate:"

_WORD = re.compile(r"\w+", re.UNICODE)
_STUTTER = re.compile(rf"(\w{{1,{STUTTER_UNIT}}}?)\1{{{STUTTER_REPEATS - 1},}}", re.UNICODE)


def _words(text: str | None) -> list[str]:
    return [w.lower() for w in _WORD.findall(text if isinstance(text, str) else "")]


def repeat_share(text: str | None, n: int = LOOP_NGRAM) -> float:
    """Share of the word n-grams of ``text`` that repeat an earlier n-gram (0 with fewer than n + 1 words)."""
    w = _words(text)
    grams = [tuple(w[i:i + n]) for i in range(len(w) - n + 1)]
    if len(grams) < 2:
        return 0.0
    return 1.0 - len(set(grams)) / len(grams)


def stutter_share(text: str | None) -> float:
    """Share of the non-space characters of ``text`` inside stutters (a unit of 1 to ``STUTTER_UNIT`` word
    characters repeated ``STUTTER_REPEATS`` times or more); 0 when the stutters total under
    ``STUTTER_MIN_CHARS`` characters or the text is empty."""
    t = text if isinstance(text, str) else ""
    solid = sum(not c.isspace() for c in t)
    stuck = sum(m.end() - m.start() for m in _STUTTER.finditer(t))
    return stuck / solid if solid and stuck >= STUTTER_MIN_CHARS else 0.0


def is_echo(reply: str | None, prompt: str | None) -> bool:
    """True when the prompt's first non-empty line (≥ ``ECHO_MIN_WORDS`` words; words only) appears twice or
    more in the reply, or once making up ≥ ``ECHO_SHARE`` of the reply's words."""
    first = next((ln for ln in prompt.splitlines() if ln.strip()), "") if isinstance(prompt, str) else ""
    pw, rw = _words(first), _words(reply)
    if len(pw) < ECHO_MIN_WORDS or not rw:
        return False
    k = len(pw)
    hits = sum(rw[i:i + k] == pw for i in range(len(rw) - k + 1))
    return hits >= 2 or (hits == 1 and len(pw) >= ECHO_SHARE * len(rw))


def reply_kind(reply: str | None, prompt: str | None = None) -> str:
    """``"salad"``, ``"loop"``, ``"echo"`` (the first rule that holds) or ``""`` for a reply that may be an answer.

    Args:
        reply: the model's reply (non-strings count as empty: not degenerate).
        prompt: the prompt it answers (the echo rule needs it; None skips that rule).
    """
    if salad.is_salad(reply):
        return SALAD
    if len(_words(reply)) >= LOOP_MIN_WORDS and repeat_share(reply) >= LOOP_SHARE:
        return LOOP
    if stutter_share(reply) >= LOOP_SHARE:
        return LOOP
    if prompt is not None and is_echo(reply, prompt):
        return ECHO
    return ""


def reply_flags(replies: pd.DataFrame) -> pd.DataFrame:
    """Each reply's degenerate kind and flag.

    Args:
        replies: ``Store.reply_texts`` (… response, prompt).
    Returns:
        the frame with ``kind`` ("" | salad | loop | echo) and ``flag`` (``"degenerate:<kind>"`` or "").
    """
    kinds = [reply_kind(r, p) for r, p in zip(replies["response"], replies["prompt"])]
    return replies.assign(kind=kinds, flag=[f"{FLAG_PREFIX}{k}" if k else "" for k in kinds])


def degenerate_counts(flagged: pd.DataFrame) -> pd.DataFrame:
    """Per model: base and variant replies, and how many of each are degenerate, by kind.

    Args:
        flagged: ``reply_flags`` output (model, variant_id (None for a base reply), kind).
    Returns:
        model, role ("base" | "variant"), replies, degenerate, salad, loop, echo — sorted by model, role.
    """
    cols = ["model", "role", "replies", "degenerate", *KINDS]
    if flagged.empty:
        return pd.DataFrame(columns=cols)
    f = flagged.assign(role=flagged["variant_id"].isna().map({True: "base", False: "variant"}))
    rows = []
    for (m, role), g in f.groupby(["model", "role"], sort=True):
        rows.append({"model": m, "role": role, "replies": len(g), "degenerate": int((g["kind"] != "").sum()),
                     **{k: int((g["kind"] == k).sum()) for k in KINDS}})
    return pd.DataFrame(rows, columns=cols)
