"""Structured Streaming query around `Pipeline.process_batch`: trigger and checkpoint.

Exactly-once comes from the pair checkpoint + sink: Spark logs a batch's offsets before
running it and commits after it returns; a crash in between replays the same batch id
over the same input, and the sinks overwrite what the first attempt wrote.
"""
from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from streaming.errors import OperatorError
from streaming.io.hive_metastore import is_metastore_unreachable, metastore_unreachable_refusal
from streaming.io.layout import QUERY_NAME
from streaming.io.sources import LandingStream
from streaming.pipeline.batch import Pipeline
from streaming.runtime.disk_full import disk_full_refusal, is_disk_full
from streaming.runtime.trigger import DEFAULT_INTERVAL, Trigger

log = logging.getLogger(__name__)

# The OperatorError that stopped each query, by query name. Spark reports an exception
# raised in foreachBatch only as a StreamingQueryException whose text holds the Python
# traceback; `refusal_of` gives the error itself, so the operator reads its message alone.
_refusals: dict[str, OperatorError] = {}


def refusal_of(query_name: str = QUERY_NAME) -> OperatorError | None:
    """The OperatorError a batch of the query last started under `query_name` raised, if any."""
    return _refusals.get(query_name)


def run_stream(
    spark: SparkSession,
    pipeline: Pipeline,
    source: DataFrame | LandingStream,
    *,
    checkpoint_dir: str,
    trigger: Trigger = "available-now",
    interval: str = DEFAULT_INTERVAL,
    query_name: str = QUERY_NAME,
    raw_root: str | None = None,
    catalog: str | None = None,
) -> StreamingQuery:
    """Start the query over `source` (a streaming envelope, or the landing files whose
    batches are turned into envelopes). `available-now` drains what is there and returns
    the finished query; `processing-time` returns the running query (one micro-batch per
    interval).

    A batch that raises stops the query; with `available-now` the error is raised here
    (StreamingQueryException), so nothing is skipped or committed past it. When it was an
    OperatorError, `refusal_of(query_name)` returns it; so it does for a write that met a
    full disk (NoSpaceLeft, naming `raw_root`, else the checkpoint's folder), and for a
    sync to the Hive metastore `catalog` that no longer answers (MetastoreUnreachable).
    """
    if isinstance(source, LandingStream):
        source_df = source.files

        def envelope_of(files: DataFrame, batch_id: int) -> DataFrame:
            return source.batch_envelope(files, batch_id)
    else:
        source_df = source

        def envelope_of(envelope: DataFrame, batch_id: int) -> DataFrame:
            return envelope

    _refusals.pop(query_name, None)

    def process_batch(batch: DataFrame, batch_id: int) -> None:
        try:
            pipeline.process_batch(envelope_of(batch, batch_id), batch_id)
        except OperatorError as exc:
            _refusals[query_name] = exc
            raise
        except Exception as exc:
            if is_disk_full(exc):
                refusal: OperatorError = disk_full_refusal(raw_root or checkpoint_dir, batch_id)
            elif catalog is not None and is_metastore_unreachable(exc):
                refusal = metastore_unreachable_refusal(catalog, batch_id)
            else:
                raise
            _refusals[query_name] = refusal
            raise refusal from exc

    _quiet_py4j_about_refusals()
    if not source_df.isStreaming:
        raise ValueError("run_stream needs a streaming DataFrame (spark.readStream...)")
    if any(active.name == query_name for active in spark.streams.active):
        raise RuntimeError(f"a streaming query named {query_name!r} is already running in this session")
    writer = (
        source_df.writeStream.queryName(query_name)
        .option("checkpointLocation", checkpoint_dir)
        .foreachBatch(process_batch)
    )
    if trigger == "available-now":
        writer = writer.trigger(availableNow=True)
    elif trigger == "processing-time":
        writer = writer.trigger(processingTime=interval)
    else:
        raise ValueError(f"trigger must be 'available-now' or 'processing-time', not {trigger!r}")
    query = writer.start()
    log.info("query=%s trigger=%s checkpoint=%s started", query_name, trigger, checkpoint_dir)
    if trigger == "available-now":
        query.awaitTermination()
        log.info("query=%s drained all available input", query_name)
    return query


class _RefusalTraceback(logging.Filter):
    """Drops py4j's log of an exception raised in a batch when it is an OperatorError: the
    command prints the refusal's own message (refusal_of), and the traceback before it
    only buries it. Other exceptions, bugs, keep their traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], OperatorError))


def _quiet_py4j_about_refusals() -> None:
    # py4j logs a Python callback's exception from whichever of its two servers ran it
    # (py4j/clientserver.py and py4j/java_gateway.py, "There was an exception while
    # executing the Python Proxy on the Python Side").
    for name in ("py4j.clientserver", "py4j.java_gateway"):
        logger = logging.getLogger(name)
        if not any(isinstance(existing, _RefusalTraceback) for existing in logger.filters):
            logger.addFilter(_RefusalTraceback())


@contextmanager
def deferred_stop_signals(report: Callable[[str], None]) -> Iterator[threading.Event]:
    """While the block runs, SIGINT (Ctrl-C) and SIGTERM only set the event it yields;
    a second Ctrl-C raises KeyboardInterrupt as usual, to abort at once.

    Without this, Ctrl-C raises KeyboardInterrupt inside a py4j call while a batch runs in
    the JVM, and stopping the query then interrupts that batch: py4j tracebacks, exit 1,
    and a batch to replay. The JVM does not see a signal sent to the whole process group
    (a terminal's Ctrl-C, `timeout`, `kill -- -<pgid>`): it runs in a session of its own
    (streaming/runtime/spark_session.py).
    """
    requested = threading.Event()

    def request_stop(signum: int, frame: object) -> None:
        if requested.is_set():
            raise KeyboardInterrupt
        requested.set()
        report("stopping after the current batch (Ctrl-C again to abort it) ...")

    previous = {number: signal.signal(number, request_stop) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield requested
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def stop_between_batches(query: StreamingQuery, requested: threading.Event, *, poll_seconds: float = 1.0) -> bool:
    """Wait until the query ends (False; a failed query raises) or `requested` is set (True):
    then let the batch in progress finish and commit, and stop the query while no trigger
    is active. Waits with a timeout, as a signal handler runs only between py4j calls."""
    while not requested.is_set():
        if query.awaitTermination(poll_seconds):
            return False
    while query.isActive and query.status["isTriggerActive"]:
        query.awaitTermination(0.2)
    query.stop()
    return True
