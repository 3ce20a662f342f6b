"""What a slash command did and what the gateway does next (commands/slash.py dispatches them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CommandResult:
    command: str
    reply: str | None  # what the gateway should answer (None: stay silent)
    session_id: str | None = None
    changed: bool = False
    duplicate: bool = False  # refused as a redelivery of a command already handled (its message_id)
    # A turn now waits on the key (/retry): the gateway runs it, as for any accepted message
    # (Turnlog.run_next with its responder and sender); its answer is the command's reply.
    turn_pending: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)
