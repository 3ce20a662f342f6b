"""Searching the search projection: which index a query goes to, filters, ranking and snippets.

- Words (no Chinese, Japanese or Korean letters): the unicode61 index, ranked by bm25.
- CJK text, every term 3 characters or more: the trigram index (substring match), bm25.
- CJK text with a 1- or 2-character term, which no trigram can hold, or a term that mixes CJK
  with other text (the trigram index holds only CJK runs): a LIKE scan of the projection's own
  message table, newest first (docs/behaviour.md §10; the same messages, only slower).

Ranking is BM25 (FTS5's formula and statistics, search_rank.py) over the newest matches after
filters: RANK_WINDOW of them, or RANK_DEPTH times the number of hits asked for if that is more.
A conversation search favours what was said recently; a query with fewer matches than the window
is ranked exactly. The window bounds the per-candidate work (reading its text and counting its
terms, about 10 µs a candidate), and the term statistics cache removes the cost FTS5's bm25()
pays in every query, counting every row that holds each phrase.
"""

from __future__ import annotations

import sqlite3
import weakref
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time
from typing import Any

from ..domain.fts_query import QueryPlan, QueryTooLong, Term, plan_query
from ..domain.history import HIDDEN
from ..errors import InvalidRequest
from .runner import ProjectionRunner
from .views_file import is_corruption
from ..storage.sql import utc_text
from .search_rank import TermStats, counter, idf, length, score

MAX_LIMIT = 1000
RANK_WINDOW = 100
RANK_DEPTH = 5
SNIPPET_TOKENS = 16
MARK_OPEN, MARK_CLOSE, ELLIPSIS = ">>>", "<<<", "…"
SNIPPET_CHARS = 60  # either side of a substring match
_COLUMNS = "m.id, f.session_id, m.seq, m.role, f.session_key, f.platform, m.at, m.position, m.fate"
# The message table with its filing (session, key, platform), the messages outermost.
_MESSAGES = "search_messages m CROSS JOIN search_filings f ON f.id = m.filing"


@dataclass(frozen=True)
class Filters:
    session: str | None = None
    key: str | None = None
    platform: str | None = None
    role: str | None = None
    since: str | None = None  # fixed-width UTC text (search.utc_text), inclusive
    until: str | None = None  # exclusive
    hidden: bool = False  # leave out messages undone or retried out of the agent's history

    def sql(self) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        filed: list[str] = []
        if self.hidden:
            clauses.append("(m.fate IS NULL OR m.fate NOT IN (?,?))")
            params.extend(HIDDEN)
        for column, value in (("session_id", self.session), ("session_key", self.key), ("platform", self.platform)):
            if value is not None:
                filed.append(f"{column} = ?")
                params.append(value)
        if filed:
            clauses.append(f"m.filing IN (SELECT id FROM search_filings WHERE {' AND '.join(filed)})")
        if self.role is not None:
            clauses.append("m.role = ?")
            params.append(self.role)
        if self.since is not None:
            clauses.append("m.at >= ?")
            params.append(self.since)
        if self.until is not None:
            clauses.append("m.at < ?")
            params.append(self.until)
        return " AND ".join(clauses), params


