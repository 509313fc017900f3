"""What lies behind an exception that a JVM call raised, read across py4j.

A failure deep in Spark or Hudi reaches Python as a Py4JJavaError whose text is the whole
Java stack, thousands of lines for a failed write; what an operator can act on (a full
disk, a metastore that stopped answering) is one throwable of its chain of causes. Python
wraps it again (`raise ... from`, an error met while handling another), so both chains are
read: every exception of the Python chain, and for each one py4j raised, its JVM
throwable and that throwable's causes.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple


class JavaCause(NamedTuple):
    class_name: str
    """The throwable's class, e.g. `java.net.ConnectException`."""
    message: str
    """Its message; empty when it has none."""


def python_chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then what it was raised from or while handling, each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def java_causes(exc: BaseException) -> list[JavaCause]:
    """Every JVM throwable behind `exc`, outermost first; none read once the JVM is gone
    (it may have died of the same failure)."""
    from py4j.protocol import Py4JError

    found: list[JavaCause] = []
    for current in python_chain(exc):
        throwable = getattr(current, "java_exception", None)
        try:
            # A cause chain is short; the bound only guards against a throwable that is
            # its own cause's cause, which Java allows.
            for _ in range(64):
                if throwable is None:
                    break
                found.append(JavaCause(str(throwable.getClass().getName()), str(throwable.getMessage() or "")))
                throwable = throwable.getCause()
        except Py4JError:
            break
    return found


def first_line(exc: BaseException) -> str:
    """The first line of what went wrong: for a py4j error its JVM throwable's own text
    (`str` of a Py4JJavaError starts with "An error occurred while calling o65.save."),
    else the exception's; its class name when there is no text."""
    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else str(exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__
