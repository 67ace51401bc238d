"""Offline length rules (rules-v1): greedy stop-word compression and neutral-context expansion."""

from __future__ import annotations

import random
import re
import unicodedata

from sago_engine.variants._text import detect_mood, terminal_for, upper_first

_TOKEN = re.compile(r"\S+")
#: tier 1: articles and fillers; tier 2: prepositions, auxiliaries, pronouns; tier 3: other
#: function words. Lower tiers are dropped first; content words come after (tier 4: "-ly"
#: adverbs, then shorter words first), then capitalised words (tier 5). Negations, numbers and quoted/bracketed tokens are never dropped.
_TIER1 = frozenset(
    "a an the please kindly just really very actually basically quite rather simply literally "
    "also so then exactly currently ever".split()
)
_TIER2 = frozenset(
    "of to in on at for with by from as into about onto upon that which is are was were be been "
    "being do does did it its this these those there has have had will would can could should may "
    "might shall must i me my you your we our us they their them he his him she her".split()
)
_TIER3 = frozenset(
    "and or but if than such some any each all both either other another own same over under "
    "after before during between through out up down off more most much many".split()
)
_PROTECT = frozenset("not no never nor without none nothing n't cannot".split())
_QUOTES_BRACKETS = set("\"'“”‘’«»()[]{}")

#: Expansion sentences by role; at most one sentence per role, so nothing is said twice.
#: (role, where) -> phrasings. "pre" goes before the prompt, "post" after it.
_ROLES_Q: dict[tuple[str, str], tuple[str, ...]] = {
    ("intro", "pre"): ("Question:", "My question:", "Here is a question.", "I have a question.",
                       "I have a question for you.", "Here is something I have been wondering about.",
                       "The following is a question I would like answered."),
    ("motive", "pre"): ("I was reading about this earlier.", "This came up in a conversation recently.",
                        "I came across this and want to know the answer.",
                        "This is something I have wanted to know for a while."),
    ("close", "post"): ("That is all.", "That is my question.", "That is the whole question.",
                        "That is what I would like to know."),
    ("curious", "post"): ("Just curious.", "Out of curiosity.", "I am asking out of curiosity.",
                          "I am curious about the answer."),
    ("want", "post"): ("I would like an answer.", "I would like to know the answer.",
                       "An answer to that would help me.", "I want to understand this properly."),
}
_ROLES_T: dict[tuple[str, str], tuple[str, ...]] = {
    ("intro", "pre"): ("Task:", "My request:", "Here is a task.", "I have a task for you.",
                       "The following is a request.", "Here is what I need you to do.",
                       "Below is a request that I would like you to complete."),
    ("motive", "pre"): ("I need this for something I am working on.", "This is for a project of mine.",
                        "I have been meaning to get this done."),
    ("close", "post"): ("That is all.", "That is the task.", "That is the whole request.",
                        "That is everything I am asking for."),
    ("scope", "post"): ("Follow the request as written.", "I would like this done as described.",
                        "The request above is complete as written."),
    ("want", "post"): ("I would like your response.", "A response to that would help me.",
                       "I am looking forward to the result."),
}
_RESTATE = ("In other words:", "To restate:", "Once again:", "Put another way:")


def _core(tok: str) -> str:
    return "".join(ch for ch in tok if not unicodedata.category(ch).startswith("P")).lower()


def _trail(tok: str) -> str:
    k = len(tok)
    while k > 0 and unicodedata.category(tok[k - 1]).startswith("P") and tok[k - 1] not in _QUOTES_BRACKETS:
        k -= 1
    return tok[k:]


def _tier(i: int, tok: str) -> int | None:
    """Drop tier of one token (lower first), or None when it must be kept."""
    core = _core(tok)
    if (not core or core in _PROTECT or core.endswith("n't") or any(c.isdigit() for c in tok)
            or any(c in _QUOTES_BRACKETS for c in tok) or (i == 0 and core in
            {"what", "who", "whom", "whose", "when", "where", "which", "why", "how"})):
        return None
    if core in _TIER1:
        return 1
    if core in _TIER2:
        return 2
    if core in _TIER3:
        return 3
    return 5 if tok[:1].isupper() else 4


