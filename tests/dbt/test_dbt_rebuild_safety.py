"""Failed rebuilds on DuckDB: a build that fails midway leaves the previous tables
readable with their previous rows (table, incremental and microbatch models, with and
without --full-refresh), and `dbt retry` after fixing the input reruns only what
failed or was skipped."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dbt.cli.main import dbtRunnerResult
from dbt_scenario import EVENT_WINDOW, INGESTED, SCENARIO_SELECTION
from dbt_tables import all_tables

from streaming.contracts.loader import load_contracts
from streaming.runtime.dbt_runner import run_dbt
from streaming.samples.raw_schema import arrow_raw_schema

pytestmark = pytest.mark.dbt

BAD_BATCH_ID = 4
LINES_TABLE = "lakehouse_intermediate.int_orders__lines_unnested"
CHANGES_TABLE = "lakehouse_staging.stg_dynamodb__customers_changes"


def _write_unreadable_customer_batch(data_dir: Path) -> Path:
    """A raw customers batch whose _event_ts is text: the raw view is created (the
    files' schemas merge) but any query reading the value fails to cast it."""
    schema = arrow_raw_schema(load_contracts()["customers"])
    fields = [pa.field("_event_ts", pa.string()) if f.name == "_event_ts" else f for f in schema]
    row = {name: None for name in schema.names}
    row.update(
        id="c9", cust_name="Bad", _event_name="INSERT", _event_ts="yesterday noon",
        _ordering_value="9", _event_id="bad-event",
        # Newer than every stored row: inside the incremental lookback window.
        _ingested_at=INGESTED[max(INGESTED)] + timedelta(hours=1),
    )
    batch_dir = data_dir / "raw" / "customers_changes" / "_ingest_hour=2026-11-30-00" / f"_batch_id={BAD_BATCH_ID}"
    batch_dir.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([row], schema=pa.schema(fields)), batch_dir / "part-00000.parquet")
    return batch_dir


def _break_lines_table(data_dir: Path) -> None:
    """Replaces the intermediate lines table under fct_orders by a view of it that
    fails while a query reads a line."""
    with duckdb.connect(str(data_dir / "lakehouse.duckdb")) as con:
        con.sql(f"alter table {LINES_TABLE} rename to int_orders__lines_unnested_readable")
        con.sql(
            f"create view {LINES_TABLE} as select * replace "
            "(cast(error('line items unreadable') as decimal(38, 2)) as line_total) "
            "from lakehouse_intermediate.int_orders__lines_unnested_readable"
        )


def _break_changes_table(data_dir: Path) -> None:
    """Replaces the customer change events table, which the history and activity
    marts read, by a view of it that fails while a query reads an event time: each
    mart then fails inside its own build query."""
    with duckdb.connect(str(data_dir / "lakehouse.duckdb")) as con:
        con.sql(f"alter table {CHANGES_TABLE} rename to stg_dynamodb__customers_changes_readable")
        con.sql(
            f"create view {CHANGES_TABLE} as select * replace "
            "(cast(error('change events unreadable') as timestamp) as _event_ts) "
            "from lakehouse_staging.stg_dynamodb__customers_changes_readable"
        )


def _restore_changes_table(data_dir: Path) -> None:
    with duckdb.connect(str(data_dir / "lakehouse.duckdb")) as con:
        con.sql(f"drop view {CHANGES_TABLE}")
        con.sql("alter table lakehouse_staging.stg_dynamodb__customers_changes_readable rename to stg_dynamodb__customers_changes")


def _statuses(result: dbtRunnerResult) -> dict[str, str]:
    return {r.node.unique_id: str(r.status) for r in result.result}


@dataclass
class FailedRebuilds:
    before: dict[str, set[tuple]]
    after_failed_full_refresh: dict[str, set[tuple]]
    after_failed_incremental: dict[str, set[tuple]]
    full_refresh: dbtRunnerResult
    incremental: dbtRunnerResult
    failed_build: dbtRunnerResult
    retry: dbtRunnerResult
    retry_run_results: dict
    after_retry: dict[str, set[tuple]]


