"""`lakehouse stream`: the landing files of a data directory into its active raw tables."""
from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import TYPE_CHECKING

from streaming.errors import OperatorError
from streaming.io.layout import DataLayout
from streaming.io.sinks import SinkName
from streaming.io.sources import local_landing_files
from streaming.operations.batches.recorded_batch import unfinished_operations
from streaming.runtime.data_lock import hold_data_dir
from streaming.runtime.spark_session import session_for
from streaming.runtime.startup import LandingFiles, StreamOptions, claim_stream, load_checked_contracts, start_stream
from streaming.runtime.stream_identity import record_table_batches
from streaming.runtime.stream_loop import deferred_stop_signals, refusal_of, stop_between_batches
from streaming.runtime.trigger import DEFAULT_INTERVAL, Trigger

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Printer = Callable[[str], None]


def stream(
    layout: DataLayout,
    *,
    trigger: Trigger = "available-now",
    interval: str = DEFAULT_INTERVAL,
    sink: SinkName | None = None,
    max_files_per_trigger: int | None = None,
    max_bytes_per_trigger: int | None = None,
    catalog: str | None = None,
    contracts_dir: str | None = None,
    master: str | None = None,
    spark: SparkSession | None = None,
    out: Printer = print,
) -> None:
    """Stream the landing files into the raw tables; processing-time runs until Ctrl-C or
    SIGTERM, each of which stops it after the batch in progress. `catalog` is a Hive
    metastore (thrift://host:port) each raw table commit is synced to. `master` is used only
    when no `spark` session is given."""
    from pyspark.errors import StreamingQueryException

    if not local_landing_files(layout.landing):
        raise OperatorError(f"no landing files under {layout.landing}; run `lakehouse generate` first")
    options = StreamOptions(trigger, interval, sink, max_files_per_trigger, max_bytes_per_trigger, catalog=catalog)
    contracts = load_checked_contracts(contracts_dir, report=out)
    # Lock, identity and contracts are checked before Spark starts: a refusal costs no JVM start.
    with hold_data_dir(layout.root, "stream", report=out):
        target = layout.active()
        # The stream does not wait for them, but an analyst would miss their items.
        for warning in unfinished_operations(target.root):
            out(f"WARNING: {warning}")
        ends = LandingFiles(target, layout.landing, options)
        stream_id = claim_stream(ends, contracts, out)
        with session_for(spark, out, master) as session:
            started = time.monotonic()
            # From its start, a processing-time stream's Ctrl-C waits for the batch in progress.
            continuous = options.trigger == "processing-time"
            stop_signals = deferred_stop_signals(out) if continuous else nullcontext(None)
            try:
                with stop_signals as stop_requested:
                    query = start_stream(session, ends, contracts, out, stream_id=stream_id).query
                    if stop_requested is not None:
                        out(f"running: one micro-batch every {options.interval}; "
                            "Ctrl-C stops it after the current batch")
                        if stop_between_batches(query, stop_requested):
                            out("stopped")
            except StreamingQueryException as exc:
                refusal = refusal_of(options.query_name)
                if refusal is not None:
                    raise refusal from exc
                raise OperatorError(
                    f"the stream stopped on an error (nothing past the failed batch was committed): {exc}"
                ) from exc
        # What the change logs hold now, so that the next start notices one deleted.
        record_table_batches(target.root, contracts)
    out(f"stream finished in {time.monotonic() - started:.1f}s")
