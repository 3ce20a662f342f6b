"""The /compress chat command: `/compress [focus]`, `/compress here [N] [focus]` (keep the last N
turns verbatim, default 1), answered the way Hermes answers it."""

from __future__ import annotations

from ..domain.compression import MIN_MESSAGES
from ..domain.source import SessionSource
from ..errors import CompactionFailed, ConflictError, LeaseTimeout
from .compaction import Compaction, CompactionCommands
from .context import CommandContext
from .routing import RoutingCommands

COMPRESS_USAGE = "Usage: /compress [focus] — or /compress here [N] [focus] to keep the last N turns as they are."
BUSY = "⏳ A turn is running on this session: /compress it when the turn has ended."
HERE_DEFAULT_TURNS = 1


def parse_compress(arg: str) -> tuple[int, str | None]:
    """(turns to keep, focus); ValueError for `here` with a count that is not a positive integer."""
    words = arg.split()
    if not words or words[0].lower() != "here":
        return 0, arg.strip() or None
    keep = HERE_DEFAULT_TURNS
    rest = words[1:]
    if rest and rest[0].lstrip("+-").isdigit():
        keep = int(rest[0])
        rest = rest[1:]
        if keep < 1:
            raise ValueError(f"the number of turns to keep must be at least 1, got {keep}")
    return keep, " ".join(rest) or None


def compress(ctx: CommandContext, routing: RoutingCommands, compaction: CompactionCommands, source: SessionSource,
             arg: str, *, actor: str, cause: str) -> tuple[str, str | None, bool]:
    """(reply, session id, whether the history changed)."""
    try:
        keep, focus = parse_compress(arg)
    except ValueError:
        return COMPRESS_USAGE, None, False
    rk = routing.routing_key(source)
    route = ctx.get(rk.route_id)
    session_id = route.session_id if route is not None else None
    if session_id is None:
        return f"Not enough conversation to compress (need at least {MIN_MESSAGES} messages).", None, False
    try:
        done = compaction.compact(session_id, rk.key, keep_turns=keep, focus=focus, min_history=MIN_MESSAGES,
                                  actor=actor, cause=cause)
    except LeaseTimeout:
        return BUSY, session_id, False
    except CompactionFailed as failed:
        text = str(failed)
        if failed.nothing_to_do:
            return f"{text[:1].upper()}{text[1:]}.", session_id, False
        return f"Compression failed: {text}. The history was not changed.", session_id, False
    except ConflictError as raced:
        return f"Compression failed: {raced}.", session_id, False
    return compressed_reply(done), session_id, True


def compressed_reply(done: Compaction) -> str:
    lines = [f"🗜️ Compressed: {done.history_before} → {done.history_after} messages"
             f" ({done.messages_compacted} summarised"
             + (f", the last {done.kept_turns} turn(s) kept as they are)" if done.kept_turns else ")")]
    if done.focus:
        lines.append(f'Focus: "{done.focus}"')
    lines.append(f"Approx history size: ~{done.tokens_before:,} → ~{done.tokens_after:,} tokens")
    lines.append("The original messages stay in the log and in search.")
    return "\n".join(lines)
