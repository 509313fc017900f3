"""Production raw sink: per DynamoDB table a Hudi change log and a Hudi current-state table.

Each micro-batch of one table lands twice: every distinct change is inserted into
`<raw_table>_changes` (append-only, partitioned by ingest hour), and the winner per key
(`streaming.pipeline.ordering.latest_per_key`) is upserted into `<raw_table>`.

Replays: a micro-batch that Spark runs again after a crash must not insert its changes
twice. Every commit records `<stream_id>:<batch_id>` in its extraMetadata; before
writing, the sink reads the newest commit of the table's timeline and skips the write
when it already holds this batch. Batches of one stream commit in order and one writer
owns a table, so the only batch that can be replayed is the one committed last. A
one-off batch (a negative id: backfills and replays) may be retried after stream commits
followed it, so for those every commit of the active timeline is searched. Hudi
syncs the catalog after its commit, so a sync that failed left the batch committed but
not synced: a skipped table is therefore synced again when catalog sync is on.

Schema: the same newest commit holds the table's writer schema; the batch's columns are
put in the table's order with new contract columns at the end, the only place Hudi's
schema evolution on write accepts them.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from streaming.contracts.spark_schema import change_log_schema, raw_schema
from streaming.io import layout as raw_layout
from streaming.io.formats.hudi import HUDI_CAPABILITIES
from streaming.io.formats.hudi.options import (
    DEFAULT_COMMIT_INTERVAL_SECONDS,
    DEFAULT_RETAIN_HOURS,
    DEFAULT_SYNC_MODE,
    BUCKETS_RECORD_KEY,
    DROP_COLUMNS_KEY,
    HUDI_HADOOP_CONF,
    NUM_BUCKETS_KEY,
    SyncMode,
    batch_marker,
    batch_marker_options,
    buckets_for_table,
    change_log_write_options,
    current_state_write_options,
    hudi_table_path,
    meta_sync_tools,
)
from streaming.io.formats.hudi.timeline import TableFiles, TimelineHead, holds_batch_marker, read_timeline_head
from streaming.io.storage import HadoopFiles, jvm_class_loadable
from streaming.pipeline.ordering import latest_per_key

if TYPE_CHECKING:
    from streaming.contracts.model import TableContract

log = logging.getLogger(__name__)

HUDI_DATASOURCE_CLASS = "org.apache.hudi.DefaultSource"


def hudi_bundle_available(spark: SparkSession) -> bool:
    """True when the Hudi Spark datasource can be loaded by this session's JVM."""
    return jvm_class_loadable(spark, HUDI_DATASOURCE_CLASS)


# The write-path warm-up's scratch tables (HudiSink.warm_up), a folder of the raw tables'
# own scratch folder: readers and the registry pass over `_` folders, and no change log
# (`<raw_table>_changes`) is named so.
WARM_UP_FOLDER = "hudi_warm_up"
WARM_UP_TABLE = "warm_up"

HudiWriter = Callable[[DataFrame, Mapping[str, str], str], None]
MetaSync = Callable[[SparkSession, Mapping[str, str], str], None]


class HudiSchemaError(ValueError):
    """A batch's columns cannot be written to the table without breaking its readers."""


def table_column_order(
    frame_columns: Sequence[str], table_columns: Sequence[str] | None, droppable: Collection[str] = ()
) -> list[str]:
    """The frame's columns, ordered so that the table's columns keep their places.

    Hudi's schema evolution on write accepts a new nullable column at the end of the
    schema, not one that shifts existing columns (hudi.apache.org/docs/schema_evolution:
    "Add a new nullable column and change the ordering of fields" is unsupported). A
    contract attribute added later lands before the partition and metadata columns of
    raw_schema, so it is moved to the end here. A table column the frame lacks is refused:
    removing a contract attribute is not an evolution the raw layer allows, but for one in
    `droppable` (nested too deep for hudi-rs to read the table, TimelineHead.too_deep),
    which the write then drops.
    """
    if table_columns is None:
        return list(frame_columns)
    missing = [name for name in table_columns if name not in frame_columns and name not in droppable]
    if missing:
        raise HudiSchemaError(
            f"the table has columns this batch lacks: {missing}; a contract attribute may be added, "
            "never removed or renamed (reprocess into a new table instead)"
        )
    kept = [name for name in table_columns if name in frame_columns]
    return [*kept, *(name for name in frame_columns if name not in table_columns)]


def use_hudi_hadoop_conf(spark: SparkSession) -> None:
    """Set HUDI_HADOOP_CONF on the session's Hadoop configuration, which Hudi's Parquet
    writers read (options.py says why): every runner's session gets it, also one this
    project did not build (Glue's, spark-submit's), before its first Hudi write."""
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in HUDI_HADOOP_CONF.items():
        hadoop_conf.set(key, value)


