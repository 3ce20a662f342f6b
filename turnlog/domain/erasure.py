"""SubjectErased: the record that a subject's data keys were destroyed (crypto-shredding).

The subject itself is not in it: `subject_hash` is its keyed hash (domain/sealing.py), the
name the key table files its keys under, so the record says who was erased only to someone
holding the database's master key and the subject's id.
"""

from __future__ import annotations

from uuid import UUID

from eventsourcing.utils import register_topic

from .base import StreamEvent, stream_id

ERASURES_ID: UUID = stream_id("erasures", "engine")  # one stream, an event per erase, in order


class SubjectErased(StreamEvent):
    TOPIC = "turnlog:SubjectErased"
    subject_hash: str
    keys: int  # how many data keys were destroyed
    sessions: list[str]  # the sessions of the subject suspended, so that its next message starts afresh
    actor: str
    cause: str


register_topic(SubjectErased.TOPIC, SubjectErased)
