"""What a full-text search finds: one message of a transcript, where it is and why it matched."""

from __future__ import annotations

from dataclasses import dataclass

from .base import TypedRow


@dataclass(frozen=True)
class SearchHit(TypedRow):
    """A message that matched: its log `position`, session, seq, role, routing key, platform and
    time (`at`); `snippet` marks the match >>>like this<<<; `score` is its bm25 rank (None when
    the text was scanned rather than ranked) and `match` says how it matched (words or substring);
    `fate`: None for a message in the agent's history, else "compacted" (summarised, still found)
    or, asked for with include_undone, "undone" or "retried"."""
    position: int
    session_id: str
    seq: int
    role: str
    session_key: str | None
    platform: str | None
    at: str
    snippet: str
    score: float | None
    match: str
    fate: str | None = None
