"""`process_batch`: one micro-batch of change envelopes -> raw change logs + quarantine.

The same function runs under every runner (`foreachBatch` locally and on Glue, batch
backfills, tests). Each table's sink receives every distinct change of the batch
(de-duplicated by eventID); the Hudi sink also upserts the winner per key into the
current-state table. Replaying a batch id reproduces its output: the sinks replace
what an earlier attempt of that batch wrote.
"""
from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial, reduce
from typing import Any, Protocol, TypeVar, cast

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Observation, Row, SparkSession
from pyspark.sql import functions as F

from streaming.contracts.evolution import contract_version
from streaming.contracts.model import INGEST_HOUR_COLUMN, TableContract, ingest_hour
from streaming.contracts.spark_schema import change_log_schema
from streaming.errors import OperatorError
from streaming.pipeline.decode import (
    MOVED_FROM,
    decode_records,
    invalid_rows,
    kept_apart_from_its_plan,
    release_kept,
    rows_landing_in,
    table_rows,
)
from streaming.pipeline.envelope import envelope_columns
from streaming.pipeline.ordering import drop_duplicate_events, ordering_columns
from streaming.pipeline.sink_capabilities import SinkCapabilities

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
T = TypeVar("T")
# Raw-table writes running at once for a sink that allows it (SinkCapabilities).
CONCURRENT_WRITES = 2
# How long a finished write's observed counts may take to arrive from Spark's listener
# bus (they come within milliseconds; only a stage proved empty sends none).
OBSERVED_FIGURES_WAIT_S = 10.0
# How Spark 3.5 fails a task reading rows of a local checkpoint (kept_apart_from_its_plan)
# that are gone with their executor (SparkCoreErrors.checkpointRDDBlockIdNotFoundError).
LOST_KEPT_ROWS = re.compile(r"Checkpoint block rdd_\d+_\d+ not found")


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class RawSink(Protocol):
    """Where each table's distinct changes land (streaming.io.formats: local Parquet, Hudi)."""

    capabilities: SinkCapabilities

    def write(self, changes: DataFrame, contract: TableContract, batch_id: int, rows: int | None = None) -> None:
        """Land this batch's distinct changes of one table (columns `change_log_schema`).
        `rows`: their count when the caller knows it, which spares a Spark job to find out
        whether the frame is empty."""


class StagingSink(Protocol):
    """A raw sink that can write a table's rows where no reader sees them and make them
    visible later (the local change log), declared by `stages_tables`. The pipeline then counts each table's rows from
    the write job itself and publishes every table only once the counts add up; a sink
    without it is counted by a job of its own before it writes (the Hudi sink, whose
    write is its commit)."""

    def stage(self, changes: DataFrame | None, contract: TableContract, batch_id: int, ingest_hour: str) -> Any:
        """Write one table's rows of the batch out of sight (None: it has none this batch)."""

    def publish(self, spark: SparkSession, staged: Any) -> None:
        """Make a staged table the batch's rows of it, replacing any earlier attempt's."""

    def discard(self, spark: SparkSession, staged: Any) -> None:
        """Remove a staged table's rows: the batch failed its checks."""


class QuarantineSink(Protocol):
    """Where the batch's rejected records land, each with its reason (streaming.io.quarantine_writer)."""

    def write(self, df: DataFrame, batch_id: int, rows: int | None = None) -> None:
        """Replace batch `batch_id`'s quarantine rows with `df`."""


class BatchMetricsPublisher(Protocol):
    def publish(self, report: BatchReport) -> None:
        """Record one finished micro-batch; must not raise."""


class NoMetricsPublisher:
    """Locally nothing is published: the batch log line carries the same figures."""

    def publish(self, report: BatchReport) -> None:
        pass


class RecordsLostError(RuntimeError):
    """Decode returned fewer rows than it was given: records would vanish silently."""


class UnusableStreamViewType(OperatorError):
    """A table's DynamoDB stream sends records without the item's values (KEYS_ONLY,
    OLD_IMAGE): every insert and update of it would be quarantined, so the batch is refused."""


