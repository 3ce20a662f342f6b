"""Importing a Hermes home: every session, its transcript, its routing key and flags, as events.

What identifies an imported session is its Hermes session id (turnlog keeps it as its own); its
messages are its transcript in Hermes id order. Each batch of sessions is saved in one
transaction through the application (never raw SQL into the log), so a killed import leaves
whole sessions only, and the next run skips the sessions already there: it resumes without
duplicates, and a run over an imported home imports nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterator

import orjson
from eventsourcing.persistence import IntegrityError

from ..gc_pause import cyclic_gc_paused
from ..commands.context import CommandContext, session_aggregate_id
from ..commands.lease import lease_id
from ..domain.history import COMPACTED as COMPACTED_FATE, UNDONE
from ..commands.titles import TitleCommands
from ..domain.imported import (IMPORT_ACTOR, HermesHomeImported, HermesSessionImported, hermes_home_id,
                               hermes_record_id, import_cause)
from ..domain.keys import RoutingKey, legacy_account_key, legacy_slack_key, resolve_routing_key
from ..domain.lease import TurnLease
from ..domain.policy import END_REASONS, FOREIGN_END_REASONS
from ..domain.route import Route
from ..domain.session import Session
from ..domain.source import SessionSource, check_session_id, quoted
from ..domain.transcript import ROLES, MessagesImported, transcript_id
from ..errors import InvalidRequest
from . import cells
from .formats import MESSAGE_COLUMNS, MESSAGE_DEFAULTS, HermesHome, json_value, lid_aliases, read_home
from .history_import import edited_history, row_fate
from .owed import import_owed_replies
from .titles import import_title

IMPORT_REASON = "hermes_import"  # why the session and its route exist in this log
BATCH_MESSAGES = 10_000  # messages per transaction: big enough to be fast (each commit syncs), small enough to resume
# A session's messages go into MessagesImported events of at most this many messages or content
# characters, so that no event is huge (a reader of one message decodes its whole run).
RUN_MESSAGES = 500
RUN_CHARS = 256 * 1024
# The message columns after platform_message_id: flags with a default, and fields turnlog has no place for.
TAIL = MESSAGE_COLUMNS.index("platform_message_id") + 1
FLAG_AND_EXTRA_COLUMNS = MESSAGE_COLUMNS[TAIL:]
# Most rows have every flag and extra at Hermes' default: nothing of theirs to keep beside the event.
DEFAULT_TAIL = tuple(MESSAGE_DEFAULTS.get(name) for name in FLAG_AND_EXTRA_COLUMNS)
ACTIVE = MESSAGE_COLUMNS.index("active")
COMPACTED = MESSAGE_COLUMNS.index("compacted")
MARKER_ROLE = "session_meta"  # Hermes' gateway marker row: not a message (HERMES_FORMATS §2.2)
Progress = Callable[[int, int], None]


@dataclass
class ImportReport:
    home: str
    dry_run: bool
    sessions_found: int = 0
    sessions_imported: int = 0
    sessions_already_imported: int = 0
    messages_found: int = 0
    messages_imported: int = 0  # into transcripts
    undone_rows: int = 0  # rewound by /undo (active=0, compacted=0): transcript messages, hidden by TurnsUndone
    compacted_rows: int = 0  # archived by in-place compaction (compacted=1): covered by TranscriptCompacted
    inactive_rows_kept: int = 0  # inactive rows of no known role: kept whole in the import record only
    marker_rows_kept: int = 0  # session_meta markers: in the import record, never in a transcript
    routes_imported: int = 0
    routes_rekeyed: list[dict[str, str]] = field(default_factory=list)  # keys moved to their workspace or bot account
    suspended: int = 0
    resume_pending: int = 0
    ledger_rows: int = 0
    owed_replies: int = 0  # ledger rows still owed (pending, attempting, failed): in turnlog's ledger now
    restart_counts: int = 0
    reset: dict[str, Any] = field(default_factory=dict)
    key_options: dict[str, Any] = field(default_factory=dict)
    skipped: list[dict[str, str]] = field(default_factory=list)
    repaired: list[dict[str, str]] = field(default_factory=list)  # cells imported with a repair (cells.py)

    @property
    def nothing_to_do(self) -> bool:
        return self.sessions_imported == 0 and self.routes_imported == 0

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "nothing_to_do": self.nothing_to_do}


@dataclass
class _Plan:
    """Routes to create for a session, decided from the whole routing index up front."""

    routes: dict[str, list[tuple[RoutingKey, dict[str, Any]]]] = field(default_factory=dict)


class HermesImporter:
    """`known()` names the sessions already in the log (session id -> why it was created), read
    from the sessions projection: a hint that spares a read per session. The log stays the
    judge: a session created meanwhile makes the batch's save conflict, and the batch is then
    decided again session by session from the log."""

    def __init__(self, ctx: CommandContext, titles: TitleCommands, known: Callable[[], dict[str, str]] = dict) -> None:
        self.ctx = ctx
        self.titles = titles  # sessions.title becomes SessionTitled and the title's claim (titles.py)
        self.known = known

    def run(self, hermes_home: str, *, profile: str | None = None, dry_run: bool = False,
            progress: Progress | None = None, batch_messages: int = BATCH_MESSAGES,
            force: bool = False) -> ImportReport:
        home = read_home(hermes_home, profile, force=force)
        try:
            with cyclic_gc_paused():
                return self._run(home, dry_run, progress, batch_messages)
        finally:
            home.close()

    def _run(self, home: HermesHome, dry_run: bool, progress: Progress | None, batch_messages: int) -> ImportReport:
        report = ImportReport(home=str(home.path), dry_run=dry_run, reset=home.reset,
                              key_options={**home.options, "whatsapp_aliases": str(home.lid_dir or "") or None})
        report.skipped.extend(home.skipped)
        report.repaired.extend(home.repaired)
        rows, refused = self._session_rows(home, report)
        known = self.known()
        report.sessions_found = len(home.sessions)
        plan = self._plan_routes(home, rows, report)
        report.messages_found = home.message_count()
        report.ledger_rows = len(home.ledger)
        report.restart_counts = len(home.restart_counts)
        done = 0
        batch: list[tuple[dict[str, Any], list[tuple[Any, ...]]]] = []
        size = 0
        for session_id, messages in self._sessions_with_messages(home, rows, refused, report):
            batch.append((rows[session_id], messages))
            size += len(messages) + 1
            if size >= batch_messages:
                done += self._commit(batch, home, plan, report, dry_run, known)
                batch, size = [], 0
                if progress is not None:
                    progress(done, report.messages_found)
        done += self._commit(batch, home, plan, report, dry_run, known)
        if progress is not None:
            progress(done, report.messages_found)
        report.owed_replies = import_owed_replies(self.ctx, home, rows, plan.routes, report.skipped, dry_run)
        if not dry_run:
            self._record_home(home, report)
        return report

    # -- what to import ---------------------------------------------------------------------

    @staticmethod
    def _session_rows(home: HermesHome, report: ImportReport) -> tuple[dict[str, dict[str, Any]], dict[Any, str]]:
        """The sessions to import by id, and the refused ones (id as read -> why): an id goes
        through the id rules (domain/source.py) like any id from outside."""
        rows: dict[str, dict[str, Any]] = {}
        refused: dict[Any, str] = {}
        for row in home.sessions:
            ident = row.get("id")
            try:
                if not isinstance(ident, str) or not cells.is_clean_text(ident):
                    raise InvalidRequest("session_id is not valid text" if ident is not None else "session_id is NULL")
                check_session_id(ident)
            except InvalidRequest as e:
                refused[ident] = str(e)
                report.skipped.append({"what": f"session {_shown_id(ident)}", "reason": str(e)})
                continue
            if ident in rows:
                report.skipped.append({"what": f"session {ident}", "reason": "a second row with this id"})
                continue
            rows[ident] = row
        return rows, refused

    def _sessions_with_messages(self, home: HermesHome, rows: dict[str, dict[str, Any]], refused: dict[Any, str],
                                report: ImportReport) -> Iterator[tuple[str, list[tuple[Any, ...]]]]:
        """(session_id, its message rows) for every session row, in session id order for a sound home.

        Sessions without messages are yielded between the groups, where their id sorts; a session
        with messages only with its group, whatever order a damaged home's ids sort in."""
        with_messages = home.message_sessions()
        empty = sorted(s for s in rows if s not in with_messages)
        index = 0
        for session_id, messages, repairs in home.messages():
            while index < len(empty) and type(session_id) is str and empty[index] < session_id:
                yield empty[index], []
                index += 1
            if type(session_id) is str and session_id in rows:
                # named when the session is imported (_session_items), not on a re-run that skips it
                home.session_repairs.setdefault(session_id, []).extend(
                    {"what": f"message {message_id} of session {session_id}", "reason": note}
                    for message_id, notes in repairs.items() for note in notes)
                yield session_id, messages
            else:
                why = refused.get(session_id)
                shown = _shown_id(session_id) if why or not cells.is_clean_text(session_id) else session_id
                report.skipped.append({"what": f"{len(messages)} messages of session {shown}",
                                       "reason": f"their session is skipped ({why})" if why
                                       else "no sessions row for them"})
        yield from ((session_id, []) for session_id in empty[index:])

    def _plan_routes(self, home: HermesHome, rows: dict[str, dict[str, Any]], report: ImportReport) -> _Plan:
        plan = _Plan()
        for key, entry in home.routing.items():
            reason = self._unroutable(key, entry, rows)
            rk = None
            if reason is None:
                rk, reason = self._routing_key(home, key, entry["origin"])
            if reason is not None or rk is None:
                report.skipped.append({"what": f"routing key {key}", "reason": reason or "no key"})
                continue
            plan.routes.setdefault(entry["session_id"], []).append((rk, entry))
        return plan

    @staticmethod
    def _unroutable(key: str, entry: dict[str, Any], rows: dict[str, dict[str, Any]]) -> str | None:
        session_id = entry.get("session_id")
        if not isinstance(session_id, str) or not session_id:
            return "entry has no session_id"
        try:
            check_session_id(session_id)
        except InvalidRequest as e:
            return f"unsafe session id ({e})"
        if session_id not in rows:
            return f"session {session_id} is not in state.db"
        if rows[session_id].get("end_reason"):
            return f"session {session_id} already ended ({rows[session_id]['end_reason']})"
        if not isinstance(entry.get("origin"), dict):
            return "entry has no origin"
        return None

    def _routing_key(self, home: HermesHome, key: str, origin: dict[str, Any]) -> tuple[RoutingKey | None, str | None]:
        """The turnlog key of a Hermes entry, recomputed from its origin by the one key rule.

        Hermes keys have no Slack workspace and no bot account; turnlog's do (seed 000). An entry
        whose origin names its workspace or account moves to that key (§12 and §12.1, rule 1); one
        without stays on the legacy key, where routing applies rules 2 and 3 when a message
        naming one arrives.
        """
        try:
            source = SessionSource.from_dict(origin)
        except (KeyError, TypeError, ValueError) as e:
            return None, f"origin is not a usable source ({e})"
        namespace = key.split(":", 2)[1] if key.count(":") >= 2 else "main"
        options: dict[str, Any] = dict(group_sessions_per_user=home.options["group_sessions_per_user"],
                       thread_sessions_per_user=home.options["thread_sessions_per_user"],
                       profile=_profile_of(namespace),
                       whatsapp_aliases=lid_aliases(home.lid_mappings) if home.lid_mappings else None)
        rk = resolve_routing_key(source, **options)
        if rk.key == key:
            return rk, None
        # An origin naming its bot account moves to the account's key too (§12.1 rule 1).
        for legacy in (legacy_account_key(source, **options), legacy_slack_key(source, **options)):
            if legacy is not None and legacy.key == key:
                return rk, None
        return None, f"the key does not follow from its origin (recomputed {rk.key})"

    # -- writing ----------------------------------------------------------------------------

    def _commit(self, batch: list[tuple[dict[str, Any], list[tuple[Any, ...]]]], home: HermesHome, plan: _Plan,
                report: ImportReport, dry_run: bool, known: dict[str, str]) -> int:
        if not batch:
            return 0
        for attempt in range(3):
            trial = ImportReport(home=report.home, dry_run=dry_run)
            items: list[Any] = []
            for row, messages in batch:
                items += self._session_items(row, messages, home, plan, trial, known if attempt == 0 else None)
            try:
                if items and not dry_run:
                    self.ctx.save(*items)
                break
            except IntegrityError:
                # Another writer (a gateway routing a just-imported key, a second importer) got
                # there first: decide again from the log.
                if attempt == 2:
                    raise
        for name in ("sessions_imported", "sessions_already_imported", "messages_imported", "undone_rows",
                     "compacted_rows", "inactive_rows_kept", "marker_rows_kept", "routes_imported", "suspended",
                     "resume_pending"):
            setattr(report, name, getattr(report, name) + getattr(trial, name))
        report.skipped.extend(trial.skipped)
        report.repaired.extend(trial.repaired)
        report.routes_rekeyed.extend(trial.routes_rekeyed)
        return sum(len(m) for _, m in batch)

    def _session_items(self, row: dict[str, Any], messages: list[tuple[Any, ...]], home: HermesHome, plan: _Plan,
                       report: ImportReport, known: dict[str, str] | None) -> list[Any]:
        ctx = self.ctx
        session_id = row["id"]
        if known is not None:
            created_reason = known.get(session_id)
        elif ctx.session(session_id) is not None:
            created_reason = "imported" if next(iter(ctx.app.events.get(hermes_record_id(session_id), limit=1)),
                                                None) is not None else "native"
        else:
            created_reason = None
        if created_reason is not None:
            if created_reason in (IMPORT_REASON, "imported"):
                report.sessions_already_imported += 1
            else:
                report.skipped.append({"what": f"session {session_id}", "reason": "this id is already a session of"
                                       " this log, not an imported one"})
            return []
        report.repaired += home.session_repairs.get(session_id, [])
        now = ctx.clock.now()
        cause = import_cause(str(home.path), session_id)
        say: dict[str, Any] = dict(at=now, actor=IMPORT_ACTOR, cause=cause)
        routes = plan.routes.get(session_id, [])
        entry = routes[0][1] if routes else None
        origin = _origin(row, entry)
        session = Session.new(Session.Created, id=session_aggregate_id(session_id), session_id=session_id,
                              session_key=routes[0][0].key if routes else row.get("session_key") or "",
                              origin=origin, reason=IMPORT_REASON, previous_session_id=None,
                              parent_session_id=row.get("parent_session_id"), **say)
        titled = import_title(self.titles, session, row, report.skipped, say)
        # The session's creation before its messages and its history edits after them: a read
        # model's catch-up batch may end anywhere in the transaction, and an edit applied before
        # the messages it covers were filed would find none.
        items: list[Any] = [*session.collect_events(), *titled]
        started = cells.epoch(row.get("started_at"), "started_at", [])
        runs, appended, extras, fates = self._messages(session_id, messages, now, cause, report,
                                                       started if started is not None else now.timestamp())
        items += runs
        edited_history(session, *fates, report.repaired, session_id, say)
        restarts = max((home.restart_counts.get(rk.key, 0) or home.restart_counts.get(e.get("session_key", ""), 0)
                        for rk, e in routes), default=0)
        if appended or restarts:
            lease = TurnLease.new(TurnLease.Created, id=lease_id(session_id), session_id=session_id, **say)
            if appended:
                lease.seed(appended, **say)
            if restarts:
                lease.carry_restarts(restarts, **say)
            items.append(lease)
        self._flags(session, row, entry, restarts, report, say)
        items.append(session)
        for rk, route_entry in routes:
            route = self._route(rk, route_entry, session_id, report, say)
            if route is not None:
                items.append(route)
        items.append(HermesSessionImported(
            originator_id=hermes_record_id(session_id), originator_version=1, timestamp=now, session_id=session_id,
            home=str(home.path), row=row, usage=home.usage.get(session_id, []), **extras,
            routing_entry=entry, actor=IMPORT_ACTOR, cause=cause))
        report.sessions_imported += 1
        report.messages_imported += appended
        return items

    @staticmethod
    def _messages(session_id: str, messages: list[tuple[Any, ...]], now: Any, cause: str,
                  report: ImportReport, started: float
                  ) -> tuple[list[MessagesImported], int, dict[str, Any], tuple[list[str | None], list[str]]]:
        """The session's message rows as MessagesImported runs (and how many messages they hold),
        with each message's fate (history_import.py): undone and compacted rows are messages too;
        what turnlog has no field for goes to the import record (`extras`). Each message keeps
        its own Hermes time; a row without one (damaged) takes the previous row's."""
        runs: list[MessagesImported] = []
        run: list[dict[str, Any]] = []
        chars = 0
        ids: list[int] = []
        times: list[float] = []
        fields: dict[str, dict[str, Any]] = {}
        inactive: list[dict[str, Any]] = []
        markers: list[dict[str, Any]] = []
        fates: list[str | None] = []
        roles: list[str] = []
        stream = transcript_id(session_id)
        last_time = started

        def close_run() -> None:
            runs.append(MessagesImported(
                originator_id=stream, originator_version=len(ids), timestamp=now, session_id=session_id,
                first_seq=len(ids) - len(run) + 1, messages=run, epoch=0, actor=IMPORT_ACTOR, cause=cause))

        for row in messages:
            (message_id, _, role, content, tool_call_id, raw_calls, tool_name, timestamp, token_count,
             finish_reason, platform_message_id) = row[:TAIL]
            if timestamp is None:
                report.repaired.append({"what": f"message {message_id} of session {session_id}",
                                        "reason": "no time: the previous message's time is used"})
                timestamp = last_time
            last_time = timestamp
            # NULL `active` (an old reconciler's column) counts as active, as in Hermes
            inactive_row = row[ACTIVE] == 0
            if role == MARKER_ROLE or (inactive_row and role not in ROLES):
                # A marker row is never a message an agent may see; an inactive row of no known
                # role was never one either: both kept whole, flags and all, for an export.
                kept = {name: value for name, value in zip(MESSAGE_COLUMNS, row)
                        if value is not None and name != "session_id"}
                (markers if role == MARKER_ROLE else inactive).append({**kept, "timestamp": timestamp})
                continue
            if role not in ROLES:
                report.skipped.append({"what": f"message {message_id} of session {session_id}",
                                       "reason": f"unknown role {quoted(role)}"})
                continue
            extra: dict[str, Any] = {}
            # Only the set fields: an unset one reads as None (transcript.MESSAGE_FIELDS).
            message: dict[str, Any] = {"role": role, "content": content or "", "turn_id": f"hermes:{message_id}",
                                       "timestamp": _iso(timestamp)}
            if content is None:
                extra["content_null"] = True
            if raw_calls is not None:
                tool_calls = _tool_calls(raw_calls, extra)
                if tool_calls is not None:
                    message["tool_calls"] = tool_calls
            for name, value in (("tool_call_id", tool_call_id), ("name", tool_name), ("token_count", token_count),
                                ("finish_reason", finish_reason), ("platform_message_id", platform_message_id)):
                if value is not None:
                    message[name] = value
            tail = row[TAIL:]
            if tail != DEFAULT_TAIL:
                for name, value in zip(FLAG_AND_EXTRA_COLUMNS, tail):
                    # an inactive row's flags are its fate, an event of the session (the export reads it)
                    if value is not None and value != MESSAGE_DEFAULTS.get(name) and not (
                            inactive_row and name in ("active", "compacted")):
                        extra[name] = value
            fates.append(row_fate(row[ACTIVE], row[COMPACTED]))
            roles.append(role)
            if run and (len(run) == RUN_MESSAGES or chars + len(message["content"]) > RUN_CHARS):
                close_run()
                run, chars = [], 0
            ids.append(message_id)
            times.append(timestamp)
            if extra:
                fields[str(len(ids))] = extra
            run.append(message)
            chars += len(message["content"])
        if run:
            close_run()
        report.undone_rows += fates.count(UNDONE)
        report.compacted_rows += fates.count(COMPACTED_FATE)
        report.inactive_rows_kept += len(inactive)
        report.marker_rows_kept += len(markers)
        return runs, len(ids), {"message_ids": ids, "message_times": times, "message_fields": fields,
                                "inactive_rows": inactive, "marker_rows": markers}, (fates, roles)

    @staticmethod
    def _flags(session: Session, row: dict[str, Any], entry: dict[str, Any] | None, restarts: int,
               report: ImportReport, say: dict[str, Any]) -> None:
        if entry is not None and entry.get("suspended"):
            if session.suspend("stuck_loop" if restarts >= 3 else "hermes", **say):
                report.suspended += 1
        if entry is not None and entry.get("resume_pending"):
            if session.mark_resume_pending(entry.get("resume_reason") or "restart_timeout", **say):
                report.resume_pending += 1
        reason = row.get("end_reason")
        if reason:
            if reason not in END_REASONS and reason not in FOREIGN_END_REASONS:
                report.skipped.append({"what": f"end reason of session {row['id']}",
                                       "reason": f"unknown end reason {reason!r}: kept in the import record,"
                                                 " the session is ended as session_reset"})
                reason = "session_reset"
            session.end(reason, **say)

    def _route(self, rk: RoutingKey, entry: dict[str, Any], session_id: str, report: ImportReport,
               say: dict[str, Any]) -> Route | None:
        route: Route | None = self.ctx.get(rk.route_id, fresh=False)
        if route is not None:
            if route.session_id != session_id:
                report.skipped.append({"what": f"routing key {rk.key}",
                                       "reason": f"already routed to {route.session_id} in this log"})
            return None
        origin = dict(entry["origin"])
        origin.pop("message_id", None)
        route = Route.register(rk.route_id, rk.key, rk.parts, origin, session_id=session_id, reason=IMPORT_REASON,
                               **say)
        report.routes_imported += 1
        if rk.key != entry.get("session_key"):
            report.routes_rekeyed.append({"hermes_key": entry.get("session_key") or "", "session_key": rk.key,
                                          "session_id": session_id, "rule": _rekey_rule(origin)})
        return route

    def _record_home(self, home: HermesHome, report: ImportReport) -> None:
        stream = hermes_home_id(str(home.path))
        if next(iter(self.ctx.app.events.get(stream, limit=1)), None) is not None:
            return
        event = HermesHomeImported(
            originator_id=stream, originator_version=1, timestamp=self.ctx.clock.now(), home=str(home.path),
            schema_version=home.schema_version, sessions=report.sessions_found, messages=report.messages_found,
            ledger=home.ledger, restart_counts=home.restart_counts, reset=home.reset,
            key_options=home.options, lid_mappings=home.lid_mappings, skipped=report.skipped,
            actor=IMPORT_ACTOR, cause=import_cause(str(home.path)))
        try:
            self.ctx.save(event)
        except IntegrityError:
            pass  # another importer of the same home recorded it first


