"""Exporting the log as a Hermes 0.19.0 home: state.db (schema 22) + sessions/sessions.json + the
routing index, so a user can go back.

Imported sessions are written back from their import record (the Hermes row, its usage and each
message's own fields) updated by what happened since in turnlog (new messages, an end, flags);
sessions born in turnlog get rows built from their events. The files are written under temporary
names and renamed at the end: an export that fails leaves no half-written home.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..domain.imported import HermesHomeImported, HermesSessionImported, hermes_record_id
from ..errors import InvalidRequest
from ..export import _epoch
from .formats import LID_DIRS
from .schema import SCHEMA_SQL, SCHEMA_VERSION

if TYPE_CHECKING:
    from ..api import Turnlog

SESSIONS_README = (
    "LEGACY MIRROR of the gateway routing index (the primary copy lives in the gateway_routing table in "
    "state.db). Written by turnlog export-hermes."
)
_ROUTE_FLAGS = ("suspended", "resume_pending", "resume_reason", "last_resume_marked_at", "session_id",
                "session_key", "origin")


@dataclass
class ExportReport:
    home: str
    sessions: int = 0
    messages: int = 0
    routes: int = 0
    ledger_rows: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def export_home(t: "Turnlog", out_home: str) -> ExportReport:
    home = Path(out_home).expanduser()
    if (home / "state.db").exists():
        raise InvalidRequest(f"{home}: already holds a state.db (export-hermes writes a new home)")
    if home.exists() and not home.is_dir():
        raise InvalidRequest(f"{home}: not a directory")
    report = ExportReport(home=str(home.resolve()))
    sessions = [s.to_dict() for s in t.sessions()]
    records = _records(t, sessions)
    homes = _home_records(t)
    routing = _routing(t, records, report)
    (home / "sessions").mkdir(parents=True, exist_ok=True)
    scope = str((home / "sessions").resolve())
    fd, tmp_db = tempfile.mkstemp(prefix=".state.db.", dir=home)
    os.close(fd)
    try:
        db = sqlite3.connect(tmp_db, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=DELETE")
            db.executescript(SCHEMA_SQL)
            db.execute("BEGIN")
            db.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
            _write_sessions(t, db, sessions, records, report)
            now = t._clock.now().timestamp()
            for key, entry in routing.items():
                db.execute("INSERT INTO gateway_routing (scope, session_key, entry_json, updated_at) VALUES (?,?,?,?)",
                           (scope, key, json.dumps(entry), now))
            for record in homes:
                for row in record.ledger:
                    _insert(db, "delivery_obligations", row, ignore=True)
                    report.ledger_rows += 1
            db.execute("COMMIT")
        finally:
            db.close()
        _write_files(home, routing, homes)
        os.chmod(tmp_db, 0o644)
        os.replace(tmp_db, home / "state.db")
    except BaseException:
        if os.path.exists(tmp_db):
            os.unlink(tmp_db)
        raise
    report.routes = len(routing)
    return report


def _records(t: "Turnlog", sessions: list[dict[str, Any]]) -> dict[str, HermesSessionImported]:
    found: dict[str, HermesSessionImported] = {}
    for s in sessions:
        for event in t._app.events.get(hermes_record_id(s["session_id"]), limit=1):
            found[s["session_id"]] = cast(HermesSessionImported, event)
    return found


def _home_records(t: "Turnlog") -> list[HermesHomeImported]:
    return [cast(HermesHomeImported, t._app.mapper.to_domain_event(n)) for n in _notifications(t, HermesHomeImported.TOPIC)]


def _notifications(t: "Turnlog", topic: str) -> list[Any]:
    found: list[Any] = []
    start = 1
    while True:
        batch = t._app.recorder.select_notifications(start, 1000, topics=[topic])
        if not batch:
            return found
        found += batch
        start = batch[-1].id + 1


def _routing(t: "Turnlog", records: dict[str, HermesSessionImported], report: ExportReport) -> dict[str, dict[str, Any]]:
    """The routing index by Hermes key: turnlog's entries, with an imported entry's extras kept."""
    out: dict[str, dict[str, Any]] = {}
    for key, entry in t.export_routing().items():
        if key.startswith("_"):
            continue
        hermes_key = _hermes_key(key, entry.get("origin"))
        if hermes_key in out:
            report.skipped.append({"what": f"routing key {key}",
                                   "reason": f"same Hermes key as another route ({hermes_key}): Hermes keys have"
                                             " no Slack workspace"})
            continue
        record = records.get(entry["session_id"])
        imported = record.routing_entry if record is not None else None
        if imported is not None:
            merged = dict(imported)
            merged.update({name: entry[name] for name in _ROUTE_FLAGS if name in entry})
            if entry["resume_pending"] == imported.get("resume_pending"):
                # unchanged since the import: Hermes' own reason and (local, naive) time stay
                for name in ("resume_reason", "last_resume_marked_at"):
                    merged[name] = imported.get(name)
            entry = merged
        entry["session_key"] = hermes_key
        out[hermes_key] = entry
    return dict(sorted(out.items()))


def _hermes_key(key: str, origin: dict[str, Any] | None) -> str:
    """Hermes 0.19.0 keys carry no Slack workspace: turnlog's puts it right after the chat-type
    slot (keys.py), so the Hermes key is the same key without that part."""
    scope = (origin or {}).get("scope_id")
    head, sep, tail = key.partition(":slack:")
    if not scope or not sep:
        return key
    slot, _, rest = tail.partition(":")
    if rest == scope:
        return f"{head}{sep}{slot}"
    if rest.startswith(f"{scope}:"):
        return f"{head}{sep}{slot}:{rest[len(scope) + 1:]}"
    return key


def _write_sessions(t: "Turnlog", db: sqlite3.Connection, sessions: list[dict[str, Any]],
                    records: dict[str, HermesSessionImported], report: ExportReport) -> None:
    taken = {i for r in records.values() for i in (*r.message_ids, *(row["id"] for row in r.inactive_rows))}
    next_id = max(taken, default=0) + 1
    used: set[int] = set()
    for s in sessions:
        session_id = s["session_id"]
        record = records.get(session_id)
        row = dict(record.row) if record is not None else _native_row(s)
        if s["end_reason"] and not (record is not None and row.get("end_reason")):
            row["end_reason"] = s["end_reason"]
            row["ended_at"] = _epoch(s["ended_at"])
        ids = record.message_ids if record is not None else []
        times = record.message_times if record is not None else []
        fields = record.message_fields if record is not None else {}
        messages = t.turns.transcript(session_id)
        added_tools = 0
        for seq, m in enumerate(messages, start=1):
            extra = dict(fields.get(str(seq), {}))
            if seq <= len(ids):
                extra["timestamp"] = times[seq - 1]
            wanted = ids[seq - 1] if seq <= len(ids) else None
            if wanted is not None and wanted not in used:
                message_id = wanted
            else:
                message_id, next_id = next_id, next_id + 1
            used.add(message_id)
            if seq > len(ids):
                added_tools += len(m.tool_calls or [])
            _insert(db, "messages", _message_row(m, extra, message_id, session_id))
            report.messages += 1
        for inactive in record.inactive_rows if record is not None else []:
            if inactive["id"] in used:
                inactive = {**inactive, "id": next_id}
                next_id += 1
            used.add(inactive["id"])
            _insert(db, "messages", {**inactive, "session_id": session_id})
            report.messages += 1
        if record is None:
            row["message_count"] = len(messages)
            row["tool_call_count"] = added_tools
        elif len(messages) > len(ids):
            row["message_count"] = row.get("message_count", 0) + len(messages) - len(ids)
            row["tool_call_count"] = row.get("tool_call_count", 0) + added_tools
        _insert(db, "sessions", row)
        for usage in record.usage if record is not None else []:
            _insert(db, "session_model_usage", usage)
        report.sessions += 1


def _native_row(s: dict[str, Any]) -> dict[str, Any]:
    origin = s.get("origin") or {}
    return {
        "id": s["session_id"], "source": s["platform"] or "unknown", "user_id": origin.get("user_id"),
        "session_key": s["session_key"] or None, "chat_id": origin.get("chat_id"), "chat_type": s["chat_type"],
        "thread_id": origin.get("thread_id"), "display_name": s["display_name"],
        "origin_json": json.dumps(origin) if origin else None, "parent_session_id": s["parent_session_id"],
        "started_at": _epoch(s["created_at"]), "ended_at": _epoch(s["ended_at"]), "end_reason": s["end_reason"],
    }


def _message_row(m: Any, extra: dict[str, Any], message_id: int, session_id: str) -> dict[str, Any]:
    tool_calls = extra.get("tool_calls_text")
    if tool_calls is None and m.tool_calls is not None:
        tool_calls = json.dumps(m.tool_calls)
    row = {
        "id": message_id, "session_id": session_id, "role": m.role,
        "content": None if extra.get("content_null") else m.content, "tool_call_id": m.tool_call_id,
        "tool_calls": tool_calls, "tool_name": m.name,
        "timestamp": extra.get("timestamp", m.timestamp.timestamp()), "token_count": m.token_count,
        "finish_reason": m.finish_reason, "platform_message_id": m.platform_message_id,
        "observed": extra.get("observed", 0), "active": extra.get("active", 1), "compacted": extra.get("compacted", 0),
    }
    row.update((k, v) for k, v in extra.items()
               if k not in ("timestamp", "content_null", "tool_calls_text", "observed", "active", "compacted"))
    return row


def _insert(db: sqlite3.Connection, table: str, row: dict[str, Any], *, ignore: bool = False) -> None:
    names = list(row)
    db.execute(f"INSERT {'OR IGNORE ' if ignore else ''}INTO {table} ({', '.join(names)})"
               f" VALUES ({', '.join('?' * len(names))})", [row[n] for n in names])


def _write_files(home: Path, routing: dict[str, dict[str, Any]], homes: list[HermesHomeImported]) -> None:
    _atomic_write(home / "sessions" / "sessions.json",
                  json.dumps({"_README": SESSIONS_README, **routing}, indent=2))
    mappings = {name: value for record in homes for name, value in record.lid_mappings.items()}
    if mappings:
        directory = home / LID_DIRS[0]
        directory.mkdir(parents=True, exist_ok=True)
        for name, value in mappings.items():
            _atomic_write(directory / name, json.dumps(value))
    options = next((r.key_options for r in reversed(homes) if r.key_options), None)
    if options:
        lines = ["# written by turnlog export-hermes: the keys that shape session keys"]
        lines += [f"{name}: {'true' if value else 'false'}" for name, value in options.items()]
        _atomic_write(home / "config.yaml", "\n".join(lines) + "\n")
    reset = next((r.reset for r in reversed(homes) if r.reset), None)
    if reset:
        _atomic_write(home / "gateway.json", json.dumps(reset, indent=2))
    counts = {k: v for r in homes for k, v in r.restart_counts.items()}
    if counts:
        _atomic_write(home / ".restart_failure_counts", json.dumps(counts))


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


