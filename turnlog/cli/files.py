"""Writing a command's output to a file (`export -o`, `export-routing -o`) the way a careful user expects.

The file is written next to its destination and moved into place, so it is never half-written; an
existing file is replaced only when asked (`--force`); a symbolic link is never followed (its target
may be anything: `~/.bashrc`, another user's file); a missing folder is one clear line.

Every output a command names (a file, a folder, a database to make) goes into a folder that
exists: turnlog makes no folders on the way (`require_folder`).
"""

from __future__ import annotations

import os
import tempfile

import click

from .output import visible


def require_folder(path: str) -> None:
    """The folder `path` is to be written into exists, or one line naming it, exit 1 (as a missing
    --db is: the command line is well formed, the file system says no), before anything is made."""
    folder = os.path.dirname(os.path.abspath(os.path.expanduser(path)))
    if not os.path.isdir(folder):
        raise click.ClickException(f"cannot write {visible(path)}: no such folder: {visible(folder)}")


def write_file(path: str, text: str, *, force: bool = False) -> None:
    if os.path.islink(path):
        raise click.ClickException(f"{visible(path)} is a symbolic link: not followed; give the real path")
    require_folder(path)
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.lexists(path) and not force:
        raise click.ClickException(f"{visible(path)} exists: give --force to overwrite it")
    fd, temp = tempfile.mkstemp(dir=directory, prefix=".turnlog-", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # as an ordinary new file would be, not mkstemp's 0600
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        if force:
            os.replace(temp, path)  # a rename replaces a link made meanwhile, never writes through it
        else:
            os.link(temp, path)  # fails if the path appeared meanwhile: never overwrites unasked
    except FileExistsError:
        raise click.ClickException(f"{visible(path)} exists: give --force to overwrite it") from None
    except OSError as e:
        raise click.ClickException(f"cannot write {visible(path)}: {e.strerror}") from None
    finally:
        if os.path.lexists(temp):
            os.unlink(temp)


__all__ = ["require_folder", "write_file"]
