"""Errors a caller of turnlog can catch; each message is one line naming what was wrong.

Every exception turnlog raises on purpose is defined here and exported by `turnlog`:

    TurnlogError
    ├── StoreError                the database cannot be opened, read or trusted
    │   ├── ReadOnlyDatabase      the operation would write to a read-only database
    │   ├── ProjectionCorrupt     a read model is damaged (rebuild it from the log)
    │   ├── UnreadableEvent       an event of the log does not decode into what its topic promises
    │   ├── DatabaseInUse         another process has the database open (a restore refuses)
    │   ├── DamagedDatabase       SQLite found the file's pages damaged: restore it from a backup
    │   ├── ChainBroken           the log no longer matches its hash chain
    │   └── EncryptionKeyMissing  an encrypted database without its master key at hand
    ├── NotFound                  no such session or routing key
    ├── InvalidRequest            an argument turnlog cannot accept (also a ValueError)
    │   ├── AmbiguousKey          a key string names several routes
    │   ├── InvalidSetting        a TURNLOG_* environment variable has a value turnlog does not take
    │   └── TooLarge              a read would do more work than allowed (a diff over its limit)
    ├── ConflictError             an optimistic-concurrency race lost too often
    ├── LeaseTimeout              the turn lease was not obtained in time
    │   └── SessionBusy           a turn holds the session: an edit of its history is refused
    ├── StaleLease                a write under a lease epoch that moved on
    │   └── TurnCancelled         the running turn lost its lease and was cancelled
    │       └── TurnlogClosed     the engine was closed while the turn ran
    ├── QueueFull                 the key already has the most items waiting
    ├── GatewayStillRunning       a boot of the gateway is alive elsewhere
    ├── SessionOwnedElsewhere     the session belongs to another routing key
    ├── HermesHomeError           a Hermes home whose state cannot be read
    └── SendOutcomeUnknown        raised BY a platform sender: the send may have reached the chat

One warning, `KeySettingsIgnored` (a UserWarning), says an EngineConfig's key settings lost to
the log's (docs/configuration.md). Catch `TurnlogError` for all of the errors. A failure that is none of these is a bug (or an error of
the platform below: sqlite3, psycopg) and is not wrapped.
"""


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


class SessionBusy(LeaseTimeout):
    """A turn holds the session's lease, so an edit of its history (/undo, /retry, a compaction)
    is refused rather than made under the running turn: wait for its answer, or /stop it."""


class StaleLease(TurnlogError):
    """A write was attempted under a lease epoch that is no longer current."""


class GatewayStillRunning(TurnlogError):
    """A boot of the gateway is alive in another process: it cannot be recovered or replaced."""


class SessionOwnedElsewhere(TurnlogError):
    """The session belongs to another routing key (or user): taking it needs an explicit force."""


class InvalidSetting(InvalidRequest):
    """A TURNLOG_* environment variable has a value turnlog does not take: the message names the
    variable and what it takes. Raised when the variable is read, before a database is opened or made."""


class TooLarge(InvalidRequest):
    """What was asked for needs more work than the bound the caller set (a diff over more events
    than its limit): narrow it."""


class AmbiguousKey(InvalidRequest):
    """A key string names several routes (chat `a:b` + user `c`, chat `a` + user `b:c`): give a route id."""


class ReadOnlyDatabase(StoreError):
    """The database (or its folder) is read-only and the operation would write to it."""


class QueueFull(TurnlogError):
    """The key already has the maximum number of items waiting."""


class ProjectionCorrupt(StoreError):
    """A projection's tables are damaged; rebuilding it from the log repairs it."""

    def __init__(self, name: str, error: BaseException) -> None:
        super().__init__(f"the {name} read model is damaged ({error})")
        self.name = name


class UnreadableEvent(StoreError):
    """An event in the log that a projection cannot take: its stored bytes do not decode, or
    its fields are not those its topic promises (an edited or damaged log)."""

    def __init__(self, name: str, position: int, topic: str, problem: str) -> None:
        super().__init__(f"the event at position {position} ({topic}) cannot be read into the {name} read model"
                         f" ({problem}); `turnlog verify --chain` tells whether it was edited")
        self.name = name
        self.position = position
        self.topic = topic
        self.problem = problem


class DatabaseInUse(StoreError):
    """Another process has the database open (a gateway, a tool): replacing it would pull the
    file from under that process."""


class DamagedDatabase(StoreError):
    """SQLite read the database file and found its pages damaged ("database disk image is
    malformed"): a database, hurt, not a file of another kind. Restore it from a backup."""


class ChainBroken(StoreError):
    """The log no longer matches its chain in a way a writer must not paper over."""


class HermesHomeError(TurnlogError):
    """A Hermes home whose state.db cannot be read (a runtime failure, not a usage error)."""


class TurnCancelled(StaleLease):
    """The running turn lost its lease (revoked by /stop or /new, taken over after a stall): the
    lease keeper cancelled it, and nothing it writes afterwards is accepted."""


class TurnlogClosed(TurnCancelled):
    """The Turnlog was closed while the turn ran (after waiting for it as long as close was told):
    the turn was cancelled, its lease released and its item failed; nothing it writes afterwards
    is accepted."""


class CompactionFailed(TurnlogError):
    """A compaction that did not happen, and left nothing in the log: the history held nothing to
    compact (`nothing_to_do`), or the summariser raised or gave no usable summary."""

    def __init__(self, message: str, *, nothing_to_do: bool = False) -> None:
        super().__init__(message)
        self.nothing_to_do = nothing_to_do


class KeySettingsIgnored(UserWarning):
    """The EngineConfig sets a key flag (group/thread_sessions_per_user) other than the one the log
    records (`turnlog rekey` wrote it): routing follows the log, and the config's value is ignored."""


class SendOutcomeUnknown(TurnlogError):
    """Raised by a platform sender (not by turnlog) when a send may have reached the platform
    though it failed at the client, e.g. a timeout after the request was written. The delivery is
    recorded `unknown` and never blindly resent (docs/behaviour.md: sends of unknown outcome)."""


class EncryptionKeyMissing(StoreError):
    """An encrypted database opened without its master key (or with another one): nothing was
    read or written."""
