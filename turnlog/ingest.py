"""Replaying gateway traffic from JSONL: one record a line, each validated whole before it is applied.

    {"op":"message","source":{...},"text":"...","message_id":"...","at":"ISO time","reply":"..."}
    {"op":"command","source":{...},"text":"/new","message_id":"...","at":"ISO time"}

A message with a reply runs a whole turn (route, lease, user message, reply with its delivery
obligation, delivered); without one it is accepted and stays queued. "at" sets the clock for
that record, so a replay reproduces the original times (turn leases still expire by the wall
clock, as every other process judges them).

The reply travels with the accepted message (Inbox.ReplyAttached), so whichever turn answers it,
in this process or in another one replaying at the same time, records it: messages merged into
one turn (a burst on one key) get their replies joined in order. An item that must run and has
no recorded reply (a `/queue` item, say) is answered with the silence marker.

A replay is idempotent: each record is accepted once per routing key by its message_id, through
the engine's durable dedup, so re-running a file, or an overlapping one after a kill, duplicates
nothing. A record without a message_id is identified by where it stands (the file's resolved path,
or `<stdin>`, and its line number) and by its content: "continue" on line 1 and on line 3 are two
messages, a second `/new` is a second reset, and a re-run of the same file is still refused line by
line. (An id-less record of a copy of the file under another path is a new record.) A refused
record counts as a duplicate, never as applied. An ingest
records a gateway boot (default name `ingest`), so the next ingest or `turnlog recover --gateway
ingest` cleans up after a killed one; the next ingest also finishes the killed one's turns.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any, Callable, Iterable, Iterator
from uuid import UUID

import orjson

from .api import Turnlog
from .clock import ManualClock, SystemClock, parse_aware_time
from . import SLASH_COMMANDS, parse_command
from .domain.inbox import InboxItem
from .domain.source import DICT_FIELDS as SOURCE_FIELDS, SessionSource
from .errors import GatewayStillRunning, TurnlogError

OPS = ("message", "command")
RECORD_FIELDS = ("op", "source", "text", "message_id", "at", "reply")
STDIN = "<stdin>"  # the origin of lines that come from no named file
DEFAULT_GATEWAY = "ingest"
# What a turn records when the item it runs has no recorded reply: the agent "chose" silence.
NO_RECORDED_REPLY = "[SILENT]"


class RecordError(ValueError):
    """A line that cannot be applied; nothing of it is."""


@dataclass(frozen=True)
class Record:
    line: int
    op: str
    source: SessionSource
    text: str
    at: datetime | None
    reply: str | None


@dataclass
class IngestReport:
    lines: int = 0
    applied: int = 0
    turns: int = 0
    commands: int = 0
    queued: int = 0
    duplicates: int = 0
    errors: list[tuple[int, str]] = field(default_factory=list)
    # Records whose reply is not in a transcript after the run, and why (line, reason).
    unrecorded: list[tuple[int, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"lines": self.lines, "applied": self.applied, "turns": self.turns, "commands": self.commands,
                "queued": self.queued, "duplicates": self.duplicates, "failed": len(self.errors),
                "errors": [{"line": n, "error": e} for n, e in self.errors],
                "replies_not_recorded": [{"line": n, "reason": r} for n, r in self.unrecorded]}


def parse_record(line_no: int, line: str | bytes, *, origin: str = STDIN) -> Record | None:
    """None for a blank line; RecordError naming the problem for anything else wrong. `origin`
    names the file the line comes from: with the line number it identifies a record without an id."""
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as e:
            raise RecordError(f"invalid UTF-8 at byte {e.start}") from None
    if line_no == 1:
        line = line.removeprefix(BOM)
    if not line.strip():
        return None
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        raise RecordError(f"not JSON ({e})") from None
    if not isinstance(data, dict):
        raise RecordError("a record must be a JSON object")
    # A field given twice has no one meaning (parsers differ on which wins): orjson keeps the
    # last, so a second, slower parse looks for repeats; a line costs a turn, this a few µs.
    json.loads(line, object_pairs_hook=_without_repeats)
    _refuse_unknown(data, RECORD_FIELDS, "")
    op = data.get("op")
    if op not in OPS:
        raise RecordError(f"op must be one of {', '.join(OPS)}, got {_quote(op)}")
    raw_source = data.get("source")
    if not isinstance(raw_source, dict):
        raise RecordError("source must be an object")
    _refuse_unknown(raw_source, SOURCE_FIELDS, "source ")
    _check_source_types(raw_source)
    try:
        source = SessionSource.from_dict(raw_source)
    except KeyError as e:
        raise RecordError(f"bad source: it has no {e.args[0]}") from None
    except (ValueError, TypeError) as e:
        raise RecordError(f"bad source: {e}") from None
    text = data.get("text")
    if not isinstance(text, str):
        raise RecordError("text must be a string")
    at = _parse_at(data.get("at"))
    reply = data.get("reply")
    if reply is not None and not isinstance(reply, str):
        raise RecordError("reply must be a string")
    if op == "command":
        parsed = parse_command(text)
        if parsed is None or parsed[0] not in SLASH_COMMANDS:
            raise RecordError(f"unknown command {_quote(text.strip())} (known: {', '.join(SLASH_COMMANDS)})")
    if "message_id" in data:
        if not isinstance(data["message_id"], (str, int)) or isinstance(data["message_id"], bool) \
                or not str(data["message_id"]).strip():
            raise RecordError("message_id must be a non-empty string")
        try:
            source.message_id = str(data["message_id"])
        except ValueError as e:  # the id rule every source field obeys (control characters, length)
            raise RecordError(str(e)) from None
    elif not source.message_id:
        source.message_id = line_id(origin, line_no, op, raw_source, text, data.get("at"))
    return Record(line_no, op, source, text, at, reply)


# Editors on Windows start a UTF-8 file with one; RFC 8259 lets a reader ignore it.
BOM = "\ufeff"


def _without_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for name, _ in pairs:
        if name in seen:
            raise RecordError(f"field {_quote(name)} is given twice")
        seen.add(name)
    return dict(pairs)


def _refuse_unknown(data: dict[str, Any], known: Iterable[str], where: str) -> None:
    """A misspelt field ("rpely") would otherwise be dropped in silence, and its record applied
    as something else (a message left queued instead of answered)."""
    unknown = sorted(set(data).difference(known))
    if unknown:
        raise RecordError(f"unknown {where}field {_quote(unknown[0])} (known: {', '.join(sorted(known))})")


# The text fields of a source (ids and names); a flag such as auto_thread_created is read as a truth value.
_TEXT_FIELDS = tuple(f.name for f in fields(SessionSource) if "str" in str(f.type))


def _check_source_types(raw: dict[str, Any]) -> None:
    """Ids are strings, or integers as some platforms send them: true, 1.5 or a list would become
    a key such as `dm:True` that no later message of that chat can reach."""
    for name in _TEXT_FIELDS:
        value = raw.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (str, int))):
            raise RecordError(f"bad source: {name} must be a string or an integer, not {_quote(value)}")


def line_id(origin: str, line_no: int, op: str, source: dict[str, Any], text: str, at: Any) -> str:
    """The id of a record that names none. Its place (origin, line) keeps equal lines of one file
    apart; its content keeps an edited file from passing a new line off as a repeat of an old one."""
    body = orjson.dumps([origin, line_no, op, source, text, at], option=orjson.OPT_SORT_KEYS)
    return "ingest:" + hashlib.sha256(body).hexdigest()[:24]


def _parse_at(raw: Any) -> datetime | None:
    if raw is None:
        return None
    try:
        at = parse_aware_time(str(raw))
    except ValueError as e:
        raise RecordError(f"at {e}: {_quote(raw)}") from None
    try:
        # Times near the ends of the calendar overflow in the engine's arithmetic (expiries, windows).
        at - timedelta(days=366), at + timedelta(days=366)
    except OverflowError:
        raise RecordError(f"at is out of range: {_quote(raw)}") from None
    return at


def _quote(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class ReplayClock(ManualClock):
    """The record's own time when it has one, else the wall clock; leases go by the wall clock."""

    def __init__(self) -> None:
        super().__init__(SystemClock().now())

    def lease_now(self) -> datetime:
        return SystemClock().now()


