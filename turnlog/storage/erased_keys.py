"""A write sealed under a data key that an erase destroyed meanwhile is refused in its own transaction.

A process keeps the data keys it has used in memory (keys.py). Another process's erase destroys a
subject's keys in the key table, not in this process's memory, so without this check the process
would go on sealing the subject's new words under a key nobody can open again: words accepted,
recorded and lost. So an event stored with sealed fields names the key that sealed them
(`SealedStoredEvent`), and the recorder checks, in the transaction that writes the events and after
it holds the write lock, that none of those keys is erased. If one is, the whole write is refused
(`KeyErased`, an IntegrityError, so the command runs again from fresh state, as after a conflict),
and the command layer forgets this process's keys and caches first, so the retry seals under the
subject's new key. On PostgreSQL the check takes a share lock on the key rows: an erase's UPDATE of
them waits for the write to commit (the write is then erased with the rest), or the write sees the
erase.
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


def refuse_erased(cursor: Any, key_ids: list[str]) -> None:
    """Raise KeyErased if any of these keys is erased (SQLite: the cursor of the write transaction)."""
    if not key_ids:
        return
    cursor.execute(f"SELECT key_id FROM {DATA_KEYS} WHERE wrapped IS NULL AND key_id IN"
                   f" ({','.join('?' * len(key_ids))})", key_ids)
    erased = [row[0] for row in cursor.fetchall()]
    if erased:
        raise KeyErased(f"{ERASED} ({', '.join(erased)}): nothing was written")
