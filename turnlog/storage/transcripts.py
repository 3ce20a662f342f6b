"""Transcripts as this process last read them, topped up from the log: a session's agent history
costs the messages added since, not the whole transcript, on every turn.

A transcript stream is append-only (a message's seq is its event's version; /undo, /retry and
compaction are edits recorded on the session, applied on top), so the cached messages stay true
and the events after the cached seq are all that a read has to fetch. What would change a
message in place is cleared by its command: an erase (the words read "[erased]" from then on)
clears everything, an archive and its restore forget their sessions.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Iterable

from ..domain.transcript import MessageAppended, read_transcript

CACHE_MESSAGES = 200_000  # messages kept in all, the least recently read sessions dropped first


class _Entry:
    __slots__ = ("after", "seq", "messages")

    def __init__(self, after: int, seq: int, messages: list[MessageAppended]) -> None:
        self.after = after  # the floor it was read from: messages at or below it are not held
        self.seq = seq  # the highest seq read from the log (0: none yet)
        self.messages = messages


class TranscriptCache:
    def __init__(self, get: Callable[..., Iterable[Any]], size: int = CACHE_MESSAGES) -> None:
        self._get = get
        self.size = size
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()
        self.read_events = 0  # events fetched from the log by `messages` (for tests and benchmarks)

    def messages(self, session_id: str, after: int = 0) -> list[MessageAppended]:
        """The session's messages with a seq above `after`, as the log holds them now."""
        with self._lock:
            entry = self._entries.get(session_id)
            if entry is not None:
                self._entries.move_to_end(session_id)
        if entry is None or entry.after > after:
            fresh = read_transcript(self._get, session_id, after=after or None)
            entry = _Entry(after, fresh[-1].originator_version if fresh else after, fresh)
            added = fresh
        else:
            added = read_transcript(self._get, session_id, after=entry.seq or None)
            if added:
                entry = _Entry(entry.after, added[-1].originator_version, entry.messages + added)
        self.read_events += len(added)
        self._keep(session_id, entry)
        return [m for m in entry.messages if m.originator_version > after] if entry.after < after \
            else list(entry.messages)

    def _keep(self, session_id: str, entry: _Entry) -> None:
        with self._lock:
            current = self._entries.get(session_id)
            if current is not None:
                if current.seq > entry.seq:  # another thread read further meanwhile
                    return
                self._held -= len(current.messages)
            self._entries[session_id] = entry
            self._entries.move_to_end(session_id)
            self._held += len(entry.messages)
            while self._held > self.size and len(self._entries) > 1:
                _, dropped = self._entries.popitem(last=False)
                self._held -= len(dropped.messages)

    def forget(self, session_id: str) -> None:
        with self._lock:
            dropped = self._entries.pop(session_id, None)
            if dropped is not None:
                self._held -= len(dropped.messages)

    def clear(self) -> None:
        """Forget every transcript (after an erase: cached ones hold the subject's plaintext)."""
        with self._lock:
            self._entries.clear()
            self._held = 0
