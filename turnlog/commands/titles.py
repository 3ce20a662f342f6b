"""Setting a session's title (SessionTitled) and finding sessions by title: /title, `turnlog title`,
and the names /branch and /resume use (the rules are domain/titles.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from ..domain.session import Session
from ..domain.title_claim import TitleClaim, title_claim_id
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
        InvalidRequest when it is too long or another session holds it."""
        title = clean_title(text)

        def step() -> str | None:
            session: Session | None = self.ctx.session(session_id)
            if session is None:
                raise NotFound(f"no session {session_id!r}")
            also = self.claim(session, title, actor=actor, cause=cause)
            if also:
                self.ctx.save(session, *also)
            return title
        return self.ctx.retrying(step, f"title of {session_id}")

    def claim(self, session: Session, title: str | None, *, actor: str, cause: str,
              at: datetime | None = None) -> list[Any]:
        """Give `session` the title (None: no title): its SessionTitled is recorded on it, and the
        other aggregates to save with it are returned (the new title's claim, the old one's
        release; [] when it has this title already). InvalidRequest when another session holds the
        title, unless this one continues that session after a compression rotation: the ended
        ancestor is no longer listed and could not give it up, so it moves over (as in Hermes)."""
        at = at or self.ctx.clock.now()
        old = session.current_title
        if title == old:
            return []
        items: list[Any] = []
        if title is not None:
            claim: TitleClaim | None = self.ctx.get(title_claim_id(title))
            if claim is None:
                claim = TitleClaim.new(TitleClaim.Created, id=title_claim_id(title), at=at, actor=actor, cause=cause,
                                       title=title, session_id=session.session_id)
            else:
                holder = claim.holder
                if holder is not None and holder != session.session_id:
                    if holder not in self._compressed_from(session.session_id):
                        raise InvalidRequest(f"Title '{title}' is already in use by another session.")
                    ancestor: Session | None = self.ctx.session(holder)
                    if ancestor is not None:
                        ancestor.retitle(None, at=at, actor=actor, cause=cause)
                        items.append(ancestor)
                claim.take(session.session_id, at=at, actor=actor, cause=cause)
            items.append(claim)
        if old is not None:
            freed: TitleClaim | None = self.ctx.get(title_claim_id(old))
            if freed is not None:
                freed.release(session.session_id, at=at, actor=actor, cause=cause)
                items.append(freed)
        session.retitle(title, at=at, actor=actor, cause=cause)
        return items

    def holder(self, title: str) -> str | None:
        claim: TitleClaim | None = self.ctx.get(title_claim_id(title))
        return claim.holder if claim is not None else None

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
