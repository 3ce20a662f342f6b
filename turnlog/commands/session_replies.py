"""The chat's answers to /title, /sessions, /usage and /status, read from the log (the titles,
the recorded usage events, the session's flags and lease); only /title writes (SessionTitled)."""

from __future__ import annotations

from datetime import datetime, timezone

from ..clock import parse_aware_time
from ..domain.compression import estimate_tokens
from ..domain.lease import TurnLease
from ..domain.ownership import bound_session_ids, started_by
from ..domain.route import Route
from ..domain.source import SessionSource
from ..domain.titles import clean_title
from ..errors import InvalidRequest
from ..projections.routing_views import SessionRow
from ..projections.usage import usage_of
from ..projections.views import Views
from .branch import BranchCommands, busy
from .context import CommandContext
from .lease import LeaseCommands, lease_id
from .routing import RoutingCommands
from .titles import TitleCommands

NAMES = ("/title", "/branch", "/sessions", "/usage", "/status")
LISTED = 10  # /sessions shows this many, as Hermes does
USAGE_FIELDS = (("input_tokens", "Input tokens"), ("output_tokens", "Output tokens"),
                ("cache_read_tokens", "Cache read tokens"), ("cache_write_tokens", "Cache write tokens"),
                ("reasoning_tokens", "Reasoning tokens"))


def age(seconds: float) -> str:
    """"just now", "5m ago", "3h ago", "2d ago"."""
    if seconds < 60:
        return "just now"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return "just now"


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


