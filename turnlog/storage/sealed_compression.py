"""A sealed value's plaintext, zstd-compressed before it is sealed when that makes it smaller.

Sealed bytes are random to zstd, so the event compressor cannot shrink a message's words once
they are sealed: they are compressed here first. Plain zstd (level 3, magicless frame with its
content size, no checksum): on the benchmark's chat texts it beats the event dictionary, which
was trained on event shapes, not words. A sealed value says which form it holds (sealing_mapper.py).
"""

from __future__ import annotations

import zstandard

from .per_thread import per_thread

_PARAMETERS = zstandard.ZstdCompressionParameters.from_level(
    3, format=zstandard.FORMAT_ZSTD1_MAGICLESS, write_content_size=1, write_checksum=0, write_dict_id=0)


class _Zstd:
    def __init__(self) -> None:
        self.compress = zstandard.ZstdCompressor(compression_params=_PARAMETERS).compress
        self.decompress = zstandard.ZstdDecompressor(format=zstandard.FORMAT_ZSTD1_MAGICLESS).decompress


_codec = per_thread(_Zstd)


def shrink(plain: bytes) -> bytes | None:
    """The compressed plaintext, or None when compressing would not make it smaller."""
    packed = _codec().compress(plain)
    return packed if len(packed) < len(plain) else None


def grow(packed: bytes) -> bytes:
    return _codec().decompress(packed)
