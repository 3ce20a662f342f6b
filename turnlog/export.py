"""Exporting a session (or a whole compression lineage) in Hermes' export shape (docs/behaviour.md §10).

`export_session` gives the session row's fields plus its active messages, tool calls decoded;
`export_lineage` concatenates the compression segments from root to tip and adds `segments`,
`lineage_session_ids` and the total `message_count`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson

from .errors import InvalidRequest, NotFound
from .projections.views import Views

FORMATS = ("json", "jsonl", "markdown")


def epoch_seconds(iso: str | None) -> float | None:
    """An ISO time as Hermes writes times (in its exports and its state.db): seconds since the
    epoch, a float; None stays None (a session not ended)."""
    return None if iso is None else datetime.fromisoformat(iso).timestamp()


def _session(views: Views, session_id: str) -> dict[str, Any]:
    row = views.session(session_id)
    if row is None:
        raise NotFound(f"no session {session_id!r}")
    return row.to_dict()


def export_session(views: Views, session_id: str) -> dict[str, Any]:
    s = _session(views, session_id)
    origin = s.get("origin") or {}
    messages = views.transcript(session_id)
    tool_calls = sum(len(m["tool_calls"] or []) for m in messages)
    return {
        "id": session_id,
        "source": s["platform"],
        "user_id": origin.get("user_id"),
        "session_key": s["session_key"],
        "chat_id": origin.get("chat_id"),
        "chat_type": s["chat_type"],
        "thread_id": origin.get("thread_id"),
        "display_name": s["display_name"],
        "origin_json": orjson.dumps(origin).decode() if origin else None,
        "parent_session_id": s["parent_session_id"],
        "started_at": epoch_seconds(s["created_at"]),
        "ended_at": epoch_seconds(s["ended_at"]),
        "end_reason": s["end_reason"],
        "message_count": len(messages),
        "tool_call_count": tool_calls,
        "title": s.get("title"),
        "messages": [
            {"id": m["seq"], "session_id": session_id, "role": m["role"], "content": m["content"],
             "tool_call_id": m["tool_call_id"], "tool_calls": m["tool_calls"], "tool_name": m["name"],
             "timestamp": epoch_seconds(m["timestamp"]), "token_count": m["token_count"],
             "finish_reason": m["finish_reason"], "platform_message_id": m["platform_message_id"]}
            for m in messages
        ],
    }


def lineage(views: Views, session_id: str) -> list[str]:
    """Root to tip through compression rotations, cycles and depth bounded.

    Only a compression child continues its parent's conversation: a fork already holds a copy of
    its parent's messages, so its lineage starts at the fork (its parent's would repeat them).
    """
    chain = [session_id]
    seen = {session_id}
    current = _session(views, session_id)
    while (current["created_reason"] == "compression" and current["parent_session_id"]
           and current["parent_session_id"] not in seen and len(chain) < 100):
        parent = current["parent_session_id"]
        chain.insert(0, parent)
        seen.add(parent)
        current = _session(views, parent)
    tip = session_id
    while len(chain) < 100:
        child = views.compression_child(tip)
        if child is None or child in seen:
            break
        tip = child
        seen.add(tip)
        chain.append(tip)
    return chain


def export_lineage(views: Views, session_id: str) -> dict[str, Any]:
    ids = lineage(views, session_id)
    segments = [export_session(views, sid) for sid in ids]
    tip = dict(segments[-1])
    tip["messages"] = [m for seg in segments for m in seg["messages"]]
    tip["segments"] = [{k: v for k, v in seg.items() if k != "messages"} for seg in segments]
    tip["lineage_session_ids"] = ids
    tip["message_count"] = sum(seg["message_count"] for seg in segments)
    return tip


def render(exported: dict[str, Any], fmt: str) -> str:
    if fmt not in FORMATS:
        raise InvalidRequest(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
    if fmt == "json":
        return orjson.dumps(exported, option=orjson.OPT_INDENT_2).decode()
    if fmt == "jsonl":
        segments = exported.get("segments")
        if not segments:
            return orjson.dumps(exported).decode()
        by_session: dict[str, list[Any]] = {}
        for m in exported["messages"]:
            by_session.setdefault(m["session_id"], []).append(m)
        return "\n".join(orjson.dumps({**seg, "messages": by_session.get(seg["id"], [])}).decode()
                         for seg in segments)
    lines = [f"# Session {exported['id']}", "", f"- key: `{exported['session_key']}`",
             f"- platform: {exported['source']}", f"- messages: {exported['message_count']}"]
    if exported.get("lineage_session_ids"):
        lines.append(f"- lineage: {' → '.join(exported['lineage_session_ids'])}")
    lines.append("")
    for m in exported["messages"]:
        lines += [f"**{m['role']}** ({m['session_id']} #{m['id']})", "", m["content"], ""]
    return "\n".join(lines)