class SessionReplies:
    def __init__(self, ctx: CommandContext, routing: RoutingCommands, turns: LeaseCommands, views: Views,
                 titles: TitleCommands, branches: BranchCommands) -> None:
        self.ctx = ctx
        self.routing = routing
        self.turns = turns
        self.views = views
        self.titles = titles
        self.branches = branches

    def run(self, name: str, source: SessionSource, arg: str, *, actor: str, cause: str,
            queued: int = 0) -> tuple[str, str | None, bool]:
        """One of NAMES: (reply, the session it concerns, whether it changed anything)."""
        if name == "/title":
            return self.title(source, arg, actor=actor, cause=cause)
        if name == "/branch":
            reply, branch_id = self.branches.branch(source, arg, actor=actor, cause=cause)
            return reply, branch_id, branch_id is not None
        if name == "/sessions":
            return self.sessions(source), self.current(source), False
        if name == "/usage":
            return self.usage(source), self.current(source), False
        return self.status(source, queued=queued), self.current(source), False

    # -- whose sessions ------------------------------------------------------------------

    def owned(self, source: SessionSource) -> list[SessionRow]:
        """The sessions this chat may take back (domain/ownership.py: the ones its key pointed at,
        and the ones its user started on this platform), newest first."""
        rk = self.routing.routing_key(source)
        bound = bound_session_ids(self.ctx.app.events.get(rk.route_id))
        self.views.refresh()
        candidates = self.views.sessions_of(bound, source.platform, source.user_id_alt or source.user_id)
        return [r for r in candidates if r.session_id in bound or started_by(r.origin, source)]

    def find_owned(self, source: SessionSource, wanted: str) -> str | None:
        """The chat's own session that /resume WANTED names, or None: N picks the Nth of the
        /sessions list (as Hermes' numbered /resume list), anything else is a title."""
        owned = self.owned(source)
        if wanted.isdigit() and 1 <= int(wanted) <= min(LISTED, len(owned)):
            return owned[int(wanted) - 1].session_id
        return self.titles.find(wanted, (r.session_id for r in owned))

    def current(self, source: SessionSource) -> str | None:
        route: Route | None = self.ctx.get(self.routing.routing_key(source).route_id)
        return route.session_id if route is not None else None

    # -- /title ----------------------------------------------------------------------------

    def title(self, source: SessionSource, text: str, *, actor: str, cause: str) -> tuple[str, str, bool]:
        """(reply, session id, changed)."""
        session_id = self.routing.get_or_create_session(source, actor=actor, cause=cause).session_id
        if not text:
            current = self.titles.title(session_id)
            if current:
                return f"Session: {session_id}\nTitle: {current}", session_id, False
            return f"Session: {session_id}\nNo title set. Usage: /title <name>", session_id, False
        before = self.titles.title(session_id)
        try:
            if clean_title(text) is None:  # in a chat, an empty title is a mistake, not a clearing
                return "Title is empty after cleanup: use printable characters.", session_id, False
            title = self.titles.set_title(session_id, text, actor=actor, cause=cause)
        except InvalidRequest as refused:
            return f"⚠️ {refused}", session_id, False
        return f"Session title set: {title}", session_id, title != before

    # -- /sessions -------------------------------------------------------------------------

    def sessions(self, source: SessionSource) -> str:
        rows = self.owned(source)
        if not rows:
            return "No sessions yet."
        now = self.ctx.clock.now()
        current = self.current(source)
        lines = ["Sessions (newest first):"]
        for i, row in enumerate(rows[:LISTED], start=1):
            name = f"\"{row.title}\"" if row.title else "(untitled)"
            seen = age((now - parse_aware_time(row.updated_at)).total_seconds())
            mark = " (current)" if row.session_id == current else ""
            messages = _count(self.message_count(row.session_id), "message")
            lines.append(f"{i}. {name} · {row.session_id} · {seen} · {messages}{mark}")
        if len(rows) > LISTED:
            lines.append(f"… and {len(rows) - LISTED} older")
        lines.append("Resume one with /resume <number, title or id>.")
        return "\n".join(lines)

    def message_count(self, session_id: str) -> int:
        lease: TurnLease | None = self.ctx.get(lease_id(session_id))
        return lease.last_seq if lease is not None else 0

    # -- /usage and /status ----------------------------------------------------------------

    def usage_totals(self, session_id: str) -> tuple[dict[str, int], str | None, int]:
        """(token counters summed over the recorded usage events, the last model, how many calls)."""
        rows = usage_of(self.ctx.app, self.turns.transcript(session_id))
        totals = {name: sum(r.get(name, 0) for r in rows) for name, _ in USAGE_FIELDS}
        model = next((r["model"] for r in reversed(rows) if r.get("model")), None)
        return totals, model, len(rows)

    def usage(self, source: SessionSource) -> str:
        session_id = self.current(source)
        if session_id is None:
            return "No usage data available for this session."
        totals, model, calls = self.usage_totals(session_id)
        if calls:
            lines = ["📊 Session token usage"]
            if model:
                lines.append(f"Model: {model}")
            lines += [f"{label}: {totals[name]:,}" for name, label in USAGE_FIELDS
                      if totals[name] or name in ("input_tokens", "output_tokens")]
            lines += [f"Total: {sum(totals.values()):,}", f"API calls: {calls}"]
            return "\n".join(lines)
        messages = [m for m in self.turns.transcript(session_id) if m.role in ("user", "assistant") and m.content]
        if not messages:
            return "No usage data available for this session."
        return "\n".join(["📊 Session info", f"Messages: {len(messages)}",
                          f"Estimated context: ~{estimate_tokens(m.content for m in messages):,} tokens",
                          "Detailed usage is recorded with the agent's replies."])

    def status(self, source: SessionSource, *, queued: int) -> str:
        session_id = self.current(source)
        if session_id is None:
            return "📊 Session status\nNo active session: the next message starts one."
        self.views.refresh()
        row = self.views.session(session_id)
        totals, model, _ = self.usage_totals(session_id)
        lines = ["📊 Session status", f"Session ID: {session_id}"]
        if row is not None and row.title:
            lines.append(f"Title: {row.title}")
        if row is not None:
            lines += [f"Created: {_minute(row.created_at)}", f"Last activity: {_minute(row.updated_at)}",
                      f"State: {_state(row)}"]
        if model:
            lines.append(f"Model: {model}")
        lines += [f"Messages: {self.message_count(session_id)}", f"Tokens: {sum(totals.values()):,}",
                  f"Agent running: {'Yes' if busy(self.turns, session_id) else 'No'}"]
        if queued:
            lines.append(f"Queued: {queued}")
        return "\n".join(lines)


def _minute(iso: str) -> str:
    at: datetime = parse_aware_time(iso)
    return at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _state(row: SessionRow) -> str:
    if row.ended_at:
        return f"ended ({row.end_reason})"
    if row.suspended:
        return f"suspended ({row.suspend_reason})"
    if row.resume_pending:
        return f"resume pending ({row.resume_reason})"
    return "active"

