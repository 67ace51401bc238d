"""Small text helpers shared by the families: mood detection, sentence spans, word counts, protected spans."""

from __future__ import annotations

import functools
import re

WH_WORDS = frozenset({"what", "who", "whom", "whose", "when", "where", "which", "why", "how"})
AUX_WORDS = frozenset(
    {"is", "are", "was", "were", "am", "do", "does", "did", "can", "could", "will", "would",
     "shall", "should", "may", "might", "must", "has", "have", "had"}
)
#: After "do"/"have" an imperative is as likely as a question ("Do the math", "Have a look"):
#: count those as question starts only when a subject pronoun follows.
_WEAK_AUX = frozenset({"do", "have", "had"})
_SUBJECT_PRONOUNS = frozenset({"you", "i", "we", "they", "he", "she", "it", "people", "anyone"})
_CLOSERS = " \t\n\"'”’)]»"
_SENT_END = re.compile(r"(?<=[.!?])\s+|\n+")
#: tokens whose final "." does not end a sentence ("U.S.", "Mr.", "e.g.", "vs.")
_ABBREV = re.compile(r"^(?:[A-Za-z]\.)+$|^(?:mr|mrs|ms|dr|st|jr|sr|vs|etc|no|mt|ft|approx|fig|inc|ltd|co)\.$", re.I)


def words(text: str) -> list[str]:
    """Whitespace-separated tokens (the unit of length ratios)."""
    return text.split()


