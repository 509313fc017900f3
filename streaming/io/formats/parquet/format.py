"""The Parquet change log as a RawFormat (streaming/io/formats/raw_format.py): per DynamoDB
table one change log of batch folders; its current state is derived by its readers
(latest row per key), not stored. Read with DuckDB."""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from streaming.io import layout as raw_layout
from streaming.io.duckdb_files import duckdb_glob_literal, sql_string
from streaming.io.formats.parquet import PARQUET_CAPABILITIES
from streaming.io.formats.raw_format import (
    DbtInputs,
    JobSinkSettings,
    MavenJar,
    RawReadRefused,
    RawTableCounts,
    Report,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streaming.contracts.model import TableContract
    from streaming.pipeline.batch import RawSink

log = logging.getLogger(__name__)


class ParquetFormat:
    name = "parquet"
    title = "Parquet"
    capabilities = PARQUET_CAPABILITIES
    # Spark writes and reads Parquet itself: no jar, no setting, nothing to keep quiet.
    jars: tuple[MavenJar, ...] = ()
    jvm_log_levels: dict[str, str] = {}
    expected_jvm_warnings: tuple[str, ...] = ()

    def spark_settings(self) -> dict[str, str]:
        return {}

    def sink(
        self, spark: SparkSession, *, data_dir: str, contracts: Mapping[str, TableContract], database: str,
        stream_id: str | None, metastore_uri: str | None,
    ) -> RawSink:
        """The change log under `<data_dir>/raw/`; it keeps no commits, so none is synced
        to a catalog, and `metastore_uri` is refused."""
        from streaming.io.formats.parquet.sink import LocalParquetSink

        if metastore_uri:
            raise RuntimeError(f"only Hudi tables are synced to a catalog ({metastore_uri}); the raw tables "
                               f"here are a Parquet change log: drop the catalog, or rebuild them with "
                               f"`lakehouse reprocess --sink hudi`")
        log.info("sink=parquet change log")
        return LocalParquetSink(data_dir)

    def job_sink(
        self, spark: SparkSession, settings: JobSinkSettings, contracts: Mapping[str, TableContract], stream_id: str,
    ) -> RawSink:
        """Refused: the AWS job's tables are synced to the Glue Data Catalog after each
        commit, and a Parquet change log keeps no commits (the job writes Hudi, DESIGN.md)."""
        raise RuntimeError(f"the AWS job writes tables it syncs to a catalog; {settings.raw_root} would get a "
                           "Parquet change log, which keeps no commits to sync: give the job a format with commits")

    def require_jars(self, spark: SparkSession, *, glue_job: bool = False) -> None:
        """Nothing to check: Spark writes Parquet itself."""

    def is_table(self, folder: Path) -> bool:
        return any(folder.glob(raw_layout.BATCH_FOLDER_GLOB))

    def register(self, connection: object, name: str, table_dir: Path) -> bool:
        files = raw_layout.change_log_files(table_dir)
        if not files:
            return False
        listed = ", ".join(sql_string(duckdb_glob_literal(path)) for path in files)
        connection.execute(  # type: ignore[attr-defined]
            f'create or replace temporary view "{name}" as select * from read_parquet([{listed}], '
            "hive_partitioning = false)"
        )
        return True

    def current_state(self, connection: object, table_dir: Path, alias: str) -> str | None:
        files = raw_layout.change_log_files(table_dir)
        if not files:
            return None
        listed = ", ".join(sql_string(duckdb_glob_literal(path)) for path in files)
        # The column is inside the files too, so the folder names are not parsed again.
        return f"read_parquet([{listed}], union_by_name = true, hive_partitioning = false)"

    def count(self, connection: object, raw_dir: Path, contract: TableContract) -> RawTableCounts:
        """The change log counted with DuckDB: its rows, its distinct keys (the rows of its
        current state) and its batch folders; its live items only for an unrouted table."""
        files = raw_layout.change_log_files(raw_layout.change_log_dir(raw_dir, contract))
        change_rows, current_rows = _count_rows_and_keys(connection, files, contract.key_columns)
        live_items = _count_live_items(connection, files, contract.key_columns) if contract.unrouted else 0
        return RawTableCounts(change_rows, current_rows, len({path.parent for path in files}), live_items)

    def batch_ids(self, table_dir: Path) -> set[int]:
        return raw_layout.batch_ids(table_dir)

    def dbt_inputs(
        self, data_dir: Path, raw_dir: Path, raw_as_of: str | None, prepare: Callable[[], None], report: Report,
    ) -> DbtInputs:
        """Nothing to load: dbt reads the change log's files as they are."""
        if raw_as_of is not None:
            raise RawReadRefused(f"--raw-as-of reads Hudi raw tables as of a commit; {raw_dir} holds none "
                                 "(a Parquet change log keeps no commits to go back to)")
        return DbtInputs()


def _count_rows_and_keys(connection: object, files: list[Path], key_columns: Sequence[str]) -> tuple[int, int]:
    """Rows of a change log, and its distinct keys: the rows of its current state."""
    if not files:
        return 0, 0
    keys = ", ".join(f'"{column}"' for column in key_columns)
    rows, distinct_keys = connection.execute(  # type: ignore[attr-defined]
        f"select count(*), count(distinct ({keys})) from read_parquet(?)", [[duckdb_glob_literal(path) for path in files]]
    ).fetchone()
    return int(rows), int(distinct_keys)


def _count_live_items(connection: object, files: list[Path], key_columns: Sequence[str]) -> int:
    """Keys of a change log whose latest change (greatest `_ordering_value`) is no tombstone."""
    if not files:
        return 0
    keys = ", ".join(f'"{column}"' for column in key_columns)
    (items,) = connection.execute(  # type: ignore[attr-defined]
        f"select count(*) from (select _is_deleted from read_parquet(?) qualify row_number() over "
        f"(partition by {keys} order by _ordering_value desc) = 1) where not _is_deleted",
        [[duckdb_glob_literal(path) for path in files]],
    ).fetchone()
    return int(items)


PARQUET = ParquetFormat()