@pytest.fixture(scope="module")
def failed_rebuilds(scenario_copy: Path) -> FailedRebuilds:
    data_dir = scenario_copy
    before = all_tables(data_dir)
    bad_batch = _write_unreadable_customer_batch(data_dir)
    _break_lines_table(data_dir)
    _break_changes_table(data_dir)
    # The lines and change-events models are excluded, so dbt does not rebuild them and
    # fct_orders, the history and the activity marts read the failing views. The
    # rebuilds and the build are of the scenario's marts and what they read (every
    # compared table): not the app's models, whose raw tables the scenario leaves empty,
    # nor mart_freshness, which reads them too.
    rebuild = ["run", *EVENT_WINDOW, *SCENARIO_SELECTION,
               "--exclude", "int_orders__lines_unnested", "stg_dynamodb__customers_changes"]
    full_refresh = run_dbt([*rebuild, "--full-refresh"], data_dir)
    after_failed_full_refresh = all_tables(data_dir)
    incremental = run_dbt(rebuild, data_dir)
    after_failed_incremental = all_tables(data_dir)

    # Retry scenario: a build of the scenario's marts where only the bad raw batch fails (the build
    # rebuilds the lines table in place of the view), then the input is fixed and `dbt retry` runs.
    _restore_changes_table(data_dir)
    failed_build = run_dbt(["build", *EVENT_WINDOW, *SCENARIO_SELECTION], data_dir)
    shutil.rmtree(bad_batch)
    retry = run_dbt(["retry"], data_dir)
    retry_run_results = json.loads((data_dir / "dbt" / "target" / "run_results.json").read_text())
    return FailedRebuilds(
        before, after_failed_full_refresh, after_failed_incremental, full_refresh, incremental,
        failed_build, retry, retry_run_results, all_tables(data_dir),
    )


FAILING_MODELS = {
    "model.dynamodb_lakehouse.stg_dynamodb__customers",  # incremental (merge)
    "model.dynamodb_lakehouse.agg_daily_customer_activity",  # incremental (microbatch)
    "model.dynamodb_lakehouse.fct_orders",  # incremental (delete + insert of the changed keys)
    "model.dynamodb_lakehouse.dim_customers_history",  # incremental (delete + insert of the touched keys' versions)
}


@pytest.mark.parametrize("mode", ["full_refresh", "incremental"])
def test_failed_rebuild_leaves_previous_tables_readable(failed_rebuilds: FailedRebuilds, mode: str) -> None:
    result = getattr(failed_rebuilds, mode)
    after = getattr(failed_rebuilds, f"after_failed_{mode}")
    statuses = _statuses(result)
    assert not result.success
    assert {node for node, status in statuses.items() if status == "error"} == FAILING_MODELS
    # Each failure happened inside the model's own build query, not before it.
    errors = {r.node.name: r for r in result.result if str(r.status) == "error"}
    assert "line items unreadable" in errors["fct_orders"].message
    assert "yesterday noon" in errors["stg_dynamodb__customers"].message
    # The microbatch model reports per day of the event-time range: every day failed.
    activity = errors["agg_daily_customer_activity"].batch_results
    assert len(activity.failed) == 2 and activity.successful == []
    for table, rows in failed_rebuilds.before.items():
        assert rows, f"{table} was empty before the rebuild: the comparison would prove nothing"
        assert after[table] == rows, f"{table} changed after a failed {mode} rebuild"


def test_retry_reruns_only_failed_and_skipped_nodes(failed_rebuilds: FailedRebuilds) -> None:
    first = _statuses(failed_rebuilds.failed_build)
    failed = {node for node, status in first.items() if status in {"error", "fail"}}
    skipped = {node for node, status in first.items() if status == "skipped"}
    # The unreadable event time fails the two models that read the customers' raw
    # change log: the staging merge and the change events table.
    assert failed == {
        "model.dynamodb_lakehouse.stg_dynamodb__customers",
        "model.dynamodb_lakehouse.stg_dynamodb__customers_changes",
    }
    # Children of the failed nodes were skipped, the orders branch was built.
    assert {
        "model.dynamodb_lakehouse.dim_customers",
        "model.dynamodb_lakehouse.dim_customers_history",
        "model.dynamodb_lakehouse.int_customers__change_events",
        "model.dynamodb_lakehouse.agg_daily_customer_activity",
    } <= skipped
    assert first["model.dynamodb_lakehouse.fct_orders"] == "success"

    retry = failed_rebuilds.retry
    assert retry.success, retry.exception
    # The on-run-start hook (raw views) runs with every invocation; nodes are what count.
    rerun = {
        r["unique_id"] for r in failed_rebuilds.retry_run_results["results"]
        if not r["unique_id"].startswith("operation.")
    }
    assert rerun == failed | skipped
    assert all(r["status"] in {"success", "pass"} for r in failed_rebuilds.retry_run_results["results"])
    assert "model.dynamodb_lakehouse.fct_orders" not in rerun
    # The fixed input leaves the data exactly as before the bad batch arrived.
    assert failed_rebuilds.after_retry == failed_rebuilds.before