def word_count(text: str) -> int:
    """Number of whitespace-separated tokens."""
    return len(text.split())


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of sentences (split after . ! ? + whitespace, and at newlines)."""
    spans, start = [], 0
    for m in _SENT_END.finditer(text):
        if "\n" not in m.group():
            last_tok = text[:m.start()].split()[-1] if text[:m.start()].split() else ""
            nxt = text[m.end():m.end() + 1]
            inside_quotes = text[start:m.start()].count('"') % 2 == 1
            if inside_quotes or _ABBREV.match(last_tok) or not (nxt.isupper() or nxt.isdigit() or nxt in "\"'“‘("):
                continue  # "the U.S. did", "approx. five", "e.g. this": not a sentence end
        if text[start:m.start()].strip():
            spans.append((start, m.start()))
        start = m.end()
    if text[start:].strip():
        spans.append((start, len(text.rstrip())))
    return spans


def ends_with_question_mark(text: str) -> bool:
    """True when the text ends with ``?`` (ignoring closing quotes/brackets/whitespace)."""
    return text.rstrip(_CLOSERS).endswith("?")


def _norm(tok: str) -> str:
    """Lower-cased token without edge punctuation or contraction ("Where's" -> "where",
    "Isn't" -> "is", "Won't" -> "will", "Can't" -> "can")."""
    t = re.sub(r"^\W+|\W+$", "", tok).lower().replace("’", "'")
    special = {"won't": "will", "can't": "can", "shan't": "shall"}
    if t in special:
        return special[t]
    if t.endswith("n't"):
        return t[:-3]
    return t.split("'")[0] if "'" in t else t


def starts_like_question(sentence: str) -> bool:
    """True when the sentence opens with a wh-word or an auxiliary in question position."""
    toks = [_norm(t) for t in sentence.split()[:2]]
    if not toks:
        return False
    if toks[0] in WH_WORDS:
        return True
    if toks[0] in AUX_WORDS:
        if toks[0] in _WEAK_AUX:
            return len(toks) > 1 and toks[1] in _SUBJECT_PRONOUNS
        return len(toks) > 1
    return False


def detect_mood(text: str) -> str:
    """``"question"`` or ``"imperative"`` (SAGO §Variants, structural/mood).

    Interrogative when the text ends with ``?``, or its first or last sentence opens with a
    wh-word or an auxiliary ("is", "can", "did", ...); everything else (commands, statements,
    fragments) counts as imperative.
    """
    if ends_with_question_mark(text):
        return "question"
    spans = sentence_spans(text)
    if not spans:
        return "imperative"
    for a, b in (spans[0], spans[-1]):
        if starts_like_question(text[a:b]):
            return "question"
    return "imperative"


def terminal_for(text: str) -> str:
    """Punctuation to append before adding a sentence after ``text``: ``""`` if it already ends
    a sentence, else ``"?"`` for a question and ``"."`` otherwise."""
    core = text.rstrip()
    if not core or core.rstrip("\"'”’)]»")[-1:] in {".", "?", "!", ":", ";", "…"}:
        return ""
    return "?" if detect_mood(core) == "question" else "."


def lower_first(word: str) -> str:
    """Lower-case the first letter of a plain capitalised word ("Render" -> "render"); leave
    "I", acronyms ("NASA", "3D") and mixed-case names ("iPhone", "McDonald") alone."""
    if len(word) > 1 and word[0].isupper() and word[1:].islower() and word[1:].isalpha():
        return word[0].lower() + word[1:]
    return word


def upper_first(text: str) -> str:
    """Upper-case the first character if it is a lower-case letter."""
    return text[:1].upper() + text[1:] if text[:1].islower() else text


# ---------------------------------------------------------------- protected spans
# Spans whose characters carry meaning (code, URLs, e-mail addresses, quotations, …): surface noise never edits them.
_FENCED = re.compile(r"(`{3,}|~{3,}).*?(?:\1[`~]*|\Z)", re.S)
_INLINE_CODE = re.compile(r"``[^\n]+?``|`[^`\n]+`")
_URL = re.compile(r"(?i)\b(?:(?:https?|ftp)://|www\.)[^\s<>\"'`]+")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_QUOTES = (
    re.compile(r'""[^"\n]+""|"[^"\n]*"'),  # ""x"" is a CSV-escaped quotation
    re.compile(r"“[^”\n]*”"),
    re.compile(r"«[^»\n]*»"),
    re.compile(r"‘(?:[^’\n]|’(?=\w))*’(?!\w)"),
    # straight single quotes: not an apostrophe ("Gino's", "players'"); inner apostrophes allowed
    re.compile(r"(?<![\w'])'(?=[^\s'])(?:[^'\n]|'(?=\w))*?(?<=\S)'(?![\w'])"),
)
#: a line that looks like code (case-insensitive; leading indentation allowed)
_CODE_LINE = re.compile(
    r"""(?ix)^[ \t]*(?:
        def\s+[a-z_]\w*\(                                  # not "Def Leppard (band)"
      | class\s+[a-z_]\w*\s*(?:\([^)]*\))?\s*:\s*$        # not "Class action (law)"
      | (?:for|while|if|elif|with|switch)\b.*[()\[\]=<>].*:\s*$
      | (?:else|try|finally)\s*:\s*$
      | import\s+[\w.]+\s*(?:as\s+\w+\s*)?$
      | from\s+[\w.]+\s+import\s
      | (?:print|printf|console\.log|echo|system\.out\.\w+)\(  # not "Print (in bold)"
      | (?:function|const|let|var|int|void|float|double|char|bool|public|private|static)
        \s+[\w<>\[\]*]+(?:\s+\w+)?(?:\s*=|\(|;)          # "int x = 1;" "void main(" not "Let me"
      | \#include\b | <\?php\b
      | [a-z_][\w.\[\]]*\s*(?:[-+*/%]|\*\*)?=(?!=)\s*\S
      | .*[{}]\s*;?\s*$
    )""")
#: inside one token: a math/code operator; "+*/" only next to a one-letter operand ("x/y",
#: "2*n"; not "singer/songwriter"), digits are caught separately
_WORD_OP = re.compile(r"[=^<>≤≥≠≈±×÷]|(?<![^\W\d_])[^\W\d_][+*/]\w|\w[+*/][^\W\d_](?![^\W\d_])"
                      r"|\w\(|\w_\w|::|->|=>|&&|\|\|")
_OPERATOR = re.compile(r"^(?:[-=<>≤≥≠≈±×÷+*/^]|[=!<>+\-*/]=|\*\*|->|=>|&&|\|\|)$")
_OPENERS = "([{<"
_LINE, _NONSPACE, _DIGIT = re.compile(r"[^\n]+"), re.compile(r"\S+"), re.compile(r"\d")
_OPERAND = re.compile(r"\d|^[^\W\d_]$")
#: a token without any of these characters is a plain word for _math_and_numbers
_MATH_CHAR = re.compile(r"[\d=^<>≤≥≠≈±×÷+*/(_:&|-]")
#: a whole text in one pair of straight double quotes (marks after the closing one allowed)
_WRAPPED = re.compile(r'\s*(")(.*)(")[\s.,;:!?]*', re.S)
_CLOSERS_OF = {")": "(", "]": "[", "}": "{", ">": "<"}


def _core(tok: str) -> tuple[int, int]:
    """[i, j) of the meaningful core of a whitespace token: edge quotes, unbalanced brackets
    and trailing sentence marks stripped ("2019)." -> "2019", "(2019)," -> "(2019)"); "!"
    right after a digit stays (a factorial: "5!", "11!!")."""
    i, j = 0, len(tok)
    while True:
        if i < j and (tok[i] in "\"'“”‘’«»¿¡" or
                      (tok[i] in _OPENERS and tok[i:j].count(tok[i]) > tok[i:j].count(
                          {v: k for k, v in _CLOSERS_OF.items()}[tok[i]]))):
            i += 1
        elif i < j and tok[j - 1] == "!" and tok[i:j].rstrip("!")[-1:].isdigit():
            break
        elif i < j and (tok[j - 1] in ".,;:?!\"'“”‘’«»" or
                        (tok[j - 1] in _CLOSERS_OF and tok[i:j].count(tok[j - 1]) > tok[i:j].count(
                            _CLOSERS_OF[tok[j - 1]]))):
            j -= 1
        else:
            break
    return i, j


#: a line's Markdown block prefix: leading indentation, blockquote ``>``, a heading ``#``…``######``,
#: a bullet ``-``/``*``/``+`` or an ordered marker ``1.``/``1)`` (a marker needs a space or the line
#: end after it), and the whitespace before the first word (CommonMark §4.2, §5.1–5.3)
_MD_PREFIX = re.compile(r"^(?:[ \t]*(?:>|#{1,6}(?=[ \t]|$)|[-*+](?=[ \t]|$)|\d{1,9}[.)](?=[ \t]|$)))*[ \t]*", re.M)
#: a whole line that is Markdown structure: a table row (starts and ends with ``|``), or a line of
#: only ``- * _ = : | +`` (thematic break, setext underline, table delimiter row)
_MD_LINE = re.compile(r"^[ \t]*\|.*\|[ \t]*$|^[ \t]*[-*_=:|+](?:[ \t]*[-*_=:|+])*[ \t]*$", re.M)


def markdown_spans(text: str) -> list[tuple[int, int]]:
    """Character ranges of ``text`` that carry Markdown block structure: each line's block prefix
    (leading indentation, ``>``, ``#``…``######``, a ``-``/``*``/``+`` bullet or ``1.``/``1)``, with
    the whitespace up to the first word), table rows (lines that start and end with ``|``) and
    lines of only rule characters (thematic breaks, setext underlines, table delimiter rows).
    Code fences are protected as code by ``protected_spans``.

    Args:
        text: any string.
    Returns:
        sorted, disjoint [a, b) ranges (non-empty; a line's ranges never cross its newline); [] for
        text without Markdown structure. Pure function of ``text``.
    Source: CommonMark 0.31 §4 (leaf blocks: headings, thematic breaks, indented code, tables
    in GFM) and §5 (block quotes, list items); sago's rule that surface noise keeps it.
    """
    return list(_markdown(text))


def _find_markdown(text: str) -> tuple[tuple[int, int], ...]:
    found = [m.span() for m in _MD_PREFIX.finditer(text)] + [m.span() for m in _MD_LINE.finditer(text)]
    return tuple(_merge(found))


#: ``_find_markdown`` cached (wrapped here, not decorated, so that mutation testing reaches its body)
_markdown = functools.lru_cache(maxsize=4096)(_find_markdown)


def _mask(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with the characters of ``spans`` replaced by spaces (indices unchanged)."""
    chars = list(text)
    for a, b in spans:
        chars[a:b] = " " * (b - a)
    return "".join(chars)


def _code_blocks(text: str) -> list[tuple[int, int]]:
    """Lines that look like code, each with the indented (or blank) lines that follow it; a
    block's span runs from its first line's start through its last line's newline."""
    out, lines, pos = [], text.split("\n"), 0
    starts = []
    for ln in lines:
        starts.append(pos)
        pos += len(ln) + 1
    k = 0
    while k < len(lines):
        if not _CODE_LINE.match(lines[k]):
            k += 1
            continue
        last = k
        m = k + 1
        while m < len(lines) and (not lines[m].strip() or lines[m][:1] in " \t"):
            if lines[m].strip():
                last = m
            m += 1
        end = starts[last] + len(lines[last])
        out.append((starts[k], min(end + 1, len(text))))  # + its newline
        k = last + 1
    return out


def _math_and_numbers(masked: str) -> list[tuple[int, int]]:
    """Tokens holding a digit, a math/code operator ("2n+3=11", "x^2", "f(x)", "snake_case"),
    and expressions joined by stand-alone operators ("4x + 2y = 10", "Radius = 4")."""
    out = []
    for line in _LINE.finditer(masked):
        toks = [(line.start() + m.start(), m.group()) for m in _NONSPACE.finditer(line.group())]
        cores: dict[int, tuple[int, int, str]] = {}

        def core(n: int, cores=cores, toks=toks) -> tuple[int, int, str]:
            if n not in cores:
                start, tok = toks[n]
                i, j = _core(tok)
                cores[n] = (start + i, start + j, tok[i:j])
            return cores[n]

        for n, (_, tok) in enumerate(toks):
            if not _MATH_CHAR.search(tok):  # a plain word (most tokens): nothing to do
                continue
            a, b, c = core(n)
            if not c:
                continue
            if _OPERATOR.match(c):
                if 0 < n < len(toks) - 1:
                    left, right = core(n - 1), core(n + 1)
                    # an operand must look like math (digit, one letter, operator): not "Wars - The"
                    if left[2] and right[2] and any(_OPERAND.search(t[2]) or _WORD_OP.search(t[2])
                                                    for t in (left, right)):
                        out.append((left[0], right[1]))
            elif _DIGIT.search(c) or _WORD_OP.search(c):
                out.append((a, b))
    return out


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(s for s in spans if s[1] > s[0]):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def protected_spans(text: str) -> list[tuple[int, int]]:
    """Character ranges of ``text`` whose characters carry meaning, so no surface noise may
    touch them: numbers (decimals, signs, units glued to digits: "3.5", "-2", "3D", "5cm",
    "$10", "1/4", "5!"), math expressions ("2n+3=11", "x^2", "4x + 2y = 10", "Radius = 4"),
    code (fenced ```...```, inline `...`, lines that look like code with the indented lines
    after them, tokens like "f(x)" or "snake_case"), URLs, e-mail addresses, quoted strings
    ("...", '...', “...”, ‘...’, «...», quotes included) and Markdown block structure
    (``markdown_spans``: indentation, heading/list/quote markers at a line start, table rows,
    rules). Trailing sentence marks (. , ; : ?) and edge brackets are not part of a number or
    expression.

    Args:
        text: any string.
    Returns:
        sorted, disjoint, non-touching [a, b) ranges with 0 <= a < b <= len(text); [] when
        nothing is protected. Pure function of ``text``.
    Source: sago's own rule; SAGO (arXiv 2610.01428) §Variants requires
    surface noise to keep the meaning.
    """
    return list(_protected(text))


def _find_protected(text: str) -> tuple[tuple[int, int], ...]:
    spans: list[tuple[int, int]] = []
    masked = text
    for pattern in (_FENCED, _INLINE_CODE, _URL, _EMAIL):
        found = []
        for m in pattern.finditer(masked):
            a, b = m.span()
            if pattern is _URL or pattern is _EMAIL:
                i, j = _core(text[a:b])
                a, b = a + i, a + j
            found.append((a, b))
        spans += found
        masked = _mask(masked, found)
    wrap = _WRAPPED.fullmatch(text)
    if wrap and '"' not in wrap.group(2).replace('""', ""):
        # the whole prompt wrapped in quotes (CSV export: "What ""kissing"" disease?"): the
        # wrapper is no quotation; what it wraps is searched as usual
        masked = _mask(masked, [wrap.span(1), wrap.span(3)])
    for pattern in _QUOTES:
        found = [m.span() for m in pattern.finditer(masked)]
        spans += found
        masked = _mask(masked, found)
    spans += _code_blocks(text)
    spans += _markdown(text)
    spans += _math_and_numbers(masked)
    return tuple(_merge(spans))


#: ``_find_protected`` cached: every surface variant of a prompt asks again (wrapped here, not
#: decorated, so that mutation testing reaches its body)
_protected = functools.lru_cache(maxsize=4096)(_find_protected)
