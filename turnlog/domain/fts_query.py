"""Turning what a user typed into a full-text query that SQLite FTS5 always accepts (docs/behaviour.md §10).

Pure: no I/O. `sanitize_fts5_query` gives the FTS5 expression for the word index (unicode61);
`plan_query` also splits it into terms so that Chinese, Japanese and Korean text, which the word
tokenizer cannot cut into words, is searched by substring (the trigram index for terms of three
characters or more, a LIKE scan for shorter ones).

The rules, in order (each keeps the result a valid FTS5 expression):
- a query longer than MAX_QUERY_CHARS is refused (QueryTooLong), never silently truncated;
- control characters become spaces;
- balanced "quoted phrases" are kept as they are; an unmatched quote becomes a space;
- NEAR(a b, N) becomes its terms `a b`;
- each of + { } ( ) : " ^ becomes a space (so a column filter `content:x` is two plain terms);
- runs of `*` collapse to one, and a `*` that does not end a term is dropped (`***deploy*` -> `deploy*`);
- AND / OR / NOT at the start or the end are dropped, and of several in a row only the first is kept;
- terms joined by `.`, `-` or `_` are quoted (`chat-send` -> `"chat-send"`), as is any other term
  holding punctuation (`check?` -> `"check?"`); a term of punctuation only is dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_QUERY_CHARS = 2048
OPERATORS = frozenset({"AND", "OR", "NOT"})

_SPECIAL = str.maketrans({c: " " for c in '+{}():"^'})
_PHRASE = re.compile(r'"([^"]*)"')
_PLACEHOLDER = re.compile(r"(\x00\d+\x00\*?)")
_NEAR = re.compile(r"\bNEAR\s*\(([^()]*)\)")
_NEAR_DISTANCE = re.compile(r",\s*\d*\s*$")
_JOINED = re.compile(r"\w+(?:[._-]\w+)+")
_CJK_RANGES = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x2E80, 0x2FDF),  # CJK radicals
    (0x3000, 0x303F),  # CJK symbols and punctuation
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x31BF),  # Bopomofo, Hangul compatibility Jamo, Kanbun
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA960, 0xA97F),  # Hangul Jamo extended A
    (0xAC00, 0xD7FF),  # Hangul syllables, Jamo extended B
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF65, 0xFFDC),  # half-width Katakana and Hangul
    (0x20000, 0x3134F),  # CJK extensions B to G
)


_CJK_CLASS = "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in _CJK_RANGES) + "\\uff01-\\uff64"
_CJK_RUN = re.compile(f"[{_CJK_CLASS}]+(?:[ \\t]+[{_CJK_CLASS}]+)*")


def cjk_runs(text: str) -> str:
    """The Chinese, Japanese and Korean runs of `text` (spaces inside a run kept), one per line:
    what the trigram index holds. A query term without a newline cannot match across two runs."""
    return "\n".join(_CJK_RUN.findall(text))


def is_cjk_run(text: str) -> bool:
    return _CJK_RUN.fullmatch(text) is not None


class QueryTooLong(ValueError):
    """A search query longer than MAX_QUERY_CHARS."""


@dataclass(frozen=True)
class Term:
    text: str  # the words of the term or phrase, without quotes or `*`
    quoted: bool = False
    prefix: bool = False
    negated: bool = False  # preceded by NOT

    @property
    def substring(self) -> str:
        """What a substring search looks for: an unquoted term without punctuation at its ends."""
        if self.quoted:
            return self.text
        start, end = 0, len(self.text)
        while start < end and not self.text[start].isalnum():
            start += 1
        while end > start and not self.text[end - 1].isalnum():
            end -= 1
        return self.text[start:end]

    def fts(self) -> str:
        body = f'"{self.text}"' if self.quoted else self.text
        return body + ("*" if self.prefix else "")


@dataclass(frozen=True)
class QueryPlan:
    """A sanitised query: the FTS5 expression and the same query as OR-groups of AND-ed terms.

    FTS5 binds NOT tighter than AND and AND tighter than OR, so `a NOT b c OR d` is the groups
    [a, not b, c] and [d]; a row matches if every term of some group does.
    """

    fts: str
    groups: tuple[tuple[Term, ...], ...]
    cjk: bool

    @property
    def empty(self) -> bool:
        return not self.groups

    @property
    def terms(self) -> tuple[Term, ...]:
        return tuple(t for g in self.groups for t in g)

    @property
    def trigram_ok(self) -> bool:
        """True when the trigram index can answer: every term is CJK text (it holds nothing else)
        of 3 characters or more (a trigram is 3)."""
        return not self.empty and all(len(t.substring) >= 3 and is_cjk_run(t.substring) for t in self.terms)

    def trigram_fts(self) -> str:
        """The query for a trigram index: every term a quoted substring, operators kept."""
        return " OR ".join(
            " ".join(("NOT " if t.negated else "") + f'"{t.substring}"' for t in group) for group in self.groups)


def is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def has_cjk(text: str) -> bool:
    """True if `text` holds a Chinese, Japanese or Korean letter (CJK punctuation does not count)."""
    return any(ord(ch) >= 0x1100 and ch.isalnum() and is_cjk(ch) for ch in text)


def sanitize_fts5_query(query: str) -> str:
    """The FTS5 expression for `query` (see the module docstring); "" if nothing is left to search."""
    return plan_query(query).fts


def plan_query(query: str) -> QueryPlan:
    if len(query) > MAX_QUERY_CHARS:
        raise QueryTooLong(f"the search query has {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
    text = "".join(" " if _is_control(ch) else ch for ch in query)
    phrases: list[str] = []

    def keep_phrase(m: re.Match[str]) -> str:
        phrases.append(m.group(1))
        return f" \x00{len(phrases) - 1}\x00"

    text = _PHRASE.sub(keep_phrase, text)
    text = _NEAR.sub(lambda m: " " + _NEAR_DISTANCE.sub("", m.group(1)) + " ", text)
    text = text.translate(_SPECIAL)
    text = text.replace(" \x00", "\x00")  # the space above only kept NEAR from gluing to a phrase

    # Each whitespace-separated chunk becomes an operator, terms, or nothing; spaces are kept.
    parts = re.split(r"(\s+)", text)
    items: list[tuple[int, str | Term]] = []  # (index into parts, operator name or term)
    rendered = list(parts)
    for i, chunk in enumerate(parts):
        if not chunk or chunk.isspace():
            continue
        rendered[i] = ""
        core = chunk.rstrip("*")
        if core.upper() in OPERATORS:
            items.append((i, core))
            continue
        for piece in _PLACEHOLDER.split(chunk):
            term = _phrase_term(piece, phrases) if piece.startswith("\x00") else _word_term(piece)
            if term is not None:
                items.append((i, term))
    items = _clean_operators(items)

    groups: list[list[Term]] = [[]]
    negate = False
    by_part: dict[int, list[str]] = {}
    for i, item in items:
        if isinstance(item, str):
            by_part.setdefault(i, []).append(item)
            if item == "OR":
                groups.append([])
            negate = item == "NOT"
            continue
        by_part.setdefault(i, []).append(item.fts())
        groups[-1].append(Term(item.text, item.quoted, item.prefix, negated=negate))
        negate = False
    for i, texts in by_part.items():
        rendered[i] = " ".join(texts)
    fts = "".join(rendered).strip()
    kept = tuple(tuple(g) for g in groups if g)
    return QueryPlan(fts=fts, groups=kept, cjk=has_cjk(fts))


def _is_control(ch: str) -> bool:
    cp = ord(ch)
    return cp < 0x20 or 0x7F <= cp <= 0x9F or cp in (0x2028, 0x2029)


def _phrase_term(piece: str, phrases: list[str]) -> Term | None:
    index = int(piece.strip("\x00*"))
    inner = phrases[index]
    if not _has_word_char(inner):
        return None
    return Term(inner, quoted=True, prefix=piece.endswith("*"))


def _word_term(piece: str) -> Term | None:
    word = re.sub(r"\*+", "*", piece).lstrip("*")
    prefix = word.endswith("*")
    core = word.rstrip("*")
    if not core or not _has_word_char(core):
        return None
    if _is_bareword(core) and not _JOINED.fullmatch(core):
        return Term(core, prefix=prefix)
    return Term(core, quoted=True, prefix=prefix)


def _clean_operators(items: list[tuple[int, str | Term]]) -> list[tuple[int, str | Term]]:
    """Drop operator words that lead or trail (in any case, as Hermes does) and, of upper-case
    operators in a row, all but the first. A lower-case `and` / `or` / `not` between terms is a
    plain word to FTS5, so it stays a term."""
    while items and isinstance(items[0][1], str):
        items = items[1:]
    while items and isinstance(items[-1][1], str):
        items = items[:-1]
    out: list[tuple[int, str | Term]] = []
    for i, item in items:
        if isinstance(item, str) and item not in OPERATORS:
            item = Term(item)
        if isinstance(item, str) and isinstance(out[-1][1], str):
            continue
        out.append((i, item))
    return out


def _is_bareword(text: str) -> bool:
    """FTS5 takes ASCII letters, digits, `_` and any non-ASCII character in an unquoted term."""
    return all(not ch.isascii() or ch.isalnum() or ch == "_" for ch in text)


def _has_word_char(text: str) -> bool:
    return any(ch.isalnum() for ch in text)
