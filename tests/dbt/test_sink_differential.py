"""The sink differential: the same landing files through the Parquet sink and through the
Hudi sink must give the same raw rows and the same dbt tables, cell for cell.

The landing files are the generator's full mix (both AWS record formats, duplicates,
records out of order, deletes, TTL deletes, malformed records, and the single-table
`app` design with unrouted kinds), and orders holding the values that once stopped the
Hudi sink (VALUE_SHAPES). The Hudi side is read three ways: by Spark's Hudi datasource,
by hudi-rs (as dbt reads it locally), and by dbt. Only the columns that say when a batch
was written (`_ingested_at`, and the `_ingest_hour` derived from it) may differ between
the two runs; every other value must be equal.
"""
from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from dbt_tables import TABLES
from value_shapes import VALUE_SHAPES, write_value_shapes

from lakehouse_dbt.hudi_raw import read_hudi_snapshot
from streaming.contracts.loader import load_contracts
from streaming.contracts.model import INGEST_HOUR_COLUMN
from streaming.contracts.spark_schema import change_log_schema, raw_schema
from streaming.io import layout as raw_layout
from streaming.io.layout import DataLayout
from streaming.operations.stream import stream
from streaming.runtime.dbt_runner import run_dbt_command
from streaming.samples.generator import write_landing_files

WRITE_TIME_COLUMNS = ("_ingested_at", INGEST_HOUR_COLUMN)
# The app design's mart, built from the `app` entities' staging models.
APP_TABLES = (
    "lakehouse_staging.stg_dynamodb__app_tenants",
    "lakehouse_staging.stg_dynamodb__app_users",
    "lakehouse_staging.stg_dynamodb__app_invoices",
    "lakehouse_marts.agg_daily_invoiced_amount_by_tenant",
)


@pytest.fixture(scope="module")
def both_sinks(hudi_spark, tmp_path_factory) -> dict[str, Path]:
    """One generated landing, streamed once per sink."""
    roots = {}
    for sink in ("parquet", "hudi"):
        layout = DataLayout(tmp_path_factory.mktemp(f"differential_{sink}") / "data")
        write_landing_files(layout.landing, customers=12, tenants=2, seed=11, record_format="mixed")
        write_value_shapes(layout.landing)
        stream(layout, sink=sink, spark=hudi_spark, out=lambda _: None)
        roots[sink] = layout.root
    return roots


@pytest.fixture(scope="module")
def both_built(both_sinks) -> dict[str, Path]:
    """The compared tables and what they are built from; dbt's tests run elsewhere."""
    compared = " ".join("+" + table.split(".")[1] for table in (*TABLES, *APP_TABLES))
    window = _event_days(both_sinks["parquet"])
    for root in both_sinks.values():
        run_dbt_command(root, ["build", "--select", compared, "--exclude-resource-type", "test", "unit_test", *window])
    return both_sinks


def _event_days(root: Path) -> list[str]:
    """The event-time range (end exclusive) of the landed changes. Without it the daily
    microbatch mart would run one batch per day from the deployment's activity_begin
    (2024-03-01, tests/dbt/conftest.py) to today: a thousand batches, a minute a build."""
    files = [str(path) for contract in load_contracts().values()
             for path in raw_layout.change_log_files(raw_layout.change_log_dir(root / "raw", contract))]
    with duckdb.connect() as con:
        first, last = con.execute("select min(_event_ts)::date, max(_event_ts)::date "
                                  "from read_parquet(?, union_by_name = true)", [files]).fetchone()
    return ["--event-time-start", first.isoformat(), "--event-time-end", (last + timedelta(days=1)).isoformat()]


def compared_columns(contract) -> list[str]:
    return [name for name in change_log_schema(contract).fieldNames() if name not in WRITE_TIME_COLUMNS]


def parquet_change_log(root: Path, contract) -> list[tuple]:
    files = raw_layout.change_log_files(raw_layout.change_log_dir(root / "raw", contract))
    if not files:
        return []
    columns = ", ".join(f'"{name}"' for name in compared_columns(contract))
    with duckdb.connect() as con:
        return con.execute(f"select {columns} from read_parquet(?, union_by_name = true) order by all",
                           [[str(path) for path in files]]).fetchall()