def _replayed(history: Any, item: InboxItem) -> str:
    return item.recorded_reply or NO_RECORDED_REPLY


def _nowhere(*args: Any) -> None:
    """A replay sends nothing: the original traffic was delivered when it happened."""


def ingest(t: Turnlog, clock: ReplayClock, lines: Iterable[str | bytes], *, gateway: str = DEFAULT_GATEWAY,
           origin: str = STDIN, on_line: Callable[[IngestReport], None] | None = None) -> IngestReport:
    """Apply each line as it comes (a stream is read lazily), reporting and skipping bad ones.
    `origin`: the file the lines come from (see parse_record)."""
    report = IngestReport()
    booted = False
    replied: list[Record] = []
    for line_no, line in enumerate(lines, start=1):
        report.lines = line_no
        try:
            record = parse_record(line_no, line, origin=origin)
        except Exception as e:  # noqa: BLE001 - one record's failure, whatever it is, never ends the run
            report.errors.append((line_no, _reason(e)))
            record = None
        if record is not None:
            if not booted:
                # At the first record to apply, not before: a run that applies nothing records
                # nothing (a failed run on a new database leaves an empty log, which is removed).
                _boot(t, gateway)
                booted = True
            try:
                if _apply(t, clock, record, report):
                    report.applied += 1
                else:
                    report.duplicates += 1
                if record.op == "message" and record.reply is not None:
                    replied.append(record)
            except Exception as e:  # noqa: BLE001 - as above
                report.errors.append((line_no, _reason(e)))
        if on_line is not None:
            on_line(report)
    clock.set(SystemClock().now())
    if booted:
        t.stop_gateway()
    report.unrecorded = unrecorded_replies(t, replied)
    return report


