"""The key settings in force: the two flags of the key rule that decide who shares a session.

They are part of the log: `turnlog rekey` records a KeySettingsChanged event (old and new
settings, who and why) on one stream, and routing after it follows the newest one, whatever an
EngineConfig says (docs/configuration.md). Before the first such event, the config's settings
(or the defaults) hold, and the first event records what they were as `old`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping
from uuid import UUID

from eventsourcing.utils import register_topic

from ..errors import InvalidRequest
from .base import StreamEvent, stream_id

# The one stream of the settings' changes, version 1, 2, ... in order.
KEY_SETTINGS_ID: UUID = stream_id("key-settings", "engine")


@dataclass(frozen=True)
class KeySettings:
    """group_sessions_per_user: a group or channel gives each sender a session of their own;
    thread_sessions_per_user: so does a thread (only with group_sessions_per_user: docs/behaviour.md §2)."""

    group_sessions_per_user: bool = True
    thread_sessions_per_user: bool = False

    def __post_init__(self) -> None:
        for name in ("group_sessions_per_user", "thread_sessions_per_user"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidRequest(f"{name} must be true or false, got {getattr(self, name)!r}")

    def to_dict(self) -> dict[str, bool]:
        return {"group_sessions_per_user": self.group_sessions_per_user,
                "thread_sessions_per_user": self.thread_sessions_per_user}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "KeySettings":
        return cls(bool(data["group_sessions_per_user"]), bool(data["thread_sessions_per_user"]))

    def describe(self) -> str:
        return (f"group_sessions_per_user={str(self.group_sessions_per_user).lower()},"
                f" thread_sessions_per_user={str(self.thread_sessions_per_user).lower()}")


class KeySettingsChanged(StreamEvent):
    TOPIC = "turnlog:KeySettingsChanged"
    old: dict[str, bool]  # KeySettings.to_dict of the settings that held until this event
    new: dict[str, bool]
    moves: int  # how many routes the rekey pointed at a session (RouteBound events beside this one)
    actor: str
    cause: str


register_topic(KeySettingsChanged.TOPIC, KeySettingsChanged)


def first_change(events: Iterable[Any]) -> KeySettingsChanged | None:
    """The first KeySettingsChanged of a read of the settings stream, None when it read none."""
    return next((e for e in events if isinstance(e, KeySettingsChanged)), None)

__all__ = ["KEY_SETTINGS_ID", "KeySettings", "KeySettingsChanged", "first_change"]
