"""Reprocessing one day: corrected raw batches are replayed for two days, only the
second day is reprocessed, and only that day's rows change (staging by vars
reprocess_from/reprocess_to, the microbatch mart by --event-time-start/-end)."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from dbt.cli.main import dbtRunnerResult
from dbt_scenario import CUSTOMERS, DAY_1, DAY_2, INGESTED, ORDERS, SCENARIO_SELECTION, WITHOUT_UNIT_TESTS
from dbt_tables import all_tables, pseudonym, query

from streaming.runtime.dbt_runner import reprocess_args, run_dbt
from streaming.samples.raw_fixtures import write_raw_batch

pytestmark = pytest.mark.dbt

REPROCESS_DAY_2 = reprocess_args(DAY_2.date(), DAY_2.date() + timedelta(days=1))
# The scenario's marts, everything they read and every data test of these (eager
# selection): the replayed batches are customers' and orders'; the app table's models
# read raw tables the scenario leaves empty (dbt_scenario.SCENARIO_SELECTION). Not the
# unit tests, which read none of the replayed rows (dbt_scenario.WITHOUT_UNIT_TESTS).
REPROCESS_BUILD = ["build", *SCENARIO_SELECTION, *REPROCESS_DAY_2, *WITHOUT_UNIT_TESTS]


def _replay_corrected_batches(data_dir: Path) -> None:
    """Replays batches 1 (day 1) and 2 (day 2) with corrections, at their original
    ingestion times, so a normal incremental run would not look at them again."""
    day_1_customers = copy.deepcopy(CUSTOMERS[1])
    day_1_customers[3]["email"] = "eve@corrected.example.com"  # c5, event on day 1
    # A change of c1 that was missing, older than c1's stored one: would count as a
    # day-1 profile update if day 1 were recomputed.
    day_1_customers.append({"id": "c1", "cust_name": "Ann", "email": "ann@mid.example.com", "_event_name": "MODIFY",
                            "_event_ts": DAY_1 + timedelta(hours=3), "sequence": 6})
    write_raw_batch(data_dir, "customers", 1, day_1_customers, INGESTED[1])

    day_2_customers = copy.deepcopy(CUSTOMERS[2])
    day_2_customers[1]["email"] = "fay@corrected.example.org"  # c6, event on day 2
    day_2_customers.append({"id": "c8", "cust_name": "Hal", "email": "hal@example.com",
                            "registration_date": "2024-03-02T08:50:00Z",
                            "_event_ts": DAY_2 + timedelta(hours=8, minutes=50), "sequence": 24})
    write_raw_batch(data_dir, "customers", 2, day_2_customers, INGESTED[2])
    day_2_orders = copy.deepcopy(ORDERS[2])
    day_2_orders[1]["amount"] = "90.00"  # o4, event on day 2
    write_raw_batch(data_dir, "orders", 2, day_2_orders, INGESTED[2])


@dataclass
class Reprocessed:
    data_dir: Path
    before: dict[str, set[tuple]]
    after: dict[str, set[tuple]]
    result: dbtRunnerResult


@pytest.fixture(scope="module")
def reprocessed(scenario_copy: Path) -> Reprocessed:
    before = all_tables(scenario_copy)
    _replay_corrected_batches(scenario_copy)
    result = run_dbt(REPROCESS_BUILD, scenario_copy)
    return Reprocessed(scenario_copy, before, all_tables(scenario_copy), result)


def _changes(reprocessed: Reprocessed, table: str, key_width: int) -> tuple[set[tuple], set[tuple]]:
    """Keys of rows only before, and of rows only after the reprocess."""
    before, after = reprocessed.before[table], reprocessed.after[table]
    return {row[:key_width] for row in before - after}, {row[:key_width] for row in after - before}


def test_reprocess_succeeds_with_every_data_test(reprocessed: Reprocessed) -> None:
    failed = [(r.node.name, str(r.status)) for r in reprocessed.result.result
              if str(r.status) not in {"success", "pass"}]
    # A reprocess run checks every row: order o5's amount 12.345 never fitted decimal(18,2).
    assert reprocessed.result.success and failed == [("fits_contract_cast_stg_dynamodb__orders_amount", "warn")]


def test_staging_changes_only_for_changes_in_the_range(reprocessed: Reprocessed) -> None:
    # c6's corrected e-mail replaces the stored row of the same change; c8 is new. The
    # day-1 corrections (c5's e-mail, c1's missing change) are outside the range.
    assert _changes(reprocessed, "lakehouse_staging.stg_dynamodb__customers", 2) == (
        {("c6", "Fay")}, {("c6", "Fay"), ("c8", "Hal")})
    emails = dict(query(reprocessed.data_dir, "select id, email from lakehouse_staging.stg_dynamodb__customers"))
    assert emails["c6"] == "fay@corrected.example.org"
    assert emails["c5"] == "eve@yahoo.com" and emails["c1"] == "ann@new.example.com"
    assert _changes(reprocessed, "lakehouse_staging.stg_dynamodb__orders", 2) == ({("c6", "o4")}, {("c6", "o4")})
    amount = query(reprocessed.data_dir, "select amount from lakehouse_staging.stg_dynamodb__orders where order_id = 'o4'")
    assert amount == [(Decimal("90.00"),)]


def test_microbatch_mart_recomputes_only_the_days_in_the_range(reprocessed: Reprocessed) -> None:
    table = "lakehouse_marts.agg_daily_customer_activity"
    day_1 = {row for row in reprocessed.before[table] if str(row[0]) == "2024-03-01"}
    assert day_1 and day_1 <= reprocessed.after[table]  # c1's missing change not counted
    day_2 = query(
        reprocessed.data_dir,
        f"select registrations, profile_updates from {table} where activity_date = date '2024-03-02'",
    )
    assert day_2 == [(3, 1)]  # c6, c7 and c8 registered, c3 modified
    assert _changes(reprocessed, table, 1)[1] == {(DAY_2.date(),)}


def test_customer_history_recomputes_only_keys_with_changes_in_the_range(reprocessed: Reprocessed) -> None:
    table = "lakehouse_marts.dim_customers_history"
    only_before, only_after = _changes(reprocessed, table, 2)
    # c6's version carries the corrected e-mail, c8 is new; c1's missing day-1 change
    # and c5's day-1 correction are outside the range.
    assert {customer_id for _, customer_id in only_before} == {"c6"}
    assert {customer_id for _, customer_id in only_after} == {"c6", "c8"}
    domains = dict(query(reprocessed.data_dir, f"select customer_id, email_domain from {table} where is_current"))
    assert domains["c6"] == pseudonym("email", "corrected.example.org")
    assert domains["c5"] == pseudonym("email", "yahoo.com")



def test_table_marts_reflect_the_reprocessed_staging(reprocessed: Reprocessed) -> None:
    dim = {row[0] for row in query(reprocessed.data_dir, "select customer_id from lakehouse_marts.dim_customers")}
    assert dim == {"c1", "c3", "c5", "c6", "c7", "c8"}
    revenue = query(
        reprocessed.data_dir,
        """select total_amount from lakehouse_marts.agg_daily_revenue_by_status
           where order_date = date '2024-03-02' and status = 'CANCELLED'""",
    )
    assert revenue == [(Decimal("90.00"),)]


def test_reprocess_args_pass_one_range_to_both_mechanisms() -> None:
    args = reprocess_args(DAY_2.date(), DAY_2.date() + timedelta(days=2), {"pii_mode": "mask"})
    flags = dict(zip(args[::2], args[1::2]))
    dbt_vars = json.loads(flags["--vars"])
    assert dbt_vars["pii_mode"] == "mask"  # other vars survive: dbt keeps one --vars only
    assert (dbt_vars["reprocess_from"], dbt_vars["reprocess_to"]) == (
        flags["--event-time-start"], flags["--event-time-end"]) == ("2024-03-02", "2024-03-04")
    with pytest.raises(ValueError, match="empty"):
        reprocess_args(DAY_2.date(), DAY_2.date())


def test_half_a_reprocess_range_stops_the_run(tmp_path: Path) -> None:
    result = run_dbt(["run", "--vars", "{reprocess_from: '2024-03-02'}"], tmp_path)
    # Rejected while dbt parses the project: nothing runs at all.
    assert not result.success and result.result is None
    assert "set both vars reprocess_from and reprocess_to" in str(result.exception)
