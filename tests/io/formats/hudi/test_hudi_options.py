"""Hudi write options of both raw tables, built from the real table contracts (pure, no Spark).

Each rule names the Hudi 1.0.x source (apache/hudi) or AWS page it was checked against.
"""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from streaming.contracts.loader import load_contracts
from streaming.io.formats.hudi.options import (
    BUCKETS_RECORD_KEY,
    NUM_BUCKETS_KEY,
    UNRECORDED_BUCKETS_PER_PARTITION,
    HudiBucketsError,
    bucket_of_file_id,
    buckets_for_table,
    BATCH_MARKER_KEY,
    COMPLEX_KEY_GENERATOR,
    GLUE_SYNC_TOOL,
    HIVE_SYNC_TOOL,
    NONPARTITIONED_KEY_GENERATOR,
    SIMPLE_KEY_GENERATOR,
    HudiOptionsError,
    batch_marker_options,
    change_log_write_options,
    check_archival_rules,
    current_state_write_options,
    hudi_table_path,
    meta_sync_tools,
    retention_options,
)

@pytest.fixture(scope="module")
def contracts():
    return load_contracts()


def both_tables(contract, **kwargs):
    return [
        change_log_write_options(contract, base_path="s3://lake/raw/", database="raw_db", **kwargs),
        current_state_write_options(contract, base_path="s3://lake/raw/", database="raw_db", **kwargs),
    ]


@pytest.mark.parametrize(
    ("table", "record_key", "partition_field"),
    [
        ("customers", "id,cust_name", "id_suffix"),
        ("orders", "customer_id,order_id", "customer_suffix"),
        # Each entity of a single-table design, and its unrouted items, is a Hudi table pair of its own.
        ("app_users", "pk,sk", "tenant_bucket"),
        ("app_invoices", "pk,sk", "tenant_bucket"),
        ("app_unrouted", "pk,sk", "tenant_bucket"),
    ],
)
def test_current_state_follows_the_contract(contracts, table, record_key, partition_field):
    options = current_state_write_options(contracts[table], base_path="s3://lake/raw/", database="raw_db")

    assert options["hoodie.base.path"] == f"s3://lake/raw/{table}"
    assert options["hoodie.table.name"] == table
    assert options["hoodie.datasource.write.table.type"] == "COPY_ON_WRITE"
    assert options["hoodie.datasource.write.operation"] == "upsert"
    assert options["hoodie.datasource.write.recordkey.field"] == record_key
    # Both tables have a sort key, so the record key has two fields.
    assert options["hoodie.datasource.write.keygenerator.class"] == COMPLEX_KEY_GENERATOR
    assert options["hoodie.datasource.write.partitionpath.field"] == partition_field
    assert options["hoodie.datasource.write.hive_style_partitioning"] == "true"
    assert options["hoodie.datasource.hive_sync.partition_fields"] == partition_field
    assert options["hoodie.datasource.hive_sync.database"] == "raw_db"
    assert options["hoodie.datasource.hive_sync.table"] == table


@pytest.mark.parametrize("table", ["customers", "orders", "app_tenants"])
def test_current_state_uses_a_bucket_index_on_the_record_key(contracts, table):
    """HoodieIndexConfig (hudi-client-common/.../config/HoodieIndexConfig.java): BUCKET with the
    SIMPLE engine maps a key to a fixed file group per partition, no lookup, no metadata table."""
    options = current_state_write_options(contracts[table], base_path="/r", database="raw")
    assert options["hoodie.index.type"] == "BUCKET"
    assert options["hoodie.index.bucket.engine"] == "SIMPLE"
    assert options["hoodie.bucket.index.hash.field"] == options["hoodie.datasource.write.recordkey.field"]
    # One file group per partition: a busy table's commit rewrites every file group it has.
    assert options["hoodie.bucket.index.num.buckets"] == "1"
    assert options[BUCKETS_RECORD_KEY] == "1"
    wider = current_state_write_options(contracts[table], base_path="/r", database="raw", buckets_per_partition=16)
    assert wider["hoodie.bucket.index.num.buckets"] == wider[BUCKETS_RECORD_KEY] == "16"
    # A count given as an extra option is the one recorded too.
    given = current_state_write_options(contracts[table], base_path="/r", database="raw",
                                        extra={"hoodie.bucket.index.num.buckets": "8"})
    assert given["hoodie.bucket.index.num.buckets"] == given[BUCKETS_RECORD_KEY] == "8"
    with pytest.raises(HudiOptionsError, match="buckets_per_partition"):
        current_state_write_options(contracts[table], base_path="/r", database="raw", buckets_per_partition=0)


