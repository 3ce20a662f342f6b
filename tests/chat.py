"""The people tests talk as and the agents and platforms they talk to, shared by every test module.

Sources are `SessionSource`s (mutable, like the gateway's own): `alice(...)` builds a fresh one each
call; `ALICE` and `BOB` are shared constants, so a test that changes a field copies one first.
"""

from __future__ import annotations

from typing import Any, Callable

from turnlog import SessionSource


def alice(message_id: str | None = None, **fields: Any) -> SessionSource:
    """Alice in her Telegram DM (chat and user 42), no user name unless given in `fields`."""
    return SessionSource(platform="telegram", chat_type="dm", chat_id="42", user_id="42", message_id=message_id,
                         **fields)


ALICE = alice(user_name="alice")
"""Alice's Telegram DM with her user name "alice" (the session's display name), no message id."""

BOB = SessionSource(platform="slack", chat_type="channel", chat_id="C1", user_id="U1", scope_id="T1")
"""Bob in Slack channel C1 of workspace T1: the non-Telegram, non-DM session beside ALICE."""


def echo(history: Any, item: Any) -> str:
    """A responder answering every message with "re: " and its text."""
    return f"re: {item.text}"


def reply_with(text: str) -> Callable[[Any, Any], str]:
    """A responder answering every message with `text`."""
    return lambda history, item: text


def collect(sent: list[str]) -> Callable[..., None]:
    """A sender appending each text it is asked to send to `sent` (takes `text` or `target, text`)."""
    def send(*args: Any) -> None:
        sent.append(args[-1])
    return send
