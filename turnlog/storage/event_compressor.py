"""Compact stored events: zstd against a trained dictionary of turnlog's event shapes.

Plugged in through eventsourcing's documented `COMPRESSOR_TOPIC`, so the library's mapper
compresses every stored event and snapshot state and the bytes format stays the library's.
Most of an event is its JSON shape (keys, type tags, the time), which the dictionary holds;
plain compression cannot see that across separate small events.

Stored forms, told apart by their first byte (a state of JSON starts with "{"):
- b"\\x02" + a magicless zstd frame (content size in it, no checksum, no dictionary id), level 3,
  against dictionary v2 (`event_dictionary_v2.zdict`, benchmarks/make_event_dictionary.py): written now.
  About 5× cheaper to compress than v1 and 2× to decompress, and a little smaller (README, Figures).
- b"\\x01" + raw deflate against dictionary v1 (`event_dictionary.py`): written until v2, read forever.
- anything else as it is: events written before compaction and states that would not shrink.
TURNLOG_COMPACT_EVENTS=0 writes plain JSON again (reading compacted events still works).
"""

from __future__ import annotations

import hashlib
import zlib
from functools import cache
from importlib import resources

import zstandard
from eventsourcing.persistence import Compressor

from ..domain.env_flags import env_flag

from .event_dictionary import DICTIONARY_V1
from .per_thread import per_thread

V1 = b"\x01"
V2 = b"\x02"
# Pinned: a dictionary file that changed would make every v2 event unreadable, so refuse it.
DICTIONARY_V2_FILE = "event_dictionary_v2.zdict"
DICTIONARY_V2_SHA256 = "3df38e481749fb99c5764cad1cfd46c62df6d3775369cb7fb1216f0e655081d1"
# The frame carries its content size (1-2 bytes for an event: decompression then allocates
# exactly, and it saves the window byte a size-less frame needs); no magic, checksum or dict id
# (the tag byte says all that, and the hash chain already covers the stored bytes).
V2_PARAMETERS = zstandard.ZstdCompressionParameters.from_level(
    3, format=zstandard.FORMAT_ZSTD1_MAGICLESS, write_content_size=1, write_checksum=0, write_dict_id=0)

_WBITS = -13  # raw deflate, 8 KiB window: the dictionary and a typical event fit in it
# Level 6 (within 0.2% of level 9 here, +3% over level 3 in time). Each call copies a
# state already primed with the dictionary: loading the dictionary is most of a small event's cost.
_PRIMED_DEFLATE = zlib.compressobj(6, zlib.DEFLATED, _WBITS, 4, zdict=DICTIONARY_V1)
_PRIMED_INFLATE = zlib.decompressobj(_WBITS, zdict=DICTIONARY_V1)


@cache
def dictionary_v2() -> zstandard.ZstdCompressionDict:
    data = resources.files(__package__).joinpath(DICTIONARY_V2_FILE).read_bytes()
    if hashlib.sha256(data).hexdigest() != DICTIONARY_V2_SHA256:
        raise RuntimeError(f"{DICTIONARY_V2_FILE} is not the dictionary v2 events were written with")
    d = zstandard.ZstdCompressionDict(data)
    d.precompute_compress(compression_params=V2_PARAMETERS)  # once, not per event
    return d


class _Zstd:
    """A compression and a decompression context against dictionary v2."""

    def __init__(self) -> None:
        d = dictionary_v2()
        self.compress = zstandard.ZstdCompressor(dict_data=d, compression_params=V2_PARAMETERS).compress
        self.decompress = zstandard.ZstdDecompressor(dict_data=d, format=zstandard.FORMAT_ZSTD1_MAGICLESS).decompress




def compacting() -> bool:
    return env_flag("TURNLOG_COMPACT_EVENTS")


def inflate(data: bytes) -> bytes:
    """A stored state as its JSON bytes, whatever form it was stored in."""
    tag = data[:1]
    if tag == V2:
        return _codec().decompress(data[1:])
    if tag != V1:
        return data
    d = _PRIMED_INFLATE.copy()
    return d.decompress(data[1:]) + d.flush()


def compact(data: bytes) -> bytes:
    """A state in the form turnlog writes now (v2), or as it is when that would not be smaller."""
    packed = V2 + _codec().compress(data)
    return packed if len(packed) < len(data) else data


def deflate(data: bytes) -> bytes:
    """A state in the v1 form: no longer written, kept to make v1 states (tests, tools)."""
    c = _PRIMED_DEFLATE.copy()
    packed = V1 + c.compress(data) + c.flush()
    return packed if len(packed) < len(data) else data


_codec = per_thread(_Zstd)


class EventCompressor(Compressor):
    def __init__(self) -> None:
        self.enabled = compacting()

    def compress(self, data: bytes) -> bytes:
        return compact(data) if self.enabled else data

    def decompress(self, data: bytes) -> bytes:
        return inflate(data)