def parquet_current_state(root: Path, contract) -> list[tuple]:
    """What the Parquet sink's readers derive: per key the change with the greatest ordering value."""
    files = raw_layout.change_log_files(raw_layout.change_log_dir(root / "raw", contract))
    if not files:
        return []
    columns = ", ".join(f'"{name}"' for name in raw_schema(contract).fieldNames() if name not in WRITE_TIME_COLUMNS)
    keys = ", ".join(f'"{name}"' for name in contract.key_columns)
    with duckdb.connect() as con:
        return con.execute(
            f"select {columns} from read_parquet(?, union_by_name = true) qualify row_number() over "
            f"(partition by {keys} order by _ordering_value desc) = 1 order by all",
            [[str(path) for path in files]]).fetchall()


def hudi_rs_rows(table_dir: Path, columns: list[str]) -> list[tuple]:
    if not (table_dir / ".hoodie").is_dir():
        return []
    quoted = ", ".join(f'"{name}"' for name in columns)
    with duckdb.connect() as con:
        con.register("snapshot", read_hudi_snapshot(str(table_dir)))
        return con.execute(f"select {quoted} from snapshot order by all").fetchall()


def spark_rows(spark, table_dir: Path, columns: list[str]) -> list[tuple]:
    if not (table_dir / ".hoodie").is_dir():
        return []
    frame = spark.read.format("hudi").load(str(table_dir)).select(*columns)
    # As Arrow through DuckDB, so that both sides' values (timestamps with their zone)
    # have one Python form; pandas would drop the zone.
    with duckdb.connect() as con:
        con.register("frame", pa.Table.from_batches(frame._collect_as_arrow()))
        return con.execute("select * from frame order by all").fetchall()


def test_the_raw_rows_are_the_same_through_both_sinks(both_sinks, hudi_spark):
    parquet, hudi = both_sinks["parquet"], both_sinks["hudi"]
    landed = 0
    for contract in load_contracts().values():
        expected_log = parquet_change_log(parquet, contract)
        change_log_dir = raw_layout.change_log_dir(hudi / "raw", contract)
        columns = compared_columns(contract)
        assert hudi_rs_rows(change_log_dir, columns) == expected_log, contract.changes_table
        assert spark_rows(hudi_spark, change_log_dir, columns) == expected_log, contract.changes_table

        state_columns = [name for name in raw_schema(contract).fieldNames() if name not in WRITE_TIME_COLUMNS]
        expected_state = parquet_current_state(parquet, contract)
        state_dir = hudi / "raw" / contract.raw_table
        assert hudi_rs_rows(state_dir, state_columns) == expected_state, contract.raw_table
        assert spark_rows(hudi_spark, state_dir, state_columns) == expected_state, contract.raw_table
        landed += len(expected_log)
    assert landed > 200, "the generated mix landed in the raw tables"
    orders = load_contracts()["orders"]
    shapes = {row[0] for row in hudi_rs_rows(raw_layout.change_log_dir(hudi / "raw", orders), ["order_id"])}
    assert shapes >= set(VALUE_SHAPES) - {"mixed-lines"}, "every value shape landed on the Hudi sink"


def rows_but_write_time(data_dir: Path, table: str) -> list[tuple]:
    """A dbt table's rows without the columns that carry a batch's write time."""
    with duckdb.connect(str(data_dir / "lakehouse.duckdb"), read_only=True) as con:
        columns = [name for name, *_ in con.execute(f"describe {table}").fetchall() if name not in WRITE_TIME_COLUMNS]
        quoted = ", ".join(f'"{name}"' for name in columns)
        return con.execute(f"select {quoted} from {table} order by all").fetchall()


@pytest.mark.parametrize("table", [*TABLES, *APP_TABLES])
def test_dbt_builds_the_same_tables_from_both_sinks(both_built, table):
    parquet, hudi = (rows_but_write_time(both_built[sink], table) for sink in ("parquet", "hudi"))
    assert parquet, f"{table} is empty: the comparison would prove nothing"
    assert hudi == parquet
