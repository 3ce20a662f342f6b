"""The `turnlog` command: thin click functions that parse, call the public API and print.

Every command takes the output options of cli/output.py (a readable table by default, --json,
--nl, --csv) and --db, also after the command's name. A usage mistake exits with code 2 (with the
command's usage line), a runtime failure with code 1; either way the error is one line, never a
traceback. Each command declares on itself whether it writes (cli/base.py `command`).

The group lives in cli/base.py; each family module lists its commands in `COMMANDS`, and this
module registers them, in this order, on `main` (the console script `turnlog.cli:main`).
"""

from __future__ import annotations

from . import archives
from . import audit
from . import backups
from . import core
from . import crypto
from . import delegations
from . import edits
from . import hermes
from . import ledger
from . import metrics
from . import projections
from . import rekey
from . import titles
from . import web
from .base import main

FAMILIES = (
    core,
    ledger,
    titles,
    delegations,
    audit,
    edits,
    projections,
    backups,
    archives,
    crypto,
    hermes,
    metrics,
    rekey,
    web,
)

for family in FAMILIES:
    for command in family.COMMANDS:
        main.add_command(command)

__all__ = ["main"]
