"""Silence markers: a reply that means "the agent chose not to answer"."""

from __future__ import annotations

import unicodedata

SILENCE_MARKERS = frozenset({"[SILENT]", "SILENT", "NO_REPLY", "NO REPLY"})

# Longer text is a real answer that happens to mention a marker.
MAX_MARKER_LENGTH = 64

SILENCE_NOTICE = (
    "The agent returned only a silence marker, so there is no reply to this message."
)


def is_silence_marker(text: str | None) -> bool:
    """Whether a whole reply is one of the silence markers, allowing stray edge punctuation."""
    if not isinstance(text, str):
        return False
    trimmed = text.strip()
    if not trimmed or len(trimmed) > MAX_MARKER_LENGTH:
        return False
    return (
        _canonical(trimmed) in SILENCE_MARKERS
        or _canonical(_strip_edge_punctuation(trimmed)) in SILENCE_MARKERS
    )


def outbound_for_reply(text: str | None, *, internal: bool) -> str | None:
    """What to send to the chat for a reply, or None to send nothing.

    A human who wrote to the agent is told it stayed silent rather than left waiting;
    internal turns (wake-ups, diagnostics) have nobody waiting, so they stay quiet.
    """
    if text is None or not text.strip():
        return None
    if is_silence_marker(text):
        return None if internal else SILENCE_NOTICE
    return text


def _canonical(text: str) -> str:
    return " ".join(text.upper().split())


def _strip_edge_punctuation(text: str) -> str:
    # Brackets are part of "[SILENT]", so a malformed "[SILENT" must not become "SILENT".
    start, end = 0, len(text)
    while start < end and _is_strippable(text[start]):
        start += 1
    while end > start and _is_strippable(text[end - 1]):
        end -= 1
    return text[start:end].strip()


def _is_strippable(char: str) -> bool:
    return char not in "[]" and unicodedata.category(char).startswith("P")
