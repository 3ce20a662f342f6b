"""Commands that edit the agent's history of a session: `turnlog undo` and `turnlog compact`."""

from __future__ import annotations

import click

from .base import command, engine
from .output import Output, output_options


@command(writes=True)
@click.argument("key_or_session")
@click.argument("turns", type=click.IntRange(min=1), default=1)
@output_options
@click.pass_context
def undo(ctx: click.Context, key_or_session: str, turns: int, out: Output) -> None:
    """Back up the last TURNS user turns of a session (default 1), as /undo does: they leave the
    agent's history and stay in the log. Refused while a turn runs."""
    result = engine(ctx).undo(key_or_session, turns, actor="cli", cause="cli:undo")

    def text() -> None:
        if not result.turns:
            out.line("nothing to undo")
            return
        out.line(f"undid {result.turns} turn(s) of {result.session_id}: messages {result.from_seq}..{result.upto_seq}"
                 f" ({result.messages} left the agent's history)")
        for echoed in result.echoed:
            out.line(f"  {echoed}")
    out.record(result.to_dict(), text)


@command(writes=True)
@click.argument("key_or_session")
@click.option("--keep", "keep_turns", type=click.IntRange(min=0), default=0, show_default=True,
              help="Keep the last N user turns verbatim after the summary.")
@click.option("--focus", default=None, help="What the summary should keep (recorded with it).")
@click.option("--summary-file", type=click.Path(exists=True, dir_okay=False, readable=True), default=None,
              help="A file holding the summary text to record (the operator's own); without it the"
                   " deterministic fallback summary.")
@output_options
@click.pass_context
def compact(ctx: click.Context, key_or_session: str, keep_turns: int, focus: str | None, summary_file: str | None,
            out: Output) -> None:
    """Compact a session's history in place: a summary stands for its messages (all but the last
    --keep turns), which stay in the log and in search. Refused while a turn runs."""
    summary = None
    if summary_file is not None:
        with open(summary_file, encoding="utf-8", errors="replace") as f:
            summary = f.read()
    done = engine(ctx).compact(key_or_session, keep_turns=keep_turns, focus=focus, summary=summary, actor="cli")
    out.record(done.to_dict(), lambda: out.line(
        f"compacted {done.session_id}: seqs {done.from_seq}..{done.upto_seq}, {done.messages_compacted} messages"
        f" -> a summary of {done.summary_chars} characters; the history holds {done.history_after} messages"
        f" (was {done.history_before})"))


COMMANDS = (undo, compact)
