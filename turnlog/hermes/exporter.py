"""Exporting the log as a Hermes 0.19.0 home: state.db (schema 22) + sessions/sessions.json + the
routing index, so a user can go back.

Imported sessions are written back from their import record (the Hermes row, its usage and each
message's own fields) updated by what happened since in turnlog (new messages, an end, flags);
sessions born in turnlog get rows built from their events. A new home is built in a hidden folder
beside it and renamed into place whole; into an existing one, the files are written under
temporary names and renamed at the end, and put back as they were if that fails: an export that
fails or is interrupted leaves the whole home or nothing new. As `export -o`:
no file is written through a symbolic link (temporary files are created exclusively, under random
names, beside their destination), and an existing home is replaced only with `force`.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, cast

from eventsourcing.application import project_aggregate

from ..commands.context import session_aggregate_id
from ..domain.history import HistoryEdit
from ..domain.imported import IMPORT_ACTOR, HermesHomeImported, HermesSessionImported, hermes_record_id
from ..domain.session import Session
from ..errors import InvalidRequest, TurnlogError
from ..export import epoch_seconds
from . import history_rows
from .formats import LID_DIRS
from .schema import SCHEMA_SQL, SCHEMA_VERSION
from .titles import export_titles

if TYPE_CHECKING:
    from ..clock import Clock
    from ..projections.views import Views

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


def export_home(out_home: str, *, views: "Views", routing_map: Callable[[], dict[str, Any]], clock: "Clock",
                force: bool = False, key_settings: dict[str, bool] | None = None) -> ExportReport:
    """Write the log's sessions as a Hermes home at `out_home`. `views` read the sessions,
    transcripts and import records (caught up by the caller); `routing_map()` gives the routing
    map as sessions.json holds it (Turnlog.export_routing); `clock` dates the routing entries;
    `key_settings`: the key flags the log records (a rekey's), which config.yaml then says."""
    home = Path(out_home).expanduser()
    if home.is_symlink():
        raise InvalidRequest(f"{home} is a symbolic link: not followed; give the real path")
    if home.exists() and not home.is_dir():
        raise InvalidRequest(f"{home}: not a directory")
    sessions = [s.to_dict() for s in views.sessions()]
    records = _records(views, sessions)
    homes = _home_records(views)
    routing = _routing(routing_map(), records, report := ExportReport(home=str(home.absolute())))
    files = _files(routing, homes, key_settings)
    for relative in ("state.db", *files):
        _check_links(home, relative)
    if os.path.lexists(home / "state.db") and not force:
        raise InvalidRequest(f"{home}: already holds a state.db (export-hermes writes a new home): give --force to"
                             " overwrite it")
    for relative in files:
        if os.path.lexists(home / relative) and not force:
            raise InvalidRequest(f"{home / relative} exists: give --force to overwrite it")
    # A new home is built in a hidden folder beside it and renamed into place whole; into an
    # existing one, each file is renamed into place, and all of them are put back on a failure.
    # Either way an export that fails, or is interrupted, leaves nothing new behind.
    fresh = not os.path.lexists(home)
    try:
        build = _temp_dir_beside(home) if fresh else home
        made: list[Path] = []
        try:
            for relative in sorted({str(Path(r).parent) for r in files} - {"."}):
                _make_dirs(build, relative, made)
            report.home = str(home.resolve())
            scope = str((home / "sessions").resolve())
            written: list[tuple[str, Path]] = []
            try:
                for relative, text in files.items():
                    written.append((_write_temp(build / relative, text.encode("utf-8")), build / relative))
                tmp_db = _write_temp(build / "state.db", b"")
                written.append((tmp_db, build / "state.db"))  # last: a home is a home once it has its state.db
                try:
                    _write_db(views, clock, tmp_db, sessions, records, homes, routing, scope, report)
                except sqlite3.Error as e:
                    raise HermesExportError(f"cannot write {home / 'state.db'}: {e}") from None
                _move_all_into_place(written, force)
            finally:
                for temp, _ in written:
                    if os.path.lexists(temp):
                        os.unlink(temp)
            if fresh:
                os.rename(build, home)  # fails if a home was made there meanwhile (but for an empty folder)
        except BaseException:
            if fresh:
                shutil.rmtree(build, ignore_errors=True)
            else:
                for path in reversed(made):
                    _remove_empty_dir(path)
            raise
    except FileExistsError as e:
        raise InvalidRequest(f"{e.filename} exists: give --force to overwrite it") from None
    except OSError as e:
        raise HermesExportError(f"cannot write {e.filename or home}: {e.strerror or e}") from None
    report.routes = len(routing)
    return report


class HermesExportError(TurnlogError):
    """The home could not be written (permission, disk): a runtime failure, not a usage error."""


def _check_links(home: Path, relative: str) -> None:
    """Refused before anything is written: a link on the way to a file or at it (its target may be
    any file of the user)."""
    path = home
    for part in Path(relative).parts:
        path = path / part
        if path.is_symlink():
            raise InvalidRequest(f"{path} is a symbolic link: not followed; give the real path")


def _make_dirs(home: Path, relative: str, made: list[Path]) -> None:
    path = home
    for part in Path(relative).parts:
        path = path / part
        try:
            os.mkdir(path, 0o755)
            made.append(path)
        except FileExistsError:
            if path.is_symlink() or not path.is_dir():  # made meanwhile: never write through it
                raise InvalidRequest(f"{path} is not a plain directory: not followed") from None


def _remove_empty_dir(path: Path) -> None:
    try:
        os.rmdir(path)
    except OSError:
        pass  # something else is in it now: not ours to remove


def _temp_dir_beside(home: Path) -> Path:
    for _ in range(16):
        temp = home.with_name(f".{home.name}.{secrets.token_hex(8)}.tmp")
        try:
            os.mkdir(temp, 0o755)
        except FileExistsError:
            continue
        return temp
    raise HermesExportError(f"cannot create a temporary folder beside {home}")


def _write_temp(final: Path, data: bytes) -> str:
    """A new file beside `final` holding `data`: created exclusively (O_EXCL, O_NOFOLLOW) under a
    random name, so nothing planted at a guessable name is written through."""
    for _ in range(16):
        temp = final.with_name(f".{final.name}.{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return str(temp)
    raise HermesExportError(f"cannot create a temporary file beside {final}")


def _move_all_into_place(written: list[tuple[str, Path]], force: bool) -> None:
    """Each temporary file renamed to its name; on a failure (or an interrupt) midway, the files
    moved so far are taken back out and the ones they replaced put back."""
    moved: list[tuple[str, Path, str | None]] = []  # each move begun, and where the file it replaces waits
    try:
        for temp, final in written:
            kept = None
            if force and os.path.lexists(final):
                kept = str(final.with_name(f".{final.name}.{secrets.token_hex(8)}.old"))
                os.link(final, kept, follow_symlinks=False)  # the old file, kept until all are in place
            moved.append((temp, final, kept))
            _move_into_place(temp, final, force)
    except BaseException:
        for temp, final, kept in reversed(moved):
            if _is_in_place(temp, final):
                if kept is not None:
                    os.replace(kept, final)
                else:
                    os.unlink(final)
            elif kept is not None:
                os.unlink(kept)
        raise
    for _, _, kept in moved:
        if kept is not None:
            os.unlink(kept)


def _is_in_place(temp: str, final: Path) -> bool:
    """Whether the move of `temp` to `final` happened (a rename, or a link not yet followed by the unlink)."""
    if not os.path.lexists(temp):
        return True
    return os.path.lexists(final) and os.path.samestat(os.lstat(temp), os.lstat(final))


def _move_into_place(temp: str, final: Path, force: bool) -> None:
    if force:
        os.replace(temp, final)  # a rename replaces a link made meanwhile, never writes through it
    else:
        os.link(temp, final)  # fails if the name appeared meanwhile: never overwrites unasked
        os.unlink(temp)


def _write_db(views: "Views", clock: "Clock", tmp_db: str, sessions: list[dict[str, Any]],
              records: dict[str, HermesSessionImported], homes: list[HermesHomeImported],
              routing: dict[str, dict[str, Any]], scope: str, report: ExportReport) -> None:
    db = sqlite3.connect(tmp_db, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=OFF")  # the file is not in place until whole: no journal file to plant
        db.executescript(SCHEMA_SQL)
        db.execute("BEGIN")
        db.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
        _write_sessions(views, db, sessions, records, report)
        now = clock.now().timestamp()
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


def _records(views: "Views", sessions: list[dict[str, Any]]) -> dict[str, HermesSessionImported]:
    found: dict[str, HermesSessionImported] = {}
    for s in sessions:
        event = views.first_event(hermes_record_id(s["session_id"]))
        if event is not None:
            found[s["session_id"]] = cast(HermesSessionImported, event)
    return found


def _home_records(views: "Views") -> list[HermesHomeImported]:
    return [cast(HermesHomeImported, event) for event in views.events_of(HermesHomeImported.TOPIC)]


def _routing(routing: dict[str, Any], records: dict[str, HermesSessionImported],
             report: ExportReport) -> dict[str, dict[str, Any]]:
    """The routing index by Hermes key: turnlog's entries, with an imported entry's extras kept."""
    out: dict[str, dict[str, Any]] = {}
    for key, entry in routing.items():
        if key.startswith("_"):
            continue
        hermes_key = _hermes_key(key, entry.get("origin"))
        if hermes_key in out:
            report.skipped.append({"what": f"routing key {key}",
                                   "reason": f"same Hermes key as another route ({hermes_key}): Hermes keys have"
                                             " no Slack workspace and no bot account"})
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
    """Hermes 0.19.0 keys carry no Slack workspace and no bot account: turnlog's put them right
    after the chat-type slot, the workspace first (keys.py), so the Hermes key is the same key
    without those parts."""
    origin = origin or {}
    platform = origin.get("platform")
    scopes = [origin.get("scope_id") if platform == "slack" else None, origin.get("account_id")]
    head, sep, tail = key.partition(f":{platform}:")
    if not sep or not any(scopes):
        return key
    slot, _, rest = tail.partition(":")
    for scope in scopes:
        if scope and (rest == scope or rest.startswith(f"{scope}:")):
            rest = rest[len(scope) + 1:]
    return f"{head}{sep}{slot}:{rest}" if rest else f"{head}{sep}{slot}"


def _write_sessions(views: "Views", db: sqlite3.Connection, sessions: list[dict[str, Any]],
                    records: dict[str, HermesSessionImported], report: ExportReport) -> None:
    taken = {i for r in records.values()
             for i in (*r.message_ids, *(row["id"] for row in (*r.inactive_rows, *r.marker_rows)))}
    next_id = max(taken, default=0) + 1
    used: set[int] = set()
    titles = export_titles(views, sessions, records)
    for s in sessions:
        session_id = s["session_id"]
        record = records.get(session_id)
        row = dict(record.row) if record is not None else _native_row(s)
        row["title"] = titles[session_id]
        if s["end_reason"] and not (record is not None and row.get("end_reason")):
            row["end_reason"] = s["end_reason"]
            row["ended_at"] = epoch_seconds(s["ended_at"])
        ids = record.message_ids if record is not None else []
        times = record.message_times if record is not None else []
        fields = record.message_fields if record is not None else {}
        messages = views.message_events(session_id)
        edits, native_undos = _history_edits(views, session_id)
        kept = (*record.inactive_rows, *record.marker_rows) if record is not None else ()
        last = 0  # Hermes orders a transcript by id: a kept id that would break the order is not kept
        for planned in history_rows.layout(messages, ids, kept, edits):
            wanted = planned.wanted
            if wanted is not None and wanted not in used and wanted > last:
                message_id = wanted
            else:
                message_id, next_id = next_id, next_id + 1
            used.add(message_id)
            last = message_id
            if planned.seq is None:
                written = {**planned.fields, "id": message_id, "session_id": session_id}
            else:
                extra = dict(fields.get(str(planned.seq), {}))
                if planned.seq <= len(ids):
                    extra["timestamp"] = times[planned.seq - 1]
                flags = history_rows.flags(planned.seq, edits)
                if flags is not None:
                    extra["active"], extra["compacted"] = flags
                written = _message_row(planned.message, extra, message_id, session_id)
            _insert(db, "messages", written)
            report.messages += 1
        base = (row.get("message_count", 0), row.get("tool_call_count", 0)) if record is not None else (0, 0)
        row["message_count"], row["tool_call_count"] = history_rows.counts(
            messages, edits, len(ids) if record is not None else None, base)
        if native_undos:
            row["rewind_count"] = row.get("rewind_count", 0) + native_undos
        _insert(db, "sessions", row)
        for usage in record.usage if record is not None else []:
            _insert(db, "session_model_usage", usage)
        report.sessions += 1


def _history_edits(views: "Views", session_id: str) -> tuple[tuple[HistoryEdit, ...], int]:
    """The session's history edits, and how many /undo were made in turnlog (Hermes counts them in
    `rewind_count`; an imported row has its own count already)."""
    events = list(views.app.events.get(session_aggregate_id(session_id)))
    if not events:
        return (), 0
    session = cast(Session, project_aggregate(None, events))
    native = sum(1 for e in events if isinstance(e, Session.TurnsUndone) and e.actor != IMPORT_ACTOR)
    return session.history_edits, native


def _native_row(s: dict[str, Any]) -> dict[str, Any]:
    origin = s.get("origin") or {}
    return {
        "id": s["session_id"], "source": s["platform"] or "unknown", "user_id": origin.get("user_id"),
        "session_key": s["session_key"] or None, "chat_id": origin.get("chat_id"), "chat_type": s["chat_type"],
        "thread_id": origin.get("thread_id"), "display_name": s["display_name"],
        "origin_json": json.dumps(origin) if origin else None, "parent_session_id": s["parent_session_id"],
        "started_at": epoch_seconds(s["created_at"]), "ended_at": epoch_seconds(s["ended_at"]),
        "end_reason": s["end_reason"],
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


def _files(routing: dict[str, dict[str, Any]], homes: list[HermesHomeImported],
           key_settings: dict[str, bool] | None) -> dict[str, str]:
    """The home's files beside state.db (relative path -> text); config.yaml holds the log's key
    settings, else those of the last imported home that had some."""
    files = {"sessions/sessions.json": json.dumps({"_README": SESSIONS_README, **routing}, indent=2)}
    mappings = {name: value for record in homes for name, value in record.lid_mappings.items()}
    for name, value in mappings.items():
        files[f"{LID_DIRS[0]}/{name}"] = json.dumps(value)
    options = key_settings or next((r.key_options for r in reversed(homes) if r.key_options), None)
    if options:
        lines = ["# written by turnlog export-hermes: the keys that shape session keys"]
        lines += [f"{name}: {'true' if value else 'false'}" for name, value in options.items()]
        files["config.yaml"] = "\n".join(lines) + "\n"
    reset = next((r.reset for r in reversed(homes) if r.reset), None)
    if reset:
        files["gateway.json"] = json.dumps(reset, indent=2)
    counts = {k: v for r in homes for k, v in r.restart_counts.items()}
    if counts:
        files[".restart_failure_counts"] = json.dumps(counts)
    return files
