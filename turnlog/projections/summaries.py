"""One line per event for the audit timeline: what happened, in words."""

from __future__ import annotations

from typing import Any, Callable

Summary = Callable[[dict[str, Any]], str]


def _short(text: Any, n: int = 48) -> str:
    s = str(text or "").replace("\n", " ")
    return s if len(s) <= n else s[: n - 1] + "…"


def _flags(settings: Any) -> str:
    """group/thread_sessions_per_user as `group=per user, thread=shared`."""
    settings = settings or {}
    return ", ".join(f"{name}={'per user' if settings.get(f'{name}_sessions_per_user') else 'shared'}"
                     for name in ("group", "thread"))


SUMMARIES: dict[str, Summary] = {
    "RouteRegistered": lambda d: f"route registered for {d.get('session_key')}"
    + (f" -> {d['session_id']} ({d.get('reason')})" if d.get("session_id") else ""),
    "RouteBound": lambda d: f"route -> {d.get('session_id')} ({d.get('reason')})"
    + (f", was {d['previous_session_id']}" if d.get("previous_session_id") else ""),
    "RouteDetached": lambda d: f"route detached from {d.get('session_id')} ({d.get('reason')})",
    "RouteOriginChanged": lambda d: "route origin updated",
    "SubjectErased": lambda d: f"subject {d.get('subject_hash')} erased: {d.get('keys')} data key(s) destroyed,"
    f" {len(d.get('sessions') or ())} session(s) suspended",
    "KeySettingsChanged": lambda d: f"key settings {_flags(d.get('old'))} -> {_flags(d.get('new'))},"
    f" {d.get('moves')} route(s) moved",
    "ResumeRefused": lambda d: f"/resume {d.get('requested_session_id')} refused ({d.get('reason')})",
    "SessionCreated": lambda d: f"session {d.get('session_id')} created ({d.get('reason')})"
    + (f", parent {d['parent_session_id']}" if d.get("parent_session_id") else ""),
    "ActivityTouched": lambda d: "activity",
    "SessionSuspended": lambda d: f"suspended ({d.get('reason')})",
    "ResumePendingMarked": lambda d: f"resume pending ({d.get('reason')})",
    "ResumePendingCleared": lambda d: "resume pending cleared",
    "ConversationScopeCleared": lambda d: "conversation scope cleared"
    + (f", interrupted {len(d['interrupted_children'])} child(ren)" if d.get("interrupted_children") else ""),
    "ChildStarted": lambda d: f"async child {d.get('child_id')} started",
    "ChildFinished": lambda d: f"async child {d.get('child_id')} finished",
    "SessionEnded": lambda d: f"session ended ({d.get('reason')})",
    "SessionReopened": lambda d: f"session reopened for {d.get('session_key')}",
    "SessionArchived": lambda d: f"archived in {d.get('archive_file')} sha256 {str(d.get('archive_sha256'))[:12]}…",
    "SessionRestored": lambda d: f"restored from {d.get('archive_file')} sha256 {str(d.get('archive_sha256'))[:12]}…",
    "SessionsArchived": lambda d: f"{len(d.get('sessions') or [])} session(s), {d.get('events')} events archived in"
    f" {d.get('archive_file')} sha256 {str(d.get('archive_sha256'))[:12]}…",
    "SessionsRestored": lambda d: f"{len(d.get('sessions') or [])} session(s) restored from {d.get('archive_file')}",
    "SessionTitled": lambda d: f"titled {d.get('title')!r}" if d.get("title") else "title cleared",
    "TitleClaimed": lambda d: f"title {d.get('title')!r} held by {d.get('session_id')}",
    "TitleReclaimed": lambda d: f"title now held by {d.get('session_id')}",
    "TitleReleased": lambda d: f"title given up by {d.get('session_id')}",
    "TurnsUndone": lambda d: f"undid {d.get('turns')} turn(s): messages {d.get('from_seq')}..{d.get('upto_seq')}"
    " left the agent's history",
    "TurnRetried": lambda d: f"retried the last turn: messages {d.get('from_seq')}..{d.get('upto_seq')} left the"
    f" agent's history, “{_short(d.get('text'), 32)}” runs again",
    "TranscriptCompacted": lambda d: f"history compacted: seqs {d.get('from_seq')}..{d.get('upto_seq')} -> a summary"
    + (f" (focus {_short(d['focus'], 32)!r})" if d.get("focus") else "")
    + (f" by {d['model']}" if d.get("model") else ""),
    "LeaseOpened": lambda d: "turn lease opened",
    "LeaseAcquired": lambda d: f"lease epoch {d.get('epoch')} acquired by {d.get('owner')}"
    + (f" (taken over from {d['taken_over_from']})" if d.get("taken_over_from") else ""),
    "LeaseRenewed": lambda d: f"lease epoch {d.get('epoch')} renewed",
    "LeaseReleased": lambda d: f"lease epoch {d.get('epoch')} released ({d.get('outcome')})",
    "LeaseRevoked": lambda d: f"lease epoch {d.get('epoch')} revoked ({d.get('reason')})",
    "LeaseMoved": lambda d: f"lease epoch {d.get('epoch')} moved to {d.get('to_session_id')}",
    "LeaseSeeded": lambda d: f"transcript seeded with {d.get('last_seq')} message(s)",
    "MessageAppended": lambda d: f"{d.get('role')}: {_short(d.get('content'))}",
    "MessagesImported": lambda d: f"{len(d.get('messages') or ())} message(s) imported, #{d.get('first_seq')}"
    f"-#{d.get('originator_version')}",
    "DeliveryRecorded": lambda d: f"reply #{d.get('seq')} owed to {d.get('platform')}:{d.get('chat_id')}"
    + (f", delivery attempt {d.get('attempt')} by {d['attempting_owner']}" if d.get("attempting_owner") else ""),
    "DeliveryAttempting": lambda d: f"delivery attempt {d.get('attempt')} by {d.get('owner')}"
    + (" (recovered)" if d.get("recovered") else ""),
    "DeliveryDelivered": lambda d: f"delivered (attempt {d.get('attempt')})",
    "DeliveryFailed": lambda d: f"delivery failed: {_short(d.get('error'))}",
    "DeliveryMarkedUnsure": lambda d: "delivery outcome unknown after an unclean restart",
    "DeliveryAbandoned": lambda d: f"delivery abandoned ({d.get('reason')})",
    "InboxOpened": lambda d: f"inbox opened for {d.get('session_key')}",
    "InboundAccepted": lambda d: f"{d.get('kind')} message accepted"
    + (f" (merged into item {d['merged_into']})" if d.get("merged_into") else f" as item {d.get('item_id')}")
    + (f", started on {d.get('session_id')}" if d.get("turn_id") else f": {_short(d.get('text'), 32)}"),
    "InboundRejected": lambda d: f"{d.get('kind')} message refused ({d.get('reason')})",
    "InboundDuplicateRefused": lambda d: f"{d.get('kind')} message {d.get('message_id') or ''} refused as a repeat"
    + f" ({d.get('reason')}" + (f", first in item {d['duplicate_of']})" if d.get("duplicate_of") else ")"),
    "InboundWakeupPinned": lambda d: f"wake-up item {d.get('item_id')} pinned to {d.get('session_id')}"
    f" (delegation {d.get('delegation')})",
    "DelegationStarted": lambda d: f"delegation {d.get('handle')} started"
    + (f": {_short(d.get('description'), 32)}" if d.get("description") else ""),
    "DelegationStopped": lambda d: f"delegation stopped ({d.get('reason')})",
    "DelegationFinished": lambda d: f"delegation {d.get('status')}, wake-up item {d.get('wakeup_item')}"
    + (f": {_short(d.get('summary'), 32)}" if d.get("summary") else ""),
    "InboundReplyAttached": lambda d: f"recorded reply for item {d.get('item_id')}: {_short(d.get('reply'), 32)}",
    "InboundMessageFirstSeen": lambda d: f"message {d.get('message_id')} first seen (item {d.get('item_id')})",
    "InboundStarted": lambda d: f"item {d.get('item_id')} started on {d.get('session_id')}",
    "InboundCompleted": lambda d: f"item {d.get('item_id')} completed ({d.get('outcome')})",
    "InboundDropped": lambda d: f"items {', '.join(d.get('item_ids') or [])} dropped ({d.get('reason')})",
    "GatewayRegistered": lambda d: f"gateway {d.get('name')} registered",
    "GatewayStarted": lambda d: f"boot {d.get('boot_id')} started (pid {d.get('pid')} on {d.get('host')})",
    "GatewayDrainBegun": lambda d: f"drain for {d.get('reason')} ({d.get('timeout_s')} s)",
    "GatewayStopped": lambda d: "stopped " + ("clean" if d.get("clean") else "unclean")
    + (", drain timed out" if d.get("drain_timed_out") else ""),
    "GatewayRecovered": lambda d: f"boot {d.get('boot_id')} recovered: {d.get('interrupted_turns')} interrupted turn(s)",
}


def summarize(event: str, data: dict[str, Any]) -> str:
    summary = SUMMARIES.get(event)
    return summary(data) if summary is not None else event
