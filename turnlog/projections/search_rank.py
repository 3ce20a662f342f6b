"""BM25 over a window of candidate messages, with the index's term statistics kept between queries.

FTS5's own bm25() first counts, in every query, each phrase's document frequency by reading all of
the phrase's postings: for a word in a tenth of 100,000 messages that count, not the scoring,
was most of a search's time. Here the same formula (FTS5's: k1 = 1.2, b = 0.75, idf =
ln((N - df + 0.5) / (df + 0.5)), at least 1e-6) is computed from:

- N and the average length: FTS5's own totals (the "averages" record of the index), read exactly;
- each candidate's length: FTS5's own per-row size (`<index>_docsize`), read exactly;
- each phrase's document frequency: counted by FTS5 and kept (TermStats) until the index has grown
  or shrunk by more than STATS_DRIFT of its rows since, as search engines keep term statistics
  per index segment: idf moves by far less than the drift in between;
- each phrase's frequency in a candidate: counted in its text with the tokenizer's rule (a token
  is a run of letters and digits, compared case-folded) for the word index, and as a substring
  for the trigram index.
"""

from __future__ import annotations

import math
import re
import sqlite3
import threading

from ..domain.fts_query import Term

K1, B = 1.2, 0.75
STATS_DRIFT = 0.01
_TOKEN = r"[^\W_]"


def varints(blob: bytes) -> list[int]:
    """SQLite's big-endian base-128 varints (as FTS5 stores its sizes and totals)."""
    out, value, count = [], 0, 0
    for byte in blob:
        count += 1
        if count == 9:
            out.append((value << 8) | byte)
            value, count = 0, 0
        elif byte & 0x80:
            value = (value << 7) | (byte & 0x7F)
        else:
            out.append((value << 7) | byte)
            value, count = 0, 0
    return out


class TermStats:
    """Document frequencies of phrases per index, reused while the index stays about the same size."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._df: dict[tuple[str, str], tuple[int, int]] = {}  # (index, phrase) -> (df, rows then)

    def totals(self, db: sqlite3.Connection, index: str) -> tuple[int, float]:
        """(rows, average row length in tokens), from the index's averages record."""
        row = db.execute(f"SELECT block FROM {index}_data WHERE id = 1").fetchone()
        numbers = varints(row[0]) if row and row[0] else []
        rows = numbers[0] if numbers else 0
        tokens = numbers[1] if len(numbers) > 1 else 0
        return rows, (tokens / rows if rows else 0.0)

    def df(self, db: sqlite3.Connection, index: str, phrase: str, rows: int) -> int:
        with self._lock:
            known = self._df.get((index, phrase))
        if known is not None and abs(rows - known[1]) <= rows * STATS_DRIFT:
            return known[0]
        count = db.execute(f"SELECT count(*) FROM {index} WHERE {index} MATCH ?", (phrase,)).fetchone()[0]
        with self._lock:
            if len(self._df) > 10_000:
                self._df.clear()
            self._df[(index, phrase)] = (count, rows)
        return count


def counter(term: Term, substring: bool) -> "re.Pattern[str]":
    """A pattern whose matches in case-folded text are where the term may occur; `occurrences`
    keeps those that start a token. The pattern starts with the term's text, so that the regular
    expression engine scans for it as a literal."""
    if substring:
        return re.compile(re.escape(term.text.casefold()))
    words = re.findall(f"{_TOKEN}+", term.text.casefold())
    body = "[\\W_]+".join(map(re.escape, words))
    return re.compile(body + (f"{_TOKEN}*" if term.prefix else f"(?!{_TOKEN})"))


def occurrences(pattern: "re.Pattern[str]", text: str, substring: bool) -> int:
    if substring:
        return len(pattern.findall(text))
    count = 0
    for found in pattern.finditer(text):
        start = found.start()
        if start == 0 or not text[start - 1].isalnum():
            count += 1
    return count


def score(texts: dict[int, tuple[str, int]], phrases: list[tuple["re.Pattern[str]", float]], average: float,
          substring: bool) -> dict[int, float]:
    """BM25 of each (text, length in tokens) for the phrases (pattern, idf)."""
    out = {}
    for rowid, (text, length) in texts.items():
        folded = text.casefold()
        norm = K1 * (1 - B + B * (length / average if average else 1.0))
        total = 0.0
        for pattern, weight in phrases:
            tf = occurrences(pattern, folded, substring)
            if tf:
                total += weight * tf * (K1 + 1) / (tf + norm)
        out[rowid] = total
    return out


def length(blob: bytes | None) -> int:
    """A row's length in tokens from its `<index>_docsize` record."""
    return (varints(blob) or [0])[0] if blob else 0


def idf(rows: int, df: int) -> float:
    return max(math.log((rows - df + 0.5) / (df + 0.5)), 1e-6)
