"""Sessions (filters and full-text search), one session (transcript, lineage, audit timeline),
and one session as of an event's position."""

from __future__ import annotations

from typing import Any

import orjson

from .. import InvalidRequest, LeaseHolder
from .html import Markup, join, link, session_href, table, tag, text, url
from .numbers import is_number, page_number
from .snapshot import Snapshot
from .viewer import Result

PAGE_SIZE = 100
STATES = ("active", "ended", "suspended", "resume_pending")


def _lease(holder: LeaseHolder | None) -> dict[str, Any] | None:
    return holder.to_dict() if holder is not None else None


def _state(s: dict[str, Any]) -> str:
    if s["ended_at"]:
        return "ended"
    if s["suspended"]:
        return "suspended"
    if s["resume_pending"]:
        return "resume_pending"
    return "active"


def _page_number(params: dict[str, str]) -> int:
    return page_number(params.get("page", "1"))


def sessions(v: Snapshot, params: dict[str, str]) -> Result:
    t = v.t
    platform, state, key, q, title = (params.get(n, "").strip() for n in ("platform", "state", "key", "q", "title"))
    if state and state not in STATES:
        raise InvalidRequest(f"bad state {state!r} (known: {', '.join(STATES)})")
    page = _page_number(params)
    keys = v.routing_keys()
    hits: dict[str, dict[str, Any]] = {}
    if q:
        for hit in t.search(q, platform=platform or None, limit=100):
            hits.setdefault(hit.session_id, hit.to_dict())
    rows = []
    everything = v.sessions().values()
    for s in everything:
        if platform and s["platform"] != platform:
            continue
        if state and _state(s) != state:
            continue
        if key and key not in (s["session_key"] or "") and not any(key in k for k in keys.get(s["session_id"], [])):
            continue
        if q and s["session_id"] not in hits:
            continue
        if title and title.lower() not in (s.get("title") or "").lower():
            continue
        rows.append({"session_id": s["session_id"], "title": s.get("title"), "platform": s["platform"],
                     "state": _state(s),
                     "session_key": s["session_key"], "routing_keys": keys.get(s["session_id"], []),
                     "created_at": s["created_at"], "created_reason": s["created_reason"],
                     "display_name": s["display_name"],
                     **({"match": hits[s["session_id"]].get("snippet") or hits[s["session_id"]].get("content")}
                        if q else {})})
    if q:  # best match first, as search ranked them
        order = {sid: n for n, sid in enumerate(hits)}
        rows.sort(key=lambda r: order[r["session_id"]])
    total = len(rows)
    shown = rows[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]
    data = {"filters": {"platform": platform, "state": state, "key": key, "q": q, "title": title}, "page": page,
            "page_size": PAGE_SIZE, "total": total, "sessions": shown}
    platforms = sorted({s["platform"] for s in everything if s["platform"]})
    return Result("Sessions", data, _sessions_body(data, platforms))


def _select(name: str, value: str, options: list[str]) -> Markup:
    opts = [tag("option", "any", value="")] + [tag("option", o, value=o, selected=o == value) for o in options]
    return tag("select", Markup("".join(opts)), name=name, id=f"filter-{name}")


