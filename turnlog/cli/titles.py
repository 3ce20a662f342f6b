"""`turnlog title`: an operator's /title (show, set, or clear a session's title)."""

from __future__ import annotations

from typing import Any

import click

from .base import command, engine, visible
from .output import Output, output_options


@command(writes=True, writes_with=("text", "clear"))
@click.argument("key_or_session")
@click.argument("text", required=False)
@click.option("--clear", is_flag=True, help="Remove the session's title.")
@output_options
@click.pass_context
def title(ctx: click.Context, key_or_session: str, text: str | None, clear: bool, out: Output) -> None:
    """Show the title of a session (or of a routing key's current session), or set it to TEXT.

    Titles are cleaned as Hermes cleans them (control characters dropped, spaces collapsed, at
    most 100 characters) and name one session each: a title another session holds is refused."""
    if clear and text:
        raise click.UsageError("give TEXT or --clear, not both")
    t = engine(ctx)
    session_id = t.session(key_or_session).session_id
    before = t.title(session_id)
    if text is None and not clear:
        out.record({"session_id": session_id, "title": before},
                   lambda: out.line(visible(before) if before else "(no title)"))
        return
    after = t.set_title(session_id, None if clear else text, actor="cli", cause="cli:title")
    data: dict[str, Any] = {"session_id": session_id, "title": after, "previous_title": before,
                            "changed": after != before}
    out.record(data, lambda: out.line(f"{session_id}: {visible(after)}" if after else f"{session_id}: title cleared"))


COMMANDS = [title]
