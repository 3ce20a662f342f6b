"""/undo [N] and /retry: the chat's edits of its session's agent history (history_edits.py makes
them under the session's lease; the rules are domain/history.py's).

/undo backs up N user turns (default 1, clamped to the oldest) and echoes what was backed up, so
the user can edit and resend it. /retry takes the last user turn out of the history and accepts
its text again as a queued item in the same transaction: the agent sees the message once, in the
new turn, and only that turn's answer is owed. The command path has no responder, so the result
says `turn_pending` and the gateway runs the key's queue (Turnlog.run_next), as after any accept.
Either is refused while a turn runs, as Hermes refuses them mid-turn.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..domain.inbox import QUEUED
from ..domain.route import Route
from ..domain.source import SessionSource
from ..errors import QueueFull, SessionBusy
from .command_result import CommandResult
from .context import CommandContext
from .history_edits import Editing, HistoryEdits, UndoResult
from .inbound import InboundCommands
from .lease import LeaseCommands
from .routing import RoutingCommands

NOTHING_TO_UNDO = "Nothing to undo."
NOTHING_TO_RETRY = "No previous message to retry."


def busy_reply(command: str) -> str:
    return f"⏳ A turn is running — {command} can't run mid-turn. Wait for its answer or /stop it first."


def undo_reply(result: UndoResult) -> str:
    if not result.turns:
        return NOTHING_TO_UNDO
    echoed = "\n".join(f"“{text}”" for text in result.echoed)
    return (f"↩️ Undid {result.turns} turn(s) ({result.messages} message(s)). "
            f"Backed up, to edit and send again:\n{echoed}")


def undo_count(arg: str) -> int | None:
    """/undo's N: 1 when absent, at least 1; None when it is not a number."""
    if not arg:
        return 1
    try:
        return max(1, int(arg.split()[0]))
    except ValueError:
        return None


class EditCommands:
    def __init__(self, ctx: CommandContext, routing: RoutingCommands, leases: LeaseCommands,
                 inbound: InboundCommands) -> None:
        self.ctx = ctx
        self.routing = routing
        self.inbound = inbound
        self.edits = HistoryEdits(ctx, leases)

    def _session_id(self, source: SessionSource) -> str | None:
        route: Route | None = self.ctx.get(self.routing.routing_key(source).route_id)
        return route.session_id if route is not None else None

    def undo(self, source: SessionSource, arg: str, *, actor: str, cause: str) -> CommandResult:
        turns = undo_count(arg)
        if turns is None:
            return CommandResult("/undo", f"Invalid count “{arg.split()[0]}” — use /undo or /undo N.")
        session_id = self._session_id(source)
        if session_id is None:
            return CommandResult("/undo", NOTHING_TO_UNDO)
        try:
            result = self.edits.undo(session_id, turns, actor=actor, cause=cause)
        except SessionBusy:
            return CommandResult("/undo", busy_reply("/undo"), session_id)
        return CommandResult("/undo", undo_reply(result), session_id, result.turns > 0)

    def retry(self, source: SessionSource, *, actor: str, cause: str) -> CommandResult:
        session_id = self._session_id(source)
        if session_id is None:
            return CommandResult("/retry", NOTHING_TO_RETRY)
        rk = self.routing.routing_key(source)
        # The text runs as a /queue item does: its own turn, never merged, never judged a repeat.
        again = replace(source, message_id=None)

        def run_again(editing: Editing, text: str) -> list[Any]:
            inbox, _, seen = self.inbound.accepting(rk, again, text, QUEUED, actor, cause)
            return [inbox, *seen]
        try:
            text = self.edits.retry(session_id, run_again, actor=actor, cause=cause)
        except SessionBusy:
            return CommandResult("/retry", busy_reply("/retry"), session_id)
        except QueueFull as full:
            return CommandResult("/retry", f"Not retried: {full}", session_id)
        if text is None:
            return CommandResult("/retry", NOTHING_TO_RETRY, session_id)
        return CommandResult("/retry", None, session_id, True, turn_pending=True)


