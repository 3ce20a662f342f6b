"""Slash commands that change a conversation: /new, /reset, /stop, /queue, /resume, /compress
(docs/behaviour.md §8, §9, §11; /compress in compress_command.py); /undo and /retry edit its
history (edit_commands.py).

/new and /reset follow seed 000 §5: the running turn's lease is revoked (its generation is over,
so its later writes are refused), conversation-scoped state is cleared and async children are
interrupted (recorded as events), queued human messages are dropped while wake-ups stay, and the
route is detached so that the next message gets a fresh session. The old transcript stays.
/new, /reset and /stop also stop the session's running background delegations (DelegationStopped,
then the gateway's stop hook: delegations.py).
"""

from __future__ import annotations

from typing import Any

from ..domain.inbox import HUMAN, QUEUED, Inbox
from ..domain.ownership import started_by
from ..domain.policy import explicit_reset_notice
from ..domain.route import Route
from ..domain.session import Session
from ..domain.source import SessionSource
from ..errors import InvalidRequest, NotFound
from .command_result import CommandResult
from .context import CommandContext
from .compaction import CompactionCommands
from .compress_command import compress
from .delegations import DelegationCommands
from .edit_commands import EditCommands
from .inbound import InboundCommands, QueueFull
from .routing import RoutingCommands, actor_of, origin_of
from .lease import LeaseCommands
from .session_replies import NAMES as SESSION_COMMANDS, SessionReplies

QUEUE_USAGE = "Usage: /queue <message> — runs it as its own turn after the current one."


def parse_command(text: str) -> tuple[str, str] | None:
    """("/new", "rest of line") for a slash command, None for ordinary text."""
    stripped = text.strip()
    if not stripped.startswith("/") or len(stripped) < 2:
        return None
    name, _, rest = stripped.partition(" ")
    name = name.lower().split("@", 1)[0]  # Telegram's /cmd@botname
    return (name, rest.strip())


COMMANDS = ("/new", "/reset", "/stop", "/queue", "/q", "/resume", "/compress", "/undo", "/retry",
            *SESSION_COMMANDS)


