"""Batch folders: one batch's rows of one table (or of the quarantine) as one folder,
`<parent>/[<column>=<value>/]_batch_id=<n>/`, written out of sight under the raw
folder's scratch and renamed into place once complete, so a reader never sees part of
a batch and a replay replaces exactly its own batch. Paths go through Hadoop's
FileSystem, so the same code writes to a local folder or to an S3 prefix.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from streaming.io import layout as raw_layout
from streaming.io.storage import HadoopFiles


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


def scratch_folder(parent: str, batch_id: int) -> str:
    """Where the batch's attempts under `parent` are written before their rename."""
    parent_name = parent.rsplit("/", 1)[-1]
    return f"{parent.rsplit('/', 1)[0]}/{raw_layout.TEMPORARY_FOLDER}/{parent_name}/{batch_id}"


def _new_scratch_folder(files: HadoopFiles, parent: str, batch_id: int) -> str:
    """A folder of its own for this attempt's files, under the batch's scratch, which is
    emptied first of whatever an attempt that died mid-write left (only this batch's)."""
    scratch = scratch_folder(parent, batch_id)
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
    files.delete(scratch_folder(staged.parent, staged.batch_id))


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
