"""Reading a Hermes home (HERMES_FORMATS.md): state.db by column name, the routing index, the
files beside it. Read-only: the home is opened `mode=ro` and never changed.

Older homes lack columns (Hermes adds them with ALTER TABLE when it opens a home), so every row
is read by name and a missing column takes its 0.19.0 default. A home is untrusted input: no file
is read whose resolved path leaves the home (a planted link could name any file of the user), and
a cell that is not what its column holds is repaired or dropped and named (cells.py), never fatal.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import orjson

from ..errors import HermesHomeError, InvalidRequest
from ..storage.uri import file_uri
from . import cells
from .schema import SCHEMA_VERSION

# Message columns a turnlog MessageAppended does not carry; kept beside the transcript when set.
MESSAGE_EXTRAS = (
    "effect_disposition", "reasoning", "reasoning_content", "reasoning_details", "codex_reasoning_items",
    "codex_message_items", "api_content",
)
MESSAGE_COLUMNS = (
    "id", "session_id", "role", "content", "tool_call_id", "tool_calls", "tool_name", "timestamp", "token_count",
    "finish_reason", "platform_message_id", "observed", "active", "compacted", *MESSAGE_EXTRAS,
)
MESSAGE_DEFAULTS = {"observed": 0, "active": 1, "compacted": 0}
_TEXT_COLUMNS = frozenset(MESSAGE_COLUMNS) - {"id", "timestamp", "token_count", "observed", "active", "compacted"}
_INT_COLUMNS = {"token_count": None, **MESSAGE_DEFAULTS}
_NONE = type(None)
# Per column, the cell types a clean row holds (anything else sends the row through cells).
_PLAIN = tuple((int,) if c == "id" else (float, int) if c == "timestamp" else (int, _NONE) if c in _INT_COLUMNS
               else (str, _NONE) for c in MESSAGE_COLUMNS)
SIDE_FILES = ("state.db-wal", "state.db-shm", "state.db-journal")  # SQLite reads them with state.db
SESSION_DEFAULTS = {"message_count": 0, "tool_call_count": 0, "input_tokens": 0, "output_tokens": 0,
                    "cache_read_tokens": 0, "cache_write_tokens": 0, "reasoning_tokens": 0, "api_call_count": 0,
                    "expiry_finalized": 0, "compression_fallback_streak": 0, "rewind_count": 0, "archived": 0}


LID_DIRS = ("platforms/whatsapp/session", "whatsapp/session")


@dataclass
class HermesHome:
    path: Path
    schema_version: int | None
    sessions: list[dict[str, Any]]
    usage: dict[str, list[dict[str, Any]]]
    routing: dict[str, dict[str, Any]]  # session_key -> SessionEntry dict (DB rows win over sessions.json)
    routing_scopes: list[str]
    restart_counts: dict[str, int]
    ledger: list[dict[str, Any]]
    reset: dict[str, Any]  # gateway.json / config.yaml reset settings, as Hermes spells them
    options: dict[str, bool]  # group_sessions_per_user, thread_sessions_per_user
    lid_dir: Path | None
    lid_mappings: dict[str, str]
    skipped: list[dict[str, str]] = field(default_factory=list)
    repaired: list[dict[str, str]] = field(default_factory=list)  # cells read with a repair, and which
    session_repairs: dict[Any, list[dict[str, str]]] = field(default_factory=dict)  # the same, of a session's rows
    _db: sqlite3.Connection | None = None
    _decoder: cells.Decoder = field(default_factory=cells.Decoder)

    def messages(self) -> Iterator[tuple[Any, list[tuple[Any, ...]], dict[int, list[str]]]]:
        """(session_id, rows in id order, repairs by message id) for every session with rows, one
        session at a time. The session_id is as read (a damaged one may be bytes or hold escapes).

        Rows are tuples in MESSAGE_COLUMNS order (a column the home lacks reads as its default):
        at 100k rows, tuples instead of dicts are a measurable part of an import's time. A row
        with a cell its column does not hold is repaired (cells.py); its timestamp is None when
        it holds no time."""
        assert self._db is not None
        present = _columns(self._db, "messages")
        select = ", ".join(c if c in present else _default_sql(c) for c in MESSAGE_COLUMNS)
        escaped = self._decoder.escaped  # before the query: its first step may decode the first row
        cursor = self._db.execute(f"SELECT {select} FROM messages ORDER BY session_id, id")
        current: Any = None
        batch: list[tuple[Any, ...]] = []
        repairs: dict[int, list[str]] = {}
        while chunk := cursor.fetchmany(5000):
            dirty = escaped != self._decoder.escaped  # some cell of this chunk was not valid UTF-8
            escaped = self._decoder.escaped
            for row in chunk:
                if row[1] != current:
                    if batch:
                        yield current, batch, repairs
                    current, batch, repairs = row[1], [], {}
                if dirty or not all(type(v) in kinds for v, kinds in zip(row, _PLAIN)):
                    notes: list[str] = []
                    row = _clean_message(row, notes)
                    if notes:
                        repairs[row[0]] = notes
                batch.append(row)
        if batch:
            yield current, batch, repairs

    def message_sessions(self) -> set[Any]:
        """The session ids that have message rows."""
        assert self._db is not None
        return {r[0] for r in self._db.execute("SELECT DISTINCT session_id FROM messages")}

    def message_count(self) -> int:
        assert self._db is not None
        return self._db.execute("SELECT count(*) FROM messages").fetchone()[0]

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def home_of(hermes_home: str | Path, profile: str | None = None) -> Path:
    home = Path(hermes_home).expanduser()
    if profile and profile != "default":
        home = home / "profiles" / profile
    if not home.is_dir():
        raise InvalidRequest(f"{home}: not a directory (a Hermes home holds state.db)")
    if not (home / "state.db").is_file():
        raise InvalidRequest(f"{home}: no state.db (is this a Hermes home?)")
    return home


def check_home(hermes_home: str | Path, profile: str | None = None, *, force: bool = False) -> None:
    """Refuse, as read_home would, a home that cannot be imported, without reading its sessions:
    so that a command can say so before it makes a database to import into."""
    home = home_of(hermes_home, profile)
    _refuse_links_out(home)
    db, tables = _open_state_db(home)
    try:
        _schema_version(db, tables, home, force)
    finally:
        db.close()


def _refuse_links_out(home: Path) -> None:
    root = home.resolve()
    for name in ("state.db", *SIDE_FILES):
        if os.path.lexists(home / name) and not _inside(root, home / name):
            raise HermesHomeError(f"{home / name}: a link to a file outside the home: not read")


def _open_state_db(home: Path, decoder: Any = None) -> tuple[sqlite3.Connection, set[str]]:
    """state.db, read-only, with its tables; HermesHomeError when it is not a Hermes state.db."""
    try:
        db = sqlite3.connect(file_uri(home / "state.db", mode="ro"), uri=True)
        if decoder is not None:
            db.text_factory = decoder  # invalid UTF-8 must not abort the read (see cells.py)
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as e:
        raise HermesHomeError(f"{home / 'state.db'}: not a readable SQLite database ({e})") from None
    for needed in ("sessions", "messages"):
        if needed not in tables:
            db.close()
            raise HermesHomeError(f"{home / 'state.db'}: no {needed} table (is this a Hermes state.db?)")
    return db, tables


def read_home(hermes_home: str | Path, profile: str | None = None, *, force: bool = False) -> HermesHome:
    """The home's sessions and files. Refused (HermesHomeError): a state.db (or its WAL) that is a link
    out of the home, and a schema version this importer does not know unless `force`."""
    home = home_of(hermes_home, profile)
    root = home.resolve()
    skipped: list[dict[str, str]] = []
    _refuse_links_out(home)
    decoder = cells.Decoder()
    db, tables = _open_state_db(home, decoder)
    try:
        version = _schema_version(db, tables, home, force)
    except HermesHomeError:
        db.close()
        raise
    repaired: list[dict[str, str]] = []
    session_repairs: dict[Any, list[dict[str, str]]] = {}
    # Only what differs from Hermes' defaults: a missing column reads as its default again.
    sessions = []
    for r in _rows(db, "SELECT * FROM sessions ORDER BY started_at, id"):
        notes: list[str] = []
        ident = r.get("id")
        r = {"id": ident, **cells.clean({k: v for k, v in r.items() if k != "id"}, notes)}
        sessions.append({k: v for k, v in r.items() if v is not None and SESSION_DEFAULTS.get(k) != v})
        if notes:
            session_repairs.setdefault(ident, []).extend({"what": f"session {ident}", "reason": n} for n in notes)
    usage: dict[str, list[dict[str, Any]]] = {}
    if "session_model_usage" in tables:
        for r in _rows(db, "SELECT * FROM session_model_usage ORDER BY rowid"):
            notes = []
            usage.setdefault(r["session_id"], []).append(cells.clean(r, notes))
            session_repairs.setdefault(r["session_id"], []).extend(
                {"what": f"model usage row of session {r['session_id']}", "reason": n} for n in notes)
    routing, scopes = _routing(db, tables, home, root, skipped)
    lid_dir = _lid_dir(home, root, skipped)
    ledger = []
    if "delivery_obligations" in tables:
        for r in _rows(db, "SELECT * FROM delivery_obligations ORDER BY created_at, obligation_id"):
            notes = []
            ledger.append(cells.clean(r, notes))
            repaired += [{"what": f"ledger row {ledger[-1].get('obligation_id')}", "reason": n} for n in notes]
    return HermesHome(
        path=root, schema_version=version, sessions=sessions, usage=usage, routing=routing,
        routing_scopes=scopes, restart_counts=_restart_counts(home, root, skipped), ledger=ledger,
        reset=_reset_settings(home, root, skipped), options=_key_options(home, root, skipped), lid_dir=lid_dir,
        lid_mappings=_lid_mappings(home, lid_dir, root, skipped),
        skipped=skipped, repaired=repaired, session_repairs=session_repairs, _db=db, _decoder=decoder,
    )


def _schema_version(db: sqlite3.Connection, tables: set[str], home: Path, force: bool) -> int | None:
    """The home's schema version; one newer than 0.19.0's (or not a number) is refused unless `force`:
    its columns may mean something this importer does not know."""
    if "schema_version" not in tables:
        return None  # a home older than the table: read by column name like any older home
    row = db.execute("SELECT version FROM schema_version").fetchone()
    raw = row[0] if row else None
    version = cells.integer(raw, "version", None, [])
    if raw is not None and (version is None or version > SCHEMA_VERSION) and not force:
        raise HermesHomeError(f"{home / 'state.db'}: schema version {cells.text(raw, 'version', [])!r} is not one"
                              f" this importer knows (Hermes 0.19.0 writes {SCHEMA_VERSION}); give --force to"
                              " try anyway")
    return version


def _inside(root: Path, path: Path) -> bool:
    """Whether `path`, links resolved, is within the home (a planted link may name any file)."""
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):  # a loop of links
        return False


def _outside(root: Path, path: Path, what: str, skipped: list[dict[str, str]]) -> bool:
    if _inside(root, path):
        return False
    skipped.append({"what": what, "reason": f"a link to {os.path.realpath(path)}, outside the home: not read"})
    return True


def _clean_message(row: tuple[Any, ...], notes: list[str]) -> tuple[Any, ...]:
    out = []
    for name, value in zip(MESSAGE_COLUMNS, row):
        if name == "id":
            out.append(value)
        elif name == "timestamp":
            out.append(cells.epoch(value, name, notes))
        elif name in _INT_COLUMNS:
            out.append(cells.integer(value, name, _INT_COLUMNS[name], notes, minimum=0))
        elif name == "session_id":
            out.append(value)  # the session's id as read, to group by it (a bad one skips its session)
        else:
            out.append(cells.text(value, name, notes))
    return tuple(out)


def _rows(db: sqlite3.Connection, sql: str) -> list[dict[str, Any]]:
    cursor = db.execute(sql)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, values)) for values in cursor.fetchall()]


def _default_sql(column: str) -> str:
    default = MESSAGE_DEFAULTS.get(column)
    return f"{'NULL' if default is None else default} AS {column}"


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


def _routing(db: sqlite3.Connection, tables: set[str], home: Path, root: Path,
             skipped: list[dict[str, str]]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Every scope's DB rows (normally one: the path of the machine that wrote them), then
    sessions.json for keys the DB lacks (HERMES_FORMATS §2.3)."""
    entries: dict[str, dict[str, Any]] = {}
    scopes: list[str] = []
    if "gateway_routing" in tables:
        for scope, key, entry_json in db.execute(
                "SELECT scope, session_key, entry_json FROM gateway_routing ORDER BY updated_at DESC, scope"):
            scope = cells.text(scope, "scope", [])
            if scope is not None and scope not in scopes:
                scopes.append(scope)
            if not cells.is_clean_text(key):
                skipped.append({"what": f"routing entry {cells.text(key, 'key', [])!r}",
                                "reason": "its key is not valid text"})
                continue
            entry = json_value(entry_json)
            if not isinstance(entry, dict):
                skipped.append({"what": f"routing entry {key}", "reason": "entry_json is not a JSON object"})
                continue
            entries.setdefault(key, entry)
    legacy = home / "sessions" / "sessions.json"
    if legacy.is_file() and not _outside(root, legacy, "sessions/sessions.json", skipped):
        try:
            data = json_value(legacy.read_bytes(), strict=True)
        except (OSError, ValueError) as e:
            skipped.append({"what": "sessions/sessions.json", "reason": f"unreadable ({e})"})
            data = {}
        for key, entry in (data.items() if isinstance(data, dict) else ()):
            if key.startswith("_"):
                continue
            if not isinstance(entry, dict):
                skipped.append({"what": f"routing entry {key}", "reason": "not an object"})
                continue
            entries.setdefault(key, entry)
    return entries, scopes


