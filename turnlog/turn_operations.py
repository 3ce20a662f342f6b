"""The lower-level operations of a turn, for a gateway that runs its own turn loop instead of
`Turnlog.handle_message` / `run_next`: the session's turn lease, transcript writes fenced by it,
and the delivery of a recorded reply. A Turnlog's `turns` group is an instance of this class.

One turn, by hand:

    token = t.turns.acquire_lease(session_id, session_key, timeout=5)
    t.turns.append_message(token, "user", text)
    history = t.turns.agent_history(session_id)
    message, delivery_id = t.turns.record_reply(token, reply, reply_to=source)
    if delivery_id is not None:
        t.turns.deliver(delivery_id, send)
    t.turns.release_lease(token)

Every write under a token is refused (StaleLease) once the lease moved on: taken over after a
stall, revoked by /new or /stop, or moved to a child session by a compression rotation.
"""

from __future__ import annotations

import uuid
import warnings
from dataclasses import dataclass
from datetime import datetime
import threading
from typing import TYPE_CHECKING, Any

from .commands.agent_history import read_agent_history
from .commands.command_replies import CommandReplies
from .commands.command_result import CommandResult
from .commands.compaction import Compaction, CompactionCommands
from .commands.delivery import Attempt, DeliveryCommands, Sender
from .commands.lease import LeaseCommands, LeaseToken, MessageRecord
from .commands.rotation import RotationCommands
from .commands.runner import TurnRunner
from .closing import require_open
from .commands.turn import Turn, reply_obligation
from .domain.inbox import HUMAN
from .domain.source import SessionSource, require_str
from .errors import CompactionFailed
from .domain.transcript import MessageAppended
from .projections.base import TypedRow


@dataclass(frozen=True)
class LeaseHolder(TypedRow):
    """Who holds a session's turn lease, as the log says now: `expired` when its holder stopped
    renewing it (another owner may take it over)."""
    session_id: str
    owner: str
    owner_key: str | None
    epoch: int
    turn_id: str | None
    expires_at: datetime | None
    expired: bool


# The lease commands' names once read at `t.turns`, and what replaces each.
_LEASE_REPLACEMENTS = {
    "acquire": "Turnlog.turns.acquire_lease", "acquiring": "Turnlog.turns.acquire_lease",
    "renew": "Turnlog.turns.renew_lease", "release": "Turnlog.turns.release_lease",
    "release_event": "Turnlog.turns.release_lease", "append": "Turnlog.turns.append_message",
    "message_event": "Turnlog.turns.append_message", "next_seq": "Turnlog.turns.append_message",
    "fenced_save": "Turnlog.turns.append_message or Turnlog.turns.record_reply",
    "held": "Turnlog.turns.holder", "kept_expiry": "Turnlog.turns.holder",
    "revoke": "Turnlog.command(source, '/stop')",
}


