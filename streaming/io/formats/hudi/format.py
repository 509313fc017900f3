"""Hudi as a RawFormat (streaming/io/formats/raw_format.py): per DynamoDB table a change
log and a current-state table, each with its own timeline. Its readers use hudi-rs
(lakehouse_dbt.hudi_raw, as dbt does) and the timeline read as files: no Spark."""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from streaming.io import layout as raw_layout
from streaming.io.formats.hudi import HUDI_CAPABILITIES
from streaming.io.formats.hudi.options import HIVE_METASTORE_URIS_KEY, HUDI_HADOOP_CONF
from streaming.io.formats.raw_format import (
    DbtInputs,
    JobSinkSettings,
    MavenJar,
    MissingFormatJars,
    RawReadRefused,
    RawTableCounts,
    Report,
    UnreadableRawTable,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from streaming.contracts.model import TableContract
    from streaming.pipeline.batch import RawSink

log = logging.getLogger(__name__)

# The Hudi version AWS Glue 5.1 ships, built for Spark 3.5 and Scala 2.12 (pyspark 3.5.6).
HUDI_SPARK_BUNDLE = MavenJar(
    "org.apache.hudi", "hudi-spark3.5-bundle_2.12", "1.0.2",
    "2c2ab65a11e91265e4b7346f954448c46df52d66fb72f52dad83767b621deae8",
)

# Spark settings Hudi needs before the JVM starts: Kryo with Hudi's registrator
# (hudi.apache.org/docs/quick-start-guide). Its quick start also sets the SQL extension
# (HoodieSparkSessionExtension) and catalog (HoodieCatalog), which only Spark SQL on Hudi
# tables (CREATE TABLE ... USING hudi, MERGE INTO, CALL) uses; the job writes and reads
# through the DataFrame API and the Glue job does not set them either (deploy/job_arguments.py).
# Set, they made every micro-batch about 1.6 times as long, Parquet sink included: their
# analyzer rules run over each of the job's plans (docs/performance.md).
HUDI_SPARK_CONF = {
    "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
    "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
}

# Hudi 1.0.2 logs this for each setting of table version 8 it meets when it loads a
# table's properties: three lines for every commit (36 in a demo's first micro-batch).
# The raw tables are version 6 by design (docs/decisions.md), so each such setting is
# meant to be ignored. Matched on the message before its values are filled in, so that
# every other warning, Hudi's included, still shows.
EXPECTED_TABLE_VERSION_WARNING = (
    r"Table version \{\} is lower than or equal to config's first version \{\}\. Config \{\} will be ignored\."
)


class HudiFormat:
    name = "hudi"
    title = "Hudi"
    capabilities = HUDI_CAPABILITIES
    jars = (HUDI_SPARK_BUNDLE,)
    jvm_log_levels = {
        # Hudi's writers log a failed task's error with its whole stack again (a full disk:
        # hundreds of lines before the one that names it); the command prints it once.
        "org.apache.hudi.table.action.commit.BaseSparkCommitActionExecutor": "OFF",
        "org.apache.hudi.common.util.queue.SimpleExecutor": "OFF",
        # Each task writing into a partition folder first saves the folder's
        # .hoodie_partition_metadata (HoodiePartitionMetadata.trySave: if it does not exist,
        # create it without overwrite, through a RetryHelper). When two tasks make one new
        # folder, the second's create meets the first's file: FileAlreadyExistsException,
        # which RetryHelper logs as a WARN with its whole stack before retrying a second
        # later, and the retry finds the file and stops. Both write the same two
        # properties (the commit time and the folder's depth), so nothing is lost. Hudi's
        # other RetryHelper users (timeline server calls, instant time locks) retry the same
        # way; a retry that fails for good is still logged, at ERROR, and its exception
        # fails the write.
        "org.apache.hudi.common.util.RetryHelper": "ERROR",
    }
    expected_jvm_warnings = (EXPECTED_TABLE_VERSION_WARNING,)

    def spark_settings(self) -> dict[str, str]:
        """HUDI_SPARK_CONF, and HUDI_HADOOP_CONF from the session's start (the sink sets
        it again on sessions not built here, before its first write)."""
        return {**HUDI_SPARK_CONF, **{f"spark.hadoop.{key}": value for key, value in HUDI_HADOOP_CONF.items()}}

    def sink(
        self, spark: SparkSession, *, data_dir: str, contracts: Mapping[str, TableContract], database: str,
        stream_id: str | None, metastore_uri: str | None,
    ) -> RawSink:
        """The Hudi tables under `<data_dir>/raw/`. With `metastore_uri` (`thrift://host:port`)
        each table is synced to that Hive metastore after each commit as `database`.<table>,
        the Glue job's sync_mode "hms"; without it nothing is synced."""
        from streaming.io.formats.hudi.sink import HudiSink
        from streaming.io.hive_metastore import create_database

        self.require_jars(spark)
        log.info("sink=hudi")
        if metastore_uri:
            create_database(spark, metastore_uri, database)
        # Hudi makes a Hadoop URI of its base path, and a relative one ("file:data/raw") is
        # refused; so a local folder such as the default ./data is made absolute.
        root = data_dir if "://" in data_dir else str(Path(data_dir).resolve())
        return HudiSink(raw_layout.uri(root, raw_layout.RAW_FOLDER), database, contracts,
                        sync_mode="hms" if metastore_uri else "none", stream_id=stream_id,
                        extra_options={HIVE_METASTORE_URIS_KEY: metastore_uri} if metastore_uri else None)

    def job_sink(
        self, spark: SparkSession, settings: JobSinkSettings, contracts: Mapping[str, TableContract], stream_id: str,
    ) -> RawSink:
        """The Hudi tables under the job's S3 root, synced to the catalog as its
        --sync_mode says, the cleaner keeping --retain_hours of replaced file versions."""
        from streaming.io.formats.hudi.sink import HudiSink

        # The options refuse a sync mode that is none of SYNC_MODES (HudiOptionsError).
        return HudiSink(settings.raw_root, settings.database, contracts, sync_mode=settings.sync_mode,  # type: ignore[arg-type]
                        retain_hours=settings.retain_hours, stream_id=stream_id,
                        commit_interval_seconds=settings.commit_interval_seconds)

    def require_jars(self, spark: SparkSession, *, glue_job: bool = False) -> None:
        from streaming.io.formats.hudi.sink import HUDI_DATASOURCE_CLASS, hudi_bundle_available

        if hudi_bundle_available(spark):
            return
        # Glue 5.1 puts its built-in Hudi 1.0.2 on a job's classpath for this job parameter
        # (deploy/job_arguments.py passes it).
        how = ("add the job parameter --datalake-formats hudi" if glue_job else
               "`make venv` fetches it (python -m streaming.runtime.jars fetch); on a cluster add it with "
               "--packages or --jars; or write the Parquet change log with --sink parquet")
        raise MissingFormatJars(f"the Hudi sink needs the Hudi Spark bundle ({HUDI_DATASOURCE_CLASS} was not found): "
                                f"{how}")

    def is_table(self, folder: Path) -> bool:
        return (folder / raw_layout.HUDI_TIMELINE_FOLDER).is_dir()

    def register(self, connection: object, name: str, table_dir: Path) -> bool:
        snapshot = _snapshot(str(table_dir))
        if snapshot is None:
            return False
        connection.register(name, snapshot)  # type: ignore[attr-defined]
        return True

    def current_state(self, connection: object, table_dir: Path, alias: str) -> str | None:
        snapshot = _snapshot(str(table_dir.resolve()))
        if snapshot is None:
            return None  # its first commit has not completed: no rows yet
        view = f"{alias}_hudi_{table_dir.name}"
        connection.register(view, snapshot)  # type: ignore[attr-defined]
        return '"' + view.replace('"', '""') + '"'

    def count(self, connection: object, raw_dir: Path, contract: TableContract) -> RawTableCounts:
        """The change log and the current-state table, read with hudi-rs: each holds what
        its own commits wrote (the current state is stored, not derived), and its batches
        are its commits carrying a batch marker. A table not created yet, or whose first
        commit has not completed, counts nothing."""
        from lakehouse_dbt.hudi_raw import REPAIR_UNREADABLE, UnreadableHudiTable, read_hudi_snapshot
        from streaming.io.formats.hudi.timeline import HudiCommit, HudiTimelineError, LocalFiles, table_commits

        tombstones: dict[str, list[bool]] = {}
        commits: dict[str, tuple[HudiCommit, ...]] = {}
        try:
            for table in (contract.changes_table, contract.raw_table):
                path = raw_dir / table
                if self.is_table(path):
                    # One small column is all the counts need.
                    snapshot = read_hudi_snapshot(str(path.resolve()), columns=["_is_deleted"])
                    commits[table] = tuple(table_commits(LocalFiles(), str(path)))
                    if snapshot is not None:
                        tombstones[table] = snapshot.column("_is_deleted").to_pylist()
        except UnreadableHudiTable as exc:
            raise UnreadableRawTable(str(exc)) from exc
        except HudiTimelineError as exc:
            raise UnreadableRawTable(f"{exc}; {REPAIR_UNREADABLE}") from exc
        changes = tombstones.get(contract.changes_table, [])
        current = tombstones.get(contract.raw_table, [])
        batches = sum(commit.batch_marker is not None for commit in commits.get(contract.changes_table, ()))
        return RawTableCounts(len(changes), len(current), batches, current.count(False), dict(commits))

    def batch_ids(self, table_dir: Path) -> set[int]:
        """The batch markers of the change log's completed commits (those of the active
        timeline, which always keeps the newest commits)."""
        from streaming.io.formats.hudi.timeline import LocalFiles, table_commits

        markers = (commit.batch_marker for commit in table_commits(LocalFiles(), str(table_dir)))
        return {int(marker.rsplit(":", 1)[1]) for marker in markers if marker}

    def dbt_inputs(
        self, data_dir: Path, raw_dir: Path, raw_as_of: str | None, prepare: Callable[[], None], report: Report,
    ) -> DbtInputs:
        """The tables loaded with hudi-rs into DuckDB's raw_hudi schema, each as of
        `raw_as_of` when given, and dbt run with raw_format=hudi. A table hudi-rs cannot
        read is reported and left out, so that its models fail by name while every other
        table builds; one whose first commit has not completed reads as empty."""
        from lakehouse_dbt.hudi_raw import check_instant, load_hudi_tables

        if raw_as_of is not None:
            try:
                check_instant(raw_as_of)
            except ValueError as exc:
                raise RawReadRefused(f"--raw-as-of: {exc}") from exc
        prepare()
        tables = {name: str(path.resolve()) for name, path in self.tables_in(raw_dir).items()}
        loaded = load_hudi_tables(data_dir, tables, raw_as_of)
        for name in loaded.uncommitted:
            report(f"raw table {name}: no commit of it has completed yet (its first write is in flight, or was "
                   "stopped in it): read as empty")
        for name, problem in loaded.unreadable.items():
            report(f"raw table {name} is left out, its dbt models fail and the other tables build: {problem}")
        return DbtInputs({"raw_format": self.name}, tuple(loaded.unreadable))

    def tables_in(self, raw_dir: Path) -> dict[str, Path]:
        """The Hudi tables of a local raw folder by name (`<t>_changes` and `<t>`); the
        ledger, staging and contract folders (`_...`) are none."""
        if not raw_dir.is_dir():
            return {}
        return {folder.name: folder for folder in sorted(raw_dir.iterdir())
                if not folder.name.startswith("_") and self.is_table(folder)}


def _snapshot(base_uri: str) -> pa.Table | None:
    """The table's latest snapshot read with hudi-rs; UnreadableRawTable, its message
    hudi-rs's reason and what to do, when hudi-rs cannot read it."""
    from lakehouse_dbt.hudi_raw import UnreadableHudiTable, read_hudi_snapshot

    try:
        return read_hudi_snapshot(base_uri)
    except UnreadableHudiTable as exc:
        raise UnreadableRawTable(str(exc)) from exc


HUDI = HudiFormat()