def json_value(raw: Any, *, strict: bool = False) -> Any:
    """A JSON text as the value it holds when it can go into an event (valid text, no lone
    surrogates, integers orjson can hold); None otherwise, or ValueError when `strict`."""
    try:
        if not (isinstance(raw, bytes) or cells.is_clean_text(raw)):
            raise ValueError("not valid UTF-8")
        value = json.loads(raw)
        orjson.dumps(value)  # what an event cannot hold (a lone surrogate escape, a huge integer)
        return value
    except (TypeError, ValueError, RecursionError, orjson.JSONEncodeError) as e:
        if strict:
            raise ValueError(str(e)[:200]) from None
        return None


def _json_object(home: Path, root: Path, name: str, skipped: list[dict[str, str]]) -> dict[str, Any]:
    """A home file holding one JSON object; {} when absent, and named in `skipped` when unreadable."""
    path = home / name
    if not path.is_file() or _outside(root, path, name, skipped):
        return {}
    try:
        data = json_value(path.read_bytes(), strict=True)
    except (OSError, ValueError) as e:
        skipped.append({"what": name, "reason": f"unreadable ({e})"})
        return {}
    return data if isinstance(data, dict) else {}


def _restart_counts(home: Path, root: Path, skipped: list[dict[str, str]]) -> dict[str, int]:
    data = _json_object(home, root, ".restart_failure_counts", skipped)
    return {k: v for k, v in data.items() if type(v) is int and v > 0}


