"""A write sealed under a data key that an erase destroyed meanwhile is refused in its own transaction.

A process keeps the data keys it has used in memory (keys.py). Another process's erase destroys a
subject's keys in the key table, not in this process's memory, so without this check the process
would go on sealing the subject's new words under a key nobody can open again: words accepted,
recorded and lost. So an event stored with sealed fields names the key that sealed them
(`SealedStoredEvent`), and the recorder checks, in the transaction that writes the events and after
it holds the write lock, that none of those keys is erased. If one is, the whole write is refused
(`KeyErased`, an IntegrityError, so the command runs again from fresh state, as after a conflict),
and the command layer forgets this process's keys and caches first, so the retry seals under the
subject's new key. The destruction of keys takes the same write lock (on SQLite every write
transaction does; on PostgreSQL it locks the events table as the insert does), so a write either
commits before it (and is erased with the rest) or sees it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from eventsourcing.persistence import IntegrityError, StoredEvent

from .keys import DATA_KEYS

# PostgreSQL's function raises it (recorded as the error's message) to say why the write failed.
ERASED = "turnlog: sealed under an erased data key"


class KeyErased(IntegrityError):
    """The write was refused: some of its fields were sealed under a data key that is erased."""


@dataclass(frozen=True)
class SealedStoredEvent(StoredEvent):
    """A stored event whose state holds sealed fields, and the id of the data key that sealed them."""

    key_id: str = ""


def sealing_keys(stored_events: Sequence[StoredEvent]) -> list[str]:
    """The data keys these events were sealed under, each once, in order."""
    return list(dict.fromkeys(e.key_id for e in stored_events if isinstance(e, SealedStoredEvent)))


def erased_among(key_ids: list[str]) -> str:
    """An SQLite expression: how many of these keys (bound as its parameters) are erased."""
    return f"(SELECT count(*) FROM {DATA_KEYS} WHERE wrapped IS NULL AND key_id IN ({','.join('?' * len(key_ids))}))"


def refused(key_ids: list[str]) -> KeyErased:
    return KeyErased(f"{ERASED} ({', '.join(key_ids)} among them): nothing was written")
