"""How much anonymous memory the gateway holds, what its budget is, and giving freed memory back.

Under a cgroup v2 limit (`memory.high`, else `memory.max`, on the process's cgroup or the nearest
ancestor that sets one) the budget is counted on that cgroup's scope: its `memory.stat` `anon`,
so the unit's other processes count too (under cgroup v1, `memory.limit_in_bytes` and the
`total_rss` of its memory.stat). Without a limit it is the process's own anonymous RSS
(`/proc/self/status` RssAnon, else `/proc/self/smaps_rollup` Anonymous). Every reader takes
`root`, the directory the files are found under, so a test can lay them out in a tmp dir.
"""

from __future__ import annotations

import ctypes
import gc
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

# An "auto" budget: this share of the cgroup's limit, so agents go before the kernel throttles
# (memory.high) or kills (memory.max) the gateway.
AUTO_FRACTION = 0.8
MiB = 1024 * 1024


@dataclass(frozen=True)
class CgroupLimit:
    """The cgroup whose limit holds the process: its directory, the limit and the file that set it."""

    path: Path
    limit_bytes: int
    source: str  # "memory.high", "memory.max" (cgroup v2) or "memory.limit_in_bytes" (v1)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _under(root: Path, absolute: str) -> Path:
    return root / absolute.lstrip("/")


def _mount(root: Path, fstype: str, option: str | None = None) -> tuple[Path, str] | None:
    """Where a cgroup hierarchy is mounted (cgroup2, or the cgroup v1 one with `option`), and
    which of its paths that mount shows."""
    for line in (_read(_under(root, "/proc/self/mountinfo")) or "").splitlines():
        mount, _, fs = line.partition(" - ")
        fs_fields = fs.split()
        if fs_fields[:1] == [fstype] and (option is None or option in fs_fields[-1].split(",")):
            fields = mount.split()
            return _under(root, fields[4]), fields[3]
    return None


def _membership(root: Path, hierarchy: Callable[[str, str], bool], mount: tuple[Path, str] | None) -> Path | None:
    if mount is None:
        return None
    for line in (_read(_under(root, "/proc/self/cgroup")) or "").splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy(number, controllers):
            where, shown = mount
            if shown != "/" and (path == shown or path.startswith(shown.rstrip("/") + "/")):
                path = path[len(shown.rstrip("/")):]
            directory = _under(where, path)
            return directory if directory.is_dir() else None
    return None


def process_cgroup(root: str | Path = "/") -> Path | None:
    """The directory of this process's cgroup v2 (None: no v2 membership, or not mounted)."""
    base = Path(root)
    mount = _mount(base, "cgroup2") or (_under(base, "/sys/fs/cgroup"), "/")
    return _membership(base, lambda number, controllers: number == "0" and not controllers, mount)


def _v1_memory_cgroup(root: Path) -> Path | None:
    return _membership(root, lambda number, controllers: "memory" in controllers.split(","),
                       _mount(root, "cgroup", "memory"))


# cgroup v1 says "no limit" with the largest page-aligned number it holds.
_V1_UNLIMITED = 1 << 62


def _limit_in(directory: Path) -> tuple[int, str] | None:
    for name in ("memory.high", "memory.max"):
        text = (_read(directory / name) or "").strip()
        if text.isdigit():  # "max" (no limit) and a missing file alike fall through
            return int(text), name
    text = (_read(directory / "memory.limit_in_bytes") or "").strip()
    if text.isdigit() and int(text) < _V1_UNLIMITED:
        return int(text), "memory.limit_in_bytes"
    return None


def _nearest_limit(directory: Path | None, mount: Path) -> CgroupLimit | None:
    while directory is not None:
        found = _limit_in(directory)
        if found is not None:
            return CgroupLimit(directory, *found)
        if directory == mount or mount not in directory.parents:
            return None
        directory = directory.parent
    return None


def cgroup_limit(root: str | Path = "/") -> CgroupLimit | None:
    """The nearest limit on the process's cgroup or its ancestors (None: none is set): cgroup v2's
    memory.high, then memory.max; without one, cgroup v1's memory.limit_in_bytes."""
    base = Path(root)
    v2 = _mount(base, "cgroup2") or (_under(base, "/sys/fs/cgroup"), "/")
    v1 = _mount(base, "cgroup", "memory")
    return (_nearest_limit(process_cgroup(base), v2[0])
            or (_nearest_limit(_v1_memory_cgroup(base), v1[0]) if v1 is not None else None))


def cgroup_anon_bytes(directory: Path) -> int | None:
    """The cgroup's anonymous memory from its memory.stat (bytes): v2's `anon`, v1's `total_rss`
    (its hierarchy) or `rss`."""
    values: dict[str, int] = {}
    for line in (_read(directory / "memory.stat") or "").splitlines():
        name, _, value = line.partition(" ")
        if value.strip().isdigit():
            values[name] = int(value)
    return next((values[name] for name in ("anon", "total_rss", "rss") if name in values), None)


def _kib_field(text: str | None, field: str) -> int | None:
    for line in (text or "").splitlines():
        name, _, value = line.partition(":")
        if name == field:
            number = value.split()[0] if value.split() else ""
            return int(number) * 1024 if number.isdigit() else None
    return None


def process_anon_bytes(root: str | Path = "/") -> int | None:
    """This process's anonymous resident memory (bytes): RssAnon, else smaps_rollup's Anonymous."""
    base = Path(root)
    found = _kib_field(_read(_under(base, "/proc/self/status")), "RssAnon")
    if found is None:
        found = _kib_field(_read(_under(base, "/proc/self/smaps_rollup")), "Anonymous")
    return found


def anonymous_memory(root: str | Path = "/") -> int | None:
    """What a memory budget is compared with (bytes): the limiting cgroup's anon when a limit holds
    the process, else its own anonymous RSS; None when neither can be read (not Linux)."""
    limit = cgroup_limit(root)
    if limit is not None:
        found = cgroup_anon_bytes(limit.path)
        if found is not None:
            return found
    return process_anon_bytes(root)


def auto_budget(root: str | Path = "/") -> int | None:
    """The "auto" budget (bytes): AUTO_FRACTION of the cgroup's limit; None (no budget) without one."""
    limit = cgroup_limit(root)
    return int(limit.limit_bytes * AUTO_FRACTION) if limit is not None else None


def _glibc_malloc_trim() -> Callable[[int], int] | None:
    try:
        return getattr(ctypes.CDLL("libc.so.6"), "malloc_trim", None)
    except OSError:
        return None  # not glibc (musl, macOS): freed memory goes back as that allocator decides


_MALLOC_TRIM = _glibc_malloc_trim()


def give_back_memory() -> bool:
    """Free what only cycles keep alive, then return the C heap's free pages to the OS
    (`malloc_trim(0)` where glibc has it). Whether malloc_trim ran."""
    gc.collect()
    if _MALLOC_TRIM is None:
        return False
    _MALLOC_TRIM(0)
    return True
