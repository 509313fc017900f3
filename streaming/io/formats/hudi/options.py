"""Hudi write options for the two raw tables of one contract: change log and current state.

Pure (no SparkSession), so every option is unit-tested without the Hudi bundle. Keys are
the Spark datasource keys of Hudi 1.0.2 (AWS Glue 5.1) writing table version 6, the
newest version Athena reads. Each choice names the Hudi source file it was checked in
(paths in apache/hudi, release 1.0.x); docs/architecture.md explains the design.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal, Protocol, Sequence

from streaming.contracts.model import INGEST_HOUR_COLUMN

# Athena reads Hudi 0.14/0.15 tables, i.e. table version 6; Hudi 1.0 writes version 8
# unless told otherwise, so both keys are pinned and not overridable.
ATHENA_TABLE_VERSION = "6"
TABLE_VERSION_KEY = "hoodie.write.table.version"
AUTO_UPGRADE_KEY = "hoodie.write.auto.upgrade"

ORDERING_FIELD = "_ordering_value"
# Honours the ordering field when merging with what is already stored, so a late,
# older change never overwrites a newer one (event-time ordering).
EVENT_TIME_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
GLUE_SYNC_TOOL = "org.apache.hudi.aws.sync.AwsGlueCatalogSyncTool"
HIVE_SYNC_TOOL = "org.apache.hudi.hive.HiveSyncTool"

SIMPLE_KEY_GENERATOR = "org.apache.hudi.keygen.SimpleKeyGenerator"
COMPLEX_KEY_GENERATOR = "org.apache.hudi.keygen.ComplexKeyGenerator"
NONPARTITIONED_KEY_GENERATOR = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
MULTI_PART_KEYS_EXTRACTOR = "org.apache.hudi.hive.MultiPartKeysValueExtractor"
NONPARTITIONED_EXTRACTOR = "org.apache.hudi.hive.NonPartitionedExtractor"

SyncMode = Literal["hms", "glue", "none"]
SYNC_MODES: tuple[SyncMode, ...] = ("hms", "glue", "none")
# AWS documents Hudi-on-Glue catalog sync through the Hive metastore client ("hms"), which
# is the Glue Data Catalog once the job runs with --enable-glue-datacatalog
# (https://docs.aws.amazon.com/glue/latest/dg/aws-glue-programming-etl-format-hudi.html).
DEFAULT_SYNC_MODE: SyncMode = "hms"
# The Hive metastore that sync_mode "hms" registers the tables in, when it is not the one
# the session's Hadoop configuration names: HiveSyncTool's constructor copies it into
# hive.metastore.uris of the configuration it syncs with (hudi-sync/hudi-hive-sync/src/
# main/java/org/apache/hudi/hive/HiveSyncTool.java, HiveSyncConfigHolder.METASTORE_URIS,
# release-1.0.2). Only a local stream names one (`lakehouse stream --catalog`, the
# metastore of streaming/runtime/athena_local.py); on Glue the session's client is the catalog.
HIVE_METASTORE_URIS_KEY = "hoodie.datasource.hive_sync.metastore.uris"

# A query or dbt run may read file versions for hours; the cleaner keeps them this long.
DEFAULT_RETAIN_HOURS = 24
# The streaming trigger interval; archival sizing assumes at most one commit per table this often.
DEFAULT_COMMIT_INTERVAL_SECONDS = 100
# File groups per partition of the current-state table (bucket index). Every batch of a
# busy table touches every file group, and a COW commit rewrites each one it touches, so
# each file group costs a commit a file rewrite whatever its size: one per partition gives
# the partition's rows one file (up to ~100 MB per partition before a table needs more).
NUM_BUCKETS_KEY = "hoodie.bucket.index.num.buckets"
DEFAULT_BUCKETS_PER_PARTITION = 1

# Any write option whose key starts with the prefix lands in the commit's extraMetadata
# (DataSourceUtils.getExtraMetadata, hudi-spark-datasource/hudi-spark-common/src/main/java/
# org/apache/hudi/DataSourceUtils.java); the marker names the micro-batch a commit holds.
COMMIT_METADATA_PREFIX_KEY = "hoodie.datasource.write.commitmeta.key.prefix"
COMMIT_METADATA_PREFIX = "lakehouse."
BATCH_MARKER_KEY = COMMIT_METADATA_PREFIX + "batch"
# A version-6 table keeps no record of its bucket count (hoodie.properties has none), and a
# write with another count hashes keys to other file groups: the same key twice in the
# current state. So every commit records the count it was written with, and a table keeps
# the count of its first commit (buckets_for_table).
BUCKETS_RECORD_KEY = COMMIT_METADATA_PREFIX + "buckets_per_partition"
# Commits written before the count was recorded all used 4, the default until then.
UNRECORDED_BUCKETS_PER_PARTITION = 4

# Hudi 1.0 renamed the cleaner's keys from hoodie.cleaner.* to hoodie.clean.* and warns on
# every write given an old one (HoodieCleanConfig keeps the old names as alternatives).
CLEANER_COMMITS_RETAINED_KEY = "hoodie.clean.commits.retained"
_OLD_CLEANER_COMMITS_RETAINED_KEY = "hoodie.cleaner.commits.retained"
# A clean is planned at most once per this many commits of a table (NUM_COMMITS trigger).
# hoodie.clean.trigger.max.commits: Hudi 1.0.2 warns on every write given its old name,
# hoodie.clean.max.commits, naming this one as the new key (ConfigUtils). Planning lists
# the partitions written since the last clean: about a second of every micro-batch when
# run per commit (docs/performance.md). Files are kept at least `retain_hours` either
# way; they may stay a few commits longer.
CLEAN_EVERY_COMMITS = 10
KEEP_MIN_COMMITS_KEY = "hoodie.keep.min.commits"
KEEP_MAX_COMMITS_KEY = "hoodie.keep.max.commits"
# Hudi's defaults for the three (HoodieCleanConfig / HoodieArchivalConfig), used when unset.
_HUDI_DEFAULT_COMMITS = {CLEANER_COMMITS_RETAINED_KEY: 10, KEEP_MIN_COMMITS_KEY: 20, KEEP_MAX_COMMITS_KEY: 30}
# Archival removes instants in chunks of (max - min); head room over the hours window.
_ARCHIVAL_MARGIN = 20

_PROTECTED_KEYS = (TABLE_VERSION_KEY, AUTO_UPGRADE_KEY, COMMIT_METADATA_PREFIX_KEY)

# Hudi 1.0.2 writes a COW base file through parquet-avro (1.13.1 inside the Spark bundle):
# HoodieAvroFileWriterFactory.getHoodieAvroWriteSupport (hudi-hadoop-common/src/main/java/
# org/apache/hudi/io/hadoop/HoodieAvroFileWriterFactory.java) converts the schema with
# `new AvroSchemaConverter(storage.getConf())`, and AvroWriteSupport.init reads the same
# Hadoop configuration: the session's, not a write option. Both default to the old 2-level
# list (`repeated <type> array`), which cannot hold a null element, so a DynamoDB list with
# a NULL in it (`{"L": [{"N": "35"}, {"NULL": true}]}`) failed the whole commit with
# "Array contains a null element". The 3-level list (`list.element`, optional) is the one
# parquet-format specifies; Spark, hudi-rs (arrow-rs) and Athena (Trino's
# lib/trino-parquet/src/main/java/io/trino/parquet/ParquetTypeUtils.java,
# getArrayElementColumn) read both, also in one table. Hudi's own reader of an old file
# (org/apache/parquet/avro/HoodieAvroReadSupport.java) reads it in the structure it was
# written with, so a COW merge of an old file writes the new one.
PARQUET_AVRO_OLD_LIST_STRUCTURE_KEY = "parquet.avro.write-old-list-structure"
# Set on the Hadoop configuration of every session that writes Hudi (sink.HudiSink).
HUDI_HADOOP_CONF = {PARQUET_AVRO_OLD_LIST_STRUCTURE_KEY: "false"}

# Hudi 1.0.2 puts a bloom filter of the file's record keys in the footer of every Parquet
# base file it writes unless this is false (HoodieStorageConfig.PARQUET_WITH_BLOOM_FILTER_ENABLED,
# default true; HoodieFileWriterFactory.enableBloomFilter writes one anyway for a BLOOM index).
# Only the BLOOM index reads it; the current state's index is BUCKET and the change log is
# only inserted into. At the default 60,000 entries (hoodie.index.bloom.num_entries) it is
# about 431 KB a file however few rows the file holds, built and written by every commit,
# rewritten by every COW merge, and read with every footer by Athena and the local readers.
BLOOM_FILTER_KEY = "hoodie.parquet.bloom.filter.enabled"

# With it, a write whose schema lacks one of the table's columns drops that column from the
# table's schema instead of failing (off by default; HoodieWriteConfig, hudi-client/
# hudi-client-common/src/main/java/org/apache/hudi/config/HoodieWriteConfig.java). The sink
# sets it only for a write that drops a column nested deeper than hudi-rs reads.
DROP_COLUMNS_KEY = "hoodie.datasource.write.schema.allow.auto.evolution.column.drop"


class HudiOptionsError(ValueError):
    """The requested options would produce a table Athena or the raw layer cannot use."""


class KeyedContract(Protocol):
    """The parts of a TableContract the Hudi options need."""

    raw_table: str
    key_columns: Sequence[str]
    partition_column: str | None


class ChangeLogContract(KeyedContract, Protocol):
    @property
    def changes_table(self) -> str: ...


def hudi_table_path(base_path: str, name: str) -> str:
    """Where one raw table lives under the raw base path (local folder or S3 prefix)."""
    return f"{base_path.rstrip('/')}/{name}"


def key_generator_class(key_columns: Sequence[str], partition_column: str | None) -> str:
    """Pick the key generator for the record key fields and the partition field."""
    if not key_columns:
        raise HudiOptionsError("a Hudi record key needs at least one key column")
    if not partition_column:
        return NONPARTITIONED_KEY_GENERATOR
    if len(key_columns) == 1:
        return SIMPLE_KEY_GENERATOR
    return COMPLEX_KEY_GENERATOR


def batch_marker(stream_id: str, batch_id: int) -> str:
    """The value recorded in a commit's extraMetadata for one micro-batch of one stream."""
    if not stream_id:
        raise HudiOptionsError("a batch marker needs a non-empty stream id")
    return f"{stream_id}:{batch_id}"


