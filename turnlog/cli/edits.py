"""Edits of a session's agent history from the operator's side: `turnlog undo`."""

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


COMMANDS = (undo,)
