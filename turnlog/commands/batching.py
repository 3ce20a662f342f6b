"""Running text batches once their debounce window has passed (domain/batching.py has the rule).

With batching on, `handle_message` only accepts a text (it merges into the key's waiting item);
the gateway calls `run_due` on a timer (`next_due` says when), which runs each key's waiting items
whose window is over, oldest first, and stops at the first one still held back.
"""

from __future__ import annotations

from datetime import datetime

from ..domain.batching import TextBatching
from ..domain.source import SessionSource
from .delivery import Sender
from .runner import TurnRunner
from .turn import Responder, TurnOutcome


class BatchCommands:
    def __init__(self, runner: TurnRunner) -> None:
        self.runner = runner
        self.inbound = runner.inbound

    @property
    def rule(self) -> TextBatching:
        return self.inbound.ctx.config.text_batching

    def run_due(self, source: SessionSource, responder: Responder, sender: Sender) -> list[TurnOutcome]:
        outcomes: list[TurnOutcome] = []
        while True:
            inbox = self.inbound.inbox(self.inbound.routing.routing_key(source), fresh=True)
            pending = inbox.pending() if inbox is not None else []
            if not pending or not self.rule.ready(pending[0], self.inbound.ctx.clock.now()):
                return outcomes
            outcome = self.runner.run_next(source, responder, sender)
            if outcome is None:
                return outcomes
            outcomes.append(outcome)

    def next_due(self, sources: list[SessionSource]) -> datetime | None:
        """The earliest time a held-back item of these keys becomes ready (None: nothing held)."""
        times = []
        for source in sources:
            inbox = self.inbound.inbox(self.inbound.routing.routing_key(source), fresh=True)
            pending = inbox.pending() if inbox is not None else []
            at = self.rule.ready_at(pending[0]) if pending else None
            if at is not None:
                times.append(at)
        return min(times, default=None)