def batch_marker_options(stream_id: str, batch_id: int) -> dict[str, str]:
    """Options that make Hudi record the micro-batch in the commit it creates."""
    return {COMMIT_METADATA_PREFIX_KEY: COMMIT_METADATA_PREFIX, BATCH_MARKER_KEY: batch_marker(stream_id, batch_id)}


def sync_options(sync_mode: SyncMode, database: str, table: str, partition_column: str | None) -> dict[str, str]:
    """Catalog sync after each commit.

    HoodieSparkSqlWriter.metaSync runs every class in hoodie.meta.sync.client.tool.class
    (default HiveSyncTool) once hive_sync.enable or meta.sync.enable is true. "glue" therefore
    enables meta sync with only the Glue tool and keeps hive_sync.enable off: Hudi 0.13 added
    HiveSyncTool whenever hive_sync.enable was on (apache/hudi#8942, fixed by #8943 in 0.14),
    and no release should ever reach for a Hive JDBC endpoint that Glue does not have.
    """
    if sync_mode not in SYNC_MODES:
        raise HudiOptionsError(f"sync_mode must be one of {', '.join(SYNC_MODES)}, not {sync_mode!r}")
    if sync_mode == "none":
        return {"hoodie.datasource.hive_sync.enable": "false", "hoodie.datasource.meta.sync.enable": "false"}
    options = {
        # HoodieSyncConfig: these hive_sync.* keys are the sync settings of every sync tool.
        "hoodie.datasource.hive_sync.database": database,
        "hoodie.datasource.hive_sync.table": table,
        "hoodie.datasource.hive_sync.partition_fields": partition_column or "",
        "hoodie.datasource.hive_sync.partition_extractor_class": (
            MULTI_PART_KEYS_EXTRACTOR if partition_column else NONPARTITIONED_EXTRACTOR
        ),
        # Without this, timestamps are synced as bigint and Athena shows epoch numbers.
        "hoodie.datasource.hive_sync.support_timestamp": "true",
    }
    # Every sync ends by storing the last synced commit in the catalog table
    # (HiveSyncTool.syncHoodieTable), an UpdateTable per commit; Glue keeps each update
    # as a table version unless told to skip it, and caps versions per table.
    if sync_mode == "hms":
        options.update(
            {
                "hoodie.datasource.hive_sync.enable": "true",
                "hoodie.datasource.hive_sync.mode": "hms",
                # Through the Hive client no update can skip the version, so the table is
                # updated only when schema, properties or partitions changed (HoodieSyncConfig).
                "hoodie.datasource.meta_sync.condition.sync": "true",
            }
        )
    else:
        options.update(
            {
                "hoodie.datasource.hive_sync.enable": "false",
                "hoodie.datasource.meta.sync.enable": "true",
                "hoodie.meta.sync.client.tool.class": GLUE_SYNC_TOOL,
                # GlueCatalogSyncClientConfig (hudi-aws): its UpdateTable keeps no version,
                # so the last synced commit may advance every commit, which keeps the next
                # sync's scan of written partitions to the commits since.
                "hoodie.datasource.meta.sync.glue.skip_table_archive": "true",
                "hoodie.datasource.meta_sync.condition.sync": "false",
            }
        )
    return options


