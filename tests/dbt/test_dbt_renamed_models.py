"""A renamed model keeps its table (issue 48 item 5): the customers' change events were
stg_dynamodb__customer_changes, and a data directory built then migrates on its next
`lakehouse dbt build`, which renames the table (macros/migrations/renamed_models.sql)
and goes on incrementally with the rows it held."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from dbt_tables import query, table_rows

from streaming.runtime.dbt_runner import run_dbt_command

pytestmark = pytest.mark.dbt

OLD_NAME = "stg_dynamodb__customer_changes"
NEW_NAME = "stg_dynamodb__customers_changes"
# A stored event that no raw batch holds: an incremental run keeps it, a rebuild from
# raw would not.
KEPT_EVENT_ID = "stored-before-the-rename"


def _tables(data_dir: Path) -> set[str]:
    return {name for (name,) in query(
        data_dir, "select table_name from information_schema.tables where table_schema = 'lakehouse_staging'")}


def test_a_table_built_under_the_old_name_is_renamed_and_kept_by_the_next_build(scenario_copy: Path) -> None:
    data_dir = scenario_copy
    with duckdb.connect(str(data_dir / "lakehouse.duckdb")) as con:
        con.sql(f"alter table lakehouse_staging.{NEW_NAME} rename to {OLD_NAME}")
        con.sql(f"insert into lakehouse_staging.{OLD_NAME} select * replace ('{KEPT_EVENT_ID}' as _event_id) "
                f"from lakehouse_staging.{OLD_NAME} order by _event_id limit 1")
    stored = table_rows(data_dir, f"lakehouse_staging.{OLD_NAME}")
    lines: list[str] = []

    run_dbt_command(data_dir, ["build", "--select", NEW_NAME], report=lines.append)

    tables = _tables(data_dir)
    assert NEW_NAME in tables and OLD_NAME not in tables
    migrated = table_rows(data_dir, f"lakehouse_staging.{NEW_NAME}")
    assert stored <= migrated
    assert [row for row in migrated if KEPT_EVENT_ID in row]
    log = (data_dir / "dbt" / "logs" / "dbt.log").read_text(encoding="utf-8")
    assert f'renamed "lakehouse"."lakehouse_staging"."{OLD_NAME}" to {NEW_NAME}' in log


def test_a_table_of_the_old_name_beside_the_new_one_is_left_and_named(scenario_copy: Path) -> None:
    data_dir = scenario_copy
    with duckdb.connect(str(data_dir / "lakehouse.duckdb")) as con:
        con.sql(f"create table lakehouse_staging.{OLD_NAME} as select * from lakehouse_staging.{NEW_NAME} limit 1")
    built = query(data_dir, f"select count(*) from lakehouse_staging.{NEW_NAME}")

    run_dbt_command(data_dir, ["build", "--select", NEW_NAME], report=lambda line: None)

    assert {OLD_NAME, NEW_NAME} <= _tables(data_dir)
    assert query(data_dir, f"select count(*) from lakehouse_staging.{NEW_NAME}") == built
    log = (data_dir / "dbt" / "logs" / "dbt.log").read_text(encoding="utf-8")
    assert f'both "lakehouse"."lakehouse_staging"."{OLD_NAME}" and' in log