def _unusable_view_type_error(records: DataFrame, batch_id: int) -> UnusableStreamViewType:
    found = (
        records.where(F.col("_unusable_view_type").isNotNull())
        .groupBy("_source_table", "_unusable_view_type")
        .agg(F.count(F.lit(1)).alias("rows"), F.min("source_ref").alias("example"))
        .orderBy("_source_table", "_unusable_view_type")
        .collect()
    )
    streams = "; ".join(
        f"table {row['_source_table']}'s stream sends StreamViewType {row['_unusable_view_type']} records "
        f"({row['rows']} in this batch, e.g. {row['example']})"
        for row in found
    )
    return UnusableStreamViewType(
        f"batch {batch_id} refused, nothing of it was written: {streams}. Such records hold no item values, "
        "so no insert or update of the table could be landed. Fix: give the table a stream with view type "
        "NEW_IMAGE or NEW_AND_OLD_IMAGES (a stream's view type is set when it is enabled: disable the stream "
        "and enable it again), or use Kinesis Data Streams for DynamoDB, whose records carry both images. "
        "The landing files stay where they are and the checkpoint has not moved past this batch, so a restart "
        "loses nothing; these records can never be decoded, though: before restarting, move the files holding "
        "them out of the landing folder (land any other records in them again as new files), and load the "
        "table's items with `lakehouse backfill` from a DynamoDB export."
    )


def _cache(df: DataFrame, cached: list[DataFrame]) -> DataFrame:
    # Kept as Spark's columnar cache batches, not serialized once more: PySpark's
    # MEMORY_AND_DISK serializes them, which cost a third more CPU per batch here.
    df = df.persist(StorageLevel.MEMORY_AND_DISK_DESER)
    cached.append(df)
    return df


def _lost_kept_rows(error: BaseException) -> bool:
    return LOST_KEPT_ROWS.search(str(error)) is not None


def _count_where(condition: Column) -> Column:
    return F.count(F.when(condition, F.lit(1)))


def _decoded_stats() -> list[Column]:
    """What a table's decoded rows (before de-duplication) tell the batch report."""
    return [F.count(F.lit(1)).alias("rows"), F.max(F.unix_micros("_event_ts")).alias("max_event_micros")]


def _observed(observation: Observation) -> dict[str, Any] | None:
    """The figures a finished write job observed, or None when they did not come.

    Spark hands them over from its listener thread just after the job. When its
    optimizer proved a stage empty (a table whose rows all vanished, statically or at
    run time: adaptive execution replaces such a stage by an empty relation) the
    observing step is gone from the plan, the figures never come and `Observation.get`
    would wait for ever.
    """
    figures: dict[str, Any] = {}
    waiting = threading.Thread(target=lambda: figures.update(observation.get), daemon=True, name="observed-counts")
    waiting.start()
    waiting.join(OBSERVED_FIGURES_WAIT_S)
    return figures or None


@dataclass(frozen=True)
class TableCounts:
    """One raw table's rows in a batch: decoded (copies of an event included), landed
    (its distinct changes) and the latest event time among them."""

    decoded: int
    landed: int
    max_event_micros: int | None


def _distinct_changes_to_count(frame: DataFrame, contract: TableContract) -> DataFrame:
    """A table's distinct changes on their keys and eventIDs alone: the grouping of
    `drop_duplicate_events`, so the same count, without carrying the wide rows."""
    return drop_duplicate_events(frame.select(*ordering_columns(contract)), contract)


def _counted(frame: DataFrame, contract: TableContract) -> TableCounts:
    """One table's counts by a job of its own, for a write that observed none."""
    decoded = frame.agg(*_decoded_stats()).collect()[0]
    landed = _distinct_changes_to_count(frame, contract).count()
    return TableCounts(decoded=decoded["rows"], landed=landed, max_event_micros=decoded["max_event_micros"])


def _check_nothing_lost(counts: Mapping[str, TableCounts], overview: Row, batch_id: int) -> None:
    """Every record in landed in a table or in the quarantine (a record moving its item
    to another entity lands twice: its tombstone where it left). Checked before any
    table's rows are visible, so a decode bug stops the stream instead of committing a
    batch that silently lost records."""
    decoded_rows = sum(table.decoded for table in counts.values()) - overview["moved"]
    if decoded_rows + overview["quarantined"] != overview["in"]:
        raise RecordsLostError(
            f"batch {batch_id}: {overview['in']} records in, but {decoded_rows} decoded + "
            f"{overview['quarantined']} quarantined; every record must land or be quarantined"
        )


def readable_duration(seconds: float) -> str:
    """`seconds` in the two largest units that matter: "850 ms", "12.3 s", "2 min 5 s",
    "3 h 4 min", "365 d 14 h". Old sample data lags by months; a plain seconds count
    ("31600000.0s") is unreadable. Negative (event time ahead of this clock) keeps its sign."""
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    if seconds < 1:
        return f"{sign}{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{sign}{seconds:.1f} s"
    whole = int(seconds)
    for unit, size, smaller, smaller_size in (("d", 86400, "h", 3600), ("h", 3600, "min", 60), ("min", 60, "s", 1)):
        if whole >= size:
            return f"{sign}{whole // size} {unit} {whole % size // smaller_size} {smaller}"
    raise AssertionError("unreachable: seconds >= 60 always has a unit")


