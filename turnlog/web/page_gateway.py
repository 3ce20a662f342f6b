"""Gateway now: each gateway's boots and how they ended, active turns, owed replies, queue
depths and suspended sessions (stuck loops among them)."""

from __future__ import annotations

from typing import Any

from .. import BootSummary
from .html import Markup, link, session_href, table, tag, text, url
from .snapshot import Snapshot
from .viewer import Result


def gateway_now(v: Snapshot, params: dict[str, str]) -> Result:
    t = v.t
    names = t.gateways()
    gateways = []
    for name in names:
        status = t.status(name).to_dict()
        boots = [_boot(b) for b in t.boots(name)]
        gateways.append({"name": name, "last_boot": status["last_boot"], "boots": boots})
    status = t.status(names[0] if names else "main").to_dict()
    depths = [row.to_dict() for row in t.queue_depths()]
    data = {"gateways": gateways, "active_turns": status["active_turns"], "expired_leases": status["expired_leases"],
            "owed_replies": status["pending_deliveries"], "dead_replies": status["dead_deliveries"],
            "queue_depths": depths,
            "resume_pending": status["resume_pending"], "suspended": status["suspended"],
            "head": t.maintenance.log_head()}
    return Result("Gateway now", data, _body(data))


# The boot's own fields, in the order the page has always shown them.
BOOT_FIELDS = ("boot_id", "pid", "host", "started_at", "state", "drain_reason", "stopped_at", "drain_timed_out",
               "recovered")


def _boot(boot: BootSummary) -> dict[str, Any]:
    b = boot.to_dict()
    out = {k: b[k] for k in BOOT_FIELDS}
    state = b.get("state")
    # A boot still marked running may be alive or may have died without a word; once another boot
    # recovered it, it is known dead. Only a stop ends a boot clean.
    out["alive"] = state in ("running", "draining") and not b.get("recovered")
    out["ended"] = ("clean stop" if state == "stopped" else "died, recovered" if b.get("recovered")
                    else "not ended (or died unrecovered)")
    return out


def _session_link(row: dict[str, Any]) -> Markup:
    return link(session_href(row["session_id"]), row["session_id"])


def _body(d: dict[str, Any]) -> Markup:
    parts = [tag("p", f"log head #{d['head']}")]
    if not d["gateways"]:
        parts.append(tag("p", "no gateway has booted on this log", class_="empty"))
    for g in d["gateways"]:
        parts.append(tag("h2", f"gateway {g['name']}"))
        parts.append(table(g["boots"], ["boot_id", "host", "pid", "started_at", "stopped_at", "state", "alive",
                                        "ended", "drain_reason"], empty="no boots"))
    sl = {"session_id": _session_link}
    parts += [tag("h2", "Active turns"),
              table(d["active_turns"], ["session_id", "owner", "owner_key", "epoch", "acquired_at", "expires_at"],
                    cells=sl, empty="no turn is running"),
              tag("h2", "Expired leases (their holders stopped renewing)"),
              table(d["expired_leases"], ["session_id", "owner", "owner_key", "epoch", "acquired_at", "expires_at"],
                    cells=sl, empty="none"),
              tag("h2", "Owed replies"),
              table(d["owed_replies"], ["delivery_id", "session_id", "seq", "platform", "chat_id", "state",
                                        "attempts", "owner"], cells=sl, empty="nothing owed"),
              tag("h2", "Dead replies (turnlog ledger retry | abandon)"),
              table(d["dead_replies"], ["delivery_id", "session_id", "seq", "platform", "chat_id", "attempts"],
                    cells=sl, empty="none"),
              tag("h2", "Queue depths"),
              table(d["queue_depths"], ["session_key", "pending", "started"],
                    cells={"session_key": lambda r: link(url("/sessions", key=r["session_key"]), r["session_key"])},
                    empty="no message waiting"),
              tag("h2", "Suspended (stuck loops among them)"),
              table(d["suspended"], ["session_id", "session_key", "suspend_reason"], cells=sl, empty="none"),
              tag("h2", "Waiting to resume"),
              table(d["resume_pending"], ["session_id", "session_key", "resume_reason", "resume_marked_at"],
                    cells=sl, empty="none")]
    return Markup("".join(text(p) for p in parts))
