"""`turnlog web`: serve the read-only viewer."""

from __future__ import annotations

import ipaddress
import socket

import click

from .base import command
from .output import visible

DEFAULT_PORT = 8321


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def refuse_unless_listenable(host: str, port: int) -> None:
    """Bind HOST:PORT once and let go, so that a port in use or a host that is no address of this
    machine is one line (uvicorn would log it and exit 3, after the banner said it serves)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            probe.bind(address)
    except (OSError, UnicodeError, ValueError) as e:  # UnicodeError: a label over 63 characters; ValueError: a NUL
        reason = (e.strerror if isinstance(e, OSError) else None) or str(e) or type(e).__name__
        raise click.ClickException(f"cannot listen on {visible(host)}:{port}: {reason[:1].lower()}{reason[1:]}") \
            from None


@command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; anything but loopback needs --token.")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535),
              help="TCP port to listen on.")
@click.option("--token", envvar="TURNLOG_WEB_TOKEN", default=None,
              help="Access token every request must carry (?token=, a Bearer header, or the cookie it sets).")
@click.option("--max-diff-events", default=5_000, show_default=True, type=click.IntRange(min=1),
              help="A time-travel diff that would read more events is refused (413): give a key or a shorter range.")
@click.pass_context
def web(ctx: click.Context, host: str, port: int, token: str | None, max_diff_events: int) -> None:
    """A read-only local web viewer: gateway now, sessions, transcripts, audit, time travel,
    integrity checks and a turns plot. It never writes to the database."""
    loopback = is_loopback(host)
    if not loopback and not token:
        raise click.UsageError(f"--host {host} is not loopback: give --token (anyone who can reach it could read"
                               " every transcript)", ctx)
    if token is not None and not token.strip():
        raise click.UsageError("--token must not be empty", ctx)
    try:
        import uvicorn

        from ..web.app import LOOPBACK_HOSTS, create_app
    except ImportError as e:
        raise click.ClickException(f"turnlog web needs its extra ({e.name} is missing):"
                                   " pip install 'turnlog[web]'") from None

    refuse_unless_listenable(host, port)
    db = ctx.find_root().obj["db"]
    app = create_app(db, token=token, allowed_hosts=LOOPBACK_HOSTS if loopback else None,
                     max_diff_events=max_diff_events)
    if not loopback:
        click.echo(f"Warning: serving on {host}, beyond this machine; every request needs the token.", err=True)
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"turnlog web: http://{shown}:{port}/ (read-only view of {db}; Ctrl-C stops)", err=True)
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:  # also when uvicorn stops before its lifespan ends (a port in use): no copy left behind
        app.state.viewer.close()


COMMANDS = (web,)
