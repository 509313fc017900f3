"""Where decoded batches land: a local Parquet change log, Hudi, and the quarantine.

Each sink is a thin adapter with `write(changes, contract, batch_id)`; the frames arrive
already shaped as change-log rows by the pipeline. Paths go through Hadoop's FileSystem,
so the same code writes to a local folder or to an S3 prefix.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pyspark.sql import DataFrame, SparkSession

from streaming.contracts.model import INGEST_HOUR_COLUMN
from streaming.io import layout as raw_layout
from streaming.io.formats.hudi.options import SyncMode
from streaming.io.storage import HadoopFiles

if TYPE_CHECKING:
    from streaming.contracts.model import TableContract
    from streaming.pipeline.batch import RawSink

log = logging.getLogger(__name__)

SinkName = Literal["hudi", "parquet"]
SINK_NAMES: tuple[SinkName, ...] = ("hudi", "parquet")
# The production format is the local default too (DESIGN.md); Parquet is named explicitly.
DEFAULT_SINK: SinkName = "hudi"


def _is_empty(df: DataFrame, rows: int | None) -> bool:
    return df.isEmpty() if rows is None else rows == 0


@dataclass(frozen=True)
class StagedBatch:
    """One batch of one folder's rows, written under the scratch folder and not yet
    visible: `publish_batch` renames it into place. `folder` is None for a batch
    without rows (publishing it only removes what an earlier attempt left);
    `partition` is the `<column>=<value>` folder it goes under, if the parent has one."""

    parent: str
    batch_id: int
    folder: str | None
    partition: str | None = None


def _scratch(parent: str, batch_id: int) -> str:
    parent_name = parent.rsplit("/", 1)[-1]
    return f"{parent.rsplit('/', 1)[0]}/{raw_layout.TEMPORARY_FOLDER}/{parent_name}/{batch_id}"


def _new_scratch_folder(files: HadoopFiles, parent: str, batch_id: int) -> str:
    """A folder of its own for this attempt's files, under the batch's scratch, which is
    emptied first of whatever an attempt that died mid-write left (only this batch's)."""
    scratch = _scratch(parent, batch_id)
    files.delete(scratch)
    return f"{scratch}/{uuid.uuid4().hex}"


def stage_batch(
    df: DataFrame, parent: str, batch_id: int, *, partition: tuple[str, str] | None = None
) -> StagedBatch:
    """Write `df` under `<parent's parent>/_tmp/`, where no reader looks.

    With `partition` (a column and the one value it has in this batch) the column is
    left out of the files and the folder goes under `<column>=<value>/`, as Spark's
    `partitionBy` would place it; naming the folder directly spares the full sort by
    the partition column that `partitionBy` puts before every write.
    """
    parent = parent.rstrip("/")
    folder = _new_scratch_folder(HadoopFiles(df.sparkSession), parent, batch_id)
    if partition is None:
        df.write.mode("error").parquet(folder)
        return StagedBatch(parent, batch_id, folder)
    column, value = partition
    df.drop(column).write.mode("error").parquet(folder)
    return StagedBatch(parent, batch_id, folder, f"{column}={value}")


def publish_batch(spark: SparkSession, staged: StagedBatch, *, partitioned: bool) -> None:
    """Make a staged batch the one folder of its batch id under its parent.

    Whatever an earlier attempt of the batch left (also under another partition value,
    e.g. a replay after the hour turned) is removed first: a replay replaces exactly its
    own batch. `partitioned` says whether the parent's batch folders sit under
    `<column>=<value>/` folders.
    """
    files = HadoopFiles(spark)
    batch = raw_layout.batch_folder(staged.batch_id)
    for folder in files.glob_in(staged.parent, f"*/{batch}" if partitioned else batch):
        files.delete(folder)
    if staged.folder is not None:
        place = f"{staged.parent}/{staged.partition}" if staged.partition else staged.parent
        files.move(staged.folder, f"{place}/{batch}")
    files.delete(_scratch(staged.parent, staged.batch_id))


def replace_batch_folder(
    df: DataFrame, parent: str, batch_id: int, rows: int | None = None, *, partition_column: str | None = None
) -> bool:
    """Make `df` the one folder of batch `batch_id` under `parent`, or no folder when empty.

    With `partition_column` (one value per batch, not known to the caller) the folder is
    `<parent>/<column>=<value>/_batch_id=<n>`, else `<parent>/_batch_id=<n>`. The rows are
    staged first and renamed into place once complete (stage_batch, publish_batch), so a
    reader never sees part of a batch. Returns whether anything was written.
    """
    parent = parent.rstrip("/")
    spark = df.sparkSession
    if _is_empty(df, rows):
        publish_batch(spark, StagedBatch(parent, batch_id, None), partitioned=partition_column is not None)
        return False
    if partition_column is None:
        publish_batch(spark, stage_batch(df, parent, batch_id), partitioned=False)
        return True
    files = HadoopFiles(spark)
    written = _new_scratch_folder(files, parent, batch_id)
    df.write.mode("error").partitionBy(partition_column).parquet(written)
    (folder,) = files.glob_in(written, f"{partition_column}=*")
    publish_batch(spark, StagedBatch(parent, batch_id, folder, folder.rsplit("/", 1)[-1]), partitioned=True)
    return True


class LocalParquetSink:
    """The change log as Parquet: `<root>/raw/<raw_table>_changes/_ingest_hour=<h>/_batch_id=<n>/`.

    Writes every distinct change; the current state per key is derived by readers (dbt's
    DuckDB view `raw.<raw_table>`, `lakehouse status`), not stored.
    """

    # One Parquet write per table reads the changes once: the pipeline need not cache them.
    reads_changes_once = True
    # Each table's batch is staged in its own scratch folder and renamed into place.
    writes_tables_concurrently = True

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")

    def table_path(self, contract: TableContract) -> str:
        return raw_layout.uri(self.root, raw_layout.RAW_FOLDER, contract.changes_table)

    def write(self, changes: DataFrame, contract: TableContract, batch_id: int, rows: int | None = None) -> None:
        replace_batch_folder(
            changes, self.table_path(contract), batch_id, rows, partition_column=INGEST_HOUR_COLUMN
        )

    def stage(
        self, changes: DataFrame | None, contract: TableContract, batch_id: int, ingest_hour: str
    ) -> StagedBatch:
        """Write one table's changes of the batch where no reader sees them (None: the
        table has none); `publish` then puts it in place. `ingest_hour` is the value of
        the batch's `_ingest_hour` column, the folder the rows go under."""
        parent = self.table_path(contract)
        if changes is None:
            return StagedBatch(parent, batch_id, None)
        return stage_batch(changes, parent, batch_id, partition=(INGEST_HOUR_COLUMN, ingest_hour))

    def publish(self, spark: SparkSession, staged: StagedBatch) -> None:
        publish_batch(spark, staged, partitioned=True)

    def discard(self, spark: SparkSession, staged: StagedBatch) -> None:
        HadoopFiles(spark).delete(_scratch(staged.parent, staged.batch_id))


class QuarantineWriter:
    """Bad records of every table: `<root>/quarantine/_batch_id=<n>/*.parquet`."""

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")

    @property
    def path(self) -> str:
        return raw_layout.uri(self.root, raw_layout.QUARANTINE_FOLDER)

    def write(self, df: DataFrame, batch_id: int, rows: int | None = None) -> None:
        replace_batch_folder(df, self.path, batch_id, rows)


def choose_sink(
    name: SinkName | None,
    spark: SparkSession,
    *,
    data_dir: str,
    contracts: Mapping[str, TableContract],
    database: str = "raw",
    sync_mode: SyncMode = "none",
    stream_id: str | None = None,
) -> RawSink:
    """The raw sink for a local run: `hudi` (the production format) or `parquet`; None
    means the format of the raw tables already there, else `hudi`.

    Locally the Hudi tables go under `<data_dir>/raw/`, where the Parquet change log goes,
    so downstream paths do not depend on the sink. A data directory whose raw tables are
    in the other format is refused, never mixed. `stream_id` names the streaming query
    (its checkpoint), which the Hudi sink records with each commit.
    """
    if name is not None and name not in SINK_NAMES:
        raise ValueError(f"sink must be one of {', '.join(SINK_NAMES)}, not {name!r}")
    on_disk = raw_layout.local_raw_format(Path(data_dir) / raw_layout.RAW_FOLDER)
    name = name or on_disk or DEFAULT_SINK
    if on_disk is not None and on_disk != name:
        raise RuntimeError(
            f"the raw tables under {raw_layout.uri(data_dir, raw_layout.RAW_FOLDER)} are {on_disk} tables; "
            f"write them with --sink {on_disk}, or rebuild them as {name} with `lakehouse reprocess --sink {name}`"
        )
    if name == "parquet":
        log.info("sink=parquet change log")
        return LocalParquetSink(data_dir)
    from streaming.io.formats.hudi.sink import HudiSink, hudi_bundle_available

    if not hudi_bundle_available(spark):
        raise RuntimeError(
            "the Hudi sink needs the Hudi Spark bundle (org.apache.hudi.DefaultSource was not found): "
            "`make venv` fetches it (python -m streaming.runtime.jars fetch); on a cluster add it with "
            "--packages or --jars; or write the Parquet change log with --sink parquet"
        )
    log.info("sink=hudi")
    # Hudi makes a Hadoop URI of its base path, and a relative one ("file:data/raw") is
    # refused; so a local folder such as the default ./data is made absolute.
    root = data_dir if "://" in data_dir else str(Path(data_dir).resolve())
    return HudiSink(raw_layout.uri(root, raw_layout.RAW_FOLDER), database, contracts, sync_mode=sync_mode,
                    stream_id=stream_id)