def parse_moment(value: str | datetime | date | None, what: str) -> str | None:
    """A since/until value (ISO time with a zone, or a date meaning midnight UTC) as fixed-width
    UTC text; raises ValueError for anything else."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            if not text.isascii():  # other digits are not ISO-8601, whatever fromisoformat takes
                raise ValueError(text)
            if len(text) == 10:
                value = date.fromisoformat(text)
            else:
                value = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in "Zz" else text)
        except ValueError:
            raise ValueError(f"{what} {value!r} is not an ISO date or time (e.g. 2026-03-01T10:00:00+00:00)") \
                from None
    if not isinstance(value, datetime):
        value = datetime.combine(value, time(0), tzinfo=UTC)
    if value.tzinfo is None:
        raise ValueError(f"{what} {value.isoformat()!r} has no time zone (add +00:00 or Z)")
    return utc_text(value)


def run(runner: ProjectionRunner, query: str, *, session: str | None = None, key: str | None = None,
        platform: str | None = None, role: str | None = None, since: Any = None, until: Any = None,
        limit: int = 20, include_undone: bool = False) -> list[dict[str, Any]]:
    """Search the search projection as it is (the caller catches it up: views.py); a damaged
    index is rebuilt from the log once and the search retried. Undone and retried messages are
    left out unless `include_undone`; every hit says its `fate`."""
    if not isinstance(query, str):
        raise InvalidRequest(f"the search query must be a string, not {type(query).__name__}")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequest(f"limit must be an integer from 1 to {MAX_LIMIT}, not {limit!r}")
    try:
        plan = plan_query(query)
        filters = Filters(session=session, key=key, platform=platform, role=role,
                          since=parse_moment(since, "since"), until=parse_moment(until, "until"))
    except (QueryTooLong, ValueError) as e:
        raise InvalidRequest(str(e)) from None
    try:
        with runner.lock:
            return search(runner.db, plan, _hiding(runner.db, filters, include_undone), limit, _stats(runner))
    except sqlite3.DatabaseError as e:
        if not is_corruption(e):
            raise
        runner.repair("search", cause=e)
    with runner.lock:
        return search(runner.db, plan, _hiding(runner.db, filters, include_undone), limit, _stats(runner))


def _hiding(db: sqlite3.Connection, filters: Filters, include_undone: bool) -> Filters:
    """The filters, hiding undone and retried messages when there are any (one look at a partial
    index; without any, the search keeps its unfiltered plan)."""
    if include_undone or db.execute("SELECT 1 FROM search_messages WHERE fate IS NOT NULL AND fate IN (?,?)"
                                    " LIMIT 1", HIDDEN).fetchone() is None:
        return filters
    return replace(filters, hidden=True)


def search(db: sqlite3.Connection, plan: QueryPlan, filters: Filters, limit: int,
           stats: TermStats | None = None) -> list[dict[str, Any]]:
    if plan.empty:
        return []
    stats = stats or TermStats()
    if not plan.cjk:
        return _ranked(db, WORDS, plan.fts, plan, filters, limit, stats)
    if plan.trigram_ok:
        return _ranked(db, TRIGRAMS, plan.trigram_fts(), plan, filters, limit, stats)
    return _scanned(db, plan, filters, limit)


WORDS, TRIGRAMS = "search_fts", "search_fts_trigram"


_STATS: "weakref.WeakKeyDictionary[ProjectionRunner, TermStats]" = weakref.WeakKeyDictionary()


def _stats(runner: ProjectionRunner) -> TermStats:
    """The term statistics of this runner's index (one database's)."""
    with runner.lock:
        stats = _STATS.get(runner)
        if stats is None:
            stats = _STATS[runner] = TermStats()
        return stats


def _ranked(db: sqlite3.Connection, index: str, expr: str, plan: QueryPlan, filters: Filters,
            limit: int, stats: TermStats) -> list[dict[str, Any]]:
    """The newest matches (after filters), ranked by BM25 (search_rank.py)."""
    where, params = filters.sql()
    window = max(RANK_WINDOW, RANK_DEPTH * limit)
    if where:
        # The filters are on the message table; CROSS JOIN keeps the index outermost.
        ids = [r[0] for r in db.execute(
            f"SELECT {index}.rowid FROM {index} CROSS JOIN search_messages m ON m.id = {index}.rowid"
            f" WHERE {index} MATCH ? AND {where} ORDER BY {index}.rowid DESC LIMIT ?",
            (expr, *params, window))]
    else:
        ids = [r[0] for r in db.execute(
            f"SELECT rowid FROM {index} WHERE {index} MATCH ? ORDER BY rowid DESC LIMIT ?", (expr, window))]
    if not ids:
        return []
    trigram = index == TRIGRAMS
    marks = ",".join("?" * len(ids))
    texts = {rowid: (text, length(size)) for rowid, text, size in db.execute(
        f"SELECT m.id, m.text, d.sz FROM search_messages m"
        f" JOIN {index}_docsize d ON d.id = m.id WHERE m.id IN ({marks})", ids)}
    rows, average = stats.totals(db, index)
    positive = [t for t in plan.terms if not t.negated]
    phrases = [(counter(t, substring=trigram), idf(rows, stats.df(db, index, _phrase(t, trigram), rows)))
               for t in positive]
    scores = score(texts, phrases, average, substring=trigram)
    top = sorted(ids, key=lambda rowid: (-scores.get(rowid, 0.0), -rowid))[:limit]
    # Snippets from the whole text, marking what the ranking counted; FTS5's snippet() would
    # read each row's postings again, 0.5 ms a row here.
    whole = {rowid: texts[rowid][0] for rowid in top if rowid in texts}
    patterns = [pattern for pattern, _ in phrases]
    snippets = {rowid: _snippet(whole.get(rowid, ""), positive, patterns, substring=trigram) for rowid in top}
    meta = _metadata(db, top)
    return [{**meta[rowid], "snippet": snippets.get(rowid, ""), "score": round(scores.get(rowid, 0.0), 6),
             "match": "substring" if trigram else "words"} for rowid in top if rowid in meta]


def _phrase(term: Term, trigram: bool) -> str:
    """The term alone as an FTS5 query, for its document frequency."""
    return f'"{term.substring}"' if trigram else term.fts()


def _scanned(db: sqlite3.Connection, plan: QueryPlan, filters: Filters, limit: int) -> list[dict[str, Any]]:
    """Substring search without an index: each OR-group's terms must all occur (NOT: must not)."""
    where, params = filters.sql()
    groups, like_params = [], []
    for group in plan.groups:
        parts = []
        for term in group:
            parts.append(("NOT " if term.negated else "") + "m.text LIKE ? ESCAPE '\\'")
            like_params.append("%" + _escape_like(term.substring) + "%")
        groups.append("(" + " AND ".join(parts) + ")")
    condition = "(" + " OR ".join(groups) + ")" + (f" AND {where}" if where else "")
    rows = db.execute(f"SELECT {_COLUMNS}, m.text FROM {_MESSAGES} WHERE {condition}"
                      " ORDER BY m.id DESC LIMIT ?", (*like_params, *params, limit)).fetchall()
    positive = [t for t in plan.terms if not t.negated]
    return [{**_row_dict(r[:9]), "snippet": _snippet(r[9], positive), "score": None, "match": "substring"}
            for r in rows]


