"""One writer per data directory.

Two processes writing one data directory corrupt each other's work: two streams both
die on Spark's `CONCURRENT_STREAM_LOG_UPDATE`, a demo clears what a stream is writing.
Every command that writes a data directory therefore holds its lock for its whole run
(`hold_data_dir`).

The lock is an OS lock (`fcntl.flock`) on `<data dir>/.lakehouse.lock`: the kernel
releases it when the holder exits, however it exits (`kill -9` included), so a crashed
holder never blocks the next run. The same file carries a JSON holder record (pid, host,
command, since when) for the refusal message, written after the lock is taken and
emptied before it is released. A record found under a lock that was free is what a
crash leaves behind: on this host it is taken over with a message.

Over NFS, `flock` is only as good as the server's lock manager, and a pid means nothing
on another host. So a record naming another host is never taken over automatically: the
command refuses and says how to clear it once that process is known to be gone.

On AWS the Glue job is the only writer of its raw tables; its `MaxConcurrentRuns=1`
(deploy/stacks/lakehouse.py, pinned by tests/deploy/test_stack.py) makes Glue refuse a
second run while one is going (AWS Glue API, ExecutionProperty:
https://docs.aws.amazon.com/glue/latest/webapi/API_ExecutionProperty.html). This lock
guards the local data directory only.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import stat
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from streaming.errors import OperatorError
from streaming.io.layout import LOCK_FILE, DataLayout

# A data directory holds clear PII (landing payloads, raw tables, the quarantine, the PII
# key): what a writer creates in it is for its owner alone, folders 0700 and files 0600.
# The CLI sets this umask for its whole process; Spark writes through Hadoop, which takes
# its permissions from `fs.permissions.umask-mode` instead (streaming/runtime/spark_session.py).
PRIVATE_UMASK = 0o077

# Data directories this process holds, with how many nested `hold_data_dir` calls hold
# each: the demo holds its directory and calls generate and stream, which hold it too.
_held: dict[Path, int] = {}
_held_guard = threading.Lock()


class DataDirLocked(OperatorError):
    """The data directory cannot be locked: another process writes it (or may, on
    another host), or the lock file cannot be opened."""


@dataclass(frozen=True)
class LockHolder:
    pid: int
    host: str
    command: str
    since: str  # ISO 8601, UTC

    def describe(self) -> str:
        return f"`lakehouse {self.command}` (pid {self.pid} on host {self.host}, since {self.since})"


def lock_path(data_dir: Path) -> Path:
    return DataLayout(Path(data_dir)).lock


def _read_holder(handle: int) -> LockHolder | None:
    """The record in the lock file; None when empty (free, or a holder still writing it)."""
    os.lseek(handle, 0, os.SEEK_SET)
    text = os.read(handle, 64 * 1024).decode("utf-8", errors="replace").strip()
    if not text:
        return None
    try:
        fields = json.loads(text)
        return LockHolder(int(fields["pid"]), str(fields["host"]), str(fields["command"]), str(fields["since"]))
    except (ValueError, KeyError, TypeError):
        # Not ours to interpret; the refusal shows it as it is.
        return LockHolder(pid=-1, host="?", command=f"? (unreadable record {text[:80]!r})", since="?")


def _write_holder(handle: int, holder: LockHolder | None) -> None:
    os.ftruncate(handle, 0)
    if holder is not None:
        os.lseek(handle, 0, os.SEEK_SET)
        os.write(handle, (json.dumps(asdict(holder)) + "\n").encode())
    os.fsync(handle)


def _pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def _way_on(holder: LockHolder | None, command: str, host: str) -> str:
    """What the refused `command` can do about `holder`, as commands to type.

    A stream runs until stopped, so waiting for it is no answer: it is stopped (SIGTERM,
    which a processing-time stream takes as "stop after the current batch"), the command
    runs, and the stream is started again, continuing from its checkpoint. Any other
    holder finishes by itself.
    """
    again = f"`lakehouse {command}`"
    if holder is None:
        return f"run {again} again in a moment"
    if holder.command != "stream":
        return f"wait for it to finish, then run {again} again"
    stop = f"`kill {holder.pid}`" + ("" if holder.host == host else f" on host {holder.host}")
    if command == "stream":
        return f"it is already streaming; to restart it, stop it with {stop} and start it again"
    return (
        f"stop the stream with {stop} (or Ctrl-C in its terminal; a processing-time stream finishes its "
        f"current batch first), run {again} again, then start the stream again with the options it had: "
        "it continues from its checkpoint, and the landing files keep what arrives meanwhile"
    )


def _utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@contextmanager
def hold_data_dir(
    data_dir: Path | str, command: str, *, report: Callable[[str], None] = print
) -> Iterator[None]:
    """Hold the single-writer lock of `data_dir` (created if missing) while the block runs.

    Raises DataDirLocked at once, without waiting, when another process holds it or when
    a record left by a process on another host may still be valid. Nested calls in one
    process for the same directory share the lock. A directory created here for the lock
    and still empty at the end is removed again. While the lock is held, the process's
    umask is PRIVATE_UMASK (the previous one is restored afterwards).
    """
    root = Path(data_dir).resolve()
    with _held_guard:
        if root in _held:
            _held[root] += 1
            nested = True
        else:
            nested = False
    if nested:
        try:
            yield
        finally:
            with _held_guard:
                _held[root] -= 1
        return

    path = lock_path(root)
    created = not root.exists()
    previous_umask = os.umask(PRIVATE_UMASK)
    try:
        root.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW: a symbolic link in the lock file's place would have this command
        # truncate and write whatever file it points to.
        handle = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        os.umask(previous_umask)
        if exc.errno == errno.ELOOP:
            raise DataDirLocked(
                f"the lock file {path} is a symbolic link; it must be a plain file of the data directory: "
                "delete the link and run again"
            ) from exc
        raise DataDirLocked(f"cannot open the lock file {path}: {exc.strerror}") from exc
    if not stat.S_ISREG(os.fstat(handle).st_mode):
        # A FIFO, socket or device opens (a FIFO read-write without blocking), but cannot
        # hold the record: its first seek fails with "Illegal seek".
        os.close(handle)
        os.umask(previous_umask)
        raise DataDirLocked(
            f"the lock file {path} is not a plain file; it must be a plain file of the data directory: "
            "delete it and run again"
        )
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            holder = _read_holder(handle)
            who = holder.describe() if holder else "another process (it is starting up)"
            raise DataDirLocked(
                f"{root} is being written by {who}; one writer per data directory: "
                f"{_way_on(holder, command, socket.gethostname())}"
            ) from None
        host = socket.gethostname()
        left = _read_holder(handle)
        if left is not None:
            if left.host != host:
                raise DataDirLocked(
                    f"{root} has a lock record of {left.describe()}; a process on another host cannot be "
                    f"checked from here. If it is no longer running, delete {path} and run again"
                )
            state = "is no longer running" if not _pid_running(left.pid) else "no longer holds the lock"
            report(f"taking over the lock of {root}: {left.describe()} {state} (it did not exit cleanly)")
        _write_holder(handle, LockHolder(os.getpid(), host, command, _utc_now()))
        with _held_guard:
            _held[root] = 1
        try:
            yield
        finally:
            with _held_guard:
                del _held[root]
            _write_holder(handle, None)
            if created:
                _remove_if_only_the_lock(root)
    finally:
        # Closing the descriptor releases the flock.
        os.close(handle)
        os.umask(previous_umask)


def _remove_if_only_the_lock(root: Path) -> None:
    """A command refused before writing anything leaves no directory it made for its lock."""
    if [entry.name for entry in root.iterdir()] == [LOCK_FILE]:
        lock_path(root).unlink()
        try:
            root.rmdir()
        except OSError:
            pass  # another process has just put something there: keep it
