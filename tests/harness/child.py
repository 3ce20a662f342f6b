"""The gateway loop of one child process of the kill -9 harness.

    start_gateway -> sweep_deliveries -> resume_interrupted -> pending_inbound() -> the script

Each routing key has its own worker thread (a gateway serves chats concurrently), so the looping
key's hung turn only blocks that key. The script is continued from the log: a scripted step is
sent again until the log has accepted its message. When every other key is idle the child drains
(timing out if the looping key's turn is running) and exits; the parent may SIGKILL it at any
moment before that. With --final nothing hangs and nothing new is sent: the run finishes the
work left behind and stops cleanly, so that the checker sees the settled state.

With --serve NAME the child is a second live gateway of another name beside the round's main
one: it sends nothing, it serves whatever waits in the shared log (both gateways race for the
same keys' leases) for a moment, then drains. Some agents are slow: they think longer than the
lease TTL, so only the lease keeper keeps their turns; both gateways' clocks run from the same
wall-clock anchor, so they agree on when a lease expires.

Run as: python -m harness.child DB SENT_FILE SEED ROUND START_AT UPTO LENGTH [--final] [--serve NAME]
"""

from __future__ import annotations

import os
import queue
import random
import sys
import threading
import time
from typing import Any, Sequence

from datetime import datetime, timedelta

from turnlog import EngineConfig, Turnlog

from .adapter import FakeAdapter
from .log import events
from .script import HUMAN, LOOP_KEY, QUEUE, WAKEUP, Step, key_of, make_script, source_of

GATEWAY = "harness"
SILENT = "[SILENT]"
STEP_CLOCK_S = 0.1  # virtual time the dispatcher lets pass per scripted message
LEASE_TTL_S = 1.0  # short, so that slow turns outlive it
SLOW_EVERY = 5  # one scripted step in this many gets a slow agent
SLOW_S = 1.5 * LEASE_TTL_S
SERVE_S = 1.2  # how long a serving gateway looks for work before it drains


class RoundClock:
    """The round's virtual start plus the wall-clock time since the parent's anchor (the same for
    every child of a round), plus what the dispatcher advanced it by."""

    def __init__(self, start_at: str, anchor: float) -> None:
        self.base = datetime.fromisoformat(start_at)
        self.anchor = anchor
        self.offset = 0.0
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self.base + timedelta(seconds=time.time() - self.anchor + self.offset)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.offset += seconds


def reply_text(history: Sequence[Any], item: Any) -> str:
    """Unique per turn: the inbound ids, the turn and whether it is a resumed one."""
    last = history[-1]
    ids = ",".join(m for m in item.message_ids if m) or item.item_id
    return f"re[{ids}|{last.turn_id[:12]}|{'resume' if last.role == 'system' else 'turn'}]"


