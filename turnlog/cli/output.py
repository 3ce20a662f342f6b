"""The CLI's output layer: one table printer, one way to render text safely, one set of output flags.

Every command takes the same output options, added by `output_options`:

    --table (default)   a readable table or text, control characters rendered visibly
    --json              one JSON document, exact (nothing escaped beyond JSON's own rules)
    --nl                newline-delimited JSON: one compact object per line (per row of a listing)
    --csv               CSV with a header row (nested values as JSON)

Applying it to a new command::

    @main.command()
    @output_options
    @click.pass_context
    def things(ctx: click.Context, out: Output) -> None:
        \"\"\"List the things.\"\"\"
        out.rows(engine(ctx).things(), ["thing_id", "name"])          # a listing
        # or: out.record(data, text=lambda: ..., rows=..., columns=...) for one object

The decorator passes an `Output` as the `out` argument. Text printed for the table format goes
through `visible()` (via `cell()` and `Output.line()`): message text or ids holding ESC, BEL or
other control characters never reach the operator's terminal raw.
"""

from __future__ import annotations

import csv
import functools
import io
import re
from typing import Any, Callable, Iterable, Sequence

import click
import orjson

from .. import CONTROL_CHARACTERS

FORMATS = ("table", "json", "nl", "csv")

# C0 and C1 controls, DEL, and the bidirectional overrides/isolates that reorder what a terminal shows.
_CONTROL = re.compile(f"[{CONTROL_CHARACTERS}\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """`text` with every control character written as an escape (ESC -> \\x1b, BEL -> \\x07, ...)."""
    return _CONTROL.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def cell(value: Any) -> str:
    """One value as table text: None '-', booleans yes/no, nested values as JSON, all of it visible."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (dict, list)):
        return visible(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str).decode())
    return visible(str(value))


def echo_json(value: Any) -> None:
    # Non-str keys (a diff's deliveries are keyed by message seq) are written as strings.
    click.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, default=str).decode())


def echo_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    """The one table printer: every cell through `cell()`, columns padded to their widest value."""
    if not rows:
        click.echo("(none)")
        return
    cells = [[cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip())
    for r in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())


def _compact(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str).decode()


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return _compact(value)
    return value


def echo_csv(rows: Iterable[dict[str, Any]]) -> None:
    rows = list(rows)
    columns: list[str] = []
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_csv_value(row.get(c)) for c in columns])
    click.echo(buffer.getvalue(), nl=False, color=True)  # exact: click would strip ANSI sequences off a pipe


class Output:
    """How one command invocation prints: `fmt` is one of FORMATS."""

    def __init__(self, fmt: str = "table", limit: int | None = None) -> None:
        self.fmt = fmt
        self.limit = limit

    @property
    def is_table(self) -> bool:
        return self.fmt == "table"

    def line(self, text: str = "", *, err: bool = False) -> None:
        """Narrative text: printed for the table format, to stderr for the machine formats; control
        characters other than the line breaks of the text itself are shown visibly."""
        click.echo("\n".join(visible(part) for part in text.split("\n")), err=err or not self.is_table)

    def rows(self, rows: Sequence[dict[str, Any]], columns: Sequence[str],
             prepare: Callable[[list[dict[str, Any]]], None] | None = None) -> None:
        """A listing: all fields for json/nl/csv; the named `columns` for the table, after `prepare`
        (which may add display-only fields such as a state word or a shortened text)."""
        rows = list(rows)
        if self.fmt == "json":
            echo_json(rows)
        elif self.fmt == "nl":
            for row in rows:
                click.echo(_compact(row))
        elif self.fmt == "csv":
            echo_csv(rows)
        else:
            if prepare is not None:
                prepare(rows)
            echo_table(rows, columns)

    def record(self, data: Any, text: Callable[[], None] | None = None, *,
               rows: Sequence[dict[str, Any]] | None = None) -> None:
        """One object: `data` as JSON; for --nl/--csv its `rows` (a listing inside it) when given,
        else the object itself as one line/row; `text()` prints the table format."""
        if self.fmt == "json":
            echo_json(data)
        elif self.fmt in ("nl", "csv") and rows is not None:
            self.rows(rows, [])
        elif self.fmt == "nl":
            click.echo(_compact(data))
        elif self.fmt == "csv":
            echo_csv([data] if isinstance(data, dict) else [{"value": data}])
        elif text is not None:
            text()
        else:
            for name, value in (data.items() if isinstance(data, dict) else [("value", data)]):
                click.echo(f"{name + ':':<19}{cell(value)}")


def output_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add --table/--json/--nl/--csv to a command and pass it an `Output` as `out` (see module doc).
    Two different ones given together (--json --csv) are a usage error naming both."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        given = [fmt for fmt in FORMATS if kwargs.pop(f"output_{fmt}", False)]
        return fn(*args, out=Output(given[-1] if given else "table"), **kwargs)

    for flag, value, text in reversed((
            ("--table", "table", "Print a readable table or text (the default); control characters shown as \\x1b."),
            ("--json", "json", "Print JSON."),
            ("--nl", "nl", "Print newline-delimited JSON: one object per line."),
            ("--csv", "csv", "Print CSV with a header row."))):
        wrapper = click.option(flag, f"output_{value}", is_flag=True, help=text, callback=_one_format)(wrapper)
    return wrapper


def _one_format(ctx: click.Context, param: click.Parameter, given: bool) -> bool:
    """Each flag has a destination of its own, so that two different ones are seen (with one shared
    destination click keeps the last one silently). Called in the order the flags were given,
    before any missing argument is looked for."""
    if given:
        flag = param.opts[0]
        seen = ctx.meta.setdefault("turnlog.output_flag", flag)
        if seen != flag:
            raise click.UsageError(f"{seen} and {flag} cannot be given together: choose one output format", ctx)
    return given


def limit_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--limit N for a listing command: passed on as `limit` (None: everything)."""
    return click.option("--limit", type=click.IntRange(min=1), default=None,
                        help="Show at most this many rows (default: all).")(fn)


__all__ = ["FORMATS", "Output", "cell", "echo_csv", "echo_json", "echo_table", "limit_option", "output_options",
           "visible"]
