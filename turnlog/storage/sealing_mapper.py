"""Sealing at the storage edge: the library's Mapper (its documented MAPPER_TOPIC extension
point) seals the fields domain/sealing.py lists as an event is stored and opens them as it is
read, so events and aggregates in memory stay plaintext and commands never see a key.

A sealed value is `{"_sealed_": key id, "_v_": kind letter + base64(nonce + AES-GCM ciphertext)}`
in place of the value; the plaintext is the value as the transcoder encodes it, or (the kind
letter followed by "~") that, zstd-compressed, when it shrinks (sealed_compression.py). Its data key
gone (erased), it reads as the stand-in of its kind ("[erased]" for text). The hash chain
covers the stored (sealed) bytes, so verification needs no key.

Whose key seals a field: domain/sealing.SUBJECTS. Subjects bound to an id (a turn, an inbox
item, a session, a stream) are remembered in memory (an LRU); a session's subject not seen by
this process is read from the log (`session_subject`, the session's first event).
"""

from __future__ import annotations

import base64
import os
import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable, cast
from uuid import UUID

from eventsourcing.domain import CanSnapshotAggregate
from eventsourcing.persistence import Mapper, MapperDeserialisationError, StoredEvent, find_id_convertor
from eventsourcing.utils import get_topic, resolve_topic

from ..domain.sealing import (BINDS, SEALED, SEALED_TAG, SEALED_VALUE, SNAPSHOTS, SUBJECTS, UNATTRIBUTED, is_sealed,
                              kind_of, sealed, stand_in, subject_of)
from .erased_keys import SealedStoredEvent
from .keys import NONCE_BYTES, KeyStore
from .sealed_compression import grow, shrink

_AAD = b"turnlog-sealed:v1"
_REFS = 200_000
_SNAPSHOT_PATHS = ("state",)
_MARK = b'"' + SEALED_TAG.encode() + b'"'
# After the kind letter, the plaintext was zstd-compressed before sealing (sealed_compression.py).
# Not a base64 character, so a value sealed before it (kind letter, then base64) reads as it did.
_ZSTD = "~"


class Sealer:
    def __init__(self, keys: KeyStore, transcoder: Any) -> None:
        self.keys = keys
        self.encode = transcoder.encode
        self.decode = transcoder.decode
        self.session_subject: Callable[[str], str | None] = lambda session_id: None
        self._refs: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()
        self._snapshot_topics: dict[str, bool] = {}

    # -- which subject ------------------------------------------------------------------------

    def _ref(self, name: str) -> str | None:
        with self._lock:
            return self._refs.get(name)

    def _bind(self, name: str, subject: str) -> None:
        with self._lock:
            self._refs[name] = subject
            self._refs.move_to_end(name)
            if len(self._refs) > _REFS:
                self._refs.popitem(last=False)

    def subject(self, topic: str, stream: Any, state: dict[str, Any]) -> str:
        for hint in SUBJECTS.get(topic, ()):
            found: str | None = None
            if hint == "stream":
                found = self._ref(f"stream:{stream}")
            elif hint.startswith("source:"):
                found = subject_of(state.get(hint[7:]))
            else:
                _, kind, field = hint.split(":")
                value = state.get(field)
                if value is not None:
                    found = self._ref(f"{kind}:{value}")
                    if found is None and kind == "session":
                        found = self.session_subject(str(value))
                        if found is not None:
                            self._bind(f"session:{value}", found)
            if found is not None:
                return found
        return UNATTRIBUTED

    def forget(self) -> None:
        with self._lock:
            self._refs.clear()
        self.keys.forget()

    # -- sealing ------------------------------------------------------------------------------

    def seal(self, topic: str, stream: Any, state: dict[str, Any], snapshot: bool) -> str | None:
        """Seal the listed fields of a stored event's state, in place (the state is the mapper's copy);
        returns the id of the data key that sealed them (None: the event has none to seal)."""
        paths: tuple[str, ...]
        if snapshot:
            paths, subject = _SNAPSHOT_PATHS, SNAPSHOTS
        else:
            paths = SEALED.get(topic, ())
            binds = BINDS.get(topic, ())
            if not paths and not binds:
                return None
            subject = self.subject(topic, stream, state)
            for bind in binds:
                if bind == "stream":
                    self._bind(f"stream:{stream}", subject)
                else:
                    kind, field = bind.split(":")
                    if state.get(field) is not None:
                        self._bind(f"{kind}:{state[field]}", subject)
            if not paths:
                return None
        key_id, key = self.keys.key_for(subject)

        def lock(value: Any) -> Any:
            if value is None:
                return None
            nonce = os.urandom(NONCE_BYTES)
            plain = self.encode(value)
            packed = shrink(plain)
            blob = nonce + key.encrypt(nonce, plain if packed is None else packed, _AAD)
            form = kind_of(value) if packed is None else kind_of(value) + _ZSTD
            return sealed(key_id, form + base64.b64encode(blob).decode())

        _apply(state, paths, lock, copy=True)
        return key_id

    def unseal(self, topic: str, state: dict[str, Any], snapshot: bool | None = None) -> None:
        """Open the sealed fields of a decoded state, in place; an erased key's read as stand-ins."""
        if snapshot is None:
            snapshot = self.is_snapshot(topic)
        paths = _SNAPSHOT_PATHS if snapshot else SEALED.get(topic, ())
        if paths:
            _apply(state, paths, self.open, copy=False)

    def open(self, value: Any) -> Any:
        if not is_sealed(value):
            return value
        blob = value[SEALED_VALUE]
        key = self.keys.key_by_id(value[SEALED_TAG])
        if key is None:
            return stand_in(blob[:1])
        packed = blob[1:2] == _ZSTD
        raw = base64.b64decode(blob[2:] if packed else blob[1:])
        plain = key.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], _AAD)
        return self.decode(grow(plain) if packed else plain)

    def is_snapshot(self, topic: str) -> bool:
        known = self._snapshot_topics.get(topic)
        if known is None:
            try:
                known = issubclass(resolve_topic(topic), CanSnapshotAggregate)
            except Exception:
                known = False
            self._snapshot_topics[topic] = known
        return known