class TurnOperations:
    """The turn lease, fenced transcript writes and deliveries of one Turnlog (`t.turns`)."""

    def __init__(self, leases: LeaseCommands, deliveries: DeliveryCommands, rotation: RotationCommands,
                 runner: TurnRunner, compaction: CompactionCommands, command_replies: CommandReplies) -> None:
        self._leases = leases
        self._command_replies = command_replies
        self._deliveries = deliveries
        self._rotation = rotation
        self._runner = runner
        self._compaction = compaction

    if not TYPE_CHECKING:  # a type checker refuses the old names instead of accepting any name
        def __getattr__(self, name: str) -> Any:
            # `t.turns` was the lease commands themselves before: their other names warn, then work.
            if name.startswith("_"):
                raise AttributeError(name)
            found = getattr(self._leases, name)
            require_open(self, f"turns.{name}")  # Turnlog.close marks its groups closed (closing.py)
            new = _LEASE_REPLACEMENTS.get(name, "the methods of Turnlog.turns (it has no replacement of its own)")
            warnings.warn(f"Turnlog.turns.{name} is deprecated and goes in the next release: use {new}",
                          DeprecationWarning, stacklevel=2)
            return found

    # -- the lease -----------------------------------------------------------------------

    def begin_next(self, source: SessionSource, *, timeout: float | None = None,
                   stop: threading.Event | None = None, cached: bool = False) -> Turn | None:
        """Begin the key's next pending turn and return it (None: nothing waits), for a caller
        that runs the agent itself, as the asyncio API does: the Turn's `keep`, `respond` and
        `fail` finish it. Setting `stop` before the lease is ours gives the wait up and starts
        nothing, so the message stays for the next run. `cached`: the queue as this process last
        wrote it will do (right after this process's own turn on the key, as handle_message does)."""
        return self._runner.begin_next(source, timeout=timeout, stop=stop, cached=cached)

    def accept_and_start(self, source: SessionSource, text: str, *, kind: str = HUMAN,
                         stop: threading.Event | None = None) -> Turn | None:
        """Accept a message (Turnlog.accept) and, when its key is idle, begin its turn in the same
        transaction, as handle_message does; None when no turn was begun (a repeat, or the key
        busy: begin_next then waits for the lease). Setting `stop` before the start is made
        leaves the accepted message pending."""
        return self._runner.accept_and_start(source, text, kind=kind, stop=stop)

    def acquire_lease(self, session_id: str, owner_key: str, generation: int = 0, timeout: float | None = None,
                      *, actor: str | None = None, cause: str = "turn") -> LeaseToken:
        """Take the session's turn lease for `owner_key` (the routing key the turn answers),
        waiting up to `timeout` s; raises LeaseTimeout. The token carries the lease's epoch."""
        require_str("session_id", session_id)
        require_str("owner_key", owner_key)
        return self._leases.acquire(session_id, owner_key, generation=generation, timeout=timeout, actor=actor,
                                    cause=cause)

    def renew_lease(self, token: LeaseToken) -> None:
        """Extend the lease (every write under the token does this too); StaleLease if it moved on."""
        self._leases.renew(token)

    def release_lease(self, token: LeaseToken, outcome: str = "completed") -> bool:
        """End the turn with `outcome`; False when the lease had already moved on."""
        return self._leases.release(token, outcome)

    def holder(self, session_id: str) -> LeaseHolder | None:
        """Who holds the session's lease, read from the log; None when it is free."""
        held = self._leases.holder(require_str("session_id", session_id))
        return LeaseHolder(**held) if held is not None else None

    # -- the transcript ------------------------------------------------------------------

    def transcript(self, session_id: str, *, after: int | None = None, upto: int | None = None,
                   limit: int | None = None, newest_first: bool = False) -> list[MessageAppended]:
        """The session's messages as the log's events, by seq (what a responder is given as history);
        `after`/`upto` bound the seq, `limit` with `newest_first` reads the latest ones."""
        return self._leases.transcript(require_str("session_id", session_id), after=after, upto=upto, limit=limit, newest_first=newest_first)

    def agent_history(self, session_id: str) -> list[MessageAppended]:
        """What a responder is given as history: the transcript as /undo, /retry and in-place
        compaction left it (undone and retried messages out, a compacted range as its summary,
        whose entries stand at the range's last seq with cause "compaction")."""
        return read_agent_history(self._leases.ctx, require_str("session_id", session_id))

    def append_message(self, token: LeaseToken, role: str, content: str, *, cause: str = "turn",
                       **fields: Any) -> MessageRecord:
        """Append to the token's session transcript; refused (StaleLease) if the lease moved on."""
        return self._leases.append(token, role, content, cause=cause, **fields)

    def record_reply(self, token: LeaseToken, content: str, *, reply_to: SessionSource | None = None,
                     internal: bool = False, inbound_message_id: str | None = None,
                     cause: str = "turn", **fields: Any) -> tuple[MessageRecord, uuid.UUID | None]:
        """Append the assistant reply and, in the same transaction, its delivery obligation.

        Returns the message and the delivery id (None when nothing is owed: silence on an internal turn).
        """
        seq = self._leases.next_seq(token)
        event = self._leases.message_event(token, seq, "assistant", content, cause=cause, **fields)
        obligation = reply_obligation(self._deliveries, token, seq, content, session_key=token.owner_key,
                                      reply_to=reply_to.to_dict() if reply_to is not None else None,
                                      internal=internal, inbound_message_id=inbound_message_id, cause=cause)
        position = self._leases.fenced_save(token, event, *([obligation] if obligation else []), last_seq=seq,
                                            cause=cause)
        return MessageRecord(token.session_id, seq, "assistant", position), (obligation.id if obligation else None)

    def needs_compression(self, token: LeaseToken, *, prompt_tokens: int, context_length: int) -> bool:
        """Whether the context should be compressed: 0.85 of the context, or 5000 messages of the
        agent's history (a compacted range counts as its summary), with at least 4 messages."""
        return self._rotation.needs_compression(token, prompt_tokens=prompt_tokens, context_length=context_length)

    def compress(self, token: LeaseToken, source: SessionSource, *, keep_turns: int = 1,
                 focus: str | None = None) -> LeaseToken:
        """Pre-turn hygiene once `needs_compression` says so, by `EngineConfig.compression_mode`:
        "in_place" (the default) compacts the history keeping the last `keep_turns` user turns
        and returns `token` (also when there is nothing to compact); "rotate" continues in a child
        session and returns the turn's token there. CompactionFailed: the summariser failed, and
        nothing was recorded."""
        if self._leases.ctx.config.compression_mode == "rotate":
            return self._rotation.rotate(token, source)
        try:
            self._compaction.compact_under(token, keep_turns=keep_turns, focus=focus, cause="hygiene")
        except CompactionFailed as failed:
            if not failed.nothing_to_do:
                raise
        return token

    def compact(self, token: LeaseToken, *, keep_turns: int = 0, focus: str | None = None,
                summary: str | list[dict[str, Any]] | None = None) -> Compaction:
        """Compact the token's session in place under its lease (a turn loop's own hygiene): a
        summary (`summary`, else `EngineConfig.summariser`, else the fallback) stands for the
        history but its last `keep_turns` user turns. CompactionFailed: nothing to compact, or
        the summariser failed; StaleLease once the lease moved on. Either way nothing is recorded."""
        return self._compaction.compact_under(token, keep_turns=keep_turns, focus=focus, summary=summary)

    def rotate_session(self, token: LeaseToken, source: SessionSource) -> LeaseToken:
        """Continue the conversation in a child session; returns the turn's token on the child."""
        return self._rotation.rotate(token, source)

    # -- deliveries ----------------------------------------------------------------------

    def attempt_delivery(self, delivery_id: uuid.UUID) -> Attempt:
        """Claim one send of a recorded reply: the attempt says what text to send and its number."""
        return self._deliveries.attempt(delivery_id)

    def settle_delivery(self, delivery_id: uuid.UUID, error: str | None = None) -> str:
        """Record how the attempt ended (delivered, or failed with `error`); returns the new state
        (delivered, failed, or abandoned after the last attempt)."""
        return self._deliveries.settle(delivery_id, error=error).state

    def deliver(self, delivery_id: uuid.UUID, send: Sender) -> str:
        """Attempt, send and settle one delivery; returns its state."""
        return self._deliveries.deliver(delivery_id, send).state

    def record_command_reply(self, source: SessionSource, result: CommandResult) -> uuid.UUID | None:
        """Owe the answer of `Turnlog.command` (`result`) to the chat of `source`, like a turn's
        reply: send it with `deliver`, and a send that fails or may have failed is settled by the
        next sweep. None when there is nothing to answer: no reply, or a redelivered command (one
        command message, by its message_id, owes one answer however often this is called)."""
        return self._command_replies.record(source, result)
