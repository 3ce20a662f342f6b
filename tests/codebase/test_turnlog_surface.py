"""What a Turnlog offers is a short, pinned list: the methods a gateway or an operator calls, two
groups (`turns`, `maintenance`) for the lower-level operations, three read-only properties, and the
names kept one release for old callers. Its collaborators are private; every public method and
property says what it does."""

from __future__ import annotations

import inspect
import types

import pytest

import turnlog
from turnlog import Maintenance, Turnlog, TurnOperations

METHODS = {
    # the gateway loop
    "accept", "command", "handle_message", "next_batch_due", "pending_inbound", "run_due_batches", "run_next",
    # routing and session flags
    "clear_resume_pending", "get_or_create_session", "mark_resume_pending", "routing_key", "suspend",
    "switch_session",
    # background delegations
    "delegations", "finish_delegation", "start_delegation",
    # what a warm agent cache watches: the history's version, the session operations
    "on_session_change", "session_version",
    "clear_resume_pending", "get_or_create_session", "mark_resume_pending", "routing_key", "set_title", "suspend",
    "switch_session", "title",
    "clear_resume_pending", "get_or_create_session", "key_settings", "mark_resume_pending", "rekey",
    "routing_key", "suspend", "switch_session",
    # edits of a session's agent history
    "undo",
    # the gateway's lifecycle and recovery
    "boots", "drain", "gateways", "recover", "resume_candidates", "resume_interrupted", "start_gateway", "status",
    "stop_gateway", "sweep_deliveries",
    # an operator's decisions on the delivery ledger
    "abandon_delivery", "retry_deliveries",
    # reads, audit and time travel
    "at", "diff", "events_around", "export", "export_routing", "fork", "history", "ledger", "message_fates", "metrics",
    "queue", "queue_depths", "route_id", "routes", "search", "session", "sessions", "transcript", "turn_spans",
    "usage",
    # edits of the agent's history
    "compact",
    # Hermes homes, and the store itself
    "backup", "close", "copy_to", "export_hermes", "import_hermes",
    # retention: sessions out to an archive file and back
    "archivable", "archive", "restore_archive",
    # encryption at rest and erase
    "encrypt", "erase_subject", "rotate_master_key",
}
GROUPS = {"turns": TurnOperations, "maintenance": Maintenance}
# what it was opened as, how it reads, and the master key it needs, read-only
PROPERTIES = {"key_fingerprint", "owner", "read_only", "stale"}

# Deprecated names (one release): a DeprecationWarning, then the same behaviour as before.
DEPRECATED_METHODS = {
    "acquire_lease", "append_message", "attempt_delivery", "catch_up", "chain_report", "deliver", "doctor",
    "lease_holder", "needs_compression", "projection_status", "projections_behind", "rebuild",
    "rebuild_projections", "record_reply", "release_lease", "renew_lease", "rotate_session", "seal",
    "settle_delivery", "show", "verify", "verify_chain",
}
DEPRECATED_ATTRIBUTES = {
    "app", "batches", "chain", "clock", "config", "ctx", "deliveries", "forks", "gateway_name", "inbound",
    "keeper", "projections", "recovery", "rotation", "routing", "slash", "views",
}


def _members(cls: type) -> dict[str, object]:
    """The class's own names and its bases' (the deprecated ones live in a base class)."""
    members: dict[str, object] = {}
    for klass in reversed(cls.__mro__[:-1]):
        members.update(vars(klass))
    return members


def _public(cls: type) -> set[str]:
    return {name for name in _members(cls) if not name.startswith("_")}


def test_the_class_offers_exactly_the_pinned_methods() -> None:
    assert _public(Turnlog) == METHODS | PROPERTIES | DEPRECATED_METHODS | DEPRECATED_ATTRIBUTES
    assert all(isinstance(_members(Turnlog)[name], property) for name in PROPERTIES)


def test_an_open_turnlog_holds_no_public_attribute_but_its_groups(tmp_path) -> None:
    with Turnlog(str(tmp_path / "t.db")) as t:
        attributes = {name for name in vars(t) if not name.startswith("_")}
        assert attributes == set(GROUPS)
        for name, cls in GROUPS.items():
            assert type(getattr(t, name)) is cls


@pytest.mark.parametrize("cls", [Turnlog, TurnOperations, Maintenance], ids=lambda c: c.__name__)
def test_every_public_method_is_documented(cls: type) -> None:
    members = _members(cls)
    undocumented = [name for name in _public(cls) if isinstance(members[name], (property, types.FunctionType))
                    and not inspect.getdoc(members[name])]
    assert not undocumented, f"{cls.__name__}: {sorted(undocumented)}"


def test_the_groups_are_exported() -> None:
    assert {cls.__name__ for cls in GROUPS.values()} <= set(turnlog.__all__)
