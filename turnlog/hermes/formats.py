"""Reading a Hermes home (HERMES_FORMATS.md): state.db by column name, the routing index, the
files beside it. Read-only: the home is opened `mode=ro` and never changed.

Older homes lack columns (Hermes adds them with ALTER TABLE when it opens a home), so every row
is read by name and a missing column takes its 0.19.0 default.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ..errors import HermesHomeError, InvalidRequest

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
    _db: sqlite3.Connection | None = None

    def messages(self) -> Iterator[tuple[str, list[tuple[Any, ...]]]]:
        """(session_id, rows in id order) for every session with rows, one session at a time.

        Rows are tuples in MESSAGE_COLUMNS order (a column the home lacks reads as its default):
        at 100k rows, tuples instead of dicts are a measurable part of an import's time."""
        assert self._db is not None
        present = _columns(self._db, "messages")
        select = ", ".join(c if c in present else _default_sql(c) for c in MESSAGE_COLUMNS)
        cursor = self._db.execute(f"SELECT {select} FROM messages ORDER BY session_id, id")
        current: str | None = None
        batch: list[tuple[Any, ...]] = []
        while chunk := cursor.fetchmany(5000):
            for row in chunk:
                if row[1] != current:
                    if batch:
                        yield current, batch  # type: ignore[misc]
                    current, batch = row[1], []
                batch.append(row)
        if batch:
            yield current, batch  # type: ignore[misc]

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


def read_home(hermes_home: str | Path, profile: str | None = None) -> HermesHome:
    home = home_of(hermes_home, profile)
    try:
        db = sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True)
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as e:
        raise HermesHomeError(f"{home / 'state.db'}: not a readable SQLite database ({e})") from None
    if "sessions" not in tables:
        db.close()
        raise HermesHomeError(f"{home / 'state.db'}: no sessions table (is this a Hermes state.db?)")
    skipped: list[dict[str, str]] = []
    version = None
    if "schema_version" in tables:
        row = db.execute("SELECT version FROM schema_version").fetchone()
        version = row[0] if row else None
    # Only what differs from Hermes' defaults: a missing column reads as its default again.
    sessions = [{k: v for k, v in r.items() if v is not None and SESSION_DEFAULTS.get(k) != v}
                for r in _rows(db, "SELECT * FROM sessions ORDER BY started_at, id")]
    usage: dict[str, list[dict[str, Any]]] = {}
    if "session_model_usage" in tables:
        for r in _rows(db, "SELECT * FROM session_model_usage ORDER BY rowid"):
            usage.setdefault(r["session_id"], []).append(r)
    routing, scopes = _routing(db, tables, home, skipped)
    lid_dir = _lid_dir(home)
    ledger = _rows(db, "SELECT * FROM delivery_obligations ORDER BY created_at, obligation_id") \
        if "delivery_obligations" in tables else []
    return HermesHome(
        path=home.resolve(), schema_version=version, sessions=sessions, usage=usage, routing=routing,
        routing_scopes=scopes, restart_counts=_restart_counts(home, skipped), ledger=ledger,
        reset=_reset_settings(home, skipped), options=_key_options(home), lid_dir=lid_dir,
        lid_mappings=_lid_mappings(lid_dir),
        skipped=skipped, _db=db,
    )


def _rows(db: sqlite3.Connection, sql: str) -> list[dict[str, Any]]:
    cursor = db.execute(sql)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, values)) for values in cursor.fetchall()]


def _default_sql(column: str) -> str:
    default = MESSAGE_DEFAULTS.get(column)
    return f"{'NULL' if default is None else default} AS {column}"


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


def _routing(db: sqlite3.Connection, tables: set[str], home: Path,
             skipped: list[dict[str, str]]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Every scope's DB rows (normally one: the path of the machine that wrote them), then
    sessions.json for keys the DB lacks (HERMES_FORMATS §2.3)."""
    entries: dict[str, dict[str, Any]] = {}
    scopes: list[str] = []
    if "gateway_routing" in tables:
        for scope, key, entry_json in db.execute(
                "SELECT scope, session_key, entry_json FROM gateway_routing ORDER BY updated_at DESC, scope"):
            if scope not in scopes:
                scopes.append(scope)
            try:
                entry = json.loads(entry_json)
            except ValueError:
                skipped.append({"what": f"routing entry {key}", "reason": "entry_json is not JSON"})
                continue
            if isinstance(entry, dict):
                entries.setdefault(key, entry)
    legacy = home / "sessions" / "sessions.json"
    if legacy.is_file():
        try:
            data = json.loads(legacy.read_text(encoding="utf-8"))
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


def _json_object(home: Path, name: str, skipped: list[dict[str, str]]) -> dict[str, Any]:
    """A home file holding one JSON object; {} when absent, and named in `skipped` when unreadable."""
    path = home / name
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        skipped.append({"what": name, "reason": f"unreadable ({e})"})
        return {}
    return data if isinstance(data, dict) else {}


def _restart_counts(home: Path, skipped: list[dict[str, str]]) -> dict[str, int]:
    data = _json_object(home, ".restart_failure_counts", skipped)
    return {k: v for k, v in data.items() if isinstance(v, int) and v > 0}


def _reset_settings(home: Path, skipped: list[dict[str, str]]) -> dict[str, Any]:
    """Per-platform / per-chat-type reset policies live only in the legacy gateway.json."""
    data = _json_object(home, "gateway.json", skipped)
    return {k: data[k] for k in ("session_reset", "reset_by_platform", "reset_by_type") if k in data}


def _key_options(home: Path) -> dict[str, bool]:
    """The two key flags from config.yaml: top-level `name: true|false`, else under `gateway:`.

    A line reader, not a YAML parser: these are plain booleans, and turnlog has no YAML dependency.
    """
    found: dict[str, bool] = {}
    nested: dict[str, bool] = {}
    path = home / "config.yaml"
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines() if path.is_file() else []
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


def _lid_dir(home: Path) -> Path | None:
    for relative in LID_DIRS:
        directory = home / relative
        if directory.is_dir() and any(directory.glob("lid-mapping-*.json")):
            return directory
    return None


def _lid_mappings(directory: Path | None) -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted(directory.glob("lid-mapping-*.json")) if directory is not None else ():
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(value, str):
            found[path.name] = value
    return found
