"""Text batching (docs/behaviour.md §14, Hermes' Weixin adapter): a user's burst of texts becomes one turn.

Texts for one key that arrive within a debounce window of each other are merged (the Inbox
already merges a human text into the waiting tail item); the item runs only once the window
after its LAST text has passed: 3 s, or 5 s when that last chunk was long (≥ 1,800 characters:
a client that split a long paste is probably still sending). Each arrival restarts the wait.
Non-text items (a `/queue` item, a wake-up) are never held back.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from .inbox import HUMAN, InboxItem

DEFAULT_DELAY_S = 3.0
DEFAULT_SPLIT_DELAY_S = 5.0
DEFAULT_SPLIT_CHARS = 1800


@dataclass(frozen=True)
class TextBatching:
    platforms: frozenset[str] = frozenset()  # where it applies ("*": everywhere); empty: off
    delay_s: float = DEFAULT_DELAY_S
    split_delay_s: float = DEFAULT_SPLIT_DELAY_S
    split_chars: int = DEFAULT_SPLIT_CHARS

    def applies(self, platform: str | None) -> bool:
        return "*" in self.platforms or (platform is not None and platform in self.platforms)

    def ready_at(self, item: InboxItem) -> datetime | None:
        """When the item may run; None when it is not held back at all."""
        source = item.source or {}
        if item.kind != HUMAN or not self.applies(source.get("platform")):
            return None
        last = item.texts[-1] if item.texts else ""
        wait = self.split_delay_s if len(last) >= self.split_chars else self.delay_s
        return (item.last_at or item.accepted_at) + timedelta(seconds=wait)

    def ready(self, item: InboxItem, now: datetime) -> bool:
        at = self.ready_at(item)
        return at is None or now >= at
