"""Business-rule tests warn and flag, structural tests stop the build (docs/dbt.md,
"Which tests stop a build"). An order without a currency, with a negative amount, an
unknown status and a negative price builds through every model, the revenue marts
and mart_freshness included, its rows flagged in quality_issues; a null or duplicate
key still fails the build and skips what depends on it."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest
from dbt.cli.main import dbtRunnerResult
from dbt_scenario import DAY_2, EVENT_WINDOW, INGESTED, WITHOUT_UNIT_TESTS
from dbt_tables import query

from streaming.runtime.dbt_runner import run_dbt
from streaming.samples.raw_fixtures import write_raw_batch

pytestmark = pytest.mark.dbt

DOCS = Path(__file__).resolve().parents[2] / "docs" / "dbt.md"

BATCH = 4
# Every model and data test of the project; the unit tests, which read none of the
# violations, run elsewhere (WITHOUT_UNIT_TESTS).
BUILD = ["build", *EVENT_WINDOW, *WITHOUT_UNIT_TESTS]
INGESTED_AT = INGESTED[3] + timedelta(days=1)
_LINE = {"sku": "Z", "quantity": "1", "unit_price": "3.00"}
NO_CURRENCY = {"customer_id": "c1", "order_id": "o20", "created_at": "2024-03-02T11:00:00Z", "status": "PAID",
               "amount": "3.00", "line_items": [_LINE], "_event_ts": DAY_2 + timedelta(hours=11), "sequence": 70}
# Three more rules broken at once: a negative amount, a status seed order_statuses does
# not know, and a line with a negative price.
NEGATIVE_UNKNOWN = {"customer_id": "c1", "order_id": "o21", "created_at": "2024-03-02T11:30:00Z", "status": "LOST",
                    "amount": "-5.00", "currency": "EUR", "line_items": [{"sku": "Y", "quantity": "1", "unit_price": "-5.00"}],
                    "_event_ts": DAY_2 + timedelta(hours=11, minutes=30), "sequence": 71}
WARNED_TESTS = {
    "not_negative_stg_dynamodb__orders_amount",
    "relationships_stg_dynamodb__orders_status__code__ref_order_statuses_",
    "not_negative_int_orders__lines_unnested_unit_price",
    "not_negative_int_orders__lines_unnested_line_total",
    "not_null_fct_orders_currency",
    "not_negative_fct_orders_amount",
    "relationships_fct_orders_status__code__ref_order_statuses_",
    "not_negative_fct_order_lines_line_total",
    "not_negative_agg_daily_revenue_by_status_total_amount",
}


def _statuses(result: dbtRunnerResult) -> dict[str, str]:
    assert result.exception is None, result.exception
    return {r.node.name: str(r.status) for r in result.result}


@dataclass
class Build:
    data_dir: Path
    result: dbtRunnerResult
    statuses: dict[str, str]


@pytest.fixture(scope="module")
def business_violations(scenario_copy: Path) -> Build:
    write_raw_batch(scenario_copy, "orders", BATCH, [NO_CURRENCY, NEGATIVE_UNKNOWN], INGESTED_AT)
    result = run_dbt(BUILD, scenario_copy)
    return Build(scenario_copy, result, _statuses(result))


def test_business_rule_violations_warn_and_every_model_builds(business_violations: Build) -> None:
    statuses = business_violations.statuses
    assert business_violations.result.success  # `dbt build` exits 0
    assert {name for name, status in statuses.items() if status == "warn"} == WARNED_TESTS
    assert {name: status for name, status in statuses.items() if status not in {"success", "pass", "warn"}} == {}
    assert {"fct_orders", "fct_order_lines", "agg_daily_revenue_by_status", "mart_freshness"} <= {
        name for name, status in statuses.items() if status == "success"}


def test_the_rows_are_kept_and_flagged_from_staging_to_the_marts(business_violations: Build) -> None:
    data_dir = business_violations.data_dir
    flagged = [("o20", None, "currency_missing"), ("o21", "EUR", "amount_negative,status_unknown")]
    for table in ("lakehouse_staging.stg_dynamodb__orders", "lakehouse_marts.fct_orders"):
        rows = query(data_dir, f"select order_id, currency, quality_issues from {table} where order_id in ('o20', 'o21') order by 1")
        assert rows == flagged, table
    # Every other live order of the scenario passes every rule, but o5, whose amount
    # 12.345 did not fit the contract's decimal(18,2).
    others = query(data_dir, "select order_id, quality_issues from lakehouse_marts.fct_orders "
                              "where order_id not in ('o20', 'o21') and quality_issues is not null")
    assert others == [("o5", "amount_invalid")]
    # A line carries its own problems, then its order's.
    lines = query(data_dir, "select order_id, quality_issues from lakehouse_marts.fct_order_lines "
                             "where quality_issues is not null order by 1")
    assert lines == [("o20", "currency_missing"), ("o21", "unit_price_negative,amount_negative,status_unknown")]


def test_customers_are_flagged_in_staging_and_both_customer_marts(business_violations: Build) -> None:
    """c3 was inserted with the e-mail `not-an-email` and the registration date `March
    1st`, then corrected: only its first version breaks the customers' rules."""
    data_dir = business_violations.data_dir
    history = query(data_dir, "select customer_id, version_number, quality_issues from lakehouse_marts.dim_customers_history "
                               "where quality_issues is not null")
    assert history == [("c3", 1, "registration_date_invalid,email_invalid")]
    for table in ("lakehouse_staging.stg_dynamodb__customers", "lakehouse_marts.dim_customers"):
        assert query(data_dir, f"select count(*) from {table} where quality_issues is not null") == [(0,)], table