def meta_sync_tools(options: Mapping[str, str]) -> list[str]:
    """The sync tool classes a Hudi 1.0.x Spark write runs after its commit, none when sync is off.

    HoodieSparkSqlWriter.metaSync (hudi-spark-common): sync runs when hive_sync.enable or
    meta.sync.enable is true; the tools are hoodie.meta.sync.client.tool.class (default
    HiveSyncTool) plus the Glue tool when hive_sync.mode is glue.
    """
    enabled = (
        options.get("hoodie.datasource.hive_sync.enable", "false").lower() == "true"
        or options.get("hoodie.datasource.meta.sync.enable", "false").lower() == "true"
    )
    if not enabled:
        return []
    tools = [name.strip() for name in options.get("hoodie.meta.sync.client.tool.class", HIVE_SYNC_TOOL).split(",")]
    if options.get("hoodie.datasource.hive_sync.mode", "").lower() == "glue":
        tools.append(GLUE_SYNC_TOOL)
    return list(dict.fromkeys(name for name in tools if name))


def retention_options(retain_hours: int, commit_interval_seconds: int) -> dict[str, str]:
    """Cleaner by hours, and an active timeline long enough for it.

    KEEP_LATEST_BY_HOURS keeps every file version a reader may still use for
    `retain_hours`. The cleaner finds its earliest commit to retain in the *active*
    timeline (CleanerUtils.getEarliestCommitToRetain), so archival must keep at least the
    commits of that window; Hudi raises keep.min/max itself when they are lower
    (ArchivalUtils.getMinAndMaxInstantsToKeep, hudi-client-common), sizing them here
    keeps the configuration honest and the warning out of every archival.
    """
    if retain_hours < 1:
        raise HudiOptionsError(f"retain_hours must be at least 1, not {retain_hours}")
    if commit_interval_seconds < 1:
        raise HudiOptionsError(f"commit_interval_seconds must be at least 1, not {commit_interval_seconds}")
    commits_in_window = math.ceil(retain_hours * 3600 / commit_interval_seconds)
    keep_min = commits_in_window + _ARCHIVAL_MARGIN
    return {
        "hoodie.clean.automatic": "true",
        "hoodie.clean.policy": "KEEP_LATEST_BY_HOURS",
        "hoodie.clean.hours.retained": str(retain_hours),
        "hoodie.clean.trigger.max.commits": str(CLEAN_EVERY_COMMITS),
        KEEP_MIN_COMMITS_KEY: str(keep_min),
        KEEP_MAX_COMMITS_KEY: str(keep_min + _ARCHIVAL_MARGIN),
    }


