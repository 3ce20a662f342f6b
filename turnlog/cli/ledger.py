"""`turnlog ledger`: the delivery ledger, and an operator's retry or abandon of a row."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import click

from .base import CommandGroup, command, engine
from .output import Output, limit_option, output_options

STATES = ["pending", "attempting", "delivered", "failed", "unknown", "dead", "abandoned"]


def _delivery_id(ctx: click.Context, param: click.Parameter, value: str | None) -> UUID | None:
    if value is None:
        return None
    try:
        return UUID(value)
    except ValueError:
        raise click.BadParameter(f"not a delivery id (a UUID from `turnlog ledger`): {value!r}") from None


@click.group("ledger", cls=CommandGroup, invoke_without_command=True)
@click.option("--status", type=click.Choice(STATES), help="Only deliveries in this state.")
@limit_option
@output_options
@click.pass_context
def ledger(ctx: click.Context, status: str | None, out: Output, limit: int | None) -> None:
    """The delivery ledger: every reply owed, its state and attempts (`retry` and `abandon` act on a row)."""
    if ctx.invoked_subcommand is not None:
        return
    rows = [e.to_dict() for e in engine(ctx).ledger(status, limit=limit)]

    def prepare(rows: list[dict[str, Any]]) -> None:
        for r in rows:
            r["content"] = r["content"][:40] + ("…" if len(r["content"]) > 40 else "")
    out.rows(rows, ["delivery_id", "session_id", "seq", "platform", "state", "attempts", "owner", "content"], prepare)


@command("retry", writes=True)
@click.argument("delivery_id", required=False, callback=_delivery_id)
@click.option("--dead", is_flag=True, help="Retry every dead-lettered row instead of one DELIVERY_ID.")
@click.option("--attempts", type=click.IntRange(min=1), default=None,
              help="Attempts to grant (default: the configured limit, 3).")
@click.option("--reason", default="operator retry", show_default=True, help="Why, recorded as the event's cause.")
@output_options
@click.pass_context
def retry(ctx: click.Context, delivery_id: UUID | None, dead: bool, attempts: int | None, reason: str,
          out: Output) -> None:
    """Owe a dead, failed or unknown reply again: the next `sweep` sends it (with the recovered-reply prefix)."""
    if (delivery_id is None) == (not dead):
        raise click.UsageError("give one DELIVERY_ID or --dead", ctx)
    retried = engine(ctx).retry_deliveries(delivery_id, dead=dead, attempts=attempts, actor="cli",
                                           cause=f"cli:{reason}")
    out.rows([e.to_dict() for e in retried], ["delivery_id", "session_id", "seq", "state", "attempts"])


@command("abandon", writes=True)
@click.argument("delivery_id", callback=_delivery_id)
@click.option("--reason", required=True, help="Why the reply will never be sent (recorded on the event).")
@output_options
@click.pass_context
def abandon(ctx: click.Context, delivery_id: UUID, reason: str, out: Output) -> None:
    """Give up on a reply for good: it is no longer owed, and the record says who and why."""
    entry = engine(ctx).abandon_delivery(delivery_id, reason, actor="cli", cause=f"cli:{reason}")
    out.rows([entry.to_dict()], ["delivery_id", "session_id", "seq", "state", "attempts"])


ledger.add_command(retry)
ledger.add_command(abandon)

COMMANDS = (ledger,)
