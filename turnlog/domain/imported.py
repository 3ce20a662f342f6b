"""What an import from another gateway's store records beside the usual session events.

A Hermes session comes in as the events turnlog itself writes (SessionCreated, RouteBound, ...;
its messages as a few MessagesImported runs, read everywhere as the MessageAppended events they
stand for; actor `import:hermes`, cause `hermes:<home>#<session_id>`), so routing, search,
history and time travel treat it like any other; Hermes' /undo and in-place compaction become the
session's TurnsUndone and TranscriptCompacted. What turnlog has no field for — token usage and
cost, titles, the Hermes row of each message (its id and time, reasoning), the marker rows and
the routing entry's extras — is kept in one
HermesSessionImported event on
the session's own "hermes" stream, so that an export can write the Hermes rows back as they were.
Version 1 of that stream exists once per session: it is also what makes an import idempotent.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.utils import register_topic

from .base import StreamEvent, stream_id

IMPORT_ACTOR = "import:hermes"


def hermes_record_id(session_id: str) -> UUID:
    return stream_id("hermes", session_id)


def hermes_home_id(home: str) -> UUID:
    return stream_id("hermes-home", home)


def import_cause(home: str, session_id: str | None = None) -> str:
    return f"hermes:{home}#{session_id}" if session_id else f"hermes:{home}"


class HermesSessionImported(StreamEvent):
    TOPIC = "turnlog:HermesSessionImported"
    class_version = 2  # 2: marker_rows
    session_id: str
    home: str
    row: dict[str, Any]  # the sessions row: every set column, by Hermes' names
    usage: list[dict[str, Any]]  # session_model_usage rows
    # Per transcript message, by position (seq - 1): the Hermes row's id and time; and, by seq,
    # the row's other fields turnlog has no place for (reasoning, active/compacted, ...), when set.
    message_ids: list[int]
    message_times: list[float]
    message_fields: dict[str, dict[str, Any]]
    # Inactive rows (active=0) that are no message: of a role turnlog does not know. Kept here,
    # whole (Hermes column -> value, set ones only), so an export writes them back as they were.
    # (Undone and compacted messages are transcript messages with the session's history edits;
    # an import made before that kept them all here.)
    inactive_rows: list[dict[str, Any]]
    # Hermes' session_meta markers (content NULL; Hermes drops them before the model): kept whole like
    # the inactive rows, for an export, and never in the transcript (an agent's API rejects the role).
    marker_rows: list[dict[str, Any]]
    routing_entry: dict[str, Any] | None  # the SessionEntry that routed to this session, if any
    actor: str
    cause: str

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["marker_rows"] = []  # version 1 imported the markers into the transcript


class HermesHomeImported(StreamEvent):
    """The home-level files: delivery ledger rows, restart counters, reset settings, what was skipped."""

    TOPIC = "turnlog:HermesHomeImported"
    home: str
    schema_version: int | None
    sessions: int
    messages: int
    ledger: list[dict[str, Any]]
    restart_counts: dict[str, int]
    reset: dict[str, Any]
    key_options: dict[str, bool]  # config.yaml's group/thread_sessions_per_user
    lid_mappings: dict[str, str]  # WhatsApp bridge files (name -> the JSON string they hold): keys depend on them
    skipped: list[dict[str, str]]
    actor: str
    cause: str


register_topic(HermesSessionImported.TOPIC, HermesSessionImported)
register_topic(HermesHomeImported.TOPIC, HermesHomeImported)