def _reason(e: Exception) -> str:
    return str(e) if isinstance(e, RecordError) else _describe(e)


def _boot(t: Turnlog, gateway: str) -> None:
    try:
        t.start_gateway(gateway)  # recovers a killed earlier ingest of this name
    except GatewayStillRunning as e:
        raise GatewayStillRunning(f"{e} (a concurrent ingest needs a --gateway name of its own)") from None
    _settle_earlier_runs(t, gateway)
    t.resume_interrupted(_replayed, _nowhere)  # a killed ingest's turns, with their recorded replies


def _settle_earlier_runs(t: Turnlog, gateway: str) -> None:
    """Settle the replies earlier runs of this ingest still owed. Not the whole ledger's sweep: a
    reply another gateway owes must reach its user, not this replay's no-op send."""
    boots = [b.boot_id for b in t.boots(gateway) if b.boot_id != t.owner]
    if not boots:
        return
    for row in t.status(gateway).pending_deliveries:
        if row.owner not in boots:
            continue
        try:
            t.turns.deliver(UUID(row.delivery_id), _nowhere)
        except TurnlogError:
            continue  # settled meanwhile, or out of attempts: the ledger says which


def _describe(e: Exception) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}"[:200] if text else type(e).__name__


def _apply(t: Turnlog, clock: ReplayClock, record: Record, report: IngestReport) -> bool:
    """False when the engine refused the record as a repeat (it is counted as a duplicate)."""
    clock.set(record.at or SystemClock().now())
    if record.op == "command":
        if t.command(record.source, record.text).duplicate:
            return False
        report.commands += 1
        return True
    accepted = t.accept(record.source, record.text, reply=record.reply)
    if accepted.duplicate is not None:
        if record.reply is None or not _still_waiting(t, record):
            return False
    elif record.reply is None:
        report.queued += 1
        return True
    # Run the key's queue up to this message's item (a killed run may have left it, or others, waiting).
    while t.run_next(record.source, _replayed, _nowhere) is not None:
        report.turns += 1
    return accepted.duplicate is None


def _still_waiting(t: Turnlog, record: Record) -> bool:
    """Whether a repeated message's first sighting is still waiting to run (a killed run left it)."""
    return any(row.state == "pending" and record.source.message_id in row.message_ids
               for row in t.queue(record.source))


def unrecorded_replies(t: Turnlog, records: list[Record]) -> list[tuple[int, str]]:
    """The records whose message did not end in an answered item, with what became of it."""
    if not records:
        return []
    by_route: dict[str, list[Record]] = {}
    for record in records:
        by_route.setdefault(t.route_id(record.source), []).append(record)
    out = []
    for mine in by_route.values():
        fates = {fate.message_id: fate for fate in t.message_fates(mine[0].source)}
        for record in mine:
            fate = fates.get(record.source.message_id or "")
            if fate is None:
                out.append((record.line, "its message was refused as a repeat of another text: no turn ran it"))
            elif (fate.state, fate.outcome) != ("completed", "answered"):
                state = fate.state if fate.outcome is None else f"{fate.state} ({fate.outcome})"
                out.append((record.line, f"its item {fate.item_id} is {state}"))
    return sorted(out)


def read_lines(stream: Iterable[Any]) -> Iterator[Any]:
    """Lines without their ending, one at a time as the stream yields them (a pipe is not read ahead)."""
    for line in stream:
        yield line.rstrip(b"\r\n" if isinstance(line, bytes) else "\r\n")


