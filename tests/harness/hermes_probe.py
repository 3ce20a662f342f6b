"""Run by the Python of a hermes-agent 0.19.0 install (TURNLOG_HERMES_PYTHON), never by turnlog's:
opens the Hermes home at HERMES_HOME with Hermes' own SessionDB and SessionStore and answers, as
JSON on stdout, what the request on stdin asks:

    {"conversations": [session_id, ...],   -> SessionDB.get_messages_as_conversation
     "searches": [query, ...],             -> SessionDB.search_messages: [[session_id, message id], ...]
     "routes": [session_key, ...]}         -> SessionStore.get_or_create_session on the key's origin

A route is asked as a message arriving a minute after the entry's last update (Hermes' clock,
`gateway.session._now`, pinned there), so a reset policy's idle timer does not decide it.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timedelta
from pathlib import Path


def main() -> None:
    request = json.load(sys.stdin)
    home = Path(os.environ["HERMES_HOME"])
    import gateway.session as hermes_session  # after HERMES_HOME: Hermes binds its paths at import
    import hermes_state
    from gateway.config import load_gateway_config
    from gateway.session import SessionSource, SessionStore

    db = hermes_state.SessionDB()
    out: dict[str, object] = {
        "conversations": {sid: db.get_messages_as_conversation(sid) for sid in request.get("conversations", [])},
        "searches": {q: [[hit["session_id"], hit["id"]] for hit in db.search_messages(q, limit=100)]
                     for q in request.get("searches", [])},
    }
    routes: dict[str, object] = {}
    entries = json.loads((home / "sessions" / "sessions.json").read_text())
    store = SessionStore(home / "sessions", load_gateway_config())
    for key in request.get("routes", []):
        entry = entries[key]
        updated = datetime.fromisoformat(entry["updated_at"]) + timedelta(minutes=1)
        hermes_session._now = lambda at=updated: at  # type: ignore[attr-defined]
        got = store.get_or_create_session(SessionSource.from_dict(entry["origin"]))
        routes[key] = {"session_id": got.session_id, "session_key": got.session_key}
    out["routes"] = routes
    json.dump(out, sys.stdout, ensure_ascii=False, default=str)


if __name__ == "__main__":
    main()
