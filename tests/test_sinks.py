"""Sinks: batch folders replace exactly their batch; Hudi only where its bundle is."""
from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import functions as F

from streaming.contract import load_contracts
from streaming.sinks import HudiSink, LocalParquetSink, QuarantineWriter, choose_sink
from streaming.spark import hudi_bundle_available

pytestmark = pytest.mark.spark


def batch_folders(parent: Path) -> dict[str, int]:
    """Folder name -> rows in it, read back independently of the sink."""
    import pyarrow.parquet as pq

    return {
        folder.name: sum(pq.read_metadata(path).num_rows for path in folder.glob("*.parquet"))
        for folder in sorted(parent.glob("_batch_id=*"))
    }


def frame(spark, ids, batch_id):
    return spark.createDataFrame([(i, f"v{i}") for i in ids], "id long, value string").withColumn(
        "_batch_id", F.lit(batch_id).cast("bigint")
    )


def test_local_sink_replay_replaces_only_its_batch(spark, tmp_path):
    sink = LocalParquetSink(str(tmp_path))
    sink.write(frame(spark, [1, 2, 3], 0), "customers", 0)
    sink.write(frame(spark, [4, 5], 1), "customers", 1)
    table_dir = tmp_path / "raw" / "customers"
    assert batch_folders(table_dir) == {"_batch_id=0": 3, "_batch_id=1": 2}

    sink.write(frame(spark, [1, 2], 0), "customers", 0)

    assert batch_folders(table_dir) == {"_batch_id=0": 2, "_batch_id=1": 2}
    rows = spark.read.parquet(str(table_dir / "_batch_id=0")).orderBy("id").collect()
    assert [(row.id, row.value) for row in rows] == [(1, "v1"), (2, "v2")]


def test_empty_replay_leaves_no_stale_folder(spark, tmp_path):
    sink = LocalParquetSink(str(tmp_path))
    sink.write(frame(spark, [1, 2], 7), "orders", 7)
    sink.write(frame(spark, [3], 8), "orders", 8)

    sink.write(frame(spark, [], 7), "orders", 7)

    assert batch_folders(tmp_path / "raw" / "orders") == {"_batch_id=8": 1}


def test_empty_first_write_creates_nothing(spark, tmp_path):
    LocalParquetSink(str(tmp_path)).write(frame(spark, [], 0), "orders", 0)
    assert not (tmp_path / "raw" / "orders" / "_batch_id=0").exists()


def test_quarantine_writer_has_the_same_batch_semantics(spark, tmp_path):
    quarantine = QuarantineWriter(str(tmp_path))
    rows = spark.createDataFrame(
        [(None, "invalid_json", "{not json", "f1"), ("orders", "missing_key:orderId", "{}", "f1")],
        "_source_table string, reason string, payload string, source_ref string",
    )
    quarantine.write(rows, 3)
    quarantine.write(rows.limit(1), 4)
    assert batch_folders(tmp_path / "quarantine") == {"_batch_id=3": 2, "_batch_id=4": 1}

    quarantine.write(rows.where("reason = 'invalid_json'"), 3)
    quarantine.write(rows.limit(0), 4)

    assert batch_folders(tmp_path / "quarantine") == {"_batch_id=3": 1}


def test_choose_sink(spark, tmp_path, caplog):
    contracts = load_contracts()
    bundle = hudi_bundle_available(spark)
    with caplog.at_level("INFO", logger="streaming.sinks"):
        auto = choose_sink("auto", spark, data_dir=str(tmp_path), contracts=contracts)
    assert isinstance(auto, HudiSink if bundle else LocalParquetSink)
    assert ("sink=hudi" if bundle else "no Hudi bundle on the classpath") in caplog.text
    assert isinstance(choose_sink("local", spark, data_dir=str(tmp_path), contracts=contracts), LocalParquetSink)
    with pytest.raises(ValueError, match="sink must be"):
        choose_sink("delta", spark, data_dir=str(tmp_path), contracts=contracts)
    if not bundle:
        with pytest.raises(RuntimeError, match="Hudi Spark bundle"):
            choose_sink("hudi", spark, data_dir=str(tmp_path), contracts=contracts)


def test_hudi_sink_upserts_latest_by_ordering_value(spark, tmp_path):
    if not hudi_bundle_available(spark):
        pytest.skip(
            "Hudi Spark bundle not on the classpath: no Maven repository is reachable here to fetch "
            "hudi-spark3.5-bundle; HudiSink runs on Glue 5.1 (--datalake-formats hudi)"
        )
    from streaming.contract import raw_schema

    contracts = load_contracts()
    contract = contracts["customers"]
    sink = HudiSink(str(tmp_path), "raw", contracts, sync_mode="none")
    schema = raw_schema(contract)

    def row(cust_id, email, ordering, batch_id, deleted=False):
        values = {name: None for name in schema.fieldNames()}
        values.update(id=cust_id, cust_name="Ana", email=email, id_suffix=cust_id[-1], _event_name="MODIFY",
                      _is_deleted=deleted, _is_ttl_delete=False, _ordering_value=ordering,
                      _event_id=f"{cust_id}-{ordering}", _source_table="customers", _batch_id=batch_id)
        return tuple(values[name] for name in schema.fieldNames())

    sink.write(spark.createDataFrame([row("c1", "new@x", "2", 0), row("c2", "a@x", "1", 0)], schema), "customers", 0)
    # A late, older change of c1 must not overwrite the newer one already stored.
    sink.write(spark.createDataFrame([row("c1", "old@x", "1", 1)], schema), "customers", 1)

    stored = spark.read.format("hudi").load(str(tmp_path / "customers"))
    assert sorted((r.id, r.email) for r in stored.collect()) == [("c1", "new@x"), ("c2", "a@x")]
    properties = (tmp_path / "customers" / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.version=6" in properties