def _rekey_rule(origin: dict[str, Any]) -> str:
    """What an imported key gained: the Slack workspace (§12), the bot account (§12.1), or both."""
    gained = [what for what, there in (("Slack workspace", origin.get("platform") == "slack" and origin.get("scope_id")),
                                       ("bot account", origin.get("account_id"))) if there]
    return f"{' and '.join(gained)} in the key (spec §12)"


def _profile_of(namespace: str) -> str | None:
    """The profile a key namespace was made for (keys._namespace backwards: "main~" is "main")."""
    if namespace == "main":
        return None
    return namespace[:-1] if namespace.startswith("main~") else namespace


def _origin(row: dict[str, Any], entry: dict[str, Any] | None) -> dict[str, Any] | None:
    """The session's origin: the routing entry's, else origin_json, else its columns (gateway rows)."""
    origin: Any = entry.get("origin") if entry else None
    if origin is None and row.get("origin_json"):
        origin = json_value(row["origin_json"])
    if origin is None and row.get("chat_id") is not None:
        origin = {"platform": row.get("source"), "chat_id": row.get("chat_id"), "chat_type": row.get("chat_type"),
                  "user_id": row.get("user_id"), "thread_id": row.get("thread_id"),
                  "chat_name": row.get("display_name")}
    if not isinstance(origin, dict):
        return None
    origin = dict(origin)
    origin.pop("message_id", None)
    return origin


def _tool_calls(raw: Any, extra: dict[str, Any]) -> list[dict[str, Any]] | None:
    """tool_calls as a list of objects; the stored text is kept too when re-encoding would differ."""
    if raw is None:
        return None
    try:
        value = orjson.loads(raw)  # several times faster; what it refuses (NaN, huge ints), json reads
    except (TypeError, ValueError):
        value = json_value(raw)  # None for what an event could not hold
    if isinstance(value, list) and all(isinstance(c, dict) for c in value):
        if json.dumps(value) != raw:
            extra["tool_calls_text"] = raw
        return value
    extra["tool_calls_text"] = raw
    return None




def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat()  # as the transcoder writes a datetime


def _shown_id(ident: Any) -> str:
    """A refused id for the report: quoted, cut, bytes shown as bytes."""
    return quoted(cells.text(ident, "id", []) if ident is not None else "NULL")
