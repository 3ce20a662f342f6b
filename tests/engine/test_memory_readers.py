"""The agent cache's memory readers (turnlog/memory.py) on cgroup v2 and /proc layouts written into
a tmp dir, and on this process's own /proc/self."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from turnlog import memory

MiB = 1024 * 1024
CGROUP2_AT_SYS_FS = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw\n"
HYBRID = ("25 24 0:22 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755\n"
          "26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw\n")


def write(root: Path, path: str, text: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def layout(root: Path, *, mountinfo: str = CGROUP2_AT_SYS_FS, mount: str = "/sys/fs/cgroup",
           cgroup: str = "/system.slice/gateway.service", status: str | None = "RssAnon:\t    2048 kB\n",
           **files: str) -> Path:
    """/proc/self (cgroup, mountinfo, status) and the cgroup's directory; `files` are written in it,
    a key `parent__memory_max` in its parent."""
    write(root, "/proc/self/cgroup", f"4:memory:/somewhere\n0::{cgroup}\n")
    write(root, "/proc/self/mountinfo", mountinfo)
    if status is not None:
        write(root, "/proc/self/status", f"Name:\tpython\n{status}VmSwap:\t0 kB\n")
    directory = root / mount.lstrip("/") / cgroup.lstrip("/")
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        where, _, file = name.rpartition("__")
        (directory.parent if where == "parent" else directory).joinpath(file.replace("_", ".")).write_text(text)
    return directory


def test_memory_high_on_the_process_cgroup_is_the_limit_and_its_anon_the_measure(tmp_path):
    directory = layout(tmp_path, memory_high="1073741824\n", memory_max="max\n",
                       memory_stat="anon 123456\nfile 999999\nanon_thp 0\n")
    limit = memory.cgroup_limit(tmp_path)
    assert limit == memory.CgroupLimit(directory, 1 << 30, "memory.high")
    assert memory.anonymous_memory(tmp_path) == 123456
    assert memory.auto_budget(tmp_path) == int((1 << 30) * memory.AUTO_FRACTION)


def test_memory_max_counts_when_memory_high_is_max(tmp_path):
    layout(tmp_path, memory_high="max\n", memory_max="2147483648\n", memory_stat="anon 5\n")
    assert (memory.cgroup_limit(tmp_path).limit_bytes, memory.cgroup_limit(tmp_path).source) == (2 << 30,
                                                                                                "memory.max")


def test_a_limit_on_an_ancestor_holds_and_its_scope_is_measured(tmp_path):
    directory = layout(tmp_path, memory_high="max\n", memory_max="max\n", memory_stat="anon 1\n",
                       parent__memory_max="536870912\n", parent__memory_stat="anon 777\n")
    limit = memory.cgroup_limit(tmp_path)
    assert limit is not None and limit.path == directory.parent and limit.source == "memory.max"
    assert memory.anonymous_memory(tmp_path) == 777


def test_the_hybrid_layout_finds_cgroup2_where_mountinfo_says(tmp_path):
    layout(tmp_path, mountinfo=HYBRID, mount="/sys/fs/cgroup/unified", memory_max="1048576\n",
           memory_stat="anon 42\n")
    assert memory.cgroup_limit(tmp_path).limit_bytes == 1048576
    assert memory.anonymous_memory(tmp_path) == 42


def test_cgroup_v1_memory_limit_when_no_v2_limit_holds(tmp_path):
    v1 = HYBRID + "35 25 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    layout(tmp_path, mountinfo=v1, mount="/sys/fs/cgroup/unified", memory_max="max\n")
    write(tmp_path, "/proc/self/cgroup", "4:memory:/gateway\n0::/system.slice/gateway.service\n")
    v1_dir = tmp_path / "sys/fs/cgroup/memory/gateway"
    write(tmp_path, "/sys/fs/cgroup/memory/gateway/memory.limit_in_bytes", "268435456\n")
    write(tmp_path, "/sys/fs/cgroup/memory/gateway/memory.stat", "cache 10\nrss 300\ntotal_rss 400\n")
    assert memory.cgroup_limit(tmp_path) == memory.CgroupLimit(v1_dir, 256 * MiB, "memory.limit_in_bytes")
    assert memory.anonymous_memory(tmp_path) == 400
    write(tmp_path, "/sys/fs/cgroup/memory/gateway/memory.limit_in_bytes", "9223372036854771712\n")
    assert memory.cgroup_limit(tmp_path) is None  # v1's "unlimited"


def test_without_a_limit_the_process_anonymous_rss_is_measured_and_auto_is_no_budget(tmp_path):
    layout(tmp_path, memory_high="max\n", memory_max="max\n", memory_stat="anon 1\n")
    assert memory.cgroup_limit(tmp_path) is None
    assert memory.anonymous_memory(tmp_path) == 2048 * 1024
    assert memory.auto_budget(tmp_path) is None


def test_smaps_rollup_when_status_has_no_rss_anon(tmp_path):
    layout(tmp_path, status="VmRSS:\t 9999 kB\n")
    write(tmp_path, "/proc/self/smaps_rollup", "Rss:   300 kB\nAnonymous:     100 kB\nKSM: 0 kB\n")
    assert memory.process_anon_bytes(tmp_path) == 100 * 1024


def test_nothing_to_read_is_none(tmp_path):
    assert memory.process_cgroup(tmp_path) is None
    assert memory.cgroup_limit(tmp_path) is None
    assert memory.anonymous_memory(tmp_path) is None


def test_this_process_anonymous_rss_follows_an_allocation():
    before = memory.process_anon_bytes()
    if before is None:
        pytest.skip("no /proc/self here")
    buffer = bytearray(32 * MiB)
    assert memory.process_anon_bytes() >= before + 30 * MiB
    del buffer
    memory.give_back_memory()
    assert memory.process_anon_bytes() < before + 16 * MiB


def test_give_back_memory_runs_malloc_trim_where_glibc_has_it():
    assert memory.give_back_memory() is (platform.libc_ver()[0] == "glibc")