def save_with_hudi(df: DataFrame, options: Mapping[str, str], path: str) -> None:
    """The real write: Spark's Hudi datasource, appending a commit to the table at `path`."""
    df.write.format("hudi").options(**options).mode("append").save(path)


def run_meta_sync(spark: SparkSession, options: Mapping[str, str], path: str) -> None:
    """Sync the table at `path` to the catalog the way a Hudi write does after its commit.

    Mirrors HoodieSparkSqlWriter.metaSync of Hudi 1.0.x: each tool of meta_sync_tools runs
    through SyncUtilHelpers.runHoodieMetaSync(tool, props, conf, fs, basePath, fileFormat)
    with the write options as its properties, plus the two the writer adds: the Spark
    version the tool records and whether to list files through the metadata table.
    """
    jvm = spark.sparkContext._jvm
    properties = jvm.org.apache.hudi.common.config.TypedProperties()
    for key, value in options.items():
        properties.setProperty(key, value)
    properties.setProperty("hoodie.meta_sync.spark.version", spark.version)
    properties.setProperty("hoodie.meta.sync.metadata_file_listing", options.get("hoodie.metadata.enable", "false"))
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark._jsparkSession.sessionState().newHadoopConf())
    helpers = jvm.org.apache.hudi.sync.common.util.SyncUtilHelpers
    for tool in meta_sync_tools(options):
        helpers.runHoodieMetaSync(tool, properties, fs.getConf(), fs, path, "PARQUET")