class Child:
    def __init__(self, db: str, sent: str, seed: int, round_no: int, start_at: str, upto: int, length: int,
                 final: bool, serve: str | None = None, anchor: float | None = None, shared: bool = False) -> None:
        self.final = final
        self.serve = serve
        self.shared = shared
        self.gateway = serve or GATEWAY
        self.clock = RoundClock(start_at, anchor if anchor is not None else time.time())
        self.t = Turnlog(db, clock=self.clock, config=EngineConfig(freshness_window_s=3600, lease_ttl_s=LEASE_TTL_S))
        rng = random.Random(f"turnlog-kill9-child:{seed}:{round_no}")
        self.adapter = FakeAdapter(sent, linger_s=lambda: rng.uniform(0, 0.03), round=round_no, boot=self.t.owner)
        self.script = make_script(seed, length)
        self.upto = upto
        self.by_id = {s.message_id: s for s in self.script}
        self.workers: dict[str, tuple[queue.Queue, threading.Thread]] = {}
        self.loop_busy = threading.Event()
        self.rng_round = round_no
        self.errors: list[str] = []
        self.loop_key = self.t.routing_key(source_of(LOOP_KEY))

    # -- the agent ------------------------------------------------------------------------

    def responder(self, history: Sequence[Any], item: Any) -> str:
        steps = [self.by_id[m] for m in item.message_ids if m in self.by_id]
        # The lease says which key the turn is for (read-model queries are not made from worker threads).
        holder = self.t.turns.holder(history[-1].session_id)
        if holder is not None and holder.owner_key == self.loop_key and not self.final:
            self.loop_busy.set()
            while True:  # the looping agent: never returns, only a kill ends it
                time.sleep(3600)
        slow = any(s.index % SLOW_EVERY == SLOW_EVERY - 1 for s in steps)
        time.sleep(SLOW_S if slow else max((s.think_ms for s in steps), default=5) / 1000)
        if item.kind == "wakeup" and steps and all(s.silent for s in steps):
            return SILENT
        return reply_text(history, item)

    # -- per-key workers -----------------------------------------------------------------

    def worker(self, key: str) -> queue.Queue:
        if key not in self.workers:
            q: queue.Queue = queue.Queue()
            thread = threading.Thread(target=self._work, args=(key, q), name=f"key-{key}", daemon=True)
            self.workers[key] = (q, thread)
            thread.start()
        return self.workers[key][0]

    def _work(self, key: str, q: queue.Queue) -> None:
        while True:
            op, payload = q.get()
            try:
                self._do(op, payload)
            except Exception as e:  # noqa: BLE001 - reported; the parent counts it as a violation
                self.errors.append(f"{key}: {type(e).__name__}: {e}")
                print(f"worker {key}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            finally:
                q.task_done()

    def _do(self, op: str, payload: Any) -> None:
        source = payload.source() if isinstance(payload, Step) else payload
        sender = self.adapter.sender(source)
        if op == "step" and payload.kind == HUMAN:
            self.t.handle_message(source, payload.text, self.responder, sender)
            return
        if op == "step" and payload.kind == QUEUE:
            self.t.command(source, f"/queue {payload.text}")
        elif op == "step" and payload.kind == WAKEUP:
            self.t.accept(source, payload.text, kind="wakeup")
        while self.t.run_next(source, self.responder, sender) is not None:
            pass

    # -- the boot ------------------------------------------------------------------------

    def run(self) -> None:
        t = self.t
        print("booting", flush=True)  # the parent's kill delay starts now, whatever imports cost
        t.start_gateway(self.gateway)
        t.sweep_deliveries(self.adapter.sweep_send)
        t.resume_interrupted(self.responder, self.adapter.sender(via="resume"))
        for source in t.pending_inbound():
            self.worker(key_of(source.platform, source.chat_id)).put(("pending", source))
        if self.serve and not self.final:
            until = time.monotonic() + SERVE_S
            while time.monotonic() < until:  # the other gateway's traffic, as it is accepted
                for source in t.pending_inbound():
                    q = self.worker(key_of(source.platform, source.chat_id))
                    if not q.unfinished_tasks:
                        q.put(("pending", source))
                time.sleep(0.05)
        elif not self.final:
            accepted = {e.message_id for e in events(t, "InboundAccepted", "InboundRejected")}
            for step in self.script[:self.upto]:
                if step.message_id not in accepted:
                    if not self.shared:  # beside another gateway both clocks must agree
                        self.clock.advance(STEP_CLOCK_S)
                    self.worker(step.key).put(("step", step))
        for key, (q, _) in list(self.workers.items()):
            if key != LOOP_KEY or self.final:
                q.join()
        if self.final:
            while sources := t.pending_inbound():  # anything the workers' turns left queued
                for source in sources:
                    while t.run_next(source, self.responder, self.adapter.sender(source)) is not None:
                        pass
        # Every other key is idle: only the looping key's turn may still run, and the drain times out.
        loop_worker = self.workers.get(LOOP_KEY)
        if loop_worker is not None and not self.final:
            while loop_worker[0].unfinished_tasks and not self.loop_busy.is_set():
                time.sleep(0.005)
        reason = "restart" if self.rng_round % 2 == 0 else "shutdown"
        clean = t.drain(reason, timeout_s=0.05 if not self.final else 5.0)
        if self.final and not clean:
            raise SystemExit("the final run's drain timed out")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(3 if self.errors else 0)


def main(argv: list[str]) -> None:
    db, sent, seed, round_no, start_at, upto, length = argv[:7]
    rest = argv[7:]
    serve = rest[rest.index("--serve") + 1] if "--serve" in rest else None
    anchor = float(rest[rest.index("--anchor") + 1]) if "--anchor" in rest else None
    Child(db, sent, int(seed), int(round_no), start_at, int(upto), int(length), "--final" in rest, serve,
          anchor, "--shared" in rest).run()


if __name__ == "__main__":
    main(sys.argv[1:])
