"""The benchmarks' memory figure: a process tree's memory, each address space once."""
from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
from collections.abc import Iterator

import psutil
import pytest

from benchmarks import measure

MiB = 1024 * 1024
pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or measure._SYS_KCMP is None,
    reason="kcmp(2) and /proc/<pid>/smaps_rollup are Linux's (x86_64 and aarch64 here)",
)

# A parent that touched 64 MiB, then forked a child sharing those pages until written.
# Run as a fresh, single-threaded interpreter: forking a pytest worker, whose other
# threads may hold locks, can leave the child stuck before it says it started.
_PARENT_AND_CHILD = """
import os, signal, sys
touched = bytearray(os.urandom(64 * 1024 * 1024))
child = os.fork()
if child == 0:
    signal.pause()
    os._exit(0)
print(os.getpid(), child, flush=True)
signal.pause()
"""


@pytest.fixture
def parent_and_child() -> Iterator[tuple[psutil.Process, psutil.Process]]:
    process = subprocess.Popen([sys.executable, "-c", _PARENT_AND_CHILD], stdout=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        parent, child = (int(pid) for pid in process.stdout.readline().split())  # type: ignore[union-attr]
        yield psutil.Process(parent), psutil.Process(child)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_a_process_shares_its_own_address_space_and_not_a_forked_childs(parent_and_child):
    parent, child = parent_and_child

    assert measure.shares_address_space(parent.pid, parent.pid)
    assert not measure.shares_address_space(child.pid, parent.pid)


def test_pages_a_forked_child_shares_count_twice_resident_and_once_proportional(parent_and_child):
    parent, child = parent_and_child

    tree = measure.tree_memory(parent)

    # Each holds the 64 MiB resident; they are one copy, shared.
    assert child.memory_info().rss >= 64 * MiB
    assert tree.rss >= 128 * MiB
    assert tree.pss < tree.rss - 48 * MiB
    assert tree.pss >= 64 * MiB


def test_a_child_still_in_its_parents_address_space_is_not_counted_again(parent_and_child, monkeypatch):
    # Such a child (a JVM's posix_spawn before exec) lives for microseconds, too briefly to
    # catch here; what the sums do with one is checked by naming the forked child one.
    parent, child = parent_and_child
    counted = measure.tree_memory(parent)

    monkeypatch.setattr(measure, "shares_address_space", lambda pid, parent_pid: pid == child.pid)
    without_child = measure.tree_memory(parent)

    assert abs(without_child.rss - parent.memory_info().rss) < 8 * MiB
    assert counted.rss - without_child.rss >= 64 * MiB
    assert counted.pss > without_child.pss