def check_archival_rules(options: Mapping[str, str]) -> None:
    """Reject what HoodieWriteConfig.Builder.validate rejects, before the first write.

    keep.max.commits must exceed keep.min.commits, which must exceed
    cleaner.commits.retained (hudi-client/hudi-client-common/src/main/java/org/apache/
    hudi/config/HoodieWriteConfig.java); a missing key counts with Hudi's default.
    """
    options = {CLEANER_COMMITS_RETAINED_KEY: options.get(_OLD_CLEANER_COMMITS_RETAINED_KEY), **options}
    values = {key: int(options.get(key) or default) for key, default in _HUDI_DEFAULT_COMMITS.items()}
    if values[KEEP_MAX_COMMITS_KEY] <= values[KEEP_MIN_COMMITS_KEY]:
        raise HudiOptionsError(
            f"{KEEP_MAX_COMMITS_KEY}={values[KEEP_MAX_COMMITS_KEY]} must be greater than "
            f"{KEEP_MIN_COMMITS_KEY}={values[KEEP_MIN_COMMITS_KEY]} (Hudi refuses to write otherwise)"
        )
    if values[KEEP_MIN_COMMITS_KEY] <= values[CLEANER_COMMITS_RETAINED_KEY]:
        raise HudiOptionsError(
            f"{KEEP_MIN_COMMITS_KEY}={values[KEEP_MIN_COMMITS_KEY]} must be greater than "
            f"{CLEANER_COMMITS_RETAINED_KEY}={values[CLEANER_COMMITS_RETAINED_KEY]}: raise "
            f"{KEEP_MIN_COMMITS_KEY} and {KEEP_MAX_COMMITS_KEY} with it (Hudi refuses to write otherwise)"
        )


