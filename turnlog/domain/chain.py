"""The hash-chain rule: one link per stored event, covering the link before it.

Pure: the recorder applies it in the write transaction, the verifier recomputes it from the log.
A link covers the position, stream id, version, topic and the exact stored bytes of the event.
"""

from __future__ import annotations

import hashlib
from typing import Any
from uuid import UUID

GENESIS = "0" * 64
# A seal keeps the first 16 bytes of its link (128 bits: forging one still takes a second
# preimage of SHA-256 truncated to 128 bits); older databases hold all 32, as hex text.
SEAL_HEX = 32


def seal_of(link_hex: str) -> str:
    return link_hex[:SEAL_HEX]


def matches(link_hex: str, stored_hex: str) -> bool:
    """A stored seal matches a recomputed link: its first 16 bytes, or all 32 of an older seal."""
    return len(stored_hex) >= SEAL_HEX and link_hex.startswith(stored_hex)


def link(previous: str, position: int, originator_id: UUID | str, version: int, topic: str, state: bytes) -> str:
    h = hashlib.sha256()
    h.update(previous.encode())
    h.update(f"|{position}|{originator_id}|{version}|{topic}|".encode())
    h.update(bytes(state))
    return h.hexdigest()


def as_hex(stored: Any) -> str:
    """Seals are stored as 32 raw bytes; databases sealed by older versions hold hex text."""
    return stored.hex() if isinstance(stored, (bytes, bytearray, memoryview)) else str(stored)
