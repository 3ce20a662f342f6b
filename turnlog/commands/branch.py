"""/branch [name]: the chat's conversation copied into a new session (the fork) that the chat's key
then points at, titled from the name or as the next of its lineage ("branch", "branch #2"). The
old session is ended by the switch, as /resume ends the one it leaves, and stays resumable."""

from __future__ import annotations

from ..domain.route import Route
from ..domain.source import SessionSource
from ..domain.titles import clean_title
from ..errors import InvalidRequest
from .context import CommandContext
from .fork import ForkCommands
from .lease import LeaseCommands
from .routing import RoutingCommands
from .titles import TitleCommands

DEFAULT_BRANCH_TITLE = "branch"
NOTHING_TO_BRANCH = "No conversation to branch yet: send a message first."
BUSY = "A turn is still running: /branch can run once it ends (or after /stop)."


def busy(turns: LeaseCommands, session_id: str) -> bool:
    """Whether a turn holds the session's lease now (Hermes refuses such commands mid-turn)."""
    holder = turns.holder(session_id)
    return holder is not None and not holder["expired"]


class BranchCommands:
    def __init__(self, ctx: CommandContext, routing: RoutingCommands, turns: LeaseCommands, forks: ForkCommands,
                 titles: TitleCommands) -> None:
        self.ctx = ctx
        self.routing = routing
        self.turns = turns
        self.forks = forks
        self.titles = titles

    def branch(self, source: SessionSource, name: str, *, actor: str, cause: str) -> tuple[str, str | None]:
        """(reply, the new session's id or None when nothing was branched)."""
        rk = self.routing.routing_key(source)
        route: Route | None = self.ctx.get(rk.route_id)
        parent = route.session_id if route is not None else None
        if parent is None:
            return NOTHING_TO_BRANCH, None
        copied = self.turns.transcript(parent)
        if not copied:
            return NOTHING_TO_BRANCH, None
        if busy(self.turns, parent):
            return BUSY, None
        parent_title = self.titles.title(parent)
        try:
            wanted = clean_title(name)
        except InvalidRequest as refused:
            return f"⚠️ {refused}", None
        base = wanted or parent_title or DEFAULT_BRANCH_TITLE

        def step() -> tuple[str, str]:  # again when another writer claimed the title meanwhile
            title = clean_title(self.titles.next_title(base)) or base  # a numbered one may be too long
            return title, self.forks.fork(parent, copied[-1].originator_version, at_position=0,
                                          route_id=rk.route_id, title=title, actor=actor, cause=cause)
        try:
            title, branch_id = self.ctx.retrying(step, f"/branch on {rk.key}")
        except InvalidRequest as refused:
            return f"⚠️ {refused}", None
        users = sum(1 for m in copied if m.role == "user")
        back = f"/resume {parent_title}" if parent_title else f"/resume {parent}"
        return (f"Branched into \"{title}\" ({users} user message{'' if users == 1 else 's'} copied)."
                f" New session {branch_id}; the original ({parent}) stays resumable: {back}", branch_id)