class SlashCommands:
    def __init__(self, ctx: CommandContext, routing: RoutingCommands, turns: LeaseCommands,
                 inbound: InboundCommands, sessions: SessionReplies, compaction: CompactionCommands,
                 delegations: DelegationCommands | None = None) -> None:
        self.ctx = ctx
        self.sessions = sessions  # /title /branch /sessions /usage /status, and /resume by title
        self.routing = routing
        self.turns = turns
        self.inbound = inbound
        self.compaction = compaction
        self.delegations = delegations or DelegationCommands(ctx, routing, inbound)
        self.edits = EditCommands(ctx, routing, turns, inbound)

    def handle(self, source: SessionSource, text: str, *, actor: str | None = None) -> CommandResult:
        if not isinstance(text, str):
            raise InvalidRequest(f"a command must be a string, not {type(text).__name__}")
        parsed = parse_command(text)
        if parsed is None or parsed[0] not in COMMANDS:
            raise NotFound(f"not a turnlog command: {text.strip()[:40]!r} (known: {', '.join(COMMANDS)})")
        name, arg = parsed
        actor = actor or actor_of(source)
        cause = f"command:{name}" + (f":{source.message_id}" if source.message_id else "")
        if source.message_id and name not in ("/queue", "/q"):  # /queue is judged when its text is accepted
            if self.inbound.claim_command(source, name, actor=actor, cause=cause) is not None:
                return CommandResult(name, None, None, False, duplicate=True)  # a redelivery: recorded, not run
        if name in ("/new", "/reset"):
            return self.reset(source, name, actor=actor, cause=cause)
        if name == "/stop":
            return self.stop(source, actor=actor, cause=cause)
        if name in ("/queue", "/q"):
            return self.queue(source, arg, actor=actor, cause=cause)
        if name == "/compress":
            reply, session_id, changed = compress(self.ctx, self.routing, self.compaction, source, arg,
                                                  actor=actor, cause=cause)
            return CommandResult(name, reply, session_id, changed)
        if name in SESSION_COMMANDS:
            inbox = self.inbound.inbox(self.routing.routing_key(source)) if name == "/status" else None
            return CommandResult(name, *self.sessions.run(name, source, arg, actor=actor, cause=cause,
                                                          queued=len(inbox.pending()) if inbox else 0))
        if name == "/undo":
            return self.edits.undo(source, arg, actor=actor, cause=cause)
        if name == "/retry":
            return self.edits.retry(source, actor=actor, cause=cause)
        return self.resume(source, arg, actor=actor, cause=cause)

    def reset(self, source: SessionSource, name: str, *, actor: str, cause: str) -> CommandResult:
        rk = self.routing.routing_key(source)
        policy = self.ctx.config.reset.for_source(source.platform, source.chat_type)
        notice = explicit_reset_notice(source.platform, policy)

        stopped: list[Any] = []

        def step() -> CommandResult:
            now = self.ctx.clock.now()
            route: Route | None = self.ctx.get(rk.route_id)
            if route is None or route.session_id is None:
                return CommandResult(name, notice, None, False)
            # A key split off a shared session by a rekey leaves that session, its turn and lease to the others.
            borrowed = route.borrows_its_session()
            session: Session | None = None if borrowed else self.ctx.session(route.session_id)
            stopped[:] = self.delegations.stop_running(session, "session_reset", actor=actor, cause=cause)
            items: list[Any] = [*stopped]
            lease = None if borrowed else self.turns.revoke(route.session_id, "session_reset", actor=actor, cause=cause)
            if lease is not None:
                items.append(lease)
            inbox: Inbox | None = self.inbound.inbox(rk)
            if inbox is not None:
                aborted = [] if borrowed else inbox.abort_in_flight("session_reset", at=now, actor=actor, cause=cause)
                if inbox.drop({HUMAN, QUEUED}, "session_reset", at=now, actor=actor, cause=cause) or aborted:
                    items.append(inbox)
            if session is not None:
                session.clear_scope(at=now, actor=actor, cause=cause)
                session.end("session_reset", at=now, actor=actor, cause=cause)
                items.append(session)
            route.detach(reason="session_reset", at=now, actor=actor, cause=cause)
            items.append(route)
            self.ctx.save(*items)
            return CommandResult(name, notice, route.session_id if session is None else session.session_id, True)
        result = self.ctx.retrying(step, f"{name} on {rk.key}")
        self.delegations.notify_stopped(stopped)
        return result

    def stop(self, source: SessionSource, *, actor: str, cause: str) -> CommandResult:
        rk = self.routing.routing_key(source)
        stopped: list[Any] = []

        def step() -> CommandResult:
            now = self.ctx.clock.now()
            route: Route | None = self.ctx.get(rk.route_id)
            session_id = route.session_id if route is not None else None
            # An idle session's delegations too: the turn that started them has ended.
            session = self.ctx.session(session_id) if session_id else None
            stopped[:] = self.delegations.stop_running(session, "stop", actor=actor, cause=cause)
            items: list[Any] = [*stopped]
            lease = self.turns.revoke(session_id, "stop", actor=actor, cause=cause) if session_id else None
            if lease is not None:
                items.append(lease)
            inbox: Inbox | None = self.inbound.inbox(rk)
            if inbox is not None:
                aborted = inbox.abort_in_flight("stopped", at=now, actor=actor, cause=cause) if lease else []
                if inbox.drop({HUMAN}, "stop", at=now, actor=actor, cause=cause) or aborted:
                    items.append(inbox)
            if not items:
                return CommandResult("/stop", "No active task to stop.", session_id, False)
            self.ctx.save(*items)
            return CommandResult("/stop", "Stopped.", session_id, True)
        result = self.ctx.retrying(step, f"/stop on {rk.key}")
        self.delegations.notify_stopped(stopped)
        return result

    def queue(self, source: SessionSource, text: str, *, actor: str, cause: str) -> CommandResult:
        if not text:
            return CommandResult("/queue", QUEUE_USAGE, None, False)
        try:
            accepted = self.inbound.accept(source, text, kind=QUEUED, actor=actor, cause=cause)
        except QueueFull as full:
            return CommandResult("/queue", f"Not queued: {full}", None, False)
        if accepted.duplicate is not None:
            return CommandResult("/queue", None, None, False, duplicate=True)  # recorded, not queued again
        waiting = accepted.depth
        reply = "Queued for the next turn." if waiting <= 1 else f"Queued for the next turn. ({waiting} queued)"
        return CommandResult("/queue", reply, None, True)

    def resume(self, source: SessionSource, target: str, *, actor: str, cause: str) -> CommandResult:
        if not target:
            listing = self.sessions.sessions(source) if self.sessions.owned(source) else ""
            return CommandResult("/resume", "Usage: /resume <session id, title or number>"
                                 + (f"\n\n{listing}" if listing else ""), None, False)
        session = self.ctx.session(target)
        titled = self.sessions.find_owned(source, target) if session is None else None
        if titled is not None:  # found among the chat's own sessions only: ownership holds
            return self.switch_to(source, titled, actor=actor, cause=cause, named=target)
        if session is None:
            # Checked before routing: on a key never routed, an unknown id must not create a session.
            return CommandResult("/resume", f"No session {target}.", None, False)
        rk = self.routing.routing_key(source)
        if not started_by(session.origin, source) and not self.routing.has_owned(rk.route_id, target):
            return self.refuse_resume(source, rk, target, actor=actor, cause=cause)
        return self.switch_to(source, target, actor=actor, cause=cause)

    def switch_to(self, source: SessionSource, target: str, *, actor: str, cause: str,
                  named: str | None = None) -> CommandResult:
        rk = self.routing.routing_key(source)
        try:
            result = self.routing.switch_session(rk.route_id, target, actor=actor, cause=cause)
        except NotFound:
            return CommandResult("/resume", f"No session {target}.", None, False)
        if result is None:
            # The key has never been routed: route it first, then switch.
            self.routing.get_or_create_session(source, actor=actor, cause=cause)
            result = self.routing.switch_session(rk.route_id, target, actor=actor, cause=cause)
        assert result is not None
        label = f"{target} (\"{named}\")" if named else target
        return CommandResult("/resume", f"Resumed session {label}.", target, result.reason is not None)

    def refuse_resume(self, source: SessionSource, rk: Any, target: str, *, actor: str, cause: str) -> CommandResult:
        """A chat may only take back its own sessions: anything else is refused and audited on its route.
        The chat is answered as for an id that does not exist, so a stranger learns nothing of it."""
        def step() -> None:
            now = self.ctx.clock.now()
            route: Route | None = self.ctx.get(rk.route_id)
            if route is None:  # a key never routed: its route is registered to hold the record
                route = Route.register(rk.route_id, rk.key, rk.parts, origin_of(source), at=now, actor=actor,
                                       cause=cause)
            route.refuse_resume(target, reason="not_owned", at=now, actor=actor, cause=cause)
            self.ctx.save(route)
        self.ctx.retrying(step, f"/resume on {rk.key}")
        return CommandResult("/resume", f"No session {target}.", None, False)
