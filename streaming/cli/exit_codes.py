"""The one place where an exception becomes an exit code (and a message without a traceback)."""
from __future__ import annotations

from lakehouse_dbt.pii_key import PiiKeyError
from streaming.errors import OperatorError
from streaming.runtime.disk_full import NO_SPACE_LEFT, is_disk_full

OK = 0
# `reconcile` exits with this when the two sides differ; 2 stays "could not run".
MISMATCH = 1
REFUSED = 2


def exit_code_of(exc: BaseException) -> int | None:
    """The exit code of an operator-facing error; None for a bug, whose traceback must show."""
    # Imported when an error is met, as its module's imports are heavy (Spark, DuckDB).
    from streaming.operations.reconcile import ReconcileMismatch

    if isinstance(exc, ReconcileMismatch):
        return MISMATCH
    # The PII key helpers run inside dbt's image, without `streaming`: their errors are
    # plain. A raw table its format cannot read is an OperatorError (UnreadableRawTable).
    if isinstance(exc, (OperatorError, PiiKeyError)):
        return REFUSED
    # A file-system error on a named path (missing, a file where a folder belongs, no
    # permission) is the operator's to fix, whichever command met it.
    if isinstance(exc, OSError) and exc.filename is not None:
        return REFUSED
    # So is a full disk, however deep in a JVM write it was met (a backfill's Hudi write).
    if is_disk_full(exc):
        return REFUSED
    return None


def message_of(exc: BaseException) -> str:
    """The one line the operator sees for an error that has an exit code."""
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror}"
    if not isinstance(exc, OperatorError) and is_disk_full(exc):
        return f"{NO_SPACE_LEFT} under one of this command's writes: free space where it writes, then run it again"
    return str(exc)