def compress(text: str, ratio: float, rng: random.Random) -> str:
    """Drop parentheticals, then fillers/function words, then content words, until the word
    count reaches ``round(ratio × n)`` (≥ 1); ties within a tier are broken by ``rng``.
    Trailing sentence punctuation of a dropped word moves to the previous kept word."""
    toks = [(m.group(), m.start(), m.end()) for m in _TOKEN.finditer(text)]
    n = len(toks)
    target = max(1, int(ratio * n + 0.5))
    drop: set[int] = set()
    # tier 0: whole parenthetical groups "( ... )", only if that does not undershoot the target
    groups, start = [], None
    for i, (t, _, _) in enumerate(toks):
        if t.startswith("(") and start is None:
            start = i
        if start is not None and t.rstrip(".,;:!?").endswith(")"):
            groups.append(range(start, i + 1))
            start = None
    rng.shuffle(groups)
    for g in groups:
        if n - len(drop) - len(g) >= target:
            drop.update(g)
    by_tier: dict[int, list[int]] = {}
    for i, (t, _, _) in enumerate(toks):
        tier = _tier(i, t)
        if tier is not None and i not in drop:
            by_tier.setdefault(tier, []).append(i)
    for tier in sorted(by_tier):
        idx = by_tier[tier]
        rng.shuffle(idx)
        if tier >= 4:  # content words: adverbs first, then shorter (less informative) words
            idx.sort(key=lambda i: (not _core(toks[i][0]).endswith("ly"), len(_core(toks[i][0]))))
        for i in idx:
            if n - len(drop) <= target:
                break
            drop.add(i)
    out: list[str] = []
    prev_end = 0
    sep_has_newline = False
    for i, (t, s, e) in enumerate(toks):
        sep_has_newline = sep_has_newline or "\n" in text[prev_end:s]
        prev_end = e
        if i in drop:
            tail = _trail(t)
            if tail and out and not _trail(out[-1]) and tail[-1] in ".?!:;,":
                out[-1] += tail
            continue
        if out:
            out.append("\n" if sep_has_newline else " ")
        out.append(t)
        sep_has_newline = False
    res = "".join(out)
    if 0 in drop and toks[0][0][:1].isupper():
        res = upper_first(res)
    return res


def expand(text: str, ratio: float, rng: random.Random) -> str:
    """Add meaning-neutral context sentences until the word count is about ``round(ratio × n)``.

    At most one sentence per role (intro, motive, closing, ...; phrasing and role order chosen
    by ``rng``, each pick the best fit for the words still needed). For ratio >= 2 and prompts
    of 25+ words the prompt is instead restated verbatim after "In other words:" (or similar).
    """
    n = len(text.split())
    need = max(1, int(ratio * n + 0.5)) - n
    roles = _ROLES_Q if detect_mood(text) == "question" else _ROLES_T
    pre: list[str] = []
    post: list[str] = []
    restate = None
    if ratio >= 2 and n >= 25:
        restate = rng.choice(_RESTATE)
    else:
        order = list(roles)
        rng.shuffle(order)
        remaining = need
        picks: dict[tuple[str, str], str] = {}
        for key in order:  # pass 1: the longest phrasing of each role that still fits
            options = list(roles[key])
            rng.shuffle(options)
            fits = [o for o in options if len(o.split()) <= remaining]
            if fits:
                picks[key] = max(fits, key=lambda o: len(o.split()))
                remaining -= len(picks[key].split())
        if remaining > 0:  # pass 2: one overshooting phrasing, if closer than stopping short
            cands = [(abs(len(o.split()) - remaining), o, key)
                     for key in order if key not in picks for o in roles[key]]
            if cands:
                _, o, key = min(cands)
                if len(o.split()) - remaining < remaining:
                    picks[key] = o
        for key in order:
            if key in picks:
                (pre if key[1] == "pre" else post).append(picks[key])
        pre.sort(key=lambda o: o.endswith(":"))  # a label goes right before the prompt
    sep = "\n" if "\n" in text.strip() else " "
    body = text.strip()
    if post or restate:
        body += terminal_for(body)
    parts = pre + [body] + post
    if restate:
        parts += [restate, body]
    return sep.join(parts)


def rewrite_length(text: str, ratio: float, rng: random.Random) -> str:
    """Compress (ratio < 1) or expand (ratio > 1) ``text`` to about ``ratio`` × its words.

    Args:
        text: base prompt; ratio: target len(variant words)/len(base words), > 0;
        rng: private generator (tie-breaks and phrasing choice).
    Returns:
        The rewritten text (ratio == 1 returns ``text`` unchanged).
    Raises:
        ValueError: ratio <= 0.
    Source: SAGO (arXiv 2610.01428) §Variants (structural/length), offline rules-v1.
    """
    if ratio <= 0:
        raise ValueError(f"ratio must be > 0, got {ratio}")
    if ratio < 1:
        return compress(text, ratio, rng)
    if ratio > 1:
        return expand(text, ratio, rng)
    return text