def test_the_revenue_marts_and_freshness_include_the_flagged_orders(business_violations: Build) -> None:
    data_dir = business_violations.data_dir
    revenue = query(data_dir, """select status, currency, order_count, flagged_order_count, total_amount
                                  from lakehouse_marts.agg_daily_revenue_by_status
                                  where order_date = date '2024-03-02' order by 1, 2""")
    assert [row for row in revenue if row[3]] == [("LOST", "EUR", 1, 1, -5), ("PAID", None, 1, 1, 3), ("PLACED", "GBP", 1, 1, None)]
    fct_orders_rows = query(data_dir, "select count(*) from lakehouse_marts.fct_orders")[0][0]
    freshness = query(data_dir, "select row_count, newest_ingested_at from lakehouse_marts.mart_freshness "
                                 "where curated_table = 'fct_orders'")
    assert freshness == [(fct_orders_rows, INGESTED_AT.replace(tzinfo=None))]


def _documented_tests() -> dict[str, set[tuple[str, str]]]:
    """Severity -> (test, model or model.column named) of each row of the table in
    docs/dbt.md, "Which tests stop a build"; a row may name several of either."""
    section = DOCS.read_text().split("## Which tests stop a build", 1)[1]
    documented: dict[str, set[tuple[str, str]]] = {"warn": set(), "error": set()}
    for line in section.splitlines():
        if line.startswith("| `"):
            test, _layer, target, severity, _why = (cell.strip() for cell in line.split("|")[1:-1])
            targets = re.findall(r"`([^`]+)`", target) or [target]
            for name in re.findall(r"`([^`]+)`", test.split("(")[0]):
                documented[severity].update((name, each) for each in targets)
    return documented


def test_docs_name_every_test_that_only_warns(business_violations: Build) -> None:
    """The table's warn rows are exactly the tests the project declares with severity
    warn, and every other kind of test is in an error row."""
    manifest = json.loads((business_violations.data_dir / "dbt" / "target" / "manifest.json").read_text())
    tests = [node for node in manifest["nodes"].values() if node["resource_type"] == "test"]
    warned, error_kinds = set(), set()
    for test in tests:
        kind = test["test_metadata"]["name"] if test.get("test_metadata") else test["name"]
        tested = manifest["nodes"][test.get("attached_node") or test["depends_on"]["nodes"][-1]]["name"]
        if test["config"]["severity"].lower() == "warn":
            warned.add((kind, f"{tested}.{test['column_name']}" if test.get("column_name") else tested))
        else:
            error_kinds.add(kind)
    documented = _documented_tests()
    assert documented["warn"] == warned
    assert error_kinds <= {name for name, _ in documented["error"]}
    assert len(warned) >= 14 and len(tests) - len(warned) >= 90


def _corrupt_null_key(data_dir: Path) -> None:
    write_raw_batch(data_dir, "orders", BATCH, [{**NO_CURRENCY, "order_id": None, "currency": "EUR"}], INGESTED_AT)


def _corrupt_duplicate_key(data_dir: Path) -> None:
    """A second staged row of order o1 written within the next build's window, as a
    faulty merge would leave it."""
    with duckdb.connect(str(data_dir / "lakehouse.duckdb")) as con:
        con.sql("insert into lakehouse_staging.stg_dynamodb__orders select * replace ("
                f"timestamp '{INGESTED_AT:%Y-%m-%d %H:%M:%S}' as _ingested_at) "
                "from lakehouse_staging.stg_dynamodb__orders where order_id = 'o1'")
    write_raw_batch(data_dir, "orders", BATCH, [{**NO_CURRENCY, "currency": "EUR"}], INGESTED_AT)


@pytest.mark.parametrize(("corrupt", "failing_test"), [
    (_corrupt_null_key, "not_null_stg_dynamodb__orders_order_id"),
    (_corrupt_duplicate_key, "unique_combination_stg_dynamodb__orders_customer_id__order_id"),
])
def test_a_structural_violation_still_fails_the_build(built_scenario: Path, tmp_path: Path, corrupt, failing_test: str) -> None:
    data_dir = tmp_path / "data"
    shutil.copytree(built_scenario, data_dir)
    corrupt(data_dir)
    result = run_dbt(BUILD, data_dir)
    statuses = _statuses(result)
    assert not result.success  # `dbt build` exits 1
    assert statuses[failing_test] == "fail"
    assert {"fct_orders", "fct_order_lines", "agg_daily_revenue_by_status", "mart_freshness"} <= {
        name for name, status in statuses.items() if status == "skipped"}
