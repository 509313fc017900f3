"""The local raw views (macros/raw/register_raw_sources.sql) read each Parquet
footer once: while every file of a change log has one schema, the view reads the
glob without union_by_name (DuckDB binds on the first file only); a file with another
schema (an attribute added to the contract) switches the log to union_by_name, which
reads the missing column as null; and a build reads only the footers of files it has
not seen, or that were rewritten."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming.runtime.dbt_runner import run_dbt
from streaming.samples.raw_fixtures import write_raw_batch

pytestmark = pytest.mark.dbt

INGESTED = datetime(2024, 3, 1, 10, tzinfo=timezone.utc)
BUILD = ["run", "--select", "stg_dynamodb__customers"]


def _customer(number: int) -> dict:
    return {"id": f"c{number}", "cust_name": f"Name {number}", "email": f"c{number}@example.com",
            "_event_ts": INGESTED - timedelta(minutes=number), "sequence": number}


def _write_batch(data_dir: Path, batch_id: int, extra_column: str | None = None) -> Path:
    folder = write_raw_batch(data_dir, "customers", batch_id, [_customer(batch_id * 10 + n) for n in range(3)],
                             INGESTED + timedelta(hours=batch_id))
    file = folder / "part-00000.parquet"
    if extra_column:
        table = pq.read_table(file)
        pq.write_table(table.append_column(extra_column, pa.array(["gold"] * table.num_rows)), file)
    return file


def _build_logging_footer_reads(data_dir: Path) -> set[str]:
    """Runs BUILD; returns the raw files whose footer schemas the build recorded
    (the reads of the query that calls parquet_schema), from DuckDB's own logs."""
    with duckdb.connect(str(data_dir / "lakehouse.duckdb")) as con:
        con.execute("call enable_logging(['FileSystem', 'QueryLog'])")
        result = run_dbt(BUILD, data_dir)
        logs = con.execute("select query_id, type, message from duckdb_logs where type = 'QueryLog' "
                           "or message like '%\"op\":\"READ\"%'").fetchall()
        con.execute("call disable_logging()")
    assert result.success, result.exception
    schema_queries = {query for query, kind, message in logs if kind == "QueryLog" and "parquet_schema(" in message}
    return {json.loads(message)["path"] for query, kind, message in logs
            if kind == "FileSystem" and query in schema_queries}


def _view(data_dir: Path) -> tuple[str, list[tuple], int]:
    with duckdb.connect(str(data_dir / "lakehouse.duckdb"), read_only=True) as con:
        sql = con.execute("select sql from duckdb_views() where schema_name = 'raw' "
                          "and view_name = 'customers_changes'").fetchone()[0]
        recorded = con.execute("select path, schema_signature from raw.parquet_file_schemas "
                               "where table_name = 'customers_changes' order by path").fetchall()
        rows = con.execute("select count(*) from raw.customers_changes").fetchone()[0]
    return sql, recorded, rows


def test_one_schema_reads_without_union_by_name_and_each_footer_once(tmp_path: Path) -> None:
    first, second = _write_batch(tmp_path, 1), _write_batch(tmp_path, 2)
    assert _build_logging_footer_reads(tmp_path) == {str(first), str(second)}
    sql, recorded, rows = _view(tmp_path)
    assert [path for path, _ in recorded] == [str(first), str(second)]
    assert len({signature for _, signature in recorded}) == 1
    assert "union_by_name" not in sql and rows == 6

    # The next build records only the new file's footer.
    third = _write_batch(tmp_path, 3)
    assert _build_logging_footer_reads(tmp_path) == {str(third)}
    sql, recorded, rows = _view(tmp_path)
    assert len(recorded) == 3 and "union_by_name" not in sql and rows == 9


def test_a_file_with_another_schema_switches_to_union_by_name_until_it_is_rewritten(tmp_path: Path) -> None:
    _write_batch(tmp_path, 1)
    _build_logging_footer_reads(tmp_path)
    # An attribute added to the contract: the newer file has a column the older lacks.
    evolved = _write_batch(tmp_path, 2, extra_column="loyalty_tier")
    assert _build_logging_footer_reads(tmp_path) == {str(evolved)}
    sql, recorded, rows = _view(tmp_path)
    assert len({signature for _, signature in recorded}) == 2 and "union_by_name = true" in sql and rows == 6
    with duckdb.connect(str(tmp_path / "lakehouse.duckdb"), read_only=True) as con:
        tiers = con.execute("select _batch_id, loyalty_tier from raw.customers_changes order by id").fetchall()
    assert tiers == [(1, None)] * 3 + [(2, "gold")] * 3

    # The batch replayed without the column (same path, new size and time): its footer
    # is read again and the log has one schema again.
    replayed = _write_batch(tmp_path, 2)
    assert replayed == evolved
    assert _build_logging_footer_reads(tmp_path) == {str(replayed)}
    sql, recorded, rows = _view(tmp_path)
    assert len(recorded) == 2 and len({signature for _, signature in recorded}) == 1
    assert "union_by_name" not in sql and rows == 6
