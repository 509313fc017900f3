"""`process_batch`: one micro-batch of change envelopes -> raw change logs + quarantine.

The same function runs under every runner (`foreachBatch` locally and on Glue, batch
backfills, tests). Each table's sink receives every distinct change of the batch
(de-duplicated by eventID); the Hudi sink also upserts the winner per key into the
current-state table. Replaying a batch id reproduces its output: the sinks replace
what an earlier attempt of that batch wrote.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial, reduce
from typing import Protocol

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streaming.contracts.evolution import contract_version
from streaming.contracts.model import INGEST_HOUR_COLUMN, TableContract, change_log_schema, ingest_hour
from streaming.errors import OperatorError
from streaming.pipeline.decode import MOVED_FROM, decode_records, invalid_rows, rows_landing_in, table_rows
from streaming.pipeline.ordering import drop_duplicate_events, ordering_columns

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
# Raw-table writes running at once for a sink that allows it (`writes_tables_concurrently`).
CONCURRENT_WRITES = 2


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class RawSink(Protocol):
    """Where each table's distinct changes land (streaming.io.sinks: local Parquet, Hudi).

    A sink that reads each table's changes in one pass can declare it with a class
    attribute `reads_changes_once = True`; the pipeline then leaves them uncached (see
    Pipeline.process_batch). Without it, they are cached for the sink's several reads.
    A sink whose writes of different tables may run at once (in threads, as concurrent
    Spark jobs) declares `writes_tables_concurrently = True`.
    """

    def write(self, changes: DataFrame, contract: TableContract, batch_id: int, rows: int | None = None) -> None:
        """Land this batch's distinct changes of one table (columns `change_log_schema`).
        `rows`: their count when the caller knows it, which spares a Spark job to find out
        whether the frame is empty."""


class QuarantineSink(Protocol):
    """Where the batch's rejected records land, each with its reason (streaming.io.sinks)."""

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


def _count_where(condition: Column) -> Column:
    return F.count(F.when(condition, F.lit(1)))


def _stat(df: DataFrame, name: str, value: Column | None = None) -> DataFrame:
    """One row (name, rows, value) describing `df`; unioned into one job."""
    value = F.lit(None) if value is None else value
    return df.agg(F.lit(name).alias("stat"), F.count(F.lit(1)).alias("rows"), value.cast("bigint").alias("value"))


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

    def _run_writes(self, writes: list[Callable[[], None]]) -> None:
        """Every raw table's write; concurrent Spark jobs when the sink allows it.

        Each write is a job of its own whose driver-side work (planning, committing files)
        leaves the cores idle; running two at a time lets one job's tasks fill them. A
        failed write fails the batch once the others have ended; its replay replaces
        whatever any of them wrote.
        """
        if not getattr(self.sink, "writes_tables_concurrently", False) or len(writes) < 2:
            for write in writes:
                write()
            return
        if self._writers is None:
            self._writers = ThreadPoolExecutor(max_workers=CONCURRENT_WRITES, thread_name_prefix="raw-write")
        futures = [self._writers.submit(write) for write in writes]
        wait(futures)
        for future in futures:
            error = future.exception()
            if error is not None:
                raise error

    def process_batch(self, envelope: DataFrame, batch_id: int) -> BatchReport:
        started = time.monotonic()
        ingested_at = self.clock()
        cached: list[DataFrame] = []
        try:
            # Every output below reads one decoded frame: kept (in memory, spilling to
            # disk), the source is read and each record parsed and decoded once per batch.
            records = _cache(decode_records(envelope, self.contracts), cached)
            quarantine_rows = with_batch_metadata(invalid_rows(records), ingested_at, batch_id)
            # First one job over the decoded records (it fills their cache): the input, the
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
            change_rows: dict[str, DataFrame] = {}
            stats = []
            for table in active:
                contract = self.contracts[table]
                frame = table_rows(records, self.contracts, table)
                changes = drop_duplicate_events(frame, contract)
                # Hudi reads the changes twice (change log, winners per key): they are kept.
                # A sink reading them once gets them uncached, and they are counted on the
                # rows' keys and eventIDs alone: the same grouping gives the same count, and
                # the wide ordering step then runs once, for the write (a 200k-record batch's
                # writes and overhead went from 101 to 91 µs a record, benchmarks/stages.py).
                if getattr(self.sink, "reads_changes_once", False):
                    counted = drop_duplicate_events(frame.select(*ordering_columns(contract)), contract)
                else:
                    changes = counted = _cache(changes, cached)
                change_rows[table] = as_change_log_rows(changes, contract, ingested_at, batch_id)
                stats += [
                    _stat(frame, f"decoded:{table}", F.max(F.unix_micros("_event_ts"))),
                    _stat(counted, f"landed:{table}"),
                ]
            # One job computes the rows of every table that gets some (and fills the caches),
            # counted on the very frames that are written.
            counts = {row["stat"]: row for row in reduce(DataFrame.unionByName, stats).collect()} if stats else {}
            decoded_rows = sum(counts[f"decoded:{table}"]["rows"] for table in change_rows) - moved
            # Checked before anything is written, so a decode bug stops the stream
            # instead of committing a batch that silently lost records.
            if decoded_rows + quarantined != records_in:
                raise RecordsLostError(
                    f"batch {batch_id}: {records_in} records in, but {decoded_rows} decoded + "
                    f"{quarantined} quarantined; every record must land or be quarantined"
                )
            spark = records.sparkSession
            writes = [
                partial(self.sink.write, change_rows[table], contract, batch_id, rows=counts[f"landed:{table}"]["rows"])
                if table in change_rows
                # Still told, so that a sink replaces whatever an earlier attempt of the batch left.
                else partial(self.sink.write, spark.createDataFrame([], change_log_schema(contract)), contract,
                             batch_id, rows=0)
                for table, contract in self.contracts.items()
            ]
            self._run_writes(writes)
            self.quarantine.write(quarantine_rows, batch_id, rows=quarantined)
        finally:
            for frame in cached:
                frame.unpersist()
        known_micros = [
            counts[f"decoded:{table}"]["value"]
            for table in change_rows
            if counts[f"decoded:{table}"]["value"] is not None
        ]
        max_event_ts = datetime.fromtimestamp(max(known_micros) / 1e6, timezone.utc) if known_micros else None
        report = BatchReport(
            batch_id=batch_id,
            records_in=records_in,
            landed={
                contract.raw_table: counts[f"landed:{table}"]["rows"] if table in change_rows else 0
                for table, contract in self.contracts.items()
            },
            quarantined=quarantined,
            unrouted=sum(
                counts[f"landed:{table}"]["rows"] for table in change_rows if self.contracts[table].unrouted
            ),
            moved=moved,
            duplicates_dropped=sum(
                counts[f"decoded:{table}"]["rows"] - counts[f"landed:{table}"]["rows"] for table in change_rows
            ),
            max_event_ts=max_event_ts,
            lag_seconds=None if max_event_ts is None else (self.clock() - max_event_ts).total_seconds(),
            seconds=time.monotonic() - started,
        )
        log.info(report.log_line())
        self.metrics.publish(report)
        return report
