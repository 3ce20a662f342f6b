"""Encryption at rest and erase: encrypt, keys (rotate), erase (registered on `turnlog`)."""

from __future__ import annotations

import base64
import binascii
from typing import Any

import click

from .backups import progress_bar
from .base import CommandGroup, command, engine
from .output import Output, output_options


@command("encrypt", writes=True)
@output_options
@click.pass_context
def encrypt(ctx: click.Context, out: Output) -> None:
    """Encrypt an unencrypted database from now on.

    Events written from here are sealed under per-subject data keys; the events before stay as
    they were stored (the hash chain covers their bytes), and erase cannot reach them. The
    master key is TURNLOG_MASTER_KEY, or a new key file made beside the database (<db>.key).
    Stop the gateways first: a database another process has open is refused.
    """
    report = engine(ctx).encrypt()

    def text() -> None:
        where = f" (key file {report.key_file})" if report.key_source == "file" else f" (from {report.key_source})"
        out.line(f"encrypted from position {report.since}; master key {report.fingerprint}{where}")
    out.record(report.to_dict(), text)


@click.group("keys", cls=CommandGroup, invoke_without_command=True)
@output_options
@click.pass_context
def keys(ctx: click.Context, out: Output) -> None:
    """The database's encryption: the master key's fingerprint (`rotate` re-wraps the data keys)."""
    if ctx.invoked_subcommand is not None:
        return
    fingerprint = engine(ctx).key_fingerprint
    out.record({"encrypted": fingerprint is not None, "fingerprint": fingerprint},
               lambda: out.line(f"master key: {fingerprint}" if fingerprint else "not encrypted"))


def _new_key(ctx: click.Context, param: click.Parameter, value: str | None) -> bytes | None:
    if value is None:
        return None
    try:
        with open(value, "rb") as f:
            key = base64.b64decode(f.read().strip(), validate=True)
    except OSError as e:
        raise click.BadParameter(f"cannot read {value}: {e.strerror or e}") from None
    except (binascii.Error, ValueError):
        raise click.BadParameter(f"{value} does not hold a base64 key") from None
    if len(key) != 32:
        raise click.BadParameter(f"{value} holds {len(key)} bytes, not 32")
    return key


@command("rotate", writes=True)
@click.option("--new-key-file", default=None, callback=_new_key, metavar="PATH",
              help="A file holding the new master key (base64 of 32 bytes); default: make one and write it to"
                   " the key file beside the database (only when the old key came from it).")
@output_options
@click.pass_context
def rotate(ctx: click.Context, new_key_file: bytes | None, out: Output) -> None:
    """Re-wrap every data key under a new master key; no event is rewritten.

    Stop the gateways first: a database another process has open is refused.
    """
    report = engine(ctx).rotate_master_key(new_key_file)

    def text() -> None:
        out.line(f"master key {report.previous_fingerprint} -> {report.fingerprint}: {report.rewrapped} data keys"
                 " re-wrapped")
        if report.key_source != "file" or new_key_file is not None:
            out.line("keep the new key where the old one was kept (TURNLOG_MASTER_KEY, the KMS): the old no longer"
                     " opens the database")
    out.record(report.to_dict(), text)


keys.add_command(rotate)


@command("erase", writes=True, dry_run_reads=True)
@click.option("--subject", required=True, metavar="PLATFORM:USER_ID", help="Whose data to erase, e.g. telegram:42.")
@click.option("--dry-run", is_flag=True, help="Only say what would be erased; change nothing.")
@click.option("--reason", default="erase request", show_default=True, help="Why, recorded as the event's cause.")
@output_options
@click.pass_context
def erase(ctx: click.Context, subject: str, dry_run: bool, reason: str, out: Output) -> None:
    """Erase a subject: destroy its data keys (crypto-shredding) and purge the read models.

    Every reader then shows [erased] for its words and ids; its next message starts a new session.
    See docs/operations.md for what erase does and does not reach.
    """
    with progress_bar("rebuilding the read models", out) as progress:
        report = engine(ctx).erase_subject(subject, actor="cli", cause=reason, dry_run=dry_run, progress=progress)
    data: dict[str, Any] = report.to_dict()

    def text() -> None:
        verb, suspended = ("would destroy", "to suspend") if dry_run else ("destroyed", "suspended")
        out.line(f"{verb} {report.keys} data key(s) of subject {report.subject_hash};"
                 f" sessions {suspended}: {len(report.sessions)}")
        if report.plaintext_before:
            out.line(f"note: positions 1..{report.plaintext_before} were written before encryption and keep"
                     " their plaintext")
    out.record(data, text)


COMMANDS = (encrypt, keys, erase)