@pytest.mark.parametrize("table", ["customers", "orders", "app_users", "app_unrouted"])
def test_change_log_is_an_insert_only_table_per_ingest_hour(contracts, table):
    options = change_log_write_options(contracts[table], base_path="s3://lake/raw", database="raw_db")

    assert options["hoodie.base.path"] == f"s3://lake/raw/{table}_changes"
    assert options["hoodie.table.name"] == f"{table}_changes"
    assert options["hoodie.datasource.hive_sync.table"] == f"{table}_changes"
    assert options["hoodie.datasource.write.table.type"] == "COPY_ON_WRITE"
    # HoodieIndex.requiresTagging: INSERT looks nothing up with the default index
    # (hudi-client-common/src/main/java/org/apache/hudi/index/HoodieIndex.java).
    assert options["hoodie.datasource.write.operation"] == "insert"
    assert "hoodie.index.type" not in options
    assert options["hoodie.datasource.write.partitionpath.field"] == "_ingest_hour"
    assert options["hoodie.datasource.hive_sync.partition_fields"] == "_ingest_hour"
    assert options["hoodie.datasource.write.hive_style_partitioning"] == "true"
    assert options["hoodie.datasource.write.keygenerator.class"] == SIMPLE_KEY_GENERATOR
    # No record key field: Hudi generates keys, so changes without an event id land too.
    # AutoRecordKeyGenerationUtils (hudi-spark-common) refuses combine.before.insert and
    # drop.duplicates with generated keys; an ordering field would be ignored.
    assert "hoodie.datasource.write.recordkey.field" not in options
    assert options["hoodie.combine.before.insert"] == "false"
    assert options["hoodie.datasource.write.insert.drop.duplicates"] == "false"
    assert "hoodie.datasource.write.precombine.field" not in options
    # New files only: earlier batches' files are never rewritten by small-file packing.
    assert options["hoodie.parquet.small.file.limit"] == "0"


def test_only_the_current_state_url_encodes_its_partition_folders(contracts):
    """Its partition value is a key's last character (`/`, `=`, `%` break a Hive-style
    folder); the change log's ingest hour never needs encoding. tests/io/formats/hudi/interop/test_hudi_tables.py
    reads encoded folders back through Spark and hudi-rs."""
    change_log, current = both_tables(contracts["customers"])
    assert current["hoodie.datasource.write.partitionpath.urlencode"] == "true"
    assert "hoodie.datasource.write.partitionpath.urlencode" not in change_log


def test_both_tables_are_pinned_to_version_6_without_metadata_table_or_bloom_filters(contracts):
    for options in both_tables(contracts["customers"]):
        assert options["hoodie.write.table.version"] == "6"
        assert options["hoodie.write.auto.upgrade"] == "false"
        assert options["hoodie.metadata.enable"] == "false"
        # HoodieStorageConfig.PARQUET_WITH_BLOOM_FILTER_ENABLED: neither table's index reads one.
        assert options["hoodie.parquet.bloom.filter.enabled"] == "false"


def test_event_time_ordering_on_the_ordering_value(contracts):
    options = current_state_write_options(contracts["orders"], base_path="/tmp/raw", database="raw")
    assert options["hoodie.datasource.write.precombine.field"] == "_ordering_value"
    assert options["hoodie.payload.ordering.field"] == "_ordering_value"
    assert options["hoodie.datasource.write.payload.class"] == (
        "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
    )


