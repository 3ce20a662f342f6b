"""Errors a caller of turnlog can catch; each message is one line naming what was wrong."""


class TurnlogError(Exception):
    """Base of every error turnlog raises on purpose."""


class StoreError(TurnlogError):
    """The database cannot be opened or is not a turnlog database."""


class NotFound(TurnlogError):
    """No session or routing key matches what was asked for."""


class InvalidRequest(TurnlogError, ValueError):
    """An argument has a value turnlog cannot accept."""


class ConflictError(TurnlogError):
    """A command lost an optimistic-concurrency race too many times in a row."""


class LeaseTimeout(TurnlogError):
    """The turn lease of a session was not obtained within the timeout."""


class StaleLease(TurnlogError):
    """A write was attempted under a lease epoch that is no longer current."""


class GatewayStillRunning(TurnlogError):
    """A boot of the gateway is alive in another process: it cannot be recovered or replaced."""


class SessionOwnedElsewhere(TurnlogError):
    """The session belongs to another routing key (or user): taking it needs an explicit force."""


class TooLarge(InvalidRequest):
    """What was asked for needs more work than the bound the caller set (a diff over more events
    than its limit): narrow it."""


class AmbiguousKey(InvalidRequest):
    """A key string names several routes (chat `a:b` + user `c`, chat `a` + user `b:c`): give a route id."""


class ReadOnlyDatabase(StoreError):
    """The database (or its folder) is read-only and the operation would write to it."""


class TurnCancelled(StaleLease):
    """The running turn lost its lease (revoked by /stop or /new, taken over after a stall): the
    lease keeper cancelled it, and nothing it writes afterwards is accepted."""


class TurnlogClosed(TurnCancelled):
    """The Turnlog was closed while the turn ran (after waiting for it as long as close was told):
    the turn was cancelled, its lease released and its item failed; nothing it writes afterwards
    is accepted."""
