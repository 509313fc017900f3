"""Where the job's time goes: microseconds per record of each stage of one batch.

One Spark session (a case of its own, `benchmarks.cases stages`) runs the stages of
`process_batch` over the same landing files, each timed alone and the best of
`rounds` runs kept. A stage's cost is the difference between two runs that differ by
that stage only, each ending in Spark's `noop` sink, which computes every column and
writes nothing:

- split:    the landing files -> envelope rows (the Python splitter on the executors,
            Arrow batches to the JVM)
- envelope: each payload's envelope parsed (envelope.py), from the split envelope kept
            as Parquet, minus reading that Parquet
- typing:   routing, the typed images, the per-attribute checks and raw columns
            (decode.py without `_extra_attributes`)
- extras:   `_extra_attributes` (extras.py): the full decode minus the one without it
- ordering: de-duplication per raw table (ordering.py) over the cached decoded rows
- writes:   the rest of `process_batch` with the local Parquet sink: the cache of the
            decoded rows, the count jobs, the change-log and quarantine writes, and
            building the batch's plans (which the other stages leave out: their frames
            are built before the clock starts)

The per-record figures are wall time on all cores over records in (2 cores: twice
that in CPU time); their sum is close to, not exactly, one `process_batch`.
"""
from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streaming.contracts.loader import load_contracts
from streaming.io.landing_ledger import LandedFile
from streaming.io.sinks import LocalParquetSink, QuarantineWriter
from streaming.io.sources import files_envelope, local_landing_files
from streaming.pipeline import decode
from streaming.pipeline.batch import Pipeline
from streaming.pipeline.envelope import parse_projections, project
from streaming.pipeline.ordering import drop_duplicate_events

STAGES = ("split", "envelope", "typing", "extras", "ordering", "writes")


def _noop(frame: DataFrame) -> None:
    frame.write.format("noop").mode("overwrite").save()


def _best(rounds: int, run: Callable[[], Any]) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.monotonic()
        run()
        best = min(best, time.monotonic() - started)
    return best


def _best_noop(rounds: int, frames: Callable[[], list[DataFrame]]) -> float:
    """The fastest of `rounds` runs computing `frames`, each built before its clock starts:
    a stage's cost is its execution, not the building of its plan."""
    best = float("inf")
    for _ in range(rounds):
        built = frames()
        started = time.monotonic()
        for frame in built:
            _noop(frame)
        best = min(best, time.monotonic() - started)
    return best


def _decode_without_extras(envelope: DataFrame, contracts: dict) -> DataFrame:
    """The decode with `_extra_attributes` always null: the typing stage alone."""
    real = decode.extra_attributes
    decode.decode_projections.cache_clear()
    decode.extra_attributes = lambda *_: F.lit(None).cast("string")
    try:
        return decode.decode_records(envelope, contracts)
    finally:
        decode.extra_attributes = real
        decode.decode_projections.cache_clear()


def profile_stages(spark: SparkSession, params: dict[str, Any]) -> dict[str, Any]:
    """Params: `landing_dir`, `work_dir`, `rounds` (default 2), `contracts_dir` (default:
    the packaged contracts). Returns seconds and microseconds per record of each stage."""
    landing, work = Path(params["landing_dir"]), Path(params["work_dir"])
    rounds = int(params.get("rounds", 2))
    contracts = load_contracts(params.get("contracts_dir"))
    files = [LandedFile(f"file:{path}", path.stat().st_size, 0) for path in local_landing_files(landing)]
    envelope_path = str(work / "envelope.parquet")
    shutil.rmtree(envelope_path, ignore_errors=True)
    files_envelope(spark, files).write.parquet(envelope_path)

    def envelope() -> DataFrame:
        return spark.read.parquet(envelope_path)

    records = envelope().count()
    tables = {contract.table for contract in contracts.values()}
    split = _best_noop(rounds, lambda: [files_envelope(spark, files)])
    read = _best_noop(rounds, lambda: [envelope()])
    parsed = _best_noop(rounds, lambda: [project(envelope(), parse_projections(tables, True))])
    typed = _best_noop(rounds, lambda: [_decode_without_extras(envelope(), contracts)])
    decoded = _best_noop(rounds, lambda: [decode.decode_records(envelope(), contracts)])

    cached = decode.decode_records(envelope(), contracts).persist(StorageLevel.MEMORY_AND_DISK_DESER)
    cached.count()
    rows = {table: decode.table_rows(cached, contracts, table) for table in contracts}
    plain = _best_noop(rounds, lambda: list(rows.values()))
    ordered = _best_noop(rounds, lambda: [drop_duplicate_events(frame, contracts[table]) for table, frame in rows.items()])
    cached.unpersist()

    def batch(attempt: list[int]) -> None:
        data = work / f"pipeline-{attempt[0]}"
        attempt[0] += 1
        pipeline = Pipeline(contracts, LocalParquetSink(str(data)), QuarantineWriter(str(data)),
                            clock=lambda: datetime(2026, 11, 25, tzinfo=timezone.utc))
        pipeline.process_batch(envelope(), 0)

    whole = _best(rounds, lambda attempt=[0]: batch(attempt))
    seconds = {
        "split": split,
        "envelope": parsed - read,
        "typing": typed - parsed,
        "extras": decoded - typed,
        "ordering": ordered - plain,
        "writes": whole - decoded - (ordered - plain),
    }
    return {
        "records": records,
        "rounds": rounds,
        "seconds": seconds,
        "us_per_record": {stage: value / records * 1e6 for stage, value in seconds.items()},
        "process_batch_seconds": whole,
    }
