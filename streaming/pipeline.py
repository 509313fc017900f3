"""`process_batch`: one micro-batch of change envelopes -> raw tables + quarantine.

The same function runs under every runner (`foreachBatch` locally and on Glue, batch
backfills, tests). Replaying a batch id reproduces its output: the sinks overwrite
what an earlier attempt of that batch wrote.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import reduce
from datetime import datetime, timezone

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streaming.contract import PIPELINE_COLUMNS, TableContract, raw_schema
from streaming.decode import decode_batch
from streaming.order import drop_duplicate_events, latest_per_key
from streaming.sinks import QuarantineWriter, RawSink

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class RecordsLostError(RuntimeError):
    """Decode returned fewer rows than it was given: records would vanish silently."""


def _cache(df: DataFrame, cached: list[DataFrame]) -> DataFrame:
    df = df.persist(StorageLevel.MEMORY_AND_DISK)
    cached.append(df)
    return df


def _stat(df: DataFrame, name: str, *, with_max_event: bool = False) -> DataFrame:
    """One row (name, rows, max event micros) describing `df`; unioned into one job."""
    max_event = F.max(F.unix_micros("_event_ts")) if with_max_event else F.lit(None).cast("bigint")
    return df.agg(F.lit(name).alias("stat"), F.count(F.lit(1)).alias("rows"), max_event.alias("max_micros"))


@dataclass(frozen=True)
class BatchReport:
    batch_id: int
    records_in: int
    landed: dict[str, int]
    quarantined: int
    duplicates_dropped: int
    max_event_ts: datetime | None
    lag_seconds: float | None
    seconds: float

    def log_line(self) -> str:
        landed = " ".join(f"{table}={rows}" for table, rows in self.landed.items())
        lag = "n/a" if self.lag_seconds is None else f"{self.lag_seconds:.1f}s"
        return (
            f"batch={self.batch_id} in={self.records_in} landed {landed} "
            f"quarantined={self.quarantined} duplicates_dropped={self.duplicates_dropped} "
            f"lag={lag} took={self.seconds:.1f}s"
        )


def with_batch_metadata(df: DataFrame, ingested_at: datetime, batch_id: int) -> DataFrame:
    return df.withColumn("_ingested_at", F.lit(ingested_at).cast("timestamp")).withColumn(
        "_batch_id", F.lit(batch_id).cast("bigint")
    )


def to_raw_rows(decoded: DataFrame, contract: TableContract, ingested_at: datetime, batch_id: int) -> DataFrame:
    """Decoded rows of one table -> the rows its raw table receives for this batch."""
    return winners_as_raw_rows(drop_duplicate_events(decoded), contract, ingested_at, batch_id)


def winners_as_raw_rows(
    unique_events: DataFrame, contract: TableContract, ingested_at: datetime, batch_id: int
) -> DataFrame:
    """De-duplicated events of one table -> the latest per key, in the raw table's columns."""
    winners = latest_per_key(unique_events, contract)
    return with_batch_metadata(winners, ingested_at, batch_id).select(*raw_schema(contract).fieldNames())


class Pipeline:
    def __init__(
        self,
        contracts: Mapping[str, TableContract],
        sink: RawSink,
        quarantine: QuarantineWriter,
        clock: Clock = utc_now,
    ) -> None:
        self.contracts = dict(contracts)
        self.sink = sink
        self.quarantine = quarantine
        self.clock = clock

    def process_batch(self, envelope: DataFrame, batch_id: int) -> BatchReport:
        started = time.monotonic()
        ingested_at = self.clock()
        spark = envelope.sparkSession
        cached: list[DataFrame] = []
        try:
            # Every output below reads the parsed records and each table's decoded rows:
            # kept in memory, the source is read and its JSON parsed once per batch.
            envelope = _cache(envelope, cached)
            decoded, quarantine_rows = decode_batch(
                envelope, self.contracts, keep=lambda frame: _cache(frame, cached)
            )
            quarantine_rows = _cache(with_batch_metadata(quarantine_rows, ingested_at, batch_id), cached)
            raw_rows: dict[str, DataFrame] = {}
            stats = [_stat(envelope, "in"), _stat(quarantine_rows, "quarantined")]
            for table, contract in self.contracts.items():
                frame = decoded.get(table)
                if frame is None:
                    frame = spark.createDataFrame([], raw_schema(contract)).drop(*PIPELINE_COLUMNS)
                # Counted and ordered from one de-duplication: its shuffle runs once.
                unique_events = _cache(drop_duplicate_events(frame), cached)
                raw_rows[contract.raw_table] = _cache(
                    winners_as_raw_rows(unique_events, contract, ingested_at, batch_id), cached
                )
                stats += [
                    _stat(frame, f"decoded:{contract.raw_table}", with_max_event=True),
                    _stat(unique_events, f"unique:{contract.raw_table}"),
                    _stat(raw_rows[contract.raw_table], f"landed:{contract.raw_table}"),
                ]
            # One job computes every count (and fills the caches the writes read),
            # instead of one planning round-trip per count.
            counts = {row["stat"]: row for row in reduce(DataFrame.unionByName, stats).collect()}
            records_in = counts["in"]["rows"]
            quarantined = counts["quarantined"]["rows"]
            decoded_rows = sum(counts[f"decoded:{raw_table}"]["rows"] for raw_table in raw_rows)
            # Checked before anything is written, so a decode bug stops the stream
            # instead of committing a batch that silently lost records.
            if decoded_rows + quarantined != records_in:
                raise RecordsLostError(
                    f"batch {batch_id}: {records_in} records in, but {decoded_rows} decoded + "
                    f"{quarantined} quarantined; every record must land or be quarantined"
                )
            for raw_table, rows in raw_rows.items():
                self.sink.write(rows, raw_table, batch_id)
            self.quarantine.write(quarantine_rows, batch_id)
        finally:
            for frame in cached:
                frame.unpersist()
        known_micros = [
            counts[f"decoded:{raw_table}"]["max_micros"]
            for raw_table in raw_rows
            if counts[f"decoded:{raw_table}"]["max_micros"] is not None
        ]
        max_event_ts = datetime.fromtimestamp(max(known_micros) / 1e6, timezone.utc) if known_micros else None
        report = BatchReport(
            batch_id=batch_id,
            records_in=records_in,
            landed={raw_table: counts[f"landed:{raw_table}"]["rows"] for raw_table in raw_rows},
            quarantined=quarantined,
            duplicates_dropped=sum(
                counts[f"decoded:{raw_table}"]["rows"] - counts[f"unique:{raw_table}"]["rows"]
                for raw_table in raw_rows
            ),
            max_event_ts=max_event_ts,
            lag_seconds=None if max_event_ts is None else (self.clock() - max_event_ts).total_seconds(),
            seconds=time.monotonic() - started,
        )
        log.info(report.log_line())
        return report