class HudiSink:
    """Writes each table's changes to its Hudi change log and upserts its current state.

    `stream_id` identifies the streaming query (its checkpoint); without it a replayed
    batch cannot be recognised and its changes would be inserted twice, so the sink
    warns once. `writer`, `meta_sync` and `files` default to the Hudi datasource, Hudi's
    own sync tools and the session's Hadoop FileSystem.
    """

    capabilities = HUDI_CAPABILITIES

    def __init__(
        self,
        base_path: str,
        database: str,
        contracts: Mapping[str, TableContract],
        *,
        sync_mode: SyncMode = DEFAULT_SYNC_MODE,
        retain_hours: int = DEFAULT_RETAIN_HOURS,
        stream_id: str | None = None,
        extra_options: Mapping[str, str] | None = None,
        commit_interval_seconds: int = DEFAULT_COMMIT_INTERVAL_SECONDS,
        writer: HudiWriter = save_with_hudi,
        meta_sync: MetaSync = run_meta_sync,
        files: TableFiles | None = None,
    ) -> None:
        self.base_path = base_path.rstrip("/")
        self.database = database
        self.stream_id = stream_id or None
        self._writer = writer
        self._meta_sync = meta_sync
        self._files = files
        self._contracts = {contract.raw_table: contract for contract in contracts.values()}
        # A count given here is the one a table committed before counts were recorded used.
        self._buckets_given = NUM_BUCKETS_KEY in (extra_options or {})
        self._told_buckets: set[str] = set()
        common = dict(
            base_path=self.base_path,
            database=database,
            sync_mode=sync_mode,
            retain_hours=retain_hours,
            commit_interval_seconds=commit_interval_seconds,
            extra=extra_options,
        )
        self._change_log_options = {
            raw_table: change_log_write_options(contract, **common) for raw_table, contract in self._contracts.items()
        }
        self._current_state_options = {
            raw_table: current_state_write_options(contract, **common)
            for raw_table, contract in self._contracts.items()
        }
        if self.stream_id is None:
            log.warning(
                "HudiSink without stream_id: a replayed micro-batch cannot be recognised and would "
                "insert its changes into the change logs a second time"
            )

    def _known(self, raw_table: str) -> str:
        if raw_table not in self._contracts:
            raise KeyError(f"no table contract has raw_table {raw_table!r}")
        return raw_table

    def write(self, changes: DataFrame, contract: TableContract, batch_id: int, rows: int | None = None) -> None:
        """Land one batch of one table: its changes in the change log, its winners per key upserted.

        `changes` has the columns of change_log_schema(contract); `rows` is its row count
        when known. An empty batch writes nothing, so it adds no commit and no catalog sync.
        """
        raw_table = self._known(contract.raw_table)
        if (changes.isEmpty() if rows is None else rows == 0):
            return
        use_hudi_hadoop_conf(changes.sparkSession)
        current_state = latest_per_key(changes, contract).select(*raw_schema(contract).fieldNames())
        targets = (
            (contract.changes_table, self._change_log_options[raw_table], changes),
            (raw_table, self._current_state_options[raw_table], current_state),
        )
        for table, options, frame in targets:
            path = hudi_table_path(self.base_path, table)
            head = read_timeline_head(self._table_files(changes.sparkSession), path)
            frame = frame.select(*table_column_order(frame.columns, head.columns, head.too_deep))
            if table == raw_table:
                options = self._with_table_buckets(options, head, table)
            dropped = sorted(head.too_deep - set(frame.columns))
            if dropped:
                log.warning("hudi %s: dropping %s, nested deeper than hudi-rs reads; the contract no longer "
                            "declares them", table, dropped)
                options = {**options, DROP_COLUMNS_KEY: "true"}
            if self.stream_id is None:
                self._writer(frame, options, path)
                continue
            marker = batch_marker(self.stream_id, batch_id)
            if head.batch_marker == marker or (
                batch_id < 0 and holds_batch_marker(self._table_files(changes.sparkSession), path, marker)
            ):
                log.info("hudi %s: batch %s is already committed, not written again", table, marker)
                if meta_sync_tools(options):
                    # The commit may be all the crashed run achieved: sync it again (idempotent).
                    self._meta_sync(changes.sparkSession, options, path)
                continue
            log.debug("hudi write table=%s batch=%s", table, marker)
            self._writer(frame, {**options, **batch_marker_options(self.stream_id, batch_id)}, path)

    def _with_table_buckets(self, options: Mapping[str, str], head: TimelineHead, table: str) -> Mapping[str, str]:
        """The current state's options with the bucket count its existing files were written
        with: a key hashed with another count would land in a second file group."""
        configured = int(options[NUM_BUCKETS_KEY])
        count = buckets_for_table(configured, committed=head.committed, recorded=head.buckets_per_partition,
                                  explicit=self._buckets_given, newest_file_ids=head.newest_file_ids)
        if count == configured:
            return options
        if self._buckets_given and table not in self._told_buckets:
            self._told_buckets.add(table)
            log.warning("hudi %s: keeps the %s bucket(s) per partition it was created with, not the %s configured; "
                        "a new count needs a new table (lakehouse reprocess)", table, count, configured)
        return {**options, NUM_BUCKETS_KEY: str(count), BUCKETS_RECORD_KEY: str(count)}

    def _table_files(self, spark: SparkSession) -> TableFiles:
        if self._files is None:
            self._files = HadoopFiles(spark)
        return self._files

    def warm_up(self, spark: SparkSession) -> None:
        """Pay the first Hudi write's one-off cost before the stream's first batch: in a
        fresh JVM a table's first commit loads and compiles Hudi's write path (its write
        client, the embedded timeline server, the Avro and Parquet writers, the bucket
        index), several seconds that the first batch would otherwise wait on.

        One row shaped as the first contract's writes a change log (insert) and a current
        state (an upsert creating it, then one merging into it) under
        `<raw root>/_tmp/hudi_warm_up`, which is removed before (what a start killed in
        it left) and after. No raw table is created or touched, and nothing is synced to
        a catalog, so readers, the replay check and each table's bucket count see what
        they saw before.
        """
        contract = replace(next(iter(self._contracts.values())), raw_table=WARM_UP_TABLE)
        scratch = raw_layout.uri(self.base_path, raw_layout.TEMPORARY_FOLDER, WARM_UP_FOLDER)
        files = HadoopFiles(spark)
        files.delete(scratch)
        use_hudi_hadoop_conf(spark)
        schema = change_log_schema(contract)
        changes = spark.createDataFrame([_warm_up_row(schema)], schema)
        current_state = changes.select(*raw_schema(contract).fieldNames())
        try:
            self._writer(changes, change_log_write_options(contract, base_path=scratch, database=self.database,
                                                           sync_mode="none"),
                         hudi_table_path(scratch, contract.changes_table))
            options = current_state_write_options(contract, base_path=scratch, database=self.database, sync_mode="none")
            # The first upsert creates the file group, the second merges into it: the
            # path of every later batch, whose first use cost the second batch seconds.
            for _ in range(2):
                self._writer(current_state, options, hudi_table_path(scratch, contract.raw_table))
        finally:
            files.delete(scratch)


def _warm_up_row(schema: T.StructType) -> tuple[object, ...]:
    """A row Hudi accepts for `schema`: every text column (the keys, the partition, the
    ordering value, the ingest hour) a value, bytes (a binary key) too, the rest null."""
    values = {T.StringType(): "0", T.BinaryType(): b"0"}
    return tuple(values.get(field.dataType) for field in schema.fields)
