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

from streaming.errors import OperatorError
from streaming.io.jvm_errors import java_causes, python_chain

# The words the JVM reports ENOSPC with are the C library's, as Python's are.
NO_SPACE_LEFT = os.strerror(errno.ENOSPC)


class NoSpaceLeft(OperatorError):
    """A batch's write met a full disk; nothing of the batch was committed."""


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc`, or an exception it was raised from, is a full disk: a Python OSError
    ENOSPC, or a JVM exception (Py4JJavaError) with a cause saying so."""
    if any(isinstance(current, OSError) and current.errno == errno.ENOSPC for current in python_chain(exc)):
        return True
    return any(NO_SPACE_LEFT in cause.message for cause in java_causes(exc))


def disk_full_refusal(where: str, batch_id: int) -> NoSpaceLeft:
    """The one line for a batch stopped by a full disk under `where`."""
    return NoSpaceLeft(
        f"{where}: {NO_SPACE_LEFT} (batch {batch_id} was not committed). Free space there and run the command "
        "again: it writes the batch again from its start, and nothing of it lands twice"
    )
