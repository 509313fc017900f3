"""The benchmarks' memory figure: a process tree's memory, each address space once."""
from __future__ import annotations

import os
import platform
import signal

import psutil
import pytest

from benchmarks import measure

MiB = 1024 * 1024
needs_linux_proc = pytest.mark.skipif(
    platform.system() != "Linux" or measure._SYS_KCMP is None,
    reason="kcmp(2) and /proc/<pid>/smaps_rollup are Linux's (x86_64 and aarch64 here)",
)


def _forked_sleeper() -> int:
    """A child forked after this process touched its pages: they are shared until written."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: say it started, then wait to be killed
        os.close(read_end)
        os.write(write_end, b"x")
        signal.pause()
        os._exit(0)
    os.close(write_end)
    os.read(read_end, 1)
    os.close(read_end)
    return pid


@needs_linux_proc
def test_a_process_shares_its_own_address_space_and_not_a_forked_childs():
    pid = _forked_sleeper()
    try:
        assert measure.shares_address_space(os.getpid(), os.getpid())
        assert not measure.shares_address_space(pid, os.getpid())
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


@needs_linux_proc
def test_pages_a_forked_child_shares_count_twice_resident_and_once_proportional():
    touched = bytearray(os.urandom(64 * MiB))
    pid = _forked_sleeper()
    try:
        alone = measure.tree_memory(psutil.Process(pid))
        tree = measure.tree_memory(psutil.Process())
        # The child holds the 64 MiB resident, shared with this process.
        assert alone.rss >= 64 * MiB
        assert tree.rss >= 128 * MiB
        # Split between the two sharers, those pages add up to one copy.
        assert tree.pss < tree.rss - 48 * MiB
        assert tree.pss >= 64 * MiB
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert len(touched) == 64 * MiB


@needs_linux_proc
def test_a_child_still_in_its_parents_address_space_is_not_counted_again(monkeypatch):
    # Such a child (a JVM's posix_spawn before exec) lives for microseconds, too briefly to
    # catch here; what the sum does with one is checked by naming the forked child one.
    pid = _forked_sleeper()
    try:
        # This process may have other children (a pytest worker's Spark JVM): the forked
        # child's own share is what must leave the sums.
        counted = measure.tree_memory(psutil.Process())
        child_rss = psutil.Process(pid).memory_info().rss
        monkeypatch.setattr(measure, "shares_address_space", lambda child, parent: child == pid)
        without_child = measure.tree_memory(psutil.Process())
        assert child_rss > 0
        assert abs((counted.rss - without_child.rss) - child_rss) < 16 * MiB
        assert counted.pss > without_child.pss
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
