"""Searching the search projection: which index a query goes to, filters, ranking and snippets.

- Words (no Chinese, Japanese or Korean letters): the unicode61 index, ranked by bm25.
- CJK text, every term 3 characters or more: the trigram index (substring match), bm25.
- CJK text with a 1- or 2-character term, which no trigram can hold, or a term that mixes CJK
  with other text (the trigram index holds only CJK runs): a LIKE scan of the projection's own
  message table, newest first (spec §10; the same messages, only slower).

Ranking is bm25 over the RANK_WINDOW newest matches (after filters): FTS5 computes bm25 for
every row it ranks, which costs 2-5 µs a row, so ranking all 40,000 messages that contain a
common word would take 80-200 ms. The scores are FTS5's own (idf over the whole index); only
the candidates are bounded, to the most recent ones, which is also what a conversation search
favours. A query with fewer matches than the window is ranked exactly. (bm25 also counts every
row holding each phrase once per query, for its idf: that, not the window, is the floor of a
query's cost.)
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any

from ..domain.fts_query import QueryPlan, QueryTooLong, Term, plan_query
from ..errors import InvalidRequest
from .runner import ProjectionRunner, is_corruption
from .base import utc_text

MAX_LIMIT = 1000
RANK_WINDOW = 500
SNIPPET_TOKENS = 16
MARK_OPEN, MARK_CLOSE, ELLIPSIS = ">>>", "<<<", "…"
SNIPPET_CHARS = 60  # either side of a substring match
_COLUMNS = "m.id, m.session_id, m.seq, m.role, m.session_key, m.platform, m.at"


@dataclass(frozen=True)
class Filters:
    session: str | None = None
    key: str | None = None
    platform: str | None = None
    role: str | None = None
    since: str | None = None  # fixed-width UTC text (search.utc_text), inclusive
    until: str | None = None  # exclusive

    def sql(self) -> tuple[str, list[Any]]:
        clauses, params = [], []
        for column, value in (("session_id", self.session), ("session_key", self.key),
                              ("platform", self.platform), ("role", self.role)):
            if value is not None:
                clauses.append(f"m.{column} = ?")
                params.append(value)
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
        limit: int = 20) -> list[dict[str, Any]]:
    """Catch the search projection up, then search it; a damaged index is rebuilt from the log
    once and the search retried."""
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
    runner.catch_up(["search"])
    try:
        with runner.lock:
            return search(runner.db, plan, filters, limit)
    except sqlite3.DatabaseError as e:
        if not is_corruption(e):
            raise
        runner.repair("search", cause=e)
    with runner.lock:
        return search(runner.db, plan, filters, limit)


def search(db: sqlite3.Connection, plan: QueryPlan, filters: Filters, limit: int) -> list[dict[str, Any]]:
    if plan.empty:
        return []
    if not plan.cjk:
        return _ranked(db, "search_fts", plan.fts, filters, limit, "words")
    if plan.trigram_ok:
        hits = _ranked(db, "search_fts_trigram", plan.trigram_fts(), filters, limit, "substring", snippets=False)
        texts = _texts(db, [h["position"] for h in hits])
        positive = [t for t in plan.terms if not t.negated]
        return [{**h, "snippet": _snippet(texts.get(h["position"], ""), positive)} for h in hits]
    return _scanned(db, plan, filters, limit)


def _ranked(db: sqlite3.Connection, table: str, expr: str, filters: Filters, limit: int,
            match: str, snippets: bool = True) -> list[dict[str, Any]]:
    """`snippets=False`: the trigram index holds only CJK runs, so its snippets would too; the
    caller makes them from the whole text."""
    where, params = filters.sql()
    snippet = f"snippet({table}, 0, '{MARK_OPEN}', '{MARK_CLOSE}', '{ELLIPSIS}', {SNIPPET_TOKENS})" \
        if snippets else "''"
    if not where:
        row = db.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
                         (expr, RANK_WINDOW - 1)).fetchone()
        lowest = row[0] if row else 0
        # `rank` (not a second bm25() call) reuses the sort's scores: bm25 first counts every row
        # holding each phrase, which costs as much as the ranking itself.
        hits = db.execute(f"SELECT rowid, rank, {snippet} FROM {table} WHERE {table} MATCH ?"
                          f" AND rowid >= ? ORDER BY rank LIMIT ?", (expr, lowest, limit)).fetchall()
    else:
        # The filters are on the message table; CROSS JOIN keeps the index outermost, so FTS5
        # computes its statistics once for the whole query.
        join = f"FROM {table} CROSS JOIN search_messages m ON m.id = {table}.rowid WHERE {table} MATCH ? AND {where}"
        row = db.execute(f"SELECT {table}.rowid {join} ORDER BY {table}.rowid DESC LIMIT 1 OFFSET ?",
                         (expr, *params, RANK_WINDOW - 1)).fetchone()
        lowest = row[0] if row else 0
        scored = db.execute(f"SELECT {table}.rowid, bm25({table}) {join} AND {table}.rowid >= ? ORDER BY 2 LIMIT ?",
                            (expr, *params, lowest, limit)).fetchall()
        hits = []
        for rowid, score in scored:
            text = db.execute(f"SELECT {snippet} FROM {table} WHERE {table} MATCH ? AND rowid = ?",
                              (expr, rowid)).fetchone() if snippets else ("",)
            hits.append((rowid, score, text[0] if text else ""))
    meta = _metadata(db, [h[0] for h in hits])
    out = []
    for rowid, score, text in hits:
        row = meta.get(rowid)
        if row is not None:
            out.append({**row, "snippet": text, "score": round(-score, 6), "match": match})
    return out


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
    rows = db.execute(f"SELECT {_COLUMNS}, m.text FROM search_messages m WHERE {condition}"
                      " ORDER BY m.id DESC LIMIT ?", (*like_params, *params, limit)).fetchall()
    positive = [t for t in plan.terms if not t.negated]
    return [{**_row_dict(r[:7]), "snippet": _snippet(r[7], positive), "score": None, "match": "substring"}
            for r in rows]


def _metadata(db: sqlite3.Connection, ids: list[int]) -> dict[int, dict[str, Any]]:
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = db.execute(f"SELECT {_COLUMNS} FROM search_messages m WHERE m.id IN ({marks})", ids).fetchall()
    return {r[0]: _row_dict(r) for r in rows}


def _texts(db: sqlite3.Connection, ids: list[int]) -> dict[int, str]:
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    return dict(db.execute(f"SELECT id, text FROM search_messages WHERE id IN ({marks})", ids).fetchall())


def _row_dict(r: tuple[Any, ...]) -> dict[str, Any]:
    return {"position": r[0], "session_id": r[1], "seq": r[2], "role": r[3], "session_key": r[4],
            "platform": r[5], "at": r[6]}


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _snippet(text: str, terms: list[Term]) -> str:
    """Text around the first occurrence of a term, every occurrence marked as FTS5's snippet does."""
    folded = text.casefold()
    spans = []
    for term in terms:
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