def _table_options(name: str, base_path: str, operation: str) -> dict[str, str]:
    return {
        "hoodie.base.path": hudi_table_path(base_path, name),
        "hoodie.table.name": name,
        "hoodie.datasource.write.table.name": name,
        "hoodie.datasource.write.table.type": "COPY_ON_WRITE",
        "hoodie.datasource.write.operation": operation,
        TABLE_VERSION_KEY: ATHENA_TABLE_VERSION,
        AUTO_UPGRADE_KEY: "false",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        # No metadata table: Athena lists files itself unless a table property asks for
        # the metadata table, the bucket index and insert-only log need no lookup index,
        # and without it archival is not held back by metadata-table compaction.
        "hoodie.metadata.enable": "false",
        BLOOM_FILTER_KEY: "false",
        COMMIT_METADATA_PREFIX_KEY: COMMIT_METADATA_PREFIX,
    }


def _with_extra(options: dict[str, str], extra: Mapping[str, object] | None) -> dict[str, str]:
    for key in _PROTECTED_KEYS:
        if extra and key in extra and str(extra[key]).lower() != options[key].lower():
            raise HudiOptionsError(
                f"{key}={extra[key]} is not allowed: the raw tables stay on table version "
                f"{ATHENA_TABLE_VERSION} (Athena reads Hudi up to 0.15) and record their "
                f"micro-batch under the commit metadata prefix {COMMIT_METADATA_PREFIX!r}"
            )
    merged = {**options, **{key: str(value) for key, value in (extra or {}).items()}}
    check_archival_rules(merged)
    return merged


def change_log_write_options(
    contract: ChangeLogContract,
    *,
    base_path: str,
    database: str,
    sync_mode: SyncMode = DEFAULT_SYNC_MODE,
    retain_hours: int = DEFAULT_RETAIN_HOURS,
    commit_interval_seconds: int = DEFAULT_COMMIT_INTERVAL_SECONDS,
    extra: Mapping[str, object] | None = None,
) -> dict[str, str]:
    """Options for the append-only change log `<raw_table>_changes`, partitioned by ingest hour.

    - insert: HoodieIndex.requiresTagging is false for INSERT with the default index, so
      no batch looks up keys in the table (hudi-client-common/.../index/HoodieIndex.java).
    - no record key field: Hudi generates unique keys itself (since 0.14, table version 6),
      so changes without an event id land too; it requires combine.before.insert off
      (AutoRecordKeyGenerationUtils, hudi-spark-common).
    - small.file.limit 0: every batch writes new files and never rewrites earlier ones.
    """
    table = contract.changes_table
    options = _table_options(table, base_path, "insert")
    options.update(
        {
            "hoodie.datasource.write.keygenerator.class": SIMPLE_KEY_GENERATOR,
            "hoodie.datasource.write.partitionpath.field": INGEST_HOUR_COLUMN,
            "hoodie.combine.before.insert": "false",
            "hoodie.datasource.write.insert.drop.duplicates": "false",
            "hoodie.parquet.small.file.limit": "0",
        }
    )
    options.update(retention_options(retain_hours, commit_interval_seconds))
    options.update(sync_options(sync_mode, database, table, INGEST_HOUR_COLUMN))
    return _with_extra(options, extra)


