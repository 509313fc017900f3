"""Where decoded batches land: a local Parquet change log, Hudi, and the quarantine.

Each sink is a thin adapter with `write(changes, contract, batch_id)`; the frames arrive
already shaped as change-log rows by the pipeline. Paths go through Hadoop's FileSystem,
so the same code writes to a local folder or to an S3 prefix.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pyspark.sql import DataFrame, SparkSession

from streaming.contracts.model import INGEST_HOUR_COLUMN
from streaming.io import layout as raw_layout
from streaming.io.hudi_options import SyncMode
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


def replace_batch_folder(
    df: DataFrame, parent: str, batch_id: int, rows: int | None = None, *, partition_column: str | None = None
) -> bool:
    """Make `df` the one folder of batch `batch_id` under `parent`, or no folder when empty.

    With `partition_column` (one value per batch) the folder is
    `<parent>/<column>=<value>/_batch_id=<n>`, else `<parent>/_batch_id=<n>`. The rows are
    written under `<parent's parent>/_tmp/` first and renamed into place once complete,
    so a reader never sees part of a batch. Whatever an earlier attempt of the batch left
    (also under another partition value, e.g. a replay after the hour turned) is removed
    first: a replay replaces exactly its own batch. Returns whether anything was written.
    """
    parent = parent.rstrip("/")
    parent_name = parent.rsplit("/", 1)[-1]
    scratch = f"{parent.rsplit('/', 1)[0]}/{raw_layout.TEMPORARY_FOLDER}/{parent_name}/{batch_id}"
    files = HadoopFiles(df.sparkSession)
    # Left by an attempt that died mid-write; only this batch's own scratch is touched.
    files.delete(scratch)
    written = not _is_empty(df, rows)
    if written:
        staged = f"{scratch}/{uuid.uuid4().hex}"
        writer = df.write.mode("error")
        if partition_column:
            writer = writer.partitionBy(partition_column)
        writer.parquet(staged)
        if partition_column:
            (written_partition,) = files.glob_in(staged, f"{partition_column}=*")
            staged, target = written_partition, f"{parent}/{written_partition.rsplit('/', 1)[-1]}"
        else:
            target = parent
        target = f"{target}/{raw_layout.batch_folder(batch_id)}"
    earlier = files.glob_in(parent, f"*/{raw_layout.batch_folder(batch_id)}" if partition_column else
                            raw_layout.batch_folder(batch_id))
    for folder in earlier:
        files.delete(folder)
    if written:
        files.move(staged, target)
    files.delete(scratch)
    return written


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
    from streaming.io.hudi_sink import HudiSink, hudi_bundle_available

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
