"""The archive's events: sessions moved out of the hot log into an archive file, and back.

Two kinds of stream, never reconstructed (StreamEvent, like a transcript):
- an archive's own stream (its id from the file's sha256): SessionsArchived at version 1, then
  SessionsRestored at 2 (a second restore of the file finds version 2 taken: refused).
- one stream per session ("archived-session"): SessionArchived / SessionRestored in turn, so the
  session's history shows them, a listing shows it archived, and routing knows the session went.

SessionsArchived names the log positions the archive took away (`positions`, as [first, last]
runs) and `seals_digest`, the sha256 over those positions' chain seals: the chain keeps the
seals, so the verifier checks the removed range against this event instead of the events.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable
from uuid import UUID

from eventsourcing.utils import register_topic

from .base import StreamEvent, stream_id


def archive_stream(sha256: str) -> UUID:
    return stream_id("archive", sha256)


def archived_session_stream(session_id: str) -> UUID:
    return stream_id("archived-session", session_id)


def seals_digest(seals: Iterable[tuple[int, str]]) -> str:
    """sha256 over (position, seal hex) pairs in position order: what stands for removed events."""
    h = hashlib.sha256()
    for position, seal in sorted(seals):
        h.update(f"{position}:{seal}\n".encode())
    return h.hexdigest()


class SessionsArchived(StreamEvent):
    TOPIC = "turnlog:SessionsArchived"
    sessions: list[str]
    archive_sha256: str
    archive_file: str
    events: int
    positions: list[list[int]]
    seals_digest: str
    actor: str
    cause: str


class SessionsRestored(StreamEvent):
    TOPIC = "turnlog:SessionsRestored"
    sessions: list[str]
    archive_sha256: str
    archive_file: str
    positions: list[list[int]]
    actor: str
    cause: str


class SessionArchived(StreamEvent):
    """One session of an archive; `row` is its listing (the sessions read model's row) as it
    was, so that it is still listed once its own events are gone."""

    TOPIC = "turnlog:SessionArchived"
    session_id: str
    session_key: str
    archive_sha256: str
    archive_file: str
    row: dict[str, Any]
    actor: str
    cause: str


class SessionRestored(StreamEvent):
    TOPIC = "turnlog:SessionRestored"
    session_id: str
    archive_sha256: str
    archive_file: str
    actor: str
    cause: str


for _cls in (SessionsArchived, SessionsRestored, SessionArchived, SessionRestored):
    register_topic(_cls.TOPIC, _cls)

# The topics after which every read model is refilled from the log (rows left it, or came back
# behind the read models' positions).
LOG_RESHAPING_TOPICS = (SessionsArchived.TOPIC, SessionsRestored.TOPIC)
