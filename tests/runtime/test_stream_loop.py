"""Structured Streaming runner: crash between write and commit, restart, same result."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException

from streaming.contracts.loader import load_contracts
from streaming.contracts.spark_schema import raw_schema
from streaming.io.formats.parquet.sink import LocalParquetSink
from streaming.io.quarantine_writer import QuarantineWriter
from streaming.io.sources import landing_files_stream
from streaming.pipeline.sink_capabilities import SinkCapabilities
from streaming.pipeline.batch import Pipeline
from streaming.runtime.stream_loop import run_stream
from streaming.samples.generator import write_landing_files

pytestmark = pytest.mark.spark


class Crash(RuntimeError):
    pass


class CrashAfterBatch:
    """Runs a batch completely (all writes done), then dies before Spark commits it."""

    def __init__(self, pipeline: Pipeline, crash_batch: int) -> None:
        self.pipeline = pipeline
        self.crash_batch = crash_batch

    def process_batch(self, df, batch_id):
        self.pipeline.process_batch(df, batch_id)
        if batch_id == self.crash_batch:
            raise Crash(f"killed after writing batch {batch_id}")


class CrashAfterFirstTableWrite:
    """A sink that dies after the first raw table of one batch is written: a partial batch."""

    capabilities = SinkCapabilities()

    def __init__(self, sink: LocalParquetSink, crash_batch: int) -> None:
        self.sink = sink
        self.crash_batch = crash_batch

    def write(self, df, contract, batch_id, rows=None):
        self.sink.write(df, contract, batch_id, rows)
        if batch_id == self.crash_batch:
            raise Crash(f"killed after writing {contract.raw_table} of batch {batch_id}")


@pytest.fixture(scope="module")
def contracts():
    # The article's two tables: these tests land their generated changes; routing the
    # single-table sample has its own tests (test_routing.py), and every further contract
    # only adds planning time to each of the many batches here.
    packaged = load_contracts()
    return {table: packaged[table] for table in ("customers", "orders")}


@pytest.fixture(scope="module")
def landing(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("runner") / "landing"
    summary = write_landing_files(root, records_per_file=18, seed=5, customers=6, orders_per_customer=2,
                                  malformed_rate=0.05, record_format="streams")
    assert len(summary.files) >= 4
    # The file source orders files by modification time: make that order explicit.
    for offset, path in enumerate(summary.files):
        os.utime(path, (1_800_000_000 + offset, 1_800_000_000 + offset))
    return root


def stream_into(spark, root: Path, landing: Path, pipeline, query_name: str):
    return run_stream(
        spark,
        pipeline,
        landing_files_stream(spark, str(landing), max_files_per_trigger=1),
        checkpoint_dir=str(root / "checkpoints" / "landing_to_raw"),
        trigger="available-now",
        query_name=query_name,
    )


def snapshot(spark, root: Path, contracts) -> dict[str, list[str]]:
    """Every raw and quarantine row except `_ingested_at`, in a stable order."""
    tables = {
        contract.raw_table: spark.read.schema(raw_schema(contract)).parquet(str(root / "raw" / contract.changes_table))
        for contract in contracts.values()
        if (root / "raw" / contract.changes_table).is_dir()
    }
    tables["quarantine"] = spark.read.parquet(str(root / "quarantine"))
    return {
        name: sorted(repr(sorted(row.asDict(recursive=True).items())) for row in df.drop("_ingested_at").collect())
        for name, df in tables.items()
    }


def committed_batches(root: Path) -> set[int]:
    commits = root / "checkpoints" / "landing_to_raw" / "commits"
    return {int(path.name) for path in commits.iterdir() if path.name.isdigit()} if commits.exists() else set()


def test_crash_between_write_and_commit_neither_loses_nor_duplicates(spark, tmp_path, landing, contracts):
    clean_root, crash_root = tmp_path / "clean", tmp_path / "crash"
    clean = Pipeline(contracts, LocalParquetSink(str(clean_root)), QuarantineWriter(str(clean_root)))
    stream_into(spark, clean_root, landing, clean, "clean_run")
    expected = snapshot(spark, clean_root, contracts)
    batches = committed_batches(clean_root)
    assert len(batches) >= 4 and all(expected.values())

    sink = LocalParquetSink(str(crash_root))
    quarantine = QuarantineWriter(str(crash_root))
    # First death: batch 1 fully written, never committed.
    with pytest.raises(StreamingQueryException, match="killed after writing batch 1"):
        stream_into(spark, crash_root, landing, CrashAfterBatch(Pipeline(contracts, sink, quarantine), 1), "crash_1")
    assert committed_batches(crash_root) == {0}
    assert list((crash_root / "raw" / "customers_changes").glob("*/_batch_id=1"))

    # Second death, on the restart: batch 2 dies half written (its first raw table only).
    first_table = next(iter(contracts))
    with pytest.raises(StreamingQueryException, match=f"killed after writing {first_table} of batch 2"):
        stream_into(spark, crash_root, landing,
                    Pipeline(contracts, CrashAfterFirstTableWrite(sink, 2), quarantine), "crash_2")
    assert committed_batches(crash_root) == {0, 1}

    seen: list[int] = []

    class Recording(Pipeline):
        def process_batch(self, df, batch_id):
            seen.append(batch_id)
            return super().process_batch(df, batch_id)

    stream_into(spark, crash_root, landing, Recording(contracts, sink, quarantine), "restart")

    assert seen[0] == 2, "the restart must replay the uncommitted batch under its own id"
    assert committed_batches(crash_root) == batches
    assert snapshot(spark, crash_root, contracts) == expected


def test_failed_batch_stops_the_query_without_commit(spark, tmp_path, landing, contracts):
    class Failing(Pipeline):
        def process_batch(self, df, batch_id):
            raise Crash("decode exploded")

    with pytest.raises(StreamingQueryException, match="decode exploded"):
        stream_into(spark, tmp_path, landing,
                    Failing(contracts, LocalParquetSink(str(tmp_path)), QuarantineWriter(str(tmp_path))), "failing")
    assert committed_batches(tmp_path) == set()


def test_processing_time_returns_the_running_query(spark, tmp_path, landing, contracts):
    # The customers' contract alone (the orders' records are quarantined): the query's
    # start and its batch are the subject here, not the routing of a second table.
    customers = {"customers": contracts["customers"]}
    pipeline = Pipeline(customers, LocalParquetSink(str(tmp_path)), QuarantineWriter(str(tmp_path)))
    query = run_stream(
        spark,
        pipeline,
        landing_files_stream(spark, str(landing)),
        checkpoint_dir=str(tmp_path / "checkpoints" / "landing_to_raw"),
        trigger="processing-time",
        interval="1 second",
        query_name="continuous",
    )
    try:
        assert query.isActive
        with pytest.raises(RuntimeError, match="already running"):
            run_stream(spark, pipeline, landing_files_stream(spark, str(landing)),
                       checkpoint_dir=str(tmp_path / "other"), query_name="continuous")
        query.processAllAvailable()
    finally:
        query.stop()
    assert committed_batches(tmp_path) == {0}
    assert any((tmp_path / "raw" / "customers_changes").glob("*/_batch_id=0/*.parquet"))


def test_batch_source_is_rejected(spark, tmp_path, contracts):
    pipeline = Pipeline(contracts, LocalParquetSink(str(tmp_path)), QuarantineWriter(str(tmp_path)))
    with pytest.raises(ValueError, match="streaming DataFrame"):
        run_stream(spark, pipeline, spark.range(1), checkpoint_dir=str(tmp_path / "cp"), query_name="batch")