def sync_tools_run(options: dict[str, str], *, hudi_0_13: bool) -> set[str]:
    """The sync tools HoodieSparkSqlWriter.metaSync runs for these options.

    hudi-spark-datasource/hudi-spark-common/src/main/scala/org/apache/hudi/HoodieSparkSqlWriter.scala:
    sync runs when hive_sync.enable or meta.sync.enable is true; the tools are the classes
    in hoodie.meta.sync.client.tool.class (default HiveSyncTool), plus the Glue tool when
    hive_sync.mode is glue. Up to 0.13 hive_sync.enable also added HiveSyncTool
    (apache/hudi#8942, removed by #8943).
    """
    hive_sync = options.get("hoodie.datasource.hive_sync.enable", "false") == "true"
    enabled = hive_sync or options.get("hoodie.datasource.meta.sync.enable", "false") == "true"
    if not enabled:
        return set()
    tools = set(options.get("hoodie.meta.sync.client.tool.class", HIVE_SYNC_TOOL).split(","))
    if hive_sync and hudi_0_13:
        tools.add(HIVE_SYNC_TOOL)
    if options.get("hoodie.datasource.hive_sync.mode") == "glue":
        tools.add(GLUE_SYNC_TOOL)
    return tools


@pytest.mark.parametrize("hudi_0_13", [False, True])
def test_each_sync_mode_runs_exactly_its_sync_tool(contracts, hudi_0_13):
    for mode, expected in (("glue", {GLUE_SYNC_TOOL}), ("hms", {HIVE_SYNC_TOOL}), ("none", set())):
        for options in both_tables(contracts["customers"], sync_mode=mode):
            assert sync_tools_run(options, hudi_0_13=hudi_0_13) == expected, mode


def test_the_sync_tools_a_replay_runs_again_are_those_of_the_write(contracts):
    for mode, expected in (("glue", [GLUE_SYNC_TOOL]), ("hms", [HIVE_SYNC_TOOL]), ("none", [])):
        for options in both_tables(contracts["customers"], sync_mode=mode):
            assert meta_sync_tools(options) == expected, mode
            assert set(expected) == sync_tools_run(options, hudi_0_13=False)
    # hive_sync.mode glue adds the Glue tool to the configured ones, once.
    assert meta_sync_tools({"hoodie.datasource.meta.sync.enable": "true", "hoodie.datasource.hive_sync.mode": "glue",
                            "hoodie.meta.sync.client.tool.class": f"{HIVE_SYNC_TOOL}, {GLUE_SYNC_TOOL}"}) == [
        HIVE_SYNC_TOOL, GLUE_SYNC_TOOL]


def test_sync_settings(contracts):
    for options in both_tables(contracts["customers"], sync_mode="hms"):
        assert options["hoodie.datasource.hive_sync.mode"] == "hms"
        assert options["hoodie.datasource.hive_sync.support_timestamp"] == "true"
        # HiveSyncTool.syncHoodieTable: with conditional sync the table is updated only when
        # schema, properties or partitions changed, not on every commit (HoodieSyncConfig).
        assert options["hoodie.datasource.meta_sync.condition.sync"] == "true"
    for options in both_tables(contracts["customers"], sync_mode="glue"):
        # GlueCatalogSyncClientConfig (hudi-aws): the Glue tool's UpdateTable keeps no table
        # version, so it may record every commit and keep its partition scans short.
        assert options["hoodie.datasource.meta.sync.glue.skip_table_archive"] == "true"
        assert options["hoodie.datasource.meta_sync.condition.sync"] == "false"
        assert options["hoodie.datasource.hive_sync.database"] == "raw_db"
    for options in both_tables(contracts["customers"], sync_mode="none"):
        assert not any(key.startswith("hoodie.datasource.hive_sync.database") for key in options)
    with pytest.raises(HudiOptionsError, match="sync_mode"):
        current_state_write_options(contracts["customers"], base_path="/r", database="raw", sync_mode="jdbc")


def test_cleaner_keeps_file_versions_by_hours_and_archival_covers_them(contracts):
    for options in both_tables(contracts["orders"]):
        assert options["hoodie.clean.policy"] == "KEEP_LATEST_BY_HOURS"
        assert options["hoodie.clean.hours.retained"] == "24"
        assert options["hoodie.clean.trigger.max.commits"] == "10"
        assert "hoodie.clean.max.commits" not in options, "Hudi 1.0.2 warns on every write given the old name"
        assert not any(key.startswith("hoodie.cleaner.") for key in options), "Hudi 1.0 warns on the old names"
        # 24 h at one commit per 100 s is 864 commits; the cleaner looks for its earliest
        # commit to retain in the active timeline, so archival keeps more than that.
        assert int(options["hoodie.keep.min.commits"]) >= 864 + 2
        assert int(options["hoodie.keep.max.commits"]) > int(options["hoodie.keep.min.commits"])
    longer = retention_options(retain_hours=48, commit_interval_seconds=60)
    assert longer["hoodie.clean.hours.retained"] == "48"
    assert int(longer["hoodie.keep.min.commits"]) >= 48 * 60 + 2
    for hours, interval in ((0, 100), (24, 0)):
        with pytest.raises(HudiOptionsError):
            retention_options(retain_hours=hours, commit_interval_seconds=interval)