@dataclass(frozen=True)
class BatchReport:
    batch_id: int
    records_in: int
    landed: dict[str, int]
    quarantined: int
    duplicates_dropped: int
    # Changes landed in unrouted tables (items matching no entity), and records that moved
    # their item from one entity to another (each also lands a tombstone where it left).
    unrouted: int
    moved: int
    max_event_ts: datetime | None
    lag_seconds: float | None
    seconds: float

    def log_line(self) -> str:
        # Only the tables that got rows: a deployment with dozens of raw tables would
        # otherwise print a wall of zeros every batch.
        landed = " ".join(f"{table}={rows}" for table, rows in self.landed.items() if rows) or "nothing"
        lag = "n/a" if self.lag_seconds is None else readable_duration(self.lag_seconds)
        return (
            f"batch={self.batch_id} in={self.records_in} landed {landed} "
            f"quarantined={self.quarantined} unrouted={self.unrouted} duplicates_dropped={self.duplicates_dropped} "
            f"lag={lag} took={self.seconds:.1f}s"
        )


def with_batch_metadata(df: DataFrame, ingested_at: datetime, batch_id: int) -> DataFrame:
    return df.select("*", *_batch_metadata(ingested_at, batch_id).values())


def _batch_metadata(ingested_at: datetime, batch_id: int) -> dict[str, Column]:
    return {
        "_ingested_at": F.lit(ingested_at).cast("timestamp").alias("_ingested_at"),
        "_batch_id": F.lit(batch_id).cast("bigint").alias("_batch_id"),
    }


def to_change_log_rows(
    decoded: DataFrame, contract: TableContract, ingested_at: datetime, batch_id: int
) -> DataFrame:
    """Decoded rows of one table -> the change-log rows this batch lands: every distinct change."""
    return as_change_log_rows(drop_duplicate_events(decoded, contract), contract, ingested_at, batch_id)


def as_change_log_rows(
    changes: DataFrame, contract: TableContract, ingested_at: datetime, batch_id: int
) -> DataFrame:
    """The batch's distinct changes in the change log's columns: `_ingest_hour` and the
    version of the contract they were decoded with included (one projection)."""
    added = {
        **_batch_metadata(ingested_at, batch_id),
        "_contract_version": F.lit(contract_version(contract)).alias("_contract_version"),
        INGEST_HOUR_COLUMN: F.lit(ingest_hour(ingested_at)).alias(INGEST_HOUR_COLUMN),
    }
    return changes.select(*[added.get(name, F.col(name)) for name in change_log_schema(contract).fieldNames()])


