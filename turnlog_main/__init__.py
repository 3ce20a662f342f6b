"""The `turnlog` console script's entry point, outside the turnlog package.

Importing turnlog takes a few tenths of a second, and Ctrl-C in them would print Python's
traceback: this package imports nothing of turnlog's until `main` runs, so the interrupt is caught
here and said as turnlog.cli says any other one. Kept tiny: it is all that loads before that.
"""

from __future__ import annotations

import sys

INTERRUPTED = 130  # turnlog.cli.base.INTERRUPTED (a test pins it): importing that would defeat the purpose


def main() -> None:
    try:
        from turnlog.cli import main as cli
    except KeyboardInterrupt:
        sys.stderr.write("turnlog: interrupted\n")
        raise SystemExit(INTERRUPTED) from None
    cli()