@pytest.mark.parametrize(
    ("options", "accepted"),
    [
        ({}, True),  # Hudi's defaults: 10 retained, keep 20..30
        ({"hoodie.cleaner.commits.retained": "20"}, False),  # the old name still counts
        ({"hoodie.clean.commits.retained": "20"}, False),
        ({"hoodie.clean.commits.retained": "20", "hoodie.keep.min.commits": "21", "hoodie.keep.max.commits": "31"},
         True),
        ({"hoodie.keep.min.commits": "30", "hoodie.keep.max.commits": "30"}, False),
    ],
)
def test_archival_rules_of_hoodie_write_config(options, accepted):
    """HoodieWriteConfig.Builder.validate: keep.max > keep.min > cleaner.commits.retained
    (hudi-client/hudi-client-common/src/main/java/org/apache/hudi/config/HoodieWriteConfig.java)."""
    if accepted:
        check_archival_rules(options)
    else:
        with pytest.raises(HudiOptionsError, match="must be greater than"):
            check_archival_rules(options)


def test_extra_options_override_but_are_validated(contracts):
    options = current_state_write_options(
        contracts["orders"],
        base_path="/r",
        database="raw",
        extra={"hoodie.upsert.shuffle.parallelism": 8, "hoodie.write.table.version": "6"},
    )
    assert options["hoodie.upsert.shuffle.parallelism"] == "8"
    with pytest.raises(HudiOptionsError, match="hoodie.keep.min.commits"):
        change_log_write_options(
            contracts["orders"], base_path="/r", database="raw",
            extra={"hoodie.cleaner.commits.retained": "900"},
        )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("hoodie.write.table.version", "8"),
        ("hoodie.write.auto.upgrade", "true"),
        ("hoodie.datasource.write.commitmeta.key.prefix", "_"),
    ],
)
def test_extra_options_cannot_leave_version_6_or_the_batch_marker(contracts, key, value):
    for build in (change_log_write_options, current_state_write_options):
        with pytest.raises(HudiOptionsError, match="not allowed"):
            build(contracts["orders"], base_path="/r", database="raw", extra={key: value})


def test_batch_marker_is_recorded_as_commit_metadata(contracts):
    """DataSourceUtils.getExtraMetadata copies every write option whose key starts with
    hoodie.datasource.write.commitmeta.key.prefix into the commit's extraMetadata
    (hudi-spark-datasource/hudi-spark-common/src/main/java/org/apache/hudi/DataSourceUtils.java)."""
    marker = batch_marker_options("s3://lake/checkpoints/job", 42)
    assert marker[BATCH_MARKER_KEY] == "s3://lake/checkpoints/job:42"
    for options in both_tables(contracts["orders"]):
        prefix = options["hoodie.datasource.write.commitmeta.key.prefix"]
        written = {**options, **marker}
        extra_metadata = {key: value for key, value in written.items() if key.startswith(prefix)}
        recorded = {BATCH_MARKER_KEY: "s3://lake/checkpoints/job:42"}
        if options["hoodie.datasource.write.operation"] == "upsert":
            recorded[BUCKETS_RECORD_KEY] = options[NUM_BUCKETS_KEY]
        assert extra_metadata == recorded
    with pytest.raises(HudiOptionsError, match="stream id"):
        batch_marker_options("", 1)


@dataclass(frozen=True)
class _Keys:
    raw_table: str
    key_columns: tuple[str, ...]
    partition_column: str | None


