"""The raw change log as plain Parquet batch folders, a local alternative to Hudi."""
from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession

from streaming.contracts.model import INGEST_HOUR_COLUMN
from streaming.io import layout as raw_layout
from streaming.io.batch_folders import StagedBatch, publish_batch, replace_batch_folder, scratch_folder, stage_batch
from streaming.io.formats.parquet import PARQUET_CAPABILITIES
from streaming.io.storage import HadoopFiles

if TYPE_CHECKING:
    from streaming.contracts.model import TableContract


class LocalParquetSink:
    """The change log as Parquet: `<root>/raw/<raw_table>_changes/_ingest_hour=<h>/_batch_id=<n>/`.

    Writes every distinct change; the current state per key is derived by readers (dbt's
    DuckDB view `raw.<raw_table>`, `lakehouse status`), not stored.
    """

    capabilities = PARQUET_CAPABILITIES

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
        HadoopFiles(spark).delete(scratch_folder(staged.parent, staged.batch_id))