def _metadata(db: sqlite3.Connection, ids: list[int]) -> dict[int, dict[str, Any]]:
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = db.execute(f"SELECT {_COLUMNS} FROM {_MESSAGES} WHERE m.id IN ({marks})", ids).fetchall()
    return {r[0]: _row_dict(r) for r in rows}


def _row_dict(r: tuple[Any, ...]) -> dict[str, Any]:
    return {"position": r[7], "session_id": r[1], "seq": r[2], "role": r[3], "session_key": r[4],
            "platform": r[5], "at": r[6], "fate": r[8]}


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _snippet(text: str, terms: list[Term], patterns: list[Any] | None = None, substring: bool = True) -> str:
    """Text around the first occurrence of a term, every occurrence marked as FTS5's snippet does.
    With `patterns` (search_rank.counter), occurrences are those the ranking counted."""
    folded = text.casefold()
    spans = []
    if patterns is not None:
        for pattern in patterns:
            spans += [m.span() for m in pattern.finditer(folded)
                      if substring or m.start() == 0 or not folded[m.start() - 1].isalnum()]
    for term in terms if patterns is None else ():
        needle = term.substring.casefold()
        start = folded.find(needle) if needle else -1
        while start >= 0:
            spans.append((start, start + len(needle)))
            start = folded.find(needle, start + len(needle))
    if not spans:
        return text[: 2 * SNIPPET_CHARS] + (ELLIPSIS if len(text) > 2 * SNIPPET_CHARS else "")
    spans.sort()
    lo = max(0, spans[0][0] - SNIPPET_CHARS)
    hi = min(len(text), spans[0][1] + SNIPPET_CHARS)
    out, cursor = [], lo
    for start, end in spans:
        if start < cursor or end > hi:
            continue
        out += [text[cursor:start], MARK_OPEN, text[start:end], MARK_CLOSE]
        cursor = end
    out.append(text[cursor:hi])
    return (ELLIPSIS if lo > 0 else "") + "".join(out) + (ELLIPSIS if hi < len(text) else "")
