"""Sinks: a batch folder appears whole or not at all, and a replay replaces exactly its batch."""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pytest
from pyspark.sql import functions as F

from streaming.contracts.loader import load_contracts
from streaming.errors import OperatorError
from streaming.io.formats.hudi.sink import hudi_bundle_available
from streaming.io.layout import CHANGE_LOG_FILE_GLOB
from streaming.io.formats.parquet.sink import LocalParquetSink
from streaming.io.quarantine_writer import QuarantineWriter
from streaming.io.sinks import choose_sink

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def customers():
    return load_contracts()["customers"]


def folder_rows(table_dir: Path) -> dict[str, int]:
    """`<hour>/<batch>` folder -> rows in it, read back independently of the sink."""
    import pyarrow.parquet as pq

    folders: dict[str, int] = {}
    for path in table_dir.glob(CHANGE_LOG_FILE_GLOB):
        name = path.parent.relative_to(table_dir).as_posix()
        folders[name] = folders.get(name, 0) + pq.read_metadata(path).num_rows
    return dict(sorted(folders.items()))


def changes(spark, ids, batch_id, hour="2026-11-23-17"):
    return spark.createDataFrame([(i, f"v{i}") for i in ids], "id long, value string").select(
        "*", F.lit(batch_id).cast("bigint").alias("_batch_id"), F.lit(hour).alias("_ingest_hour")
    )


def test_change_log_batches_live_under_their_ingest_hour(spark, tmp_path, customers):
    sink = LocalParquetSink(str(tmp_path))
    sink.write(changes(spark, [1, 2, 3], 0, "2026-11-23-17"), customers, 0)
    sink.write(changes(spark, [4, 5], 1, "2026-11-23-18"), customers, 1)

    assert folder_rows(tmp_path / "raw" / "customers_changes") == {
        "_ingest_hour=2026-11-23-17/_batch_id=0": 3, "_ingest_hour=2026-11-23-18/_batch_id=1": 2}
    assert not any((tmp_path / "raw" / "_tmp").rglob("*.parquet")), "no scratch files are left behind"


def test_replay_replaces_only_its_batch_even_in_another_hour(spark, tmp_path, customers):
    sink = LocalParquetSink(str(tmp_path))
    sink.write(changes(spark, [1, 2, 3], 0, "2026-11-23-23"), customers, 0)
    sink.write(changes(spark, [4, 5], 1, "2026-11-23-23"), customers, 1)

    # The first attempt of batch 0 ran before midnight; its replay runs after it.
    sink.write(changes(spark, [1, 2], 0, "2026-11-24-00"), customers, 0)

    table_dir = tmp_path / "raw" / "customers_changes"
    assert folder_rows(table_dir) == {
        "_ingest_hour=2026-11-23-23/_batch_id=1": 2, "_ingest_hour=2026-11-24-00/_batch_id=0": 2}
    rows = spark.read.parquet(str(table_dir)).where("_batch_id = 0").orderBy("id").collect()
    assert [(row.id, row.value, row._ingest_hour) for row in rows] == [(1, "v1", "2026-11-24-00"), (2, "v2", "2026-11-24-00")]


def test_empty_replay_leaves_no_stale_folder(spark, tmp_path, customers):
    sink = LocalParquetSink(str(tmp_path))
    sink.write(changes(spark, [1, 2], 7), customers, 7)
    sink.write(changes(spark, [3], 8), customers, 8)

    sink.write(changes(spark, [], 7), customers, 7, rows=0)

    assert folder_rows(tmp_path / "raw" / "customers_changes") == {"_ingest_hour=2026-11-23-17/_batch_id=8": 1}


def test_a_batch_that_fails_mid_write_is_invisible_and_its_retry_lands_whole(spark, tmp_path, customers):
    """Readers (the DuckDB views dbt builds on) list the same glob as this test: they must
    see the earlier batch whole and nothing of the failed one."""
    sink = LocalParquetSink(str(tmp_path))
    sink.write(changes(spark, [1, 2], 0), customers, 0)
    # Four tasks; the one holding id 7 fails after the others may have written their files.
    poisoned = changes(spark, range(10, 18), 1).repartition(4, "id").withColumn(
        "value", F.when(F.col("id") == 17, F.raise_error(F.lit("disk full"))).otherwise(F.col("value"))
    )

    with pytest.raises(Exception, match="disk full"):
        sink.write(poisoned, customers, 1)

    pattern = str(tmp_path / "raw" / "customers_changes" / CHANGE_LOG_FILE_GLOB)
    visible = duckdb.sql(f"select _batch_id, count(*) from read_parquet('{pattern}') group by 1").fetchall()
    assert visible == [(0, 2)]
    sink.write(changes(spark, range(10, 18), 1), customers, 1)
    assert folder_rows(tmp_path / "raw" / "customers_changes") == {
        "_ingest_hour=2026-11-23-17/_batch_id=0": 2, "_ingest_hour=2026-11-23-17/_batch_id=1": 8}
    assert not any((tmp_path / "raw" / "_tmp").rglob("*.parquet"))