def current_state_write_options(
    contract: KeyedContract,
    *,
    base_path: str,
    database: str,
    sync_mode: SyncMode = DEFAULT_SYNC_MODE,
    retain_hours: int = DEFAULT_RETAIN_HOURS,
    commit_interval_seconds: int = DEFAULT_COMMIT_INTERVAL_SECONDS,
    buckets_per_partition: int = DEFAULT_BUCKETS_PER_PARTITION,
    extra: Mapping[str, object] | None = None,
) -> dict[str, str]:
    """Options for the current state `<raw_table>`: one row per key, greatest ordering value wins.

    The bucket index hashes the record key to a fixed file group: no lookup over the
    table's keys (SIMPLE index) and no metadata table (record index); a COW upsert rewrites
    only the file groups whose buckets hold a changed key (HoodieIndexConfig: index.type
    BUCKET, bucket.engine SIMPLE, bucket.index.num.buckets per partition).
    """
    if buckets_per_partition < 1:
        raise HudiOptionsError(f"buckets_per_partition must be at least 1, not {buckets_per_partition}")
    table = contract.raw_table
    key_columns = list(contract.key_columns)
    partition_column = contract.partition_column or None
    record_key = ",".join(key_columns)
    options = _table_options(table, base_path, "upsert")
    options.update(
        {
            "hoodie.datasource.write.recordkey.field": record_key,
            "hoodie.datasource.write.keygenerator.class": key_generator_class(key_columns, partition_column),
            "hoodie.datasource.write.partitionpath.field": partition_column or "",
            # The partition value is a key's last character, so it may be `/` (a nested
            # folder), `=` or `%`: Spark's partition discovery then fails on the table
            # ("Empty partition column value"). URL-encoded folders (`id_suffix=%2F`) are
            # decoded again by Spark's Hudi reader and by hudi-rs; the data column keeps
            # the raw character. The Hive sync ("hms") registers the encoded value (`%2F`)
            # as the catalog's partition value: its HMSDDLExecutor ignores
            # hoodie.meta.sync.decode_partition (tests/io/formats/hudi/interop/test_hudi_tables.py).
            "hoodie.datasource.write.partitionpath.urlencode": "true",
            "hoodie.datasource.write.precombine.field": ORDERING_FIELD,
            "hoodie.datasource.write.payload.class": EVENT_TIME_PAYLOAD,
            "hoodie.payload.ordering.field": ORDERING_FIELD,
            "hoodie.index.type": "BUCKET",
            "hoodie.index.bucket.engine": "SIMPLE",
            NUM_BUCKETS_KEY: str(buckets_per_partition),
            "hoodie.bucket.index.hash.field": record_key,
        }
    )
    options.update(retention_options(retain_hours, commit_interval_seconds))
    options.update(sync_options(sync_mode, database, table, partition_column))
    options = _with_extra(options, extra)
    # Recorded in the commit's extraMetadata under the commit metadata prefix, also when
    # `extra` set the count.
    options[BUCKETS_RECORD_KEY] = options[NUM_BUCKETS_KEY]
    return options


class HudiBucketsError(HudiOptionsError):
    """A current-state table's files were written with more buckets than a write would use."""


def buckets_for_table(
    configured: int, *, committed: bool, recorded: int | None, explicit: bool, newest_file_ids: Sequence[str]
) -> int:
    """The bucket count a write to an existing current-state table must use: the one it was
    created with. `recorded`: the count its newest commits record (BUCKETS_RECORD_KEY);
    a table committed without one was written with the configured count when `explicit`
    (an extra option), else with UNRECORDED_BUCKETS_PER_PARTITION. Every bucket of the
    file groups its newest commit wrote (`newest_file_ids`) must fall below the count."""
    if not committed:
        return configured
    count = recorded or (configured if explicit else UNRECORDED_BUCKETS_PER_PARTITION)
    highest_bucket_written = max(
        (bucket for bucket in map(bucket_of_file_id, newest_file_ids) if bucket is not None), default=None)
    if highest_bucket_written is not None and highest_bucket_written >= count:
        raise HudiBucketsError(
            f"the table's newest commit wrote bucket {highest_bucket_written}, so it has more than the {count} "
            f"bucket(s) per partition this write would hash keys into (the same key would land twice): set "
            f"{NUM_BUCKETS_KEY} to the count the table was created with in the sink's extra options"
        )
    return count


def bucket_of_file_id(file_id: str) -> int | None:
    """The bucket a bucket-index file group holds: its id starts with the bucket number in 8
    digits (org.apache.hudi.index.bucket.BucketIdentifier, bucketIdStr and
    bucketIdFromFileId, Hudi 1.0.2); None for another id."""
    prefix = file_id[:8]
    return int(prefix) if len(prefix) == 8 and prefix.isdigit() and file_id[8:9] == "-" else None
