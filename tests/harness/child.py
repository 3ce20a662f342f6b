"""The gateway loop of one child process of the kill -9 harness.

    start_gateway -> sweep_deliveries -> resume_interrupted -> pending_inbound() -> the script

Each routing key has its own worker thread (a gateway serves chats concurrently), so the looping
key's hung turn only blocks that key. The script is continued from the log: a scripted step is
sent again until the log has accepted its message. When every other key is idle the child drains
(timing out if the looping key's turn is running) and exits; the parent may SIGKILL it at any
moment before that. With --final nothing hangs and nothing new is sent: the run finishes the
work left behind and stops cleanly, so that the checker sees the settled state.

Run as: python -m harness.child DB SENT_FILE SEED ROUND START_AT UPTO LENGTH [--final]
"""

from __future__ import annotations

import os
import queue
import random
import sys
import threading
import time
from typing import Any, Sequence

from turnlog import EngineConfig, ManualClock, Turnlog

from .adapter import FakeAdapter
from .log import events
from .script import HUMAN, LOOP_KEY, QUEUE, WAKEUP, Step, key_of, make_script, source_of

GATEWAY = "harness"
SILENT = "[SILENT]"
STEP_CLOCK_S = 0.1  # virtual time the dispatcher lets pass per scripted message


def reply_text(history: Sequence[Any], item: Any) -> str:
    """Unique per turn: the inbound ids, the turn and whether it is a resumed one."""
    last = history[-1]
    ids = ",".join(m for m in item.message_ids if m) or item.item_id
    return f"re[{ids}|{last.turn_id[:12]}|{'resume' if last.role == 'system' else 'turn'}]"


class Child:
    def __init__(self, db: str, sent: str, seed: int, round_no: int, start_at: str, upto: int, length: int,
                 final: bool) -> None:
        self.final = final
        self.clock = ManualClock(start_at)
        self.t = Turnlog(db, clock=self.clock, config=EngineConfig(freshness_window_s=3600))
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
        holder = self.t.lease_holder(history[-1].session_id) or {}
        if holder.get("owner_key") == self.loop_key and not self.final:
            self.loop_busy.set()
            while True:  # the looping agent: never returns, only a kill ends it
                time.sleep(3600)
        time.sleep(max((s.think_ms for s in steps), default=5) / 1000)
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
        t.start_gateway(GATEWAY)
        t.sweep_deliveries(self.adapter.sweep_send)
        t.resume_interrupted(self.responder, self.adapter.sender(via="resume"))
        for source in t.pending_inbound():
            self.worker(key_of(source.platform, source.chat_id)).put(("pending", source))
        if not self.final:
            accepted = {e.message_id for e in events(t, "InboundAccepted", "InboundRejected")}
            for step in self.script[:self.upto]:
                if step.message_id not in accepted:
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
    Child(db, sent, int(seed), int(round_no), start_at, int(upto), int(length), "--final" in argv[7:]).run()


if __name__ == "__main__":
    main(sys.argv[1:])