def _sessions_body(d: dict[str, Any], platforms: list[str]) -> Markup:
    f = d["filters"]
    form = tag("form", Markup(
        text(tag("label", Markup(f"platform {_select('platform', f['platform'], platforms)}")))
        + text(tag("label", Markup(f"state {_select('state', f['state'], list(STATES))}")))
        + text(tag("label", Markup("key " + tag("input", name="key", value=f["key"], id="filter-key"))))
        + text(tag("label", Markup("title " + tag("input", name="title", value=f["title"], id="filter-title"))))
        + text(tag("label", Markup("text " + tag("input", name="q", value=f["q"], id="filter-q",
                                                  placeholder="full-text search (CJK too)"))))
        + tag("button", "filter", type="submit")), method="get", action="/sessions", class_="filters")
    columns = ["session_id", "title", "platform", "state", "routing_keys", "created_at", "created_reason"]
    if f["q"]:
        columns.append("match")
    cells = {"session_id": lambda r: link(session_href(r["session_id"]), r["session_id"], class_="session-link"),
             "routing_keys": lambda r: join(r["routing_keys"], "\n"),
             "match": lambda r: _snippet(r.get("match"))}
    pages = max(1, -(-d["total"] // d["page_size"]))
    nav = []
    if d["page"] > 1:
        nav.append(link(url("/sessions", **f, page=d["page"] - 1), "← previous"))
    nav.append(text(f" page {d['page']} of {pages} ({d['total']} sessions) "))
    if d["page"] < pages:
        nav.append(link(url("/sessions", **f, page=d["page"] + 1), "next →"))
    return Markup(form + table(d["sessions"], columns, cells=cells, empty="no session matches", id="sessions")
                  + tag("p", Markup("".join(nav)), class_="pager"))


def _snippet(snippet: Any) -> Markup:
    # The search marks matches with [ ]; show them highlighted, everything else escaped.
    parts = str(snippet or "").split("[")
    out: list[str] = [text(parts[0])]
    for part in parts[1:]:
        hit, _, rest = part.partition("]")
        out.append(tag("mark", hit) + text(rest))
    return Markup("".join(out))


def session(v: Snapshot, session_id: str, params: dict[str, str]) -> Result:
    t = v.t
    s = v.session(session_id)  # NotFound -> 404
    messages = t.transcript(session_id)
    history = [e.to_dict() for e in t.history(session_id)]
    by_id = v.sessions()
    ancestors: list[dict[str, Any]] = []
    cur = s
    while (parent := cur.get("parent_session_id") or cur.get("previous_session_id")) and parent in by_id \
            and len(ancestors) < 100:
        cur = by_id[parent]
        ancestors.append({"session_id": parent, "created_reason": cur["created_reason"],
                          "relation": "parent" if s.get("parent_session_id") == parent else "previous"})
    children = [{"session_id": x["session_id"], "created_reason": x["created_reason"],
                 "relation": "child" if x["parent_session_id"] == session_id else "next"}
                for x in by_id.values() if session_id in (x["parent_session_id"], x["previous_session_id"])]
    switches = [e for e in history if e["event"].startswith("Route") or "resume" in str(e["cause"] or "")]
    usage: dict[str, int] = {}
    for m in messages:
        usage[m["role"]] = usage.get(m["role"], 0) + (m["token_count"] or 0)
    data = {"session": s, "lease": _lease(t.turns.holder(session_id)), "messages": messages,
            "token_usage": {"by_role": usage, "total": sum(usage.values()),
                            "tool_calls": sum(len(m["tool_calls"] or []) for m in messages)},
            "lineage": {"ancestors": ancestors, "descendants": children, "route_changes": switches},
            "timeline": history}
    return Result(f"Session {session_id}", data, _session_body(data))


# What a message's fate says beside it: it stays in the transcript, flagged.
FATE_NOTES = {"undone": "undone: not in the agent's history", "retried": "retried: not in the agent's history",
              "compacted": "compacted: a summary stands for it in the agent's history"}


def _message(m: dict[str, Any]) -> Markup:
    fate = m.get("fate")
    note = tag("span", FATE_NOTES.get(fate, fate), class_="fate") if fate else Markup("")
    head = tag("div", Markup(tag("span", m["role"], class_="role") + text(f" #{m['seq']} · {m['timestamp']}")
                             + text(f" · {m['token_count']} tokens" if m["token_count"] else "")
                             + (text(" · ") + note if fate else Markup(""))), class_="meta")
    body = tag("div", m["content"], class_="content")
    folds = []
    if m["tool_calls"]:
        folds.append(tag("details", Markup(tag("summary", f"{len(m['tool_calls'])} tool call(s)")
                                           + tag("pre", orjson.dumps(m["tool_calls"], option=orjson.OPT_INDENT_2,
                                                                     default=str).decode())), class_="tool-calls"))
    if m["role"] == "tool":  # a tool's output is long and rarely what one reads first
        body = tag("details", Markup(tag("summary", f"tool result {m['name'] or ''} {m['tool_call_id'] or ''}")
                                     + body), class_="tool-result")
    return tag("article", Markup(head + body + "".join(folds)),
               class_=f"msg role-{m['role']}" + (f" fate-{fate}" if fate else ""))


def _session_body(d: dict[str, Any]) -> Markup:
    s = d["session"]
    sid = s["session_id"]
    shown = ("title", "session_key", "platform", "chat_type", "created_at", "created_reason", "suspended",
             "resume_pending", "ended_at", "end_reason")
    facts = table([{k: s.get(k) for k in shown}], list(shown), id="facts")
    u = d["token_usage"]
    usage = tag("p", f"token usage: {u['total']} ({', '.join(f'{r} {n}' for r, n in u['by_role'].items())}); "
                     f"tool calls: {u['tool_calls']}", id="usage")
    transcript = Markup("".join(_message(m) for m in d["messages"])) if d["messages"] else \
        tag("p", "no messages", class_="empty")
    sl = {"session_id": lambda r: link(session_href(r["session_id"]), r["session_id"])}
    lin = d["lineage"]
    lineage = Markup(tag("h3", "came from") + table(lin["ancestors"], ["session_id", "relation", "created_reason"],
                                                     cells=sl, empty="a first session")
                     + tag("h3", "continued in") + table(lin["descendants"], ["session_id", "relation",
                                                                               "created_reason"],
                                                         cells=sl, empty="no later session")
                     + tag("h3", "routing changes (rebinds, /resume switches)")
                     + table(lin["route_changes"], ["position", "at", "event", "actor", "cause", "summary"],
                             cells={"position": lambda r: _event_link(sid, r)}, empty="none"))
    timeline = table(d["timeline"], ["position", "at", "event", "actor", "cause", "summary"],
                     cells={"position": lambda r: _event_link(sid, r)}, id="timeline")
    return Markup(facts + usage + tag("h2", "Transcript") + tag("section", transcript, id="transcript")
                  + tag("h2", "Lineage") + lineage + tag("h2", "Audit timeline") + timeline)


def _event_link(session_id: str, row: dict[str, Any]) -> Markup:
    return link(session_href(session_id, "at", row["position"]), f"#{row['position']}", class_="event-link")


def parse_position(v: Snapshot, raw: str) -> int:
    text_ = raw.strip().removeprefix("#")
    if not is_number(text_):
        raise InvalidRequest(f"bad log position {raw!r} (expected #N)")
    position, head = int(text_), v.t.maintenance.log_head()
    if not 1 <= position <= head:
        raise InvalidRequest(f"log position {position} is outside the log (1..{head})")
    return position


def session_at(v: Snapshot, session_id: str, raw_position: str, params: dict[str, str]) -> Result:
    t = v.t
    v.session(session_id)  # NotFound -> 404
    position = parse_position(v, raw_position)
    asof = t.at(position)
    state = asof.session(session_id)
    data = {"session_id": session_id, "position": position, "at": asof.at, "session": state,
            "lease": asof.lease(session_id), "ledger": asof.ledger(session=session_id),
            "messages": len(asof.transcript(session_id)), "events": [e.to_dict() for e in t.events_around(position, before=5, after=5)]}
    return Result(f"Session {session_id} as of #{position}", data, _at_body(data))


def _at_body(d: dict[str, Any]) -> Markup:
    sid, pos = d["session_id"], d["position"]
    s = d["session"]
    facts = table([s], list(s)) if s else tag("p", "the session did not exist yet", class_="empty")
    lease = d["lease"]
    return Markup(
        tag("p", Markup(text(f"as of #{pos} ({d['at']}) · {d['messages']} messages · ")
                        + link(session_href(sid), "the session now") + text(" · ")
                        + link(url("/travel", at=f"#{pos}"), "time travel to this event", id="travel-here")),
            class_="position", **{"data-position": pos})
        + tag("h2", "Session") + facts
        + tag("h2", "Lease") + (table([lease], list(lease)) if lease else tag("p", "no lease yet", class_="empty"))
        + tag("h2", "Ledger") + table(d["ledger"], ["seq", "state", "attempts", "owner", "content"],
                                      empty="nothing owed yet")
        + tag("h2", "Events around it")
        + table(d["events"], ["position", "at", "event", "actor", "cause", "summary"],
                cells={"position": lambda r: tag("strong" if r["position"] == pos else "span", f"#{r['position']}")}))
