"""Turnlog's names from before its faces (`t.turns`, `t.maintenance`) and its private collaborators,
kept for one release: each warns (DeprecationWarning), then does what its replacement does."""

from __future__ import annotations

import uuid
import warnings
from typing import TYPE_CHECKING, Any, Callable, Iterable

from .commands.delivery import Attempt, Sender
from .commands.lease import LeaseToken, MessageRecord
from .domain.source import SessionSource
from .maintenance import Maintenance
from .storage.chain import ChainBreak, ChainReport
from .turn_operations import TurnOperations

if TYPE_CHECKING:
    from .projections.routing_views import SessionRow


def deprecated(old: str, new: str) -> None:
    warnings.warn(f"{old} is deprecated and goes in the next release: use {new}", DeprecationWarning,
                  stacklevel=3)



class Moved:
    """An attribute of Turnlog that was public before: reading it warns naming `replacement`, then
    gives `_<name>`."""

    def __init__(self, replacement: str) -> None:
        self.replacement = replacement

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        deprecated(f"Turnlog.{self.name}", f"{self.replacement} (it is private now)")
        return getattr(obj, f"_{self.name}")


class DeprecatedNames:
    """The deprecated half of Turnlog (api.py), a base class of it."""

    turns: TurnOperations
    maintenance: Maintenance

    if TYPE_CHECKING:
        def session(self, key_or_session: str | SessionSource) -> SessionRow: ...

        def transcript(self, session_id: str) -> list[dict[str, Any]]: ...

    # The collaborators were public attributes before: reading one warns, then gives it. Named
    # one by one, so that a type checker still refuses a misspelt attribute.
    app = Moved("Turnlog.history, Turnlog.events_around or Turnlog.at")
    batches = Moved("Turnlog.run_due_batches and Turnlog.next_batch_due")
    chain = Moved("Turnlog.maintenance.seal and Turnlog.maintenance.verify_chain")
    clock = Moved("the clock given to Turnlog(clock=...)")
    config = Moved("the EngineConfig given to Turnlog(config=...)")
    ctx = Moved("Turnlog's public methods")
    deliveries = Moved("Turnlog.turns.deliver, Turnlog.retry_deliveries and Turnlog.abandon_delivery")
    forks = Moved("Turnlog.fork")
    gateway_name = Moved("the name given to Turnlog.start_gateway")
    inbound = Moved("Turnlog.accept")
    keeper = Moved("Turnlog.close (the keeper runs by itself)")
    projections = Moved("Turnlog.maintenance")
    recovery = Moved("Turnlog.recover, Turnlog.resume_candidates and Turnlog.resume_interrupted")
    rotation = Moved("Turnlog.turns.rotate_session")
    routing = Moved("Turnlog.get_or_create_session, Turnlog.switch_session and Turnlog.routing_key")
    slash = Moved("Turnlog.command")
    views = Moved("Turnlog's reads (sessions, routes, transcript, history, search)")

    def acquire_lease(self, session_id: str, owner_key: str, generation: int = 0, timeout: float | None = None,
                      *, actor: str | None = None, cause: str = "turn") -> LeaseToken:
        """Deprecated (goes in the next release): use Turnlog.turns.acquire_lease."""
        deprecated("Turnlog.acquire_lease", "Turnlog.turns.acquire_lease")
        return self.turns.acquire_lease(session_id, owner_key, generation, timeout, actor=actor, cause=cause)

    def release_lease(self, token: LeaseToken, outcome: str = "completed") -> bool:
        """Deprecated (goes in the next release): use Turnlog.turns.release_lease."""
        deprecated("Turnlog.release_lease", "Turnlog.turns.release_lease")
        return self.turns.release_lease(token, outcome)

    def renew_lease(self, token: LeaseToken) -> None:
        """Deprecated (goes in the next release): use Turnlog.turns.renew_lease."""
        deprecated("Turnlog.renew_lease", "Turnlog.turns.renew_lease")
        self.turns.renew_lease(token)

    def lease_holder(self, session_id: str) -> dict[str, Any] | None:
        """Deprecated (goes in the next release): use Turnlog.turns.holder."""
        deprecated("Turnlog.lease_holder", "Turnlog.turns.holder")
        holder = self.turns.holder(session_id)
        return holder.to_dict() if holder is not None else None

    def append_message(self, token: LeaseToken, role: str, content: str, *, cause: str = "turn",
                       **fields: Any) -> MessageRecord:
        """Deprecated (goes in the next release): use Turnlog.turns.append_message."""
        deprecated("Turnlog.append_message", "Turnlog.turns.append_message")
        return self.turns.append_message(token, role, content, cause=cause, **fields)

    def record_reply(self, token: LeaseToken, content: str, *, reply_to: SessionSource | None = None,
                     internal: bool = False, inbound_message_id: str | None = None,
                     cause: str = "turn", **fields: Any) -> tuple[MessageRecord, uuid.UUID | None]:
        """Deprecated (goes in the next release): use Turnlog.turns.record_reply."""
        deprecated("Turnlog.record_reply", "Turnlog.turns.record_reply")
        return self.turns.record_reply(token, content, reply_to=reply_to, internal=internal,
                                       inbound_message_id=inbound_message_id, cause=cause, **fields)

    def attempt_delivery(self, delivery_id: uuid.UUID) -> Attempt:
        """Deprecated (goes in the next release): use Turnlog.turns.attempt_delivery."""
        deprecated("Turnlog.attempt_delivery", "Turnlog.turns.attempt_delivery")
        return self.turns.attempt_delivery(delivery_id)

    def settle_delivery(self, delivery_id: uuid.UUID, error: str | None = None) -> str:
        """Deprecated (goes in the next release): use Turnlog.turns.settle_delivery."""
        deprecated("Turnlog.settle_delivery", "Turnlog.turns.settle_delivery")
        return self.turns.settle_delivery(delivery_id, error)

    def deliver(self, delivery_id: uuid.UUID, send: Sender) -> str:
        """Deprecated (goes in the next release): use Turnlog.turns.deliver."""
        deprecated("Turnlog.deliver", "Turnlog.turns.deliver")
        return self.turns.deliver(delivery_id, send)

    def needs_compression(self, token: LeaseToken, *, prompt_tokens: int, context_length: int) -> bool:
        """Deprecated (goes in the next release): use Turnlog.turns.needs_compression."""
        deprecated("Turnlog.needs_compression", "Turnlog.turns.needs_compression")
        return self.turns.needs_compression(token, prompt_tokens=prompt_tokens, context_length=context_length)

    def rotate_session(self, token: LeaseToken, source: SessionSource) -> LeaseToken:
        """Deprecated (goes in the next release): use Turnlog.turns.rotate_session."""
        deprecated("Turnlog.rotate_session", "Turnlog.turns.rotate_session")
        return self.turns.rotate_session(token, source)

    def show(self, key_or_session: str | SessionSource) -> dict[str, Any]:
        """Deprecated (goes in the next release): use Turnlog.session, Turnlog.turns.holder and Turnlog.transcript."""
        deprecated("Turnlog.show", "Turnlog.session, Turnlog.turns.holder and Turnlog.transcript")
        row = self.session(key_or_session)
        holder = self.turns.holder(row.session_id)
        return {**row.to_dict(), "lease": holder.to_dict() if holder is not None else None,
                "messages": self.transcript(row.session_id)}

    def catch_up(self, names: Iterable[str] | None = None) -> int:
        """Deprecated (goes in the next release): use Turnlog.maintenance.catch_up."""
        deprecated("Turnlog.catch_up", "Turnlog.maintenance.catch_up")
        return self.maintenance.catch_up(names)

    def seal(self) -> int:
        """Deprecated (goes in the next release): use Turnlog.maintenance.seal."""
        deprecated("Turnlog.seal", "Turnlog.maintenance.seal")
        return self.maintenance.seal()

    def verify_chain(self) -> list[ChainBreak]:
        """Deprecated (goes in the next release): use Turnlog.maintenance.verify_chain().breaks."""
        deprecated("Turnlog.verify_chain", "Turnlog.maintenance.verify_chain().breaks")
        return self.maintenance.verify_chain().breaks

    def chain_report(self) -> ChainReport:
        """Deprecated (goes in the next release): use Turnlog.maintenance.verify_chain."""
        deprecated("Turnlog.chain_report", "Turnlog.maintenance.verify_chain")
        return self.maintenance.verify_chain()

    def rebuild(self, names: Iterable[str] | None = None) -> int:
        """Deprecated (goes in the next release): use Turnlog.maintenance.rebuild(names)['events']."""
        deprecated("Turnlog.rebuild", "Turnlog.maintenance.rebuild(names)['events']")
        return int(self.maintenance.rebuild(names)["events"])

    def rebuild_projections(self, names: Iterable[str] | None = None, *,
                            progress: Callable[[int, int], None] | None = None,
                            pause: float = 0.0, batch: int | None = None,
                            workers: int | None = None) -> dict[str, Any]:
        """Deprecated (goes in the next release): use Turnlog.maintenance.rebuild."""
        deprecated("Turnlog.rebuild_projections", "Turnlog.maintenance.rebuild")
        return self.maintenance.rebuild(names, progress=progress, pause=pause, batch=batch, workers=workers)

    def projections_behind(self) -> int:
        """Deprecated (goes in the next release): use Turnlog.maintenance.projections_behind."""
        deprecated("Turnlog.projections_behind", "Turnlog.maintenance.projections_behind")
        return self.maintenance.projections_behind()

    def projection_status(self) -> list[dict[str, Any]]:
        """Deprecated (goes in the next release): use Turnlog.maintenance.projection_status."""
        deprecated("Turnlog.projection_status", "Turnlog.maintenance.projection_status")
        return [p.to_dict() for p in self.maintenance.projection_status()]

    def verify(self, names: Iterable[str] | None = None) -> dict[str, Any]:
        """Deprecated (goes in the next release): use Turnlog.maintenance.verify."""
        deprecated("Turnlog.verify", "Turnlog.maintenance.verify")
        return self.maintenance.verify(names)

    def doctor(self, *, repair: bool = True, deep: bool = False) -> dict[str, Any]:
        """Deprecated (goes in the next release): use Turnlog.maintenance.doctor."""
        deprecated("Turnlog.doctor", "Turnlog.maintenance.doctor")
        return self.maintenance.doctor(repair=repair, deep=deep)
