"""Time travel: the gateway as of a position or a time (routing map, sessions, leases, ledger,
queues), and the diff between two moments."""

from __future__ import annotations

from typing import Any

from .html import Markup, link, session_href, table, tag, text, url
from .numbers import page_number, position_text
from .snapshot import Snapshot
from .viewer import Result

KEYS_PER_PAGE = 50


def moment(v: Snapshot, raw: str | None, default: int) -> int:
    """A position from `#N`, `N` or an ISO time (400 for anything else or outside the log)."""
    if raw is None or not raw.strip():
        return default
    return v.t.at(position_text(raw.strip())).position


def travel(v: Snapshot, params: dict[str, str]) -> Result:
    t = v.t
    head = t.maintenance.log_head()
    if head == 0:
        return Result("Time travel", {"head": 0}, tag("p", "the log is empty", class_="empty"))
    position = moment(v, params.get("at"), head)
    key = params.get("key", "").strip() or None
    page_n = page_number(params.get("page", "1"))
    asof = t.at(position)
    routes = asof.routes(key)
    shown = routes[(page_n - 1) * KEYS_PER_PAGE: page_n * KEYS_PER_PAGE]
    events = [e.to_dict() for e in t.events_around(position, before=6, after=6)]
    # Sessions, leases, ledger and queues are rebuilt per session as of the position, so the page
    # shows those of the chosen key, or else of the sessions the nearby events concern.
    if key:
        focus = [(r["session_key"], r["session_id"]) for r in routes]
    else:
        concerned = list(dict.fromkeys(e["session_id"] for e in events if e["session_id"]))
        bound = {r["session_id"]: r["session_key"] for r in routes if r["session_id"]}
        focus = [(bound.get(sid), sid) for sid in concerned]
    sessions, leases, ledger, queue = [], [], [], []
    for session_key, sid in focus:
        if sid:
            if (s := asof.session(sid)) is not None:
                sessions.append(s)
                session_key = session_key or s["session_key"]
            if (lease := asof.lease(sid)) is not None:
                leases.append(lease)
            ledger += asof.ledger(session=sid)
        if session_key:
            queue += [{"session_key": session_key, **item} for item in asof.queue(session_key)]
    data = {"position": position, "at": asof.at, "head": head, "key": key, "page": page_n,
            "keys_per_page": KEYS_PER_PAGE, "routes_total": len(routes), "routes": shown, "sessions": sessions,
            "leases": leases, "ledger": ledger, "queue": queue, "events": events}
    return Result(f"Time travel: #{position}", data, _body(data))


def _body(d: dict[str, Any]) -> Markup:
    pos, head = d["position"], d["head"]
    form = tag("form", Markup(
        tag("label", Markup("position " + tag("input", type="range", min=1, max=head, value=pos, id="slider",
                                               **{"aria-label": "log position"}))) +
        tag("input", type="text", name="at", value=f"#{pos}", id="position", size=14,
            title="#N, N or an ISO time with a zone") +
        tag("input", type="hidden", name="key", value=d["key"] or "") +
        tag("button", "go", type="submit", id="go")), method="get", action="/travel", id="travel-form",
        class_="filters")
    diff_form = tag("form", Markup(
        text("diff from ") + tag("input", name="a", value=f"#{max(1, pos - 10)}", size=10, id="diff-a")
        + text(" to ") + tag("input", name="b", value=f"#{pos}", size=10, id="diff-b")
        + tag("button", "diff", type="submit")), method="get", action="/travel/diff", class_="filters")
    here = tag("p", f"as of #{pos} of {head} · {d['at']}", id="as-of", **{"data-position": pos})
    sl = {"session_id": lambda r: link(session_href(r["session_id"]), r["session_id"]) if r.get("session_id") else ""}
    pages = max(1, -(-d["routes_total"] // d["keys_per_page"]))
    pager = []
    if d["page"] > 1:
        pager.append(link(url("/travel", at=f"#{pos}", key=d["key"], page=d["page"] - 1), "← previous keys"))
    pager.append(text(f" keys page {d['page']} of {pages} ({d['routes_total']} keys) "))
    if d["page"] < pages:
        pager.append(link(url("/travel", at=f"#{pos}", key=d["key"], page=d["page"] + 1), "next keys →"))
    ev = {"position": lambda r: link(url("/travel", at=f"#{r['position']}", key=d["key"]), f"#{r['position']}",
                                     class_="here" if r["position"] == pos else None)}
    return Markup(
        form + here + diff_form
        + tag("h2", "Events around it") + table(d["events"], ["position", "at", "event", "actor", "cause",
                                                               "summary"], cells=ev, id="events")
        + tag("h2", "Routing map") + table(d["routes"], ["session_key", "session_id", "bound_reason",
                                                          "from_position"], cells=sl, empty="no key yet", id="routes")
        + tag("p", Markup("".join(pager)), class_="pager")
        + tag("h2", f"Sessions of key {d['key']}" if d["key"] else "Sessions the events around it concern")
        + table(d["sessions"], ["session_id", "session_key", "created_reason", "suspended", "resume_pending",
                                "ended", "end_reason"], cells=sl, id="asof-sessions")
        + tag("h2", "Leases") + table(d["leases"], ["session_id", "epoch", "owner", "turn_id", "expires_at",
                                                     "last_seq"], cells=sl, empty="no lease")
        + tag("h2", "Ledger") + table(d["ledger"], ["session_id", "seq", "state", "attempts", "owner", "content"],
                                      cells=sl, empty="nothing owed")
        + tag("h2", "Queues") + table(d["queue"], ["session_key", "item_id", "kind", "state", "text"],
                                      empty="nothing waiting"))


def diff(v: Snapshot, params: dict[str, str]) -> Result:
    head = v.t.maintenance.log_head()
    a = moment(v, params.get("a"), 1)
    b = moment(v, params.get("b"), head)
    key = params.get("key", "").strip() or None
    d = v.t.diff(a, b, key=key, max_events=v.max_diff_events)  # TooLarge -> 413
    keys = [{"session_key": k, **c} for k, changes in d["keys"].items() for c in changes]
    sessions = [{"session_id": sid, **c} for sid, c in d["sessions"].items()]
    data = {**d, "key": key}
    body = Markup(
        tag("p", f"from #{d['from']} to #{d['to']}: {d['events']} events", id="diff-range")
        + tag("h2", "Routing keys (registered, rebound)")
        + table(keys, ["session_key", "change", "from_session", "to_session", "reason"], empty="no key changed")
        + tag("h2", "Sessions (created, ended, leases, messages, deliveries)")
        + table(sessions, ["session_id", "session", "lease", "messages_added", "deliveries"],
                cells={"session_id": lambda r: link(session_href(r["session_id"]), r["session_id"])},
                empty="no session changed"))
    return Result(f"Diff #{d['from']} → #{d['to']}", data, body)