@pytest.mark.parametrize(
    ("keys", "generator", "extractor"),
    [
        (_Keys("t", ("id",), "bucket"), SIMPLE_KEY_GENERATOR, "org.apache.hudi.hive.MultiPartKeysValueExtractor"),
        (_Keys("t", ("id", "sk"), "bucket"), COMPLEX_KEY_GENERATOR, "org.apache.hudi.hive.MultiPartKeysValueExtractor"),
        (_Keys("t", ("id",), None), NONPARTITIONED_KEY_GENERATOR, "org.apache.hudi.hive.NonPartitionedExtractor"),
        (_Keys("t", ("id", "sk"), None), NONPARTITIONED_KEY_GENERATOR, "org.apache.hudi.hive.NonPartitionedExtractor"),
    ],
)
def test_key_generator_by_key_shape(keys, generator, extractor):
    options = current_state_write_options(keys, base_path="/r", database="raw")
    assert options["hoodie.datasource.write.keygenerator.class"] == generator
    assert options["hoodie.datasource.hive_sync.partition_extractor_class"] == extractor
    assert options["hoodie.datasource.write.recordkey.field"] == ",".join(keys.key_columns)


def test_table_path():
    assert hudi_table_path("s3://b/raw/", "orders") == "s3://b/raw/orders"


def test_the_raw_tables_have_one_writer(contracts):
    """No concurrency control: Hudi's single-writer mode, in which the default
    hoodie.cleaner.policy.failed.writes=EAGER rolls back failed writes "eagerly before every
    writer starts (only supported for single writer)"; a second writer needs
    hoodie.write.concurrency.mode=optimistic_concurrency_control with a lock provider
    (hudi-client/hudi-client-common/src/main/java/org/apache/hudi/config/HoodieCleanConfig.java;
    https://hudi.apache.org/docs/concurrency_control). docs/deploy-aws.md ("Initial load on
    AWS") stops the job for a backfill because of this; a change here must change that page."""
    for options in both_tables(contracts["orders"]):
        assert not [key for key in options if key.startswith(("hoodie.write.concurrency", "hoodie.write.lock"))]
        assert "hoodie.cleaner.policy.failed.writes" not in options


def test_a_table_keeps_the_bucket_count_it_was_created_with():
    """Hudi keeps no bucket count in a version-6 table's hoodie.properties; written with
    another count, a key hashes to another file group and the current state holds it twice
    (seen on Hudi 1.0.2: 200 keys, 350 rows). So the count a table's commits record wins."""
    def written(*buckets: int) -> list[str]:
        """File group ids of a commit that wrote these buckets (BucketIdentifier's form)."""
        return [f"{bucket:08d}-1d4c-426b-b31c-bf5ba925aba0-0" for bucket in buckets]

    # A new table: the configured count.
    assert buckets_for_table(1, committed=False, recorded=None, explicit=False, newest_file_ids=[]) == 1
    # A table recording its count keeps it, whatever is configured now.
    assert buckets_for_table(1, committed=True, recorded=4, explicit=False, newest_file_ids=written(0, 3)) == 4
    assert buckets_for_table(16, committed=True, recorded=2, explicit=True, newest_file_ids=written(1)) == 2
    # Committed before counts were recorded: the old default, or the count given explicitly.
    assert UNRECORDED_BUCKETS_PER_PARTITION == 4
    assert buckets_for_table(1, committed=True, recorded=None, explicit=False, newest_file_ids=written(3, 2)) == 4
    assert buckets_for_table(8, committed=True, recorded=None, explicit=True, newest_file_ids=written(7)) == 8
    # Files in a bucket above the count: refused, naming the option to set.
    with pytest.raises(HudiBucketsError, match="wrote bucket 11.*hoodie.bucket.index.num.buckets"):
        buckets_for_table(1, committed=True, recorded=None, explicit=False, newest_file_ids=written(2, 11))


def test_the_bucket_of_a_file_group_is_its_ids_first_eight_digits():
    """BucketIdentifier.bucketIdFromFileId (Hudi 1.0.2) parses the first 8 characters."""
    assert bucket_of_file_id("00000003-ff77-4156-9775-be141a2e7313-0") == 3
    assert bucket_of_file_id("00000012-1d4c-426b-b31c-bf5ba925aba0-0") == 12
    # The change log's file groups are plain UUIDs.
    assert bucket_of_file_id("65f04239-ad27-4ff7-8e0a-700e042bead9-0") is None
    assert bucket_of_file_id("1234") is None