def _reset_settings(home: Path, root: Path, skipped: list[dict[str, str]]) -> dict[str, Any]:
    """Per-platform / per-chat-type reset policies live only in the legacy gateway.json."""
    data = _json_object(home, root, "gateway.json", skipped)
    return {k: data[k] for k in ("session_reset", "reset_by_platform", "reset_by_type") if k in data}


def _key_options(home: Path, root: Path, skipped: list[dict[str, str]]) -> dict[str, bool]:
    """The two key flags from config.yaml: top-level `name: true|false`, else under `gateway:`.

    A line reader, not a YAML parser: these are plain booleans, and turnlog has no YAML dependency.
    """
    found: dict[str, bool] = {}
    nested: dict[str, bool] = {}
    path = home / "config.yaml"
    readable = path.is_file() and not _outside(root, path, "config.yaml", skipped)
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines() if readable else []
    section = None
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indented = line[0] in " \t"
        name, _, value = line.strip().partition(":")
        if not indented:
            section = name
        value = value.split("#")[0].strip().lower()
        if name in ("group_sessions_per_user", "thread_sessions_per_user") and value in ("true", "false"):
            (nested if indented and section == "gateway" else found if not indented else {})[name] = value == "true"
    options = {"group_sessions_per_user": True, "thread_sessions_per_user": False}
    options.update(nested)
    options.update(found)
    return options


