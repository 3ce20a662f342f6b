"""The routing map as Hermes' sessions.json holds it: session_key -> entry (docs/behaviour.md §3.1),
made from the routes and sessions read models' rows."""

from __future__ import annotations

from typing import Any

from ..domain.collisions import refuse_colliding_keys

ROUTING_JSON_README = (
    "Routing map exported by turnlog from its event log (sessions.json-compatible). "
    "Keys starting with '_' are not routes."
)


def routing_map(routes: list[dict[str, Any]], sessions: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """`routes`: the routes' rows; `sessions`: session_id -> its row. A route whose session is not
    among them is left out; key strings that collide are refused (one entry per key string)."""
    refuse_colliding_keys(routes)
    out: dict[str, Any] = {"_README": ROUTING_JSON_README}
    for route in routes:
        session = sessions.get(route["session_id"])
        if session is not None:
            out[route["session_key"]] = _entry(route, session)
    return out


_AUTO_RESET_REASONS = {"idle", "daily", "suspended", "resume_pending_expired"}


def _entry(route: dict[str, Any], session: dict[str, Any]) -> dict[str, Any]:
    reason = session["created_reason"]
    return {
        "session_key": route["session_key"],
        "session_id": session["session_id"],
        "created_at": session["created_at"],
        "updated_at": session["updated_at"],
        "origin": route["origin"],
        "display_name": session["display_name"],
        "platform": route["platform"],
        "chat_type": route["chat_type"] or "dm",
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "total_tokens": 0,
        "last_prompt_tokens": 0,
        "estimated_cost_usd": 0.0,
        "cost_status": "unknown",
        "was_auto_reset": reason in _AUTO_RESET_REASONS,
        "auto_reset_reason": reason if reason in _AUTO_RESET_REASONS else None,
        "reset_had_activity": False,
        "is_fresh_reset": reason == "force_new",
        "expiry_finalized": False,
        "suspended": session["suspended"],
        "resume_pending": session["resume_pending"],
        "resume_reason": session["resume_reason"],
        "last_resume_marked_at": session["resume_marked_at"],
        "model_override": None,
    }
