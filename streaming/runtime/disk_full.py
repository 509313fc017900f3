"""A full disk under a write, told apart however Spark, Hudi and py4j wrapped it.

A Hudi write that meets a full disk fails deep in an executor task: the JVM's
java.io.IOException "No space left on device" (the C library's words for ENOSPC) arrives
in Python as a Py4JJavaError whose chain of causes runs through Hadoop's FSError, Spark's
job abort and Hudi's own exceptions. Its text is thousands of lines, the cause a few of
them; the operator needs the cause and where. Nothing is lost by stopping there: the
batch was not committed, and the next start writes it again.
"""
from __future__ import annotations

import errno
import os
from typing import Any

from streaming.errors import OperatorError

# The words the JVM reports ENOSPC with are the C library's, as Python's are.
NO_SPACE_LEFT = os.strerror(errno.ENOSPC)


class NoSpaceLeft(OperatorError):
    """A batch's write met a full disk; nothing of the batch was committed."""


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc`, or an exception it was raised from, is a full disk: a Python OSError
    ENOSPC, or a JVM exception (Py4JJavaError) with a cause saying so."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno == errno.ENOSPC:
            return True
        if _java_chain_says_disk_full(getattr(current, "java_exception", None)):
            return True
        current = current.__cause__ or current.__context__
    return False


def _java_chain_says_disk_full(throwable: Any) -> bool:
    """Whether a JVM throwable or one of its causes carries the ENOSPC message."""
    from py4j.protocol import Py4JError

    try:
        depth = 0
        # A cause chain is short; the bound only guards against a throwable that is its
        # own cause's cause, which Java allows.
        while throwable is not None and depth < 64:
            message = throwable.getMessage()
            if message is not None and NO_SPACE_LEFT in message:
                return True
            throwable = throwable.getCause()
            depth += 1
    except Py4JError:
        # The JVM is gone (it may have died of the same full disk): nothing more to read.
        return False
    return False


def disk_full_refusal(where: str, batch_id: int) -> NoSpaceLeft:
    """The one line for a batch stopped by a full disk under `where`."""
    return NoSpaceLeft(
        f"{where}: {NO_SPACE_LEFT} (batch {batch_id} was not committed). Free space there and run the command "
        "again: it writes the batch again from its start, and nothing of it lands twice"
    )
