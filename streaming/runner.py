"""Structured Streaming query around `Pipeline.process_batch`: trigger and checkpoint.

Exactly-once comes from the pair checkpoint + sink: Spark logs a batch's offsets before
running it and commits after it returns; a crash in between replays the same batch id
over the same input, and the sinks overwrite what the first attempt wrote.
"""
from __future__ import annotations

import logging
from typing import Literal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from streaming.pipeline import Pipeline
from streaming.sources import LandingStream

log = logging.getLogger(__name__)

Trigger = Literal["available-now", "processing-time"]
DEFAULT_INTERVAL = "100 seconds"


def run_stream(
    spark: SparkSession,
    pipeline: Pipeline,
    source: DataFrame | LandingStream,
    *,
    checkpoint_dir: str,
    trigger: Trigger = "available-now",
    interval: str = DEFAULT_INTERVAL,
    query_name: str = "landing_to_raw",
) -> StreamingQuery:
    """Start the query over `source` (a streaming envelope, or the landing files whose
    batches are turned into envelopes). `available-now` drains what is there and returns
    the finished query; `processing-time` returns the running query (one micro-batch per
    interval).

    A batch that raises stops the query; with `available-now` the error is raised here
    (StreamingQueryException), so nothing is skipped or committed past it.
    """
    if isinstance(source, LandingStream):
        source_df = source.files

        def process_batch(files: DataFrame, batch_id: int) -> None:
            pipeline.process_batch(source.batch_envelope(files, batch_id), batch_id)
    else:
        source_df, process_batch = source, pipeline.process_batch
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
