"""TitleClaim: which session holds a title, one aggregate per title (a deterministic id), so that two
writers giving the same title to two sessions at once conflict on it instead of both succeeding
(the sessions read model could only tell after the fact). The title's text stays in the session's
SessionTitled events; the claim is saved with them.

    (none) --claimed(session)--> held --released--> free --reclaimed(session)--> held
                                 held --reclaimed(other session)--> held   (a compression ancestor's title moving on)
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING
from uuid import UUID

from .base import TurnlogAggregate, stream_id


def title_claim_id(title: str) -> UUID:
    return stream_id("title", title)


class TitleClaim(TurnlogAggregate):
    TOPIC = "turnlog:TitleClaim"

    if TYPE_CHECKING:
        title: str
        holder: str | None

    class Created(TurnlogAggregate.Created):
        TOPIC = "turnlog:TitleClaimed"
        title: str
        session_id: str

        def apply(self, c: "TitleClaim") -> None:
            c.title = self.title
            c.holder = self.session_id

    class Released(TurnlogAggregate.Event):
        TOPIC = "turnlog:TitleReleased"
        session_id: str

        def apply(self, c: "TitleClaim") -> None:
            c.holder = None

    class Reclaimed(TurnlogAggregate.Event):
        TOPIC = "turnlog:TitleReclaimed"
        session_id: str

        def apply(self, c: "TitleClaim") -> None:
            c.holder = self.session_id

    def release(self, session_id: str, *, at: datetime, actor: str, cause: str) -> None:
        if self.holder == session_id:
            self.record(TitleClaim.Released, at=at, actor=actor, cause=cause, session_id=session_id)

    def take(self, session_id: str, *, at: datetime, actor: str, cause: str) -> None:
        if self.holder != session_id:
            self.record(TitleClaim.Reclaimed, at=at, actor=actor, cause=cause, session_id=session_id)
