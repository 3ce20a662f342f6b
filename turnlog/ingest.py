"""Replaying gateway traffic from JSONL: one record a line, each validated whole before it is applied.

    {"op":"message","source":{...},"text":"...","message_id":"...","at":"ISO time","reply":"..."}
    {"op":"command","source":{...},"text":"/new"}

A message with a reply runs a whole turn (route, lease, user message, reply with its delivery
obligation, delivered); without one it is accepted and stays queued. "at" sets the clock for
that record, so a replay reproduces the original times.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Iterable, Iterator

import orjson

from .api import Turnlog
from .clock import ManualClock, SystemClock
from .commands.slash import COMMANDS, parse_command
from .domain.source import SessionSource
from .errors import TurnlogError

OPS = ("message", "command")


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
    errors: list[tuple[int, str]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"lines": self.lines, "applied": self.applied, "turns": self.turns, "commands": self.commands,
                "queued": self.queued, "failed": len(self.errors or []),
                "errors": [{"line": n, "error": e} for n, e in self.errors or []]}


def parse_record(line_no: int, line: str) -> Record | None:
    """None for a blank line; RecordError naming the problem for anything else wrong."""
    if not line.strip():
        return None
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        raise RecordError(f"not JSON ({e})") from None
    if not isinstance(data, dict):
        raise RecordError("a record must be a JSON object")
    op = data.get("op")
    if op not in OPS:
        raise RecordError(f"op must be one of {', '.join(OPS)}, got {op!r}")
    raw_source = data.get("source")
    if not isinstance(raw_source, dict):
        raise RecordError("source must be an object")
    try:
        source = SessionSource.from_dict(raw_source)
    except (ValueError, TypeError, KeyError) as e:
        raise RecordError(f"bad source: {e}") from None
    if "message_id" in data:
        if not isinstance(data["message_id"], (str, int)):
            raise RecordError("message_id must be a string")
        source.message_id = str(data["message_id"])
    text = data.get("text")
    if not isinstance(text, str):
        raise RecordError("text must be a string")
    at = None
    if data.get("at") is not None:
        try:
            at = datetime.fromisoformat(str(data["at"]).replace("Z", "+00:00"))
        except ValueError:
            raise RecordError(f"at is not an ISO time: {data['at']!r}") from None
        if at.tzinfo is None:
            raise RecordError(f"at has no time zone: {data['at']!r}")
    reply = data.get("reply")
    if reply is not None and not isinstance(reply, str):
        raise RecordError("reply must be a string")
    if op == "command":
        parsed = parse_command(text)
        if parsed is None or parsed[0] not in COMMANDS:
            raise RecordError(f"unknown command {text.strip()[:40]!r} (known: {', '.join(COMMANDS)})")
    return Record(line_no, op, source, text, at, reply)


class ReplayClock(ManualClock):
    """The record's own time when it has one, else the wall clock."""

    def __init__(self) -> None:
        super().__init__(SystemClock().now())


def ingest(t: Turnlog, clock: ReplayClock, lines: Iterable[str], *,
           on_line: Callable[[int], None] | None = None) -> IngestReport:
    report = IngestReport(errors=[])
    assert report.errors is not None
    for line_no, line in enumerate(lines, start=1):
        report.lines = line_no
        try:
            record = parse_record(line_no, line)
            if record is not None:
                _apply(t, clock, record, report)
                report.applied += 1
        except (RecordError, TurnlogError) as e:
            report.errors.append((line_no, str(e)))
        if on_line is not None:
            on_line(line_no)
    return report


def _apply(t: Turnlog, clock: ReplayClock, record: Record, report: IngestReport) -> None:
    clock.set(record.at or SystemClock().now())
    if record.op == "command":
        t.command(record.source, record.text)
        report.commands += 1
        return
    if record.reply is None:
        t.accept(record.source, record.text)
        report.queued += 1
        return
    reply = record.reply
    outcomes = t.handle_message(record.source, record.text, lambda history, item: reply, lambda text: None)
    report.turns += len(outcomes)


def read_lines(stream: Iterable[str]) -> Iterator[str]:
    for line in stream:
        yield line.rstrip("\n")
