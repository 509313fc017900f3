"""Sync mode "glue" on a real Hudi 1.0.2 write: what runs here, and the settings production relies on.

On AWS, Glue 5.1 ships Hudi 1.0.2 with its hudi-aws module ("AWS Glue version / Supported
Hudi version", https://docs.aws.amazon.com/glue/latest/dg/aws-glue-programming-etl-format-hudi.html),
and `--sync_mode glue` has Hudi run org.apache.hudi.aws.sync.AwsGlueCatalogSyncTool after
each commit (apache/hudi hudi-aws/src/main/java/org/apache/hudi/aws/sync/AwsGlueCatalogSyncTool.java).

That tool cannot run on these machines, so no sync reaches moto's Glue server here: the
Maven Central they reach serves no hudi-aws of the 1.x line (hudi-aws 1.0.0, 1.0.1,
1.0.2, 1.1.0 and hudi-aws-bundle 1.0.2 are not found; the Spark bundle holds none of its
classes), and the newest it serves, hudi-aws 0.15.0, does not link against Hudi 1.0.2:
its AwsGlueCatalogSyncTool overrides initSyncClient(HiveSyncConfig), which 1.0.2's
HiveSyncTool no longer calls (it calls initSyncClient(HiveSyncConfig, HoodieTableMetaClient)
and would build a Hive client instead), its client calls the constructor
HoodieSyncClient(HoodieSyncConfig), gone in 1.0.2, and HoodieInstant.getTimestamp(),
renamed requestedTime() in 1.0.

What is checked instead is the half Hudi 1.0.2's Spark bundle runs: the project's "glue"
options make the writer commit first and then run the Glue tool and no other, and the
sink's replay runs that same tool again (HudiSink.write, run_meta_sync).
"""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from streaming.contracts.loader import load_contracts
from streaming.contracts.spark_schema import change_log_schema
from streaming.io.formats.hudi.options import GLUE_SYNC_TOOL, HIVE_SYNC_TOOL, change_log_write_options
from streaming.io.formats.hudi.sink import HudiSink
from streaming.io.formats.hudi.timeline import LocalFiles, table_commits
from streaming.io.storage import jvm_class_loadable

pytestmark = pytest.mark.spark

CONTRACTS = load_contracts()
CUSTOMERS = CONTRACTS["customers"]
SCHEMA = change_log_schema(CUSTOMERS)
STREAM = "stream-glue"


def change(key: str, email: str) -> tuple:
    row = {name: None for name in SCHEMA.fieldNames()}
    row.update(
        id=key, cust_name="Ana", email=email, id_suffix=key[-1], _event_name="MODIFY", _is_deleted=False,
        _is_ttl_delete=False, _ordering_value="0" * 84, _source_table="customers",
        _ingested_at=datetime(2026, 4, 4, 8, tzinfo=timezone.utc), _batch_id=1, _ingest_hour="2026-04-04-08",
    )
    return tuple(row[name] for name in SCHEMA.fieldNames())


def test_the_production_glue_sync_settings():
    """What `--sync_mode glue` hands Hudi on Glue 5.1: the class name hudi-aws 1.0.2 defines
    (hudi-aws/src/main/java/org/apache/hudi/aws/sync/AwsGlueCatalogSyncTool.java) as the only
    sync tool, with the Hive sync off (HoodieSparkSqlWriter.metaSync adds HiveSyncTool when
    hive_sync.enable is on), and the database, table and partition field the tool reads
    from the hive_sync.* keys (HoodieSyncConfig, hudi-sync-common)."""
    options = change_log_write_options(CUSTOMERS, base_path="s3://bucket/raw", database="raw", sync_mode="glue")
    assert GLUE_SYNC_TOOL == "org.apache.hudi.aws.sync.AwsGlueCatalogSyncTool"
    assert options["hoodie.meta.sync.client.tool.class"] == GLUE_SYNC_TOOL
    assert options["hoodie.datasource.meta.sync.enable"] == "true"
    assert options["hoodie.datasource.hive_sync.enable"] == "false"
    assert (options["hoodie.datasource.hive_sync.database"], options["hoodie.datasource.hive_sync.table"],
            options["hoodie.datasource.hive_sync.partition_fields"]) == ("raw", "customers_changes", "_ingest_hour")
    # No endpoint or region: on Glue the AWS SDK takes the job's region and that region's
    # Glue endpoint. hoodie.aws.glue.endpoint and hoodie.aws.glue.region (HoodieAWSConfig,
    # hudi-aws, since 0.15.0) override them only when set, which a test against moto's
    # server would do.
    assert not any(key.startswith("hoodie.aws.") for key in options)


def test_glue_mode_commits_then_runs_the_glue_sync_tool_alone(hudi_spark, tmp_path):
    # The precondition of this test's shape: once a hudi-aws matching the bundle is on the
    # classpath, the sync can run against moto's Glue server and this test must check the
    # catalog's tables and partitions there instead.
    assert not jvm_class_loadable(hudi_spark, GLUE_SYNC_TOOL)
    system = hudi_spark.sparkContext._jvm.java.lang.System
    # Were HiveSyncTool run too, it would fail on this address and be named in the error,
    # instead of syncing quietly into an embedded Derby metastore.
    system.setProperty("hive.metastore.uris", "thrift://127.0.0.1:1")
    system.setProperty("hive.metastore.connect.retries", "1")
    sink = HudiSink(str(tmp_path), "raw", CONTRACTS, sync_mode="glue", stream_id=STREAM)
    batch = hudi_spark.createDataFrame([change("c1", "a@x"), change("c2", "b@x")], SCHEMA)
    try:
        with pytest.raises(Exception) as first:
            sink.write(batch, CUSTOMERS, 1)
        committed = table_commits(LocalFiles(), str(tmp_path / "customers_changes"))
        with pytest.raises(Exception) as replay:
            sink.write(batch, CUSTOMERS, 1)
    finally:
        system.clearProperty("hive.metastore.uris")
        system.clearProperty("hive.metastore.connect.retries")
    # The change log committed the batch before its sync ran; the sync's failure stopped
    # the batch there, so the current state was never written.
    assert [commit.batch_marker for commit in committed] == [f"{STREAM}:1"]
    assert not (tmp_path / "customers").exists()
    # The writer runs every configured tool and names each that failed (one: "Could not
    # sync using the meta sync class X"; several: "MetaSyncs failed: {X,Y}",
    # SyncUtilHelpers.getHoodieMetaSyncException in hudi-sync-common).
    glue_failed = f"HoodieMetaSyncException: Could not sync using the meta sync class {GLUE_SYNC_TOOL}"
    for failure in (first, replay):
        message = str(failure.value)
        assert glue_failed in message and HIVE_SYNC_TOOL not in message
        assert f"ClassNotFoundException: {GLUE_SYNC_TOOL}" in message
    # The replay found the batch committed, wrote nothing, and ran the Glue tool again.
    assert table_commits(LocalFiles(), str(tmp_path / "customers_changes")) == committed
