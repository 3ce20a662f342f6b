"""Setting a session's title (SessionTitled) and finding sessions by title: /title, `turnlog title`,
and the names /branch and /resume use (the rules are domain/titles.py)."""

from __future__ import annotations

from typing import Any, Iterable

from ..domain.session import Session
from ..domain.titles import clean_title, named_by, next_in_lineage
from ..errors import InvalidRequest, NotFound
from ..projections.views import Views
from .context import CommandContext

COMPRESSION = "compression"  # a rotation's child continues its parent (commands/rotation.py)


class TitleCommands:
    def __init__(self, ctx: CommandContext, views: Views) -> None:
        self.ctx = ctx
        self.views = views

    def title(self, session_id: str) -> str | None:
        session: Session | None = self.ctx.session(session_id)
        if session is None:
            raise NotFound(f"no session {session_id!r}")
        return session.current_title

    def set_title(self, session_id: str, text: str | None, *, actor: str, cause: str) -> str | None:
        """Set (or with an empty text clear) the title; returns the title as cleaned.

        InvalidRequest when it is too long or another session holds it. A title held by a session
        this one continues after a compression rotation moves over to it (as Hermes does), since
        the ended ancestor is no longer listed and could not give it up."""
        title = clean_title(text)

        def step() -> str | None:
            session: Session | None = self.ctx.session(session_id)
            if session is None:
                raise NotFound(f"no session {session_id!r}")
            items: list[Any] = [session]
            holder = self.holder(title) if title else None
            if holder is not None and holder != session_id:
                if holder not in self._compressed_from(session_id):
                    raise InvalidRequest(f"Title '{title}' is already in use by another session.")
                ancestor: Session | None = self.ctx.session(holder)
                assert ancestor is not None
                ancestor.retitle(None, at=self.ctx.clock.now(), actor=actor, cause=cause)
                items.append(ancestor)
            if session.retitle(title, at=self.ctx.clock.now(), actor=actor, cause=cause):
                self.ctx.save(*items)
            return title
        return self.ctx.retrying(step, f"title of {session_id}")

    def holder(self, title: str) -> str | None:
        self.views.refresh()
        return self.views.title_holder(title)

    def next_title(self, base: str) -> str:
        """The title a new member of `base`'s lineage gets: `base` when free, else "base #N"."""
        self.views.refresh()
        return next_in_lineage(base, (title for _, title in self.views.titled()))

    def find(self, title: str, among: Iterable[str]) -> str | None:
        """The session of `among` that `title` names (domain/titles.named_by), or None."""
        wanted = clean_title(title)
        if not wanted:
            return None
        allowed = set(among)
        self.views.refresh()
        return named_by(wanted, [(sid, t) for sid, t in self.views.titled() if sid in allowed])

    def _compressed_from(self, session_id: str) -> list[str]:
        """The sessions this one continues through compression rotations, nearest first."""
        self.views.refresh()
        chain: list[str] = []
        row = self.views.session(session_id)
        while row is not None and row.created_reason == COMPRESSION and row.parent_session_id \
                and row.parent_session_id not in chain and len(chain) < 100:
            chain.append(row.parent_session_id)
            row = self.views.session(row.parent_session_id)
        return chain
