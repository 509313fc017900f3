"""The demo's tables stay out of a lakehouse of one's own (issue 45 C6). The samples'
sources, models, seeds, tests and analyses are the `samples` folders, enabled by the
dbt var lakehouse_samples (dbt_project.yml). A project copy holding one table scaffolded
from a contract of one's own builds with the var false only that table's models and
tests; by default the samples' nodes are all in the project. The DynamoDB table is
named `orders`, as a sample's is; its raw table is not (dbt refuses a source named as a
disabled one, test_scaffold.py)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pytest
from project_copy import copy_project

from streaming.contracts.loader import CONTRACTS_DIR_ENV, load_contracts
from streaming.operations.scaffold import scaffold
from streaming.runtime.dbt_runner import failure_summary, run_dbt
from streaming.samples.raw_fixtures import write_raw_batch

pytestmark = pytest.mark.dbt

ORDERS_CONTRACT = """\
table: orders
raw_table: shop_orders
description: A shop's orders, not the demo's.
key:
  partition_key: orderId
attributes:
  orderId:
    type: S
    description: Order id.
  price:
    type: N
    cast: decimal(10,2)
    description: Order total.
partitioning:
  column: order_bucket
  expression: "substring(order_id, -1, 1)"
"""
INGESTED = datetime(2026, 11, 2, 9, tzinfo=timezone.utc)
NO_SAMPLES = ["--vars", "{lakehouse_samples: false}"]


@pytest.fixture(scope="module")
def own_lakehouse(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("own_lakehouse")
    project = copy_project(root / "project")
    contracts_dir = root / "contracts"
    contracts_dir.mkdir()
    (contracts_dir / "orders.yml").write_text(ORDERS_CONTRACT, encoding="utf-8")
    data_dir = root / "data"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CONTRACTS_DIR_ENV, str(contracts_dir))
        contracts = load_contracts()
        scaffold("orders", project_dir=project, contracts=contracts)
    write_raw_batch(data_dir, "shop_orders", 0, [
        {"order_id": "o1", "price": "9.50", "_event_ts": datetime(2026, 11, 2, 8, tzinfo=timezone.utc)},
        {"order_id": "o2", "price": "1.005", "_event_ts": datetime(2026, 11, 2, 8, 30, tzinfo=timezone.utc)},
    ], INGESTED, contract=contracts["shop_orders"])
    project_args = ["--project-dir", str(project), "--profiles-dir", str(project)]
    return {"project_args": project_args, "data_dir": data_dir,
            "build": run_dbt(["build", *project_args, *NO_SAMPLES], data_dir)}


def _listed(args: list[str], data_dir: Path) -> set[str]:
    result = run_dbt(["ls", *args, "--resource-type", "all", "--output", "json", "--output-keys", "unique_id",
                      "--log-level", "none"], data_dir)
    assert result.success, result.exception
    return {json.loads(line)["unique_id"] for line in result.result}


def test_without_the_samples_a_build_runs_only_the_scaffolded_tables_nodes(own_lakehouse: dict) -> None:
    build = own_lakehouse["build"]
    assert build.success, failure_summary(build)
    # Not the on-run-start hooks, which run whatever is selected.
    ran = {result.node.unique_id for result in build.result if result.node.resource_type != "operation"}
    assert {unique_id for unique_id in ran if unique_id.startswith("model.")} == {
        "model.dynamodb_lakehouse.stg_dynamodb__shop_orders",
        "model.dynamodb_lakehouse.stg_dynamodb__shop_orders_changes",
    }
    assert not [unique_id for unique_id in ran if unique_id.startswith("seed.")]
    assert [unique_id for unique_id in ran if unique_id.startswith("test.")]
    assert all("shop_orders" in unique_id for unique_id in ran), sorted(ran)
    with duckdb.connect(str(own_lakehouse["data_dir"] / "lakehouse.duckdb"), read_only=True) as con:
        built = con.sql("select table_schema, table_name from information_schema.tables where table_schema in ("
                        "'lakehouse_staging', 'lakehouse_intermediate', 'lakehouse_marts', 'lakehouse_seeds')"
                        ).fetchall()
        # The cast applies: a price that does not fit decimal(10,2) is null, its text kept.
        prices = con.sql("select order_id, price, price_text from lakehouse_staging.stg_dynamodb__shop_orders "
                         "order by 1").fetchall()
    # The fingerprint of the PII key, which the on-run-start hook require_pii_key keeps.
    assert sorted(built) == [("lakehouse_marts", "pii_key_fingerprint"),
                             ("lakehouse_staging", "stg_dynamodb__shop_orders"),
                             ("lakehouse_staging", "stg_dynamodb__shop_orders_changes")]
    assert [(order, None if price is None else str(price), text) for order, price, text in prices] == [
        ("o1", "9.50", "9.50"), ("o2", None, "1.005")]


def test_without_the_samples_the_project_lists_none_of_their_nodes(own_lakehouse: dict) -> None:
    listed = _listed([*own_lakehouse["project_args"], *NO_SAMPLES], own_lakehouse["data_dir"])

    assert listed and all("shop_orders" in unique_id for unique_id in listed), sorted(listed)


def test_by_default_every_sample_node_is_in_the_project(tmp_path: Path) -> None:
    listed = _listed([], tmp_path)
    without = _listed(NO_SAMPLES, tmp_path)

    for unique_id in ("model.dynamodb_lakehouse.stg_dynamodb__customers", "model.dynamodb_lakehouse.fct_orders",
                      "model.dynamodb_lakehouse.stg_dynamodb__app_users", "model.dynamodb_lakehouse.mart_freshness",
                      "seed.dynamodb_lakehouse.order_statuses", "source.dynamodb_lakehouse.dynamodb.customers_changes",
                      "test.dynamodb_lakehouse.customer_history_matches_current_state",
                      "analysis.dynamodb_lakehouse.daily_activity"):
        assert unique_id in listed
    assert without == set(), sorted(without)
    assert [unique_id for unique_id in listed if unique_id.startswith("unit_test.")]
