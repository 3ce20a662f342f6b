"""Transcripts as this process last read them, topped up from the log: a session's agent history
costs the messages added since, not the whole transcript, on every turn.

A transcript stream is append-only (a message's seq is its event's version; /undo, /retry and
compaction are edits recorded on the session, applied on top), so the cached messages stay true
and the events after the cached seq are all that a read has to fetch. What would change a
message in place is cleared by its command: an erase (the words read "[erased]" from then on)
clears everything, an archive and its restore forget their sessions.

The messages are kept as tuples of their fields, not as event objects: tuples of strings,
numbers and times are left alone by the garbage collector, which would otherwise scan every
cached message in each full collection (hundreds of milliseconds once a gateway has cached
100,000). Each read makes the events afresh, so a caller's changes never reach the cache.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Iterable

from ..domain.transcript import MessageAppended, read_transcript, transcript_id

CACHE_MESSAGES = 100_000  # in all, about 100 MB of chat text; the least recently read sessions go first


# A message as kept: its field names (one tuple shared by every message of that shape) and values,
# its stream left out (the session's).
Kept = tuple[tuple[str, ...], tuple[Any, ...]]
_STREAM = "originator_id"
_SEQ = "originator_version"


class _Entry:
    __slots__ = ("after", "seq", "messages")

    def __init__(self, after: int, seq: int, messages: list[Kept]) -> None:
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
        self._shapes: dict[tuple[str, ...], tuple[str, ...]] = {}

    def messages(self, session_id: str, after: int = 0) -> list[MessageAppended]:
        """The session's messages with a seq above `after`, as the log holds them now."""
        with self._lock:
            entry = self._entries.get(session_id)
            if entry is not None:
                self._entries.move_to_end(session_id)
        if entry is None or entry.after > after:
            fresh = read_transcript(self._get, session_id, after=after or None)
            entry = _Entry(after, fresh[-1].originator_version if fresh else after, [self._kept(m) for m in fresh])
        else:
            added = read_transcript(self._get, session_id, after=entry.seq or None)
            if added:
                entry = _Entry(entry.after, added[-1].originator_version,
                               entry.messages + [self._kept(m) for m in added])
        self._keep(session_id, entry)
        stream = transcript_id(session_id)
        return [_made(stream, kept) for kept in entry.messages if entry.after >= after or _seq(kept) > after]

    def _kept(self, message: MessageAppended) -> Kept:
        fields = vars(message)
        names = tuple(name for name in fields if name != _STREAM)
        names = self._shapes.setdefault(names, names)
        return names, tuple(fields[name] for name in names)

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


def _seq(kept: Kept) -> int:
    names, values = kept
    return int(values[names.index(_SEQ)])


def _made(stream: Any, kept: Kept) -> MessageAppended:
    names, values = kept
    fields = dict(zip(names, values))
    fields[_STREAM] = stream
    message = object.__new__(MessageAppended)
    object.__setattr__(message, "__dict__", fields)
    return message