def test_quarantine_writer_has_the_same_batch_semantics(spark, tmp_path):
    quarantine = QuarantineWriter(str(tmp_path))
    rows = spark.createDataFrame(
        [(None, "invalid_json", "{not json", "f1"), ("orders", "missing_key:orderId", "{}", "f1")],
        "_source_table string, reason string, payload string, source_ref string",
    )
    quarantine.write(rows, 3)
    quarantine.write(rows.limit(1), 4)

    def batches():
        import pyarrow.parquet as pq

        folders = sorted((tmp_path / "quarantine").glob("_batch_id=*"))
        return {f.name: sum(pq.read_metadata(p).num_rows for p in f.glob("*.parquet")) for f in folders}

    assert batches() == {"_batch_id=3": 2, "_batch_id=4": 1}
    quarantine.write(rows.where("reason = 'invalid_json'"), 3)
    quarantine.write(rows.limit(0), 4)
    assert batches() == {"_batch_id=3": 1}


def test_the_bundle_given_as_a_jar_is_found_where_spark_loads_datasources(hudi_spark):
    """spark.jars (like --jars and --packages) adds the bundle to Spark's own class loader:
    py4j's Class.forName, which the check used before, never sees it."""
    jvm = hudi_spark.sparkContext._jvm
    with pytest.raises(Exception, match="ClassNotFoundException"):
        jvm.java.lang.Class.forName("org.apache.hudi.DefaultSource")
    assert hudi_bundle_available(hudi_spark)


def test_choose_sink(hudi_spark, tmp_path, caplog):
    spark, contracts = hudi_spark, load_contracts()
    with caplog.at_level("INFO", logger="streaming.io.formats"):
        default = choose_sink(None, spark, data_dir=str(tmp_path / "new"), contracts=contracts)
    assert type(default).__name__ == "HudiSink" and "sink=hudi" in caplog.text
    assert isinstance(choose_sink("parquet", spark, data_dir=str(tmp_path), contracts=contracts), LocalParquetSink)
    with pytest.raises(ValueError, match="sink must be one of hudi, parquet"):
        choose_sink("auto", spark, data_dir=str(tmp_path), contracts=contracts)


def test_a_relative_data_dir_gives_hudi_an_absolute_base_path(hudi_spark, tmp_path, monkeypatch):
    """Hudi refuses a relative base path ("Relative path in absolute URI: file:data/raw/...")."""
    monkeypatch.chdir(tmp_path)
    sink = choose_sink("hudi", hudi_spark, data_dir="data", contracts=load_contracts())
    assert sink.base_path == str(tmp_path / "data" / "raw")


def test_a_data_dir_keeps_the_format_its_raw_tables_have(spark, tmp_path, customers):
    contracts = load_contracts()
    LocalParquetSink(str(tmp_path)).write(changes(spark, [1], 1), customers, 1)
    # Without a choice, the sink of the tables already there; the other one is refused.
    assert isinstance(choose_sink(None, spark, data_dir=str(tmp_path), contracts=contracts), LocalParquetSink)
    with pytest.raises(RuntimeError, match="are parquet tables; write them with --sink parquet"):
        choose_sink("hudi", spark, data_dir=str(tmp_path), contracts=contracts)
    (tmp_path / "raw" / "orders_changes" / ".hoodie").mkdir(parents=True)
    with pytest.raises(OperatorError, match="holds Hudi raw tables .orders_changes. and Parquet ones"):
        choose_sink(None, spark, data_dir=str(tmp_path), contracts=contracts)


def test_a_root_with_glob_characters_is_taken_literally(spark, tmp_path, customers):
    """Hadoop globs the sink's listings; a data directory like `run[2]` must not turn into
    a character class that matches nothing (a replay would then duplicate its batch)."""
    root = tmp_path / "run[2]{a,b}*"
    sink = LocalParquetSink(str(root))
    sink.write(changes(spark, [1, 2], 0, "2026-11-23-23"), customers, 0)

    sink.write(changes(spark, [1], 0, "2026-11-24-00"), customers, 0)

    assert folder_rows(root / "raw" / "customers_changes") == {"_ingest_hour=2026-11-24-00/_batch_id=0": 1}