def _lid_dir(home: Path, root: Path, skipped: list[dict[str, str]]) -> Path | None:
    for relative in LID_DIRS:
        directory = home / relative
        if directory.is_dir() and any(directory.glob("lid-mapping-*.json")):
            return None if _outside(root, directory, relative, skipped) else directory
    return None


def _lid_mappings(home: Path, directory: Path | None, root: Path, skipped: list[dict[str, str]]) -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted(directory.glob("lid-mapping-*.json")) if directory is not None else ():
        if not path.is_file() or _outside(root, path, os.path.relpath(path, home), skipped):
            continue  # not a regular file (a FIFO would block the read forever), or a link out of the home
        try:
            value = json_value(path.read_bytes(), strict=True)
        except (OSError, ValueError):
            continue
        if isinstance(value, str):
            found[path.name] = value
    return found


def lid_aliases(mappings: dict[str, str]) -> dict[str, list[str]]:
    """The bridge files read (name -> value) as the alias mapping the key rule takes, so keys are
    computed from what was read inside the home, never from the directory (and its links)."""
    aliases: dict[str, list[str]] = {}
    for name, value in mappings.items():
        ident = name.removeprefix("lid-mapping-").removesuffix(".json").removesuffix("_reverse")
        aliases.setdefault(ident, []).append(value)
    return aliases