class Pipeline:
    def __init__(
        self,
        contracts: Mapping[str, TableContract],
        sink: RawSink,
        quarantine: QuarantineSink,
        clock: Clock = utc_now,
        metrics: BatchMetricsPublisher | None = None,
        refuse_unusable_view_types: bool = True,
    ) -> None:
        self.contracts = dict(contracts)
        self.sink = sink
        self.quarantine = quarantine
        self.clock = clock
        # A batch holding a contract's records from a KEYS_ONLY or OLD_IMAGE stream raises
        # UnusableStreamViewType before anything is written; without the check, their inserts
        # and updates are quarantined as missing_new_image.
        self.refuse_unusable_view_types = refuse_unusable_view_types
        # Per-batch counts for alarms (CloudWatch on Glue); nothing is published locally.
        self.metrics = metrics or NoMetricsPublisher()
        self._writers: ThreadPoolExecutor | None = None

    def _run_writes(self, writes: list[Callable[[], T]]) -> list[T]:
        """Every raw table's write, in order; concurrent Spark jobs when the sink allows it.

        Each write is a job of its own whose driver-side work (planning, committing files)
        leaves the cores idle; running two at a time lets one job's tasks fill them. A
        failed write fails the batch once the others have ended; its replay replaces
        whatever any of them wrote.
        """
        if not self.sink.capabilities.writes_tables_concurrently or len(writes) < 2:
            return [write() for write in writes]
        if self._writers is None:
            self._writers = ThreadPoolExecutor(max_workers=CONCURRENT_WRITES, thread_name_prefix="raw-write")
        futures = [self._writers.submit(write) for write in writes]
        wait(futures)
        for future in futures:
            error = future.exception()
            if error is not None:
                raise error
        return [future.result() for future in futures]

    def _stage_check_publish(
        self, sink: StagingSink, spark: SparkSession, frames: dict[str, DataFrame], ingested_at: datetime,
        batch_id: int, overview: Row,
    ) -> dict[str, TableCounts]:
        """Each table's distinct changes staged by one write job, counted by that very job
        (`observe`), and published only once the counts show that no record was lost."""
        hour = ingest_hour(ingested_at)
        decoded: dict[str, Observation] = {}
        landed: dict[str, Observation] = {}
        stages = []
        for table, frame in frames.items():
            contract = self.contracts[table]
            decoded[table], landed[table] = Observation(f"decoded:{table}"), Observation(f"landed:{table}")
            observed = frame.observe(decoded[table], *_decoded_stats())
            changes = as_change_log_rows(drop_duplicate_events(observed, contract), contract, ingested_at, batch_id)
            stages.append(partial(sink.stage, changes.observe(landed[table], F.count(F.lit(1)).alias("rows")),
                                  contract, batch_id, hour))
        staged = dict(zip(frames, self._run_writes(stages)))
        counts = {}
        for table, frame in frames.items():
            decoded_stats = _observed(decoded[table])
            # Once one count is missing the table is counted anew: no wait for the other.
            landed_stats = _observed(landed[table]) if decoded_stats is not None else None
            if decoded_stats is None or landed_stats is None:
                counts[table] = _counted(frame, self.contracts[table])
            else:
                counts[table] = TableCounts(decoded=decoded_stats["rows"], landed=landed_stats["rows"],
                                            max_event_micros=decoded_stats["max_event_micros"])
        try:
            _check_nothing_lost(counts, overview, batch_id)
        except RecordsLostError:
            for rows in staged.values():
                sink.discard(spark, rows)
            raise
        for table, contract in self.contracts.items():
            # A table without rows is still published: that removes whatever an earlier
            # attempt of the batch left of it.
            sink.publish(spark, staged.get(table) or sink.stage(None, contract, batch_id, hour))
        return counts

    def _count_check_write(
        self, spark: SparkSession, frames: dict[str, DataFrame], cached: list[DataFrame], ingested_at: datetime,
        batch_id: int, overview: Row,
    ) -> dict[str, TableCounts]:
        """Each table's distinct changes counted by one job over all tables, then written
        table by table once the counts show that no record was lost (Hudi commits as it
        writes, so nothing can be held back until the counts are known)."""
        change_rows: dict[str, DataFrame] = {}
        stats = []
        for table, frame in frames.items():
            contract = self.contracts[table]
            changes = drop_duplicate_events(frame, contract)
            # Hudi reads the changes twice (change log, winners per key): they are kept.
            # A sink reading them once gets them uncached, and they are counted on the
            # rows' keys and eventIDs alone: the same grouping gives the same count, and
            # the wide ordering step then runs once, for the write.
            if self.sink.capabilities.reads_changes_once:
                counted = _distinct_changes_to_count(frame, contract)
            else:
                changes = counted = _cache(changes, cached)
            change_rows[table] = as_change_log_rows(changes, contract, ingested_at, batch_id)
            stats += [
                frame.agg(F.lit(f"decoded:{table}").alias("stat"), *_decoded_stats()),
                counted.agg(F.lit(f"landed:{table}").alias("stat"), F.count(F.lit(1)).alias("rows"),
                            F.lit(None).cast("bigint").alias("max_event_micros")),
            ]
        # One job computes the rows of every table that gets some (and fills the caches).
        found = {row["stat"]: row for row in reduce(DataFrame.unionByName, stats).collect()} if stats else {}
        counts = {
            table: TableCounts(decoded=found[f"decoded:{table}"]["rows"], landed=found[f"landed:{table}"]["rows"],
                               max_event_micros=found[f"decoded:{table}"]["max_event_micros"])
            for table in frames
        }
        _check_nothing_lost(counts, overview, batch_id)
        self._run_writes([
            partial(self.sink.write, change_rows[table], contract, batch_id, rows=counts[table].landed)
            if table in change_rows
            # Still told, so that a sink replaces whatever an earlier attempt of the batch left.
            else partial(self.sink.write, spark.createDataFrame([], change_log_schema(contract)), contract,
                         batch_id, rows=0)
            for table, contract in self.contracts.items()
        ])
        return counts

    def warm_up(self, spark: SparkSession) -> None:
        """Run the decode once before the stream's first batch, writing nothing: a fresh
        JVM's first batch otherwise waits seconds on Spark planning, generating and
        compiling code for each raw table's plan for the first time (issue 46). One record
        that belongs to no table is decoded and kept as a batch's are, then each raw
        table's rows and distinct changes go to Spark's `noop` sink, which reads a plan
        and drops its rows."""
        envelope = spark.range(1).select(*envelope_columns(payload=F.lit("{}"), source_ref=F.lit("warm-up")))
        records = kept_apart_from_its_plan(decode_records(envelope, self.contracts))
        try:
            for table, contract in self.contracts.items():
                rows = table_rows(records, self.contracts, table)
                for frame in (rows, _distinct_changes_to_count(rows, contract)):
                    frame.write.format("noop").mode("overwrite").save()
        finally:
            release_kept(records)

    def process_batch(self, envelope: DataFrame, batch_id: int) -> BatchReport:
        started = time.monotonic()
        try:
            return self._process_batch(envelope, batch_id, started)
        except Exception as error:
            if not _lost_kept_rows(error):
                raise
            # An executor holding some of the batch's decoded records was lost (a cluster).
            # The batch's source can be read again, and an attempt replaces what an
            # earlier one of the same batch wrote: run it once more.
            log.warning("batch %s: decoded records were lost with an executor; running the batch again", batch_id)
            return self._process_batch(envelope, batch_id, started)

    def _process_batch(self, envelope: DataFrame, batch_id: int, started: float) -> BatchReport:
        ingested_at = self.clock()
        cached: list[DataFrame] = []
        records: DataFrame | None = None
        try:
            # Every output below reads one decoded frame: kept (in memory, spilling to
            # disk), the source is read and each record parsed and decoded once per batch.
            records = kept_apart_from_its_plan(decode_records(envelope, self.contracts))
            quarantine_rows = with_batch_metadata(invalid_rows(records), ingested_at, batch_id)
            # First one job over the decoded records (it fills what is kept): the input, the
            # quarantine, and which raw tables get rows at all. A raw table without rows in
            # this batch (common: a contract's other entities, a quiet table) costs no
            # ordering plan, no count and no write; planning them took most of a small batch.
            lands = rows_landing_in(self.contracts)
            overview = records.agg(
                F.count(F.lit(1)).alias("in"),
                _count_where(F.col("reason").isNotNull()).alias("quarantined"),
                _count_where(F.col("_unusable_view_type").isNotNull()).alias("unusable_view_type"),
                # A record moving its item to another entity also lands a tombstone where it left.
                _count_where(F.col(MOVED_FROM).isNotNull() & F.col("reason").isNull()).alias("moved"),
                *[_count_where(lands[table]).alias(f"lands_{index}") for index, table in enumerate(self.contracts)],
            ).collect()[0]
            records_in, quarantined, moved = overview["in"], overview["quarantined"], overview["moved"]
            if self.refuse_unusable_view_types and overview["unusable_view_type"]:
                raise _unusable_view_type_error(records, batch_id)
            active = [table for index, table in enumerate(self.contracts) if overview[f"lands_{index}"]]
            frames = {table: table_rows(records, self.contracts, table) for table in active}
            if self.sink.capabilities.stages_tables:
                counts = self._stage_check_publish(cast(StagingSink, self.sink), records.sparkSession, frames,
                                                   ingested_at, batch_id, overview)
            else:
                counts = self._count_check_write(records.sparkSession, frames, cached, ingested_at, batch_id,
                                                 overview)
            self.quarantine.write(quarantine_rows, batch_id, rows=quarantined)
        finally:
            for frame in cached:
                frame.unpersist()
            if records is not None:
                release_kept(records)
        known_micros = [table.max_event_micros for table in counts.values() if table.max_event_micros is not None]
        max_event_ts = datetime.fromtimestamp(max(known_micros) / 1e6, timezone.utc) if known_micros else None
        report = BatchReport(
            batch_id=batch_id,
            records_in=records_in,
            landed={
                contract.raw_table: counts[table].landed if table in counts else 0
                for table, contract in self.contracts.items()
            },
            quarantined=quarantined,
            unrouted=sum(counts[table].landed for table in counts if self.contracts[table].unrouted),
            moved=moved,
            duplicates_dropped=sum(table.decoded - table.landed for table in counts.values()),
            max_event_ts=max_event_ts,
            lag_seconds=None if max_event_ts is None else (self.clock() - max_event_ts).total_seconds(),
            seconds=time.monotonic() - started,
        )
        log.info(report.log_line())
        self.metrics.publish(report)
        return report
