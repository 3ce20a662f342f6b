"""`turnlog rekey`: change the key settings without losing a session (registered on `turnlog`)."""

from __future__ import annotations

import click

from .base import command, echo_table, engine
from .output import Output, output_options

FLAG_HELP = "true or false (yes/no, on/off, 1/0); left out: as it is now."
_BOOLEANS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}


class StrictBool(click.ParamType):
    """A boolean spelt out: click's own BOOL takes an empty value as false, which here would
    quietly decide who shares a session."""

    name = "BOOL"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> bool:
        if isinstance(value, bool):
            return value
        found = _BOOLEANS.get(str(value).strip().lower())
        if found is None:
            self.fail(f"{value!r} is not true or false", param, ctx)
        return found


@command(writes=True, dry_run_reads=True)
@click.option("--group-sessions-per-user", "group", type=StrictBool(), default=None, metavar="BOOL",
              help=f"Give each sender in a group or channel a session of their own: {FLAG_HELP}")
@click.option("--thread-sessions-per-user", "thread", type=StrictBool(), default=None, metavar="BOOL",
              help=f"Give each sender in a thread a session of their own: {FLAG_HELP}")
@click.option("--dry-run", is_flag=True, help="Print the plan; write nothing.")
@click.option("--reason", default="operator", show_default=True, help="Why (recorded as the events' cause).")
@output_options
@click.pass_context
def rekey(ctx: click.Context, group: bool | None, thread: bool | None, dry_run: bool, reason: str,
          out: Output) -> None:
    """Change group_sessions_per_user / thread_sessions_per_user and carry every live session over.

    Each session's keys under the new settings are pointed at it and the settings become part
    of the log (running gateways route by them from their next heartbeat, whatever their
    config says): a shared session gets a key per sender seen in it; per-user sessions of one
    chat give the chat's shared key to the most recently active one, and the others stay
    listed and resumable. --nl/--csv: the moves."""
    if group is None and thread is None:
        raise click.UsageError("give --group-sessions-per-user or --thread-sessions-per-user (or both)", ctx)
    report = engine(ctx).rekey(group, thread, dry_run=dry_run, actor="cli", cause=reason)
    data = report.to_dict()

    def text() -> None:
        out.line(f"key settings: {report.old.describe()} -> {report.new.describe()}")
        if not report.changed:
            out.line("nothing to do: these are the settings in force")
            return
        out.line("dry run: nothing written" if dry_run else f"recorded at #{report.position}")
        out.line("")
        out.line(f"moves: {len(data['moves'])} (old key -> new key -> session)")
        if data["moves"]:
            echo_table(data["moves"], ["old_key", "new_key", "session_id", "reason"])
        out.line("")
        out.line(f"kept where they are, listed and resumable: {len(data['kept'])}")
        if data["kept"]:
            echo_table(data["kept"], ["old_key", "session_id", "reason"])
    out.record(data, text, rows=data["moves"])


COMMANDS = (rekey,)