def _apply(state: dict[str, Any], paths: tuple[str, ...], change: Callable[[Any], Any], *, copy: bool) -> None:
    """Replace the value at each path by change(value); dicts on the way are copied first when
    `copy` (the event's own containers must not change)."""
    copied: set[str] = set()
    for path in paths:
        head, dot, rest = path.partition(".")
        if not dot:
            if head in state:
                state[head] = change(state[head])
            continue
        if head.endswith("[]"):
            head = head[:-2]
            items = state.get(head)
            if isinstance(items, (list, tuple)):
                if copy and head not in copied:
                    items = [dict(i) if isinstance(i, dict) else i for i in items]
                    copied.add(head)
                for item in items:
                    if isinstance(item, dict) and rest in item:
                        item[rest] = change(item[rest])
                state[head] = items
            continue
        inner = state.get(head)
        if isinstance(inner, dict):
            if copy and head not in copied:
                inner = dict(inner)
                copied.add(head)
            if rest in inner:
                inner[rest] = change(inner[rest])
            state[head] = inner


class SealingMapper(Mapper[UUID]):
    """The library's Mapper with sealing; without a sealer attached (an unencrypted database,
    or before the key is known) it is the library's."""

    sealer: Sealer | None = None

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        sealer = self.sealer
        if sealer is None:
            return super().to_stored_event(domain_event)
        cls = type(domain_event)
        topic = get_topic(cls)
        event_state = dict(vars(domain_event))
        originator_id = event_state.pop("originator_id")
        originator_version = event_state.pop("originator_version")
        class_version = getattr(cls, "class_version", 1)
        if class_version > 1:
            event_state["class_version"] = class_version
        key_id = sealer.seal(topic, originator_id, event_state, isinstance(domain_event, CanSnapshotAggregate))
        stored_state = self.transcoder.encode(event_state)
        if self.compressor:
            stored_state = self.compressor.compress(stored_state)
        if self.cipher:
            stored_state = self.cipher.encrypt(stored_state)
        if key_id is not None:  # the recorder refuses it if that key is erased meanwhile (erased_keys.py)
            return SealedStoredEvent(originator_id=originator_id, originator_version=originator_version, topic=topic,
                                     state=stored_state, key_id=key_id)
        return StoredEvent(originator_id=originator_id, originator_version=originator_version, topic=topic,
                           state=stored_state)

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        sealer = self.sealer
        if sealer is None:
            return super().to_domain_event(stored_event)
        cls = resolve_topic(stored_event.topic)
        stored_state = stored_event.state
        try:
            if self.cipher:
                stored_state = self.cipher.decrypt(stored_state)
            if self.compressor:
                stored_state = self.compressor.decompress(stored_state)
            event_state: dict[str, Any] = self.transcoder.decode(stored_state)
            if _MARK in stored_state:
                sealer.unseal(stored_event.topic, event_state, issubclass(cls, CanSnapshotAggregate))
        except Exception as e:
            raise MapperDeserialisationError(
                f"Failed to deserialise state of stored event with topic '{stored_event.topic}', originator_id"
                f" '{stored_event.originator_id}' and originator_version {stored_event.originator_version}: {e}"
            ) from e
        id_convertor = find_id_convertor(cls, cast(Hashable, type(stored_event.originator_id)))
        event_state["originator_id"] = id_convertor(stored_event.originator_id)
        event_state["originator_version"] = stored_event.originator_version
        class_version = getattr(cls, "class_version", 1)
        from_version = event_state.pop("class_version", 1)
        while from_version < class_version:
            getattr(cls, f"upcast_v{from_version}_v{from_version + 1}")(event_state)
            from_version += 1
        domain_event = object.__new__(cls)
        object.__setattr__(domain_event, "__dict__", event_state)
        return domain_event
