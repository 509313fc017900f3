"""Data tests on incremental builds check only the rows the build could have written
(macros/tests/changed_rows_only.sql): a bad row an incremental build writes is still
caught, an old bad row is not looked at, and var full_data_tests (like --full-refresh)
checks every row again."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest
from dbt.cli.main import dbtRunnerResult
from dbt_scenario import DAY_1, DAY_2, EVENT_WINDOW, INGESTED, SCENARIO_SELECTION, WITHOUT_UNIT_TESTS

from streaming.runtime.dbt_runner import run_dbt
from streaming.samples.raw_fixtures import write_raw_batch

pytestmark = pytest.mark.dbt

DAY_3 = DAY_2 + timedelta(days=1)
FULL_CHECK = ["--vars", "{full_data_tests: true}"]
# The builds: the scenario's marts, what they read and their tests (every test these
# tests name), not the app's models, whose raw tables the scenario leaves empty, nor
# mart_freshness, which reads them too. The data tests are what these tests are about;
# the unit tests, which read no data, run elsewhere (WITHOUT_UNIT_TESTS).
BUILD = ["build", *EVENT_WINDOW, *SCENARIO_SELECTION, *WITHOUT_UNIT_TESTS]
# The scenario's batches end at INGESTED[3]; these land a day apart, further than the
# lookback, so each incremental build reads only its own batch and the one before.
CLEAN_BATCH, BAD_BATCH = 4, 5
INGESTED_CLEAN = INGESTED[3] + timedelta(days=1)
INGESTED_BAD = INGESTED_CLEAN + timedelta(days=1)
RAW_CHECK = "holds_latest_raw_change_stg_dynamodb__customers_id__cust_name__customers_changes"
HISTORY_CHECK = "customer_history_matches_current_state"


def _execute(data_dir: Path, sql: str) -> None:
    with duckdb.connect(str(data_dir / "lakehouse.duckdb")) as con:
        con.execute(sql)


def _reported_tests(result: dbtRunnerResult) -> dict[str, str]:
    """The data tests that found rows: `fail` (a structural test, which skips the models
    downstream of its model) or `warn` (a business-rule test, docs/dbt.md)."""
    assert result.exception is None, result.exception
    other = [r.node.unique_id for r in result.result
             if r.node.resource_type != "test" and str(r.status) not in {"success", "pass", "skipped"}]
    assert other == [], "only data tests may fail"
    return {r.node.name: str(r.status) for r in result.result if str(r.status) in {"fail", "error", "warn"}}


def _compiled_test(data_dir: Path, name: str) -> str:
    compiled = data_dir / "dbt" / "target" / "compiled" / "dynamodb_lakehouse" / "dbt_project" / "models"
    return next(compiled.rglob(f"{name}.sql")).read_text()


def _compiled_code(result: dbtRunnerResult, name: str) -> str:
    """The SQL a node of `result` ran (long test names are hashed in target/compiled)."""
    return next(r.node.compiled_code for r in result.result if r.node.name == name)


@dataclass
class Builds:
    data_dir: Path
    scoped: dbtRunnerResult
    scoped_sql: str
    full: dbtRunnerResult
    full_sql: str
    scoped_raw_check_sql: str
    full_raw_check_sql: str
    scoped_history_check_sql: str
    full_history_check_sql: str
    bad: dbtRunnerResult


@pytest.fixture(scope="module")
def builds(scenario_copy: Path) -> Builds:
    data_dir = scenario_copy
    # An old row gone bad outside any run: o1 was last written by batch 1's build.
    _execute(data_dir, "update lakehouse_marts.fct_orders set currency = 'euro' where order_id = 'o1'")
    write_raw_batch(data_dir, "customers", CLEAN_BATCH, [
        {"id": "c9", "cust_name": "Ida", "email": "ida@example.com", "registration_date": "2024-03-02T12:00:00Z",
         "_event_ts": DAY_2 + timedelta(hours=12), "sequence": 60},
    ], INGESTED_CLEAN)
    write_raw_batch(data_dir, "orders", CLEAN_BATCH, [
        {"customer_id": "c9", "order_id": "o9", "created_at": "2024-03-02T12:05:00Z", "status": "PAID",
         "amount": "4.00", "currency": "EUR", "_event_ts": DAY_2 + timedelta(hours=12, minutes=5), "sequence": 61},
    ], INGESTED_CLEAN)
    scoped = run_dbt(BUILD, data_dir)
    scoped_sql = _compiled_test(data_dir, "is_valid_iso_currency_fct_orders_currency")
    scoped_raw_check_sql = _compiled_code(scoped, RAW_CHECK)
    scoped_history_check_sql = _compiled_code(scoped, HISTORY_CHECK)
    full = run_dbt([*BUILD, *FULL_CHECK], data_dir)
    full_sql = _compiled_test(data_dir, "is_valid_iso_currency_fct_orders_currency")
    full_raw_check_sql = _compiled_code(full, RAW_CHECK)
    full_history_check_sql = _compiled_code(full, HISTORY_CHECK)

    # Bad rows as the next incremental build itself could write them: an order with a
    # negative amount, and c5's staged change replaced by one the raw log never had,
    # ingested inside that build's window (so that only the late, older raw change of
    # c5 in the batch touches that key).
    _execute(data_dir, "update lakehouse_staging.stg_dynamodb__customers set _ordering_value = 'z', "
                       f"_ingested_at = timestamp '{INGESTED_BAD:%Y-%m-%d %H:%M:%S}' where id = 'c5'")
    write_raw_batch(data_dir, "customers", BAD_BATCH, [
        {"id": "c5", "cust_name": "Eve", "email": "eve@late.example.com", "registration_date": "2024-03-01T09:50:00Z",
         "_event_name": "MODIFY", "_event_ts": DAY_1 + timedelta(hours=9, minutes=55), "sequence": 14},
    ], INGESTED_BAD)
    write_raw_batch(data_dir, "orders", BAD_BATCH, [
        {"customer_id": "c9", "order_id": "o10", "created_at": "2024-03-02T13:00:00Z", "status": "PAID",
         "amount": "-5.00", "currency": "USD", "_event_ts": DAY_2 + timedelta(hours=13), "sequence": 62},
    ], INGESTED_BAD)
    bad = run_dbt(BUILD, data_dir)
    return Builds(data_dir, scoped, scoped_sql, full, full_sql, scoped_raw_check_sql, full_raw_check_sql,
                  scoped_history_check_sql, full_history_check_sql, bad)


def test_incremental_build_skips_the_old_bad_row(builds: Builds) -> None:
    assert _reported_tests(builds.scoped) == {}
    # The window of the build: the newest _ingested_at before it, minus the 3 h lookback.
    window = f"_ingested_at > timestamp '{(INGESTED[3] - timedelta(hours=3)).strftime('%Y-%m-%d %H:%M:%S')}'"
    assert window in builds.scoped_sql


def test_incremental_raw_check_reads_only_the_partitions_the_build_read(builds: Builds) -> None:
    # The staging model's own cutoff and partition filter (raw_changes_this_run_reads):
    # a reader prunes every older `_ingest_hour` partition of the raw change log.
    cutoff = f"timestamp '{(INGESTED[3] - timedelta(hours=3)).strftime('%Y-%m-%d %H:%M:%S')}'"
    assert f"_ingested_at > {cutoff}" in builds.scoped_raw_check_sql
    assert f"_ingest_hour >= strftime({cutoff}, '%Y-%m-%d-%H')" in builds.scoped_raw_check_sql
    assert "_ingest_hour" not in builds.full_raw_check_sql


def test_incremental_history_check_reads_only_the_rows_the_build_wrote(builds: Builds) -> None:
    # Both models' cutoffs: the newest _ingested_at of each before the build, minus 3 h.
    cutoff = f"_ingested_at > timestamp '{(INGESTED[3] - timedelta(hours=3)).strftime('%Y-%m-%d %H:%M:%S')}'"
    assert builds.scoped_history_check_sql.count(cutoff) == 2
    assert "_ingested_at" not in builds.full_history_check_sql


def test_full_check_var_finds_the_old_bad_row(builds: Builds) -> None:
    # And order o5, whose amount 12.345 never fitted decimal(18,2) (written by an earlier build).
    assert _reported_tests(builds.full) == {"is_valid_iso_currency_fct_orders_currency": "warn",
                                            "fits_contract_cast_stg_dynamodb__orders_amount": "warn"}
    assert "_ingested_at" not in builds.full_sql


def test_incremental_build_catches_the_bad_rows_it_writes(builds: Builds) -> None:
    reported = _reported_tests(builds.bad)
    # The negative amount breaks a business rule: each model that carries it warns, and
    # the build goes on. c5's staged row is in the build's window but is none of the raw
    # changes the build read: a structural failure, and dim_customers, built on the
    # staged customers, is skipped. dim_customers_history, built from the change
    # events, made c5's late MODIFY its current version; the check against the staged
    # row (still the corrupted one) fails as well.
    assert reported == {"not_negative_stg_dynamodb__orders_amount": "warn",
                        "not_negative_fct_orders_amount": "warn",
                        "not_negative_agg_daily_revenue_by_status_total_amount": "warn",
                        "holds_latest_raw_change_stg_dynamodb__customers_id__cust_name__customers_changes": "fail",
                        "customer_history_matches_current_state": "fail"}
    statuses = {r.node.name: str(r.status) for r in builds.bad.result}
    assert statuses["dim_customers"] == "skipped" and statuses["fct_orders"] == "success"


def test_full_refresh_checks_every_row(builds: Builds) -> None:
    """A --full-refresh rewrites every row, so its tests read the whole tables."""
    # The staging model and its own tests: the checked test is one of them.
    result = run_dbt(["build", *EVENT_WINDOW, "--full-refresh", "--select", "stg_dynamodb__orders",
                      "--indirect-selection", "cautious"], builds.data_dir)
    assert _reported_tests(result)["not_negative_stg_dynamodb__orders_amount"] == "warn"
    assert "_ingested_at" not in _compiled_test(builds.data_dir, "not_negative_stg_dynamodb__orders_amount")
