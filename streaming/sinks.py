"""Where decoded batches land: a local Parquet change log, Hudi, and the quarantine.

Each sink is a thin adapter with `write(df, raw_table, batch_id)`; the frames arrive
already shaped as raw rows by the pipeline. Paths go through Hadoop's FileSystem, so
the same code writes to a local folder or to an S3 prefix.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Literal, Protocol

from pyspark.sql import DataFrame, SparkSession

from streaming.hudi_options import SyncMode, hudi_table_path, hudi_write_options
from streaming.spark import hudi_bundle_available

if TYPE_CHECKING:
    from streaming.contract import TableContract

log = logging.getLogger(__name__)

SinkName = Literal["auto", "local", "hudi"]


class RawSink(Protocol):
    def write(self, df: DataFrame, raw_table: str, batch_id: int, rows: int | None = None) -> None:
        """Land `df` as this batch's rows of `raw_table`. `rows`: the row count of `df`
        when the caller knows it, which spares a Spark job to find out whether it is empty."""


def batch_folder(parent: str, batch_id: int) -> str:
    """The one folder a micro-batch owns: replaying the batch replaces exactly this."""
    return f"{parent.rstrip('/')}/_batch_id={batch_id}"


def _delete_path(spark: SparkSession, path: str) -> None:
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    filesystem = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if filesystem.exists(hadoop_path):
        filesystem.delete(hadoop_path, True)


def _is_empty(df: DataFrame, rows: int | None) -> bool:
    return df.isEmpty() if rows is None else rows == 0


def overwrite_batch_folder(df: DataFrame, folder: str, rows: int | None = None) -> bool:
    """Replace `folder` with the rows of `df`; an empty frame leaves no folder at all.

    Returns whether anything was written. Removing the folder of an empty replay matters:
    a first attempt of the batch may have written rows that the replay no longer has.
    """
    if _is_empty(df, rows):
        _delete_path(df.sparkSession, folder)
        return False
    df.write.mode("overwrite").parquet(folder)
    return True


class LocalParquetSink:
    """Append-only change log: `<root>/raw/<raw_table>/_batch_id=<n>/*.parquet`."""

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")

    def table_path(self, raw_table: str) -> str:
        return f"{self.root}/raw/{raw_table}"

    def write(self, df: DataFrame, raw_table: str, batch_id: int, rows: int | None = None) -> None:
        overwrite_batch_folder(df, batch_folder(self.table_path(raw_table), batch_id), rows)


class QuarantineWriter:
    """Bad records of every table: `<root>/quarantine/_batch_id=<n>/*.parquet`."""

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")

    @property
    def path(self) -> str:
        return f"{self.root}/quarantine"

    def write(self, df: DataFrame, batch_id: int, rows: int | None = None) -> None:
        overwrite_batch_folder(df, batch_folder(self.path, batch_id), rows)


OptionsBuilder = Callable[..., dict[str, str]]


class HudiSink:
    """Upserts each raw table into a Hudi table at `<base_path>/<raw_table>`.

    Replays are idempotent without batch folders: the record key is the DynamoDB key and
    the event-time payload keeps the greatest `_ordering_value` per key.
    """

    def __init__(
        self,
        base_path: str,
        database: str,
        contracts: Mapping[str, TableContract],
        *,
        sync_mode: SyncMode = "hms",
        cleaner_commits_retained: int = 10,
        extra_options: Mapping[str, str] | None = None,
        options_builder: OptionsBuilder = hudi_write_options,
    ) -> None:
        self.base_path = base_path.rstrip("/")
        self.database = database
        self._contracts = {contract.raw_table: contract for contract in contracts.values()}
        self._options = {
            raw_table: options_builder(
                contract,
                base_path=self.base_path,
                database=database,
                cleaner_commits_retained=cleaner_commits_retained,
                sync_mode=sync_mode,
                extra=extra_options,
            )
            for raw_table, contract in self._contracts.items()
        }

    def options_for(self, raw_table: str) -> dict[str, str]:
        try:
            return self._options[raw_table]
        except KeyError:
            raise KeyError(f"no table contract has raw_table {raw_table!r}") from None

    def write(self, df: DataFrame, raw_table: str, batch_id: int, rows: int | None = None) -> None:
        options = self.options_for(raw_table)
        # An empty upsert would still add a commit (and a catalog sync) for nothing.
        if _is_empty(df, rows):
            return
        log.debug("hudi upsert table=%s batch=%d", raw_table, batch_id)
        (
            df.write.format("hudi")
            .options(**options)
            .mode("append")
            .save(hudi_table_path(self.base_path, raw_table))
        )


def choose_sink(
    name: SinkName,
    spark: SparkSession,
    *,
    data_dir: str,
    contracts: Mapping[str, TableContract],
    database: str = "raw",
    sync_mode: SyncMode = "none",
) -> RawSink:
    """The raw sink for a local run: `auto` is Hudi when its bundle is on the classpath.

    Locally the Hudi tables go to `<data_dir>/raw/<raw_table>`, the same place the Parquet
    change log uses, so downstream paths do not depend on the sink.
    """
    if name not in ("auto", "local", "hudi"):
        raise ValueError(f"sink must be 'auto', 'local' or 'hudi', not {name!r}")
    bundle = hudi_bundle_available(spark)
    if name == "hudi" and not bundle:
        raise RuntimeError(
            "sink 'hudi' needs the Hudi Spark bundle on the classpath (org.apache.hudi.DefaultSource "
            "was not found); add it with --packages/--jars, or use --sink local"
        )
    if name == "hudi" or (name == "auto" and bundle):
        log.info("sink=hudi (%s)", "requested" if name == "hudi" else "auto: Hudi bundle found on the classpath")
        return HudiSink(f"{data_dir.rstrip('/')}/raw", database, contracts, sync_mode=sync_mode)
    log.info(
        "sink=local parquet change log (%s)",
        "requested" if name == "local" else "auto: no Hudi bundle on the classpath",
    )
    return LocalParquetSink(data_dir)
