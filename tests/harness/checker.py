"""The invariants of crash recovery, judged from the event log and the adapter's send file only.

1. None lost: every accepted inbound message was answered (its reply delivered, or nothing owed:
   silence on a wake-up), or is still queued, or its session is resume_pending (or was reset by the
   freshness rule, or suspended by the stuck-loop rule).
2. Duplicates are explained: a reply is sent more than once only when its earlier attempt was
   recorded and its delivery was not; every send after the first carries the recovered prefix;
   a send without a recorded attempt, or after the delivery was recorded, is a violation.
3. Every interrupted turn (a lease revoked by recovery, or taken over after its holder died, no
   reply persisted) is resumed at most once; a resume needs an interruption to resume; at the end it has been resumed, answered by a
   later turn, or its session is still resume_pending (stale, or never given a clean boot), or
   suspended. A clean boot leaves no fresh, resumable session unresumed.
4. No turn is both re-delivered and answered again: at most one reply is recorded per inbound item.
5. Stuck loops: the third interrupted turn in a row with no reply (no completed turn between)
   suspends the session (stuck_loop), never earlier; nothing runs on a suspended session.
6. The final boot stopped cleanly; no lease is held and no reply is still owed after it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from turnlog import Turnlog

from .adapter import read_sent
from .child import LEASE_TTL_S
from .log import Logged, iter_events

PREFIX = "♻️ Recovered reply"
RESTART_RECOVERY = "restart_recovery"
STUCK_LOOP_LIMIT = 3
AUTO_RESUME_REASONS = {"restart_timeout", "shutdown_timeout", "restart_interrupted"}
BOOT_STORM = (3, timedelta(seconds=60))


def strip_prefix(text: str) -> tuple[bool, str]:
    if text.startswith(PREFIX):
        _, _, rest = text.partition("\n\n")
        return True, rest
    return False, text


@dataclass
class Turn:
    session_id: str
    epoch: int
    turn_id: str
    acquired_at: int  # log position
    acquired_time: Any = None
    ended_time: Any = None
    messages: list[Any] = field(default_factory=list)
    end: tuple[str, str] | None = None  # ("released", outcome) | ("revoked", reason)

    @property
    def resume(self) -> bool:
        return bool(self.messages) and self.messages[0].role == "system" and \
            (self.messages[0].cause or "").startswith("resume:")

    @property
    def replied(self) -> bool:
        return any(m.role == "assistant" for m in self.messages)


@dataclass
class Report:
    violations: list[str] = field(default_factory=list)
    stats: Counter = field(default_factory=Counter)

    def violation(self, text: str) -> None:
        self.violations.append(text)


class Checker:
    def __init__(self, freshness_window_s: float = 3600.0) -> None:
        self.window = timedelta(seconds=freshness_window_s)
        self.log: list[Logged] = []
        self.session_of_stream: dict[Any, str] = {}
        self.lease_session: dict[Any, str] = {}
        self.sessions: dict[str, dict[str, Any]] = {}
        self.turns: dict[tuple[str, int], Turn] = {}
        self.deliveries: dict[Any, dict[str, Any]] = {}
        self.message_words: dict[tuple[str, int], str] = {}  # (session_id, seq) -> the message's words
        self.items: dict[tuple[Any, str], dict[str, Any]] = {}
        self.message_item: dict[str, tuple[Any, str]] = {}
        self.boots: list[dict[str, Any]] = []
        self.gateways: set[Any] = set()

    # -- reading ------------------------------------------------------------------------

    def read(self, t: Turnlog) -> "Checker":
        for e in iter_events(t):
            self.log.append(e)
            self._index(e)
        return self

    def _index(self, e: Logged) -> None:
        name, ev, oid = e.name, e.event, e.event.originator_id
        if name == "SessionCreated":
            self.session_of_stream[oid] = ev.session_id
            self.sessions[ev.session_id] = {"key": ev.session_key, "suspended": None, "resume_pending": None,
                                            "marked_at": None, "ended": None, "created": e.position}
        elif name in ("SessionSuspended", "ResumePendingMarked", "ResumePendingCleared", "SessionEnded",
                      "SessionReopened"):
            s = self.sessions[self.session_of_stream[oid]]
            if name == "SessionSuspended":
                s["suspended"] = ev.reason
            elif name == "ResumePendingMarked":
                s["resume_pending"], s["marked_at"] = ev.reason, ev.timestamp
            elif name == "ResumePendingCleared":
                s["resume_pending"], s["marked_at"] = None, None
            elif name == "SessionEnded":
                s["ended"] = ev.reason
            else:
                s.update(suspended=None, resume_pending=None, marked_at=None, ended=None)
        elif name == "LeaseOpened":
            self.lease_session[oid] = ev.session_id
        elif name == "LeaseAcquired":
            sid = self.lease_session[oid]
            previous = self.turns.get((sid, ev.epoch - 1))
            if ev.taken_over_from and previous is not None and previous.end is None:
                previous.end = ("taken_over", ev.owner)  # its holder died (or stalled) and the TTL passed
            self.turns[(sid, ev.epoch)] = Turn(sid, ev.epoch, ev.turn_id, e.position, ev.timestamp)
        elif name in ("LeaseReleased", "LeaseRevoked"):
            turn = self.turns.get((self.lease_session[oid], ev.epoch))
            if turn is not None and turn.end is None:
                turn.end = ("released", ev.outcome) if name == "LeaseReleased" else ("revoked", ev.reason)
                turn.ended_time = ev.timestamp
        elif name == "MessageAppended":
            turn = self.turns.get((ev.session_id, ev.epoch))
            if turn is not None:
                turn.messages.append(ev)
            self.message_words[(ev.session_id, ev.originator_version)] = ev.content
        elif name == "DeliveryRecorded":
            # A turn's reply refers to its transcript message (content None), written just before it.
            content = ev.content if ev.content is not None else self.message_words[(ev.session_id, ev.seq)]
            self.deliveries[oid] = {"content": content, "session_id": ev.session_id, "seq": ev.seq,
                                    "inbound": ev.inbound_message_id, "history": [], "state": "pending",
                                    "at": ev.timestamp}
            if ev.attempting_owner is not None:  # recorded with its first attempt (version 4)
                self.deliveries[oid]["history"].append(("DeliveryAttempting", False))
                self.deliveries[oid]["state"] = "attempting"
        elif name.startswith("Delivery"):
            d = self.deliveries[oid]
            d["history"].append((name, getattr(ev, "recovered", None)))
            d["state"] = {"DeliveryAttempting": "attempting", "DeliveryDelivered": "delivered",
                          "DeliveryFailed": "failed", "DeliveryMarkedUnsure": "unknown",
                          "DeliveryOutcomeUnknown": "unknown", "DeliveryDeadLettered": "dead",
                          "DeliveryRetried": "failed", "DeliveryAbandoned": "abandoned"}[name]
        elif name == "InboundAccepted":
            ref = (oid, ev.merged_into or ev.item_id)
            item = self.items.setdefault(ref, {"kind": ev.kind, "message_ids": [], "state": "pending",
                                               "outcome": None, "session_id": None, "turn_id": None,
                                               "started_at": None})
            item["message_ids"].append(ev.message_id)
            if ev.message_id:
                self.message_item[ev.message_id] = ref
            if ev.turn_id is not None:  # accepted with its turn started (version 2)
                item.update(state="started", session_id=ev.session_id, turn_id=ev.turn_id, started_at=e.position)
        elif name == "InboundStarted":
            self.items[(oid, ev.item_id)].update(state="started", session_id=ev.session_id, turn_id=ev.turn_id,
                                                 started_at=e.position)
        elif name == "InboundCompleted":
            self.items[(oid, ev.item_id)].update(state="completed", outcome=ev.outcome)
        elif name == "InboundDropped":
            for item_id in ev.item_ids:
                self.items[(oid, item_id)].update(state="dropped", outcome=ev.reason)
        elif name == "GatewayStarted":
            self.gateways.add(oid)
            self.boots.append({"boot_id": ev.boot_id, "at": ev.timestamp, "stopped": None, "recovered": False})
        elif name == "GatewayStopped":
            for b in self.boots:
                if b["boot_id"] == ev.boot_id:
                    b["stopped"] = "clean" if ev.clean else ("drain_timed_out" if ev.drain_timed_out else "unclean")
        elif name == "GatewayRecovered":
            for b in self.boots:
                if b["boot_id"] == ev.boot_id:
                    b["recovered"] = True

    # -- checking -----------------------------------------------------------------------

    def check(self, sent_path: str, *, final_clean: bool = True) -> Report:
        report = Report()
        sent, torn = read_sent(sent_path)
        for line in torn:
            report.violation(f"torn or foreign line in the send file: {line[:80]!r}")
        self._check_sends(sent, report)
        self._check_inbound(report)
        self._check_resumes(report)
        self._check_stuck_loops(report)
        if final_clean:
            self._check_final(report)
        self._stats(sent, report)
        return report

    def _check_sends(self, sent: list[dict[str, Any]], report: Report) -> None:
        by_content: dict[str, list[Any]] = defaultdict(list)
        for ident, d in self.deliveries.items():
            by_content[d["content"]].append(ident)
        sends: dict[str, list[bool]] = defaultdict(list)
        for line in sent:
            prefixed, text = strip_prefix(line["text"])
            sends[text].append(prefixed)
        for text, marks in sends.items():
            owners = by_content.get(text, [])
            if len(owners) != 1:
                report.violation(f"sent {text[:60]!r} but the ledger has {len(owners)} rows with that reply")
                continue
            d = self.deliveries[owners[0]]
            attempts = [r for name, r in d["history"] if name == "DeliveryAttempting"]
            if len(marks) > len(attempts):
                report.violation(f"{text[:60]!r} sent {len(marks)} times with {len(attempts)} recorded attempts")
            if marks.count(False) > 1 or (False in marks and marks.index(False) != 0):
                report.violation(f"{text[:60]!r} re-sent without the recovered prefix: {marks}")
            if marks.count(True) > sum(1 for r in attempts if r):
                report.violation(f"{text[:60]!r} sent with the prefix more often than recovered attempts")
            names = [name for name, _ in d["history"]]
            if "DeliveryDelivered" in names and "DeliveryAttempting" in names[names.index("DeliveryDelivered"):]:
                report.violation(f"{text[:60]!r} attempted again after it was recorded delivered")
            if len(marks) > 1:
                report.stats["replies_sent_twice"] += 1
        for d in self.deliveries.values():
            if d["state"] == "delivered" and not sends.get(d["content"]):
                report.violation(f"{d['content'][:60]!r} recorded delivered but never sent")

    def _check_inbound(self, report: Report) -> None:
        per_inbound = Counter(d["inbound"] for d in self.deliveries.values() if d["inbound"])
        for inbound, n in per_inbound.items():
            if n > 1:
                report.violation(f"inbound {inbound} answered {n} times (re-delivered and answered again?)")
        for (inbox, item_id), item in self.items.items():
            what = f"item {item_id} ({item['kind']}, {item['message_ids']})"
            state, outcome = item["state"], item["outcome"]
            session = self.sessions.get(item["session_id"] or "", {})
            if state == "pending":
                report.stats["left_queued"] += 1
            elif state == "started":
                if session.get("suspended"):
                    report.violation(f"{what} left in flight on a suspended session (never closed)")
                elif session.get("ended") == "resume_pending_expired":
                    report.stats["left_expired"] += 1
                elif session.get("resume_pending"):
                    report.stats["left_resume_pending"] += 1
                else:
                    report.violation(f"{what} started and never finished, session neither resume_pending "
                                     f"nor suspended: lost")
            elif state == "dropped":
                report.violation(f"{what} dropped ({outcome}): lost")
            elif outcome == "answered":
                owed = [d for d in self.deliveries.values() if d["inbound"] and d["inbound"] == item["message_ids"][-1]]
                if owed:
                    if owed[0]["state"] in ("abandoned", "dead"):
                        report.stats["abandoned_replies"] += 1
                elif item["kind"] != "wakeup":
                    report.violation(f"{what} completed as answered but no reply is in the ledger")
            elif outcome == "stuck_loop":
                if session.get("suspended") != "stuck_loop":
                    report.violation(f"{what} closed as stuck_loop but its session is not suspended")
            elif outcome != "answered_by_later_turn":
                report.violation(f"{what} completed as {outcome!r}: lost")

    def _session_events(self) -> dict[str, list[Logged]]:
        out: dict[str, list[Logged]] = defaultdict(list)
        for e in self.log:
            oid = e.event.originator_id
            sid = self.lease_session.get(oid) or self.session_of_stream.get(oid)
            if sid is not None:
                out[sid].append(e)
        return out

    def _check_resumes(self, report: Report) -> None:
        final_boot = self.boots[-1] if self.boots else None
        for sid, evs in self._session_events().items():
            owed = False  # an interruption not yet resumed or answered
            for e in evs:
                name, ev = e.name, e.event
                if name == "LeaseRevoked" and ev.reason == RESTART_RECOVERY:
                    turn = self.turns.get((sid, ev.epoch))
                    if turn is not None and not turn.replied:
                        owed = True
                        report.stats["interrupted_turns"] += 1
                    else:
                        report.stats["interrupted_with_reply"] += 1
                elif name == "LeaseAcquired":
                    turn = self.turns[(sid, ev.epoch)]
                    cut_off = self.turns.get((sid, ev.epoch - 1))
                    if ev.taken_over_from and cut_off is not None and not cut_off.replied:
                        # Its holder died and another gateway took the lease over after the TTL: an
                        # interruption too, though no recovery revoked it (a gateway of another name).
                        owed = True
                        report.stats["taken_over_turns"] += 1
                    if turn.resume:
                        report.stats["resumed_turns"] += 1
                        if not owed:
                            report.violation(f"session {sid}: turn {ev.epoch} resumed with no interruption to resume"
                                             " (resumed twice, or after it was answered)")
                        owed = False
                elif name == "LeaseReleased" and ev.outcome == "completed":
                    owed = False
                elif name in ("SessionSuspended", "ResumePendingCleared", "SessionEnded"):
                    owed = False
            s = self.sessions[sid]
            if owed and not (s["resume_pending"] or s["suspended"] or s["ended"]):
                report.violation(f"session {sid}: an interrupted turn was neither resumed nor left resume_pending")
            if final_boot is not None and final_boot["stopped"] == "clean" and s["resume_pending"] in \
                    AUTO_RESUME_REASONS and not s["suspended"] and not s["ended"] and \
                    final_boot["at"] - s["marked_at"] <= self.window and not self._storm(final_boot):
                report.violation(f"session {sid}: fresh {s['resume_pending']} left unresumed by the clean final boot")

    def _storm(self, boot: dict[str, Any]) -> bool:
        n, window = BOOT_STORM
        return sum(1 for b in self.boots if boot["at"] - window <= b["at"] <= boot["at"]) >= n

    def _check_stuck_loops(self, report: Report) -> None:
        for sid, evs in self._session_events().items():
            in_a_row, expect_suspension, suspended = 0, False, False
            for e in evs:
                name, ev = e.name, e.event
                if name == "LeaseRevoked" and ev.reason == RESTART_RECOVERY:
                    in_a_row += 1
                    turn = self.turns.get((sid, ev.epoch))
                    if in_a_row >= STUCK_LOOP_LIMIT and turn is not None and not turn.replied and not suspended:
                        expect_suspension = True
                elif name == "LeaseReleased" and ev.outcome == "completed":
                    in_a_row = 0
                elif name == "SessionSuspended":
                    if ev.reason == "stuck_loop":
                        if not expect_suspension:
                            report.violation(f"session {sid}: suspended as stuck_loop after {in_a_row} interrupted"
                                             " turns")
                        report.stats["stuck_loop_suspensions"] += 1
                    suspended, expect_suspension = True, False
                elif name == "LeaseAcquired":
                    if expect_suspension:
                        report.violation(f"session {sid}: {in_a_row} interrupted turns in a row, not suspended,"
                                         " and run again")
                        expect_suspension = False
                    if suspended:
                        report.violation(f"session {sid}: a turn ran on it after it was suspended")
            if expect_suspension:
                report.violation(f"session {sid}: {in_a_row} interrupted turns in a row and never suspended")

    def _check_final(self, report: Report) -> None:
        if not self.boots or self.boots[-1]["stopped"] != "clean":
            report.violation(f"the final boot did not stop cleanly: {self.boots[-1] if self.boots else None}")
        for (sid, epoch), turn in self.turns.items():
            if turn.end is None:
                report.violation(f"session {sid}: lease epoch {epoch} still held after the final clean stop")
        for d in self.deliveries.values():
            if d["state"] not in ("delivered", "abandoned", "dead"):  # dead: an operator's to retry or abandon
                report.violation(f"{d['content'][:60]!r} still owed ({d['state']}) after the final run")

    def _stats(self, sent: list[dict[str, Any]], report: Report) -> None:
        s = report.stats
        s["boots"] = len(self.boots)
        s["unclean_boots"] = sum(1 for b in self.boots if b["stopped"] != "clean")
        s["drain_timeouts"] = sum(1 for b in self.boots if b["stopped"] == "drain_timed_out")
        s["boot_storms"] = sum(1 for b in self.boots if self._storm(b))
        s["accepted"] = sum(len(i["message_ids"]) for i in self.items.values())
        s["sent"] = len(sent)
        s["sent_recovered"] = sum(1 for line in sent if line["text"].startswith(PREFIX))
        s["turns"] = len(self.turns)
        s["gateways"] = len(self.gateways)
        # completed turns that outlived the lease TTL (child.py's slow agents): only the keeper kept them
        s["turns_longer_than_ttl"] = sum(
            1 for t in self.turns.values() if t.end == ("released", "completed") and t.ended_time is not None
            and (t.ended_time - t.acquired_time).total_seconds() > LEASE_TTL_S)


def check(db: str, sent_path: str, *, final_clean: bool = True, freshness_window_s: float = 3600.0) -> Report:
    with Turnlog(db) as t:
        return Checker(freshness_window_s).read(t).check(sent_path, final_clean=final_clean)
