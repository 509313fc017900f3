"""Building one table's models on a data directory no dbt build has run in: `lakehouse
dbt build --table orders`, and a selection that reads a seed it does not select
(`--select stg_dynamodb__orders+1`, which failed on seed order_statuses; issue 30, item 6)."""
from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from dbt_scenario import write_batch

from streaming.cli import main
from streaming.runtime.dbt_runner import run_dbt, table_selection
from streaming.runtime.dbt_selection import listed_ids, read_manifest, table_nodes
from streaming.runtime.startup import load_checked_contracts

pytestmark = pytest.mark.dbt

# What `dbt build` runs of the nodes a selection holds (not sources, analyses).
RUN_BY_BUILD = ("model", "seed", "snapshot", "test", "unit_test")
ORDERS_MODELS = {"stg_dynamodb__orders", "int_orders__lines_unnested", "fct_orders", "fct_order_lines",
                 "agg_daily_revenue_by_status"}


def _fresh_data_dir(tmp_path: Path) -> Path:
    """Raw change logs of both tables, and no dbt build yet: no seed, no model table."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    for batch_id in (0, 1):
        write_batch(data_dir, batch_id)
    return data_dir


def _results(data_dir: Path) -> dict[str, str]:
    """unique_id -> status of the nodes the last dbt command ran."""
    run_results = json.loads((data_dir / "dbt" / "target" / "run_results.json").read_text(encoding="utf-8"))
    return {result["unique_id"]: result["status"] for result in run_results["results"]}


def _names(results: dict[str, str], kind: str) -> set[str]:
    return {uid.split(".")[2] for uid in results if uid.startswith(f"{kind}.")}


def test_table_option_builds_exactly_the_tables_nodes_on_a_fresh_data_dir(tmp_path: Path, capsys) -> None:
    data_dir = _fresh_data_dir(tmp_path)

    assert main(["--data-dir", str(data_dir), "dbt", "build", "--table", "orders"]) == 0

    results = _results(data_dir)
    assert _names(results, "model") == ORDERS_MODELS
    assert _names(results, "seed") == {"order_statuses"}
    assert set(results.values()) <= {"success", "pass", "warn"}, results
    # Every test it ran reads only the orders models and the seed: none joins the customers.
    manifest = json.loads((data_dir / "dbt" / "target" / "manifest.json").read_text(encoding="utf-8"))
    own = {f"model.dynamodb_lakehouse.{name}" for name in ORDERS_MODELS} | {"seed.dynamodb_lakehouse.order_statuses"}
    tests = [uid for uid in results if uid.startswith(("test.", "unit_test."))]
    names = {(manifest["unit_tests"] if uid.startswith("unit_") else manifest["nodes"])[uid]["name"] for uid in tests}
    assert {"orders_amount_cast_is_exact", "unique_order_statuses_code"} <= names
    for uid in tests:
        assert set(manifest["parent_map"][uid]) - own <= {"source.dynamodb_lakehouse.dynamodb.orders_changes"}, uid
    # What the command said it selects is what dbt ran.
    said = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("--table orders: "))
    assert f"({len(ORDERS_MODELS)} models, 1 seed, " in said
    assert f" {sum(uid.startswith('test.') for uid in results)} data tests, " in said
    with duckdb.connect(str(data_dir / "lakehouse.duckdb"), read_only=True) as connection:
        assert connection.execute("select count(*) from lakehouse_marts.fct_orders").fetchone()[0] > 0
        built = {name for (name,) in connection.execute("select table_name from information_schema.tables").fetchall()}
    assert not {"stg_dynamodb__customers", "dim_customers", "mart_freshness", "free_mail_domains"} & built


def test_a_staging_model_and_its_children_build_on_a_fresh_data_dir(tmp_path: Path, capsys) -> None:
    data_dir = _fresh_data_dir(tmp_path)

    assert main(["--data-dir", str(data_dir), "dbt", "build", "--select", "stg_dynamodb__orders+1"]) == 0

    out = capsys.readouterr().out
    assert "loading seed order_statuses first" in out
    assert ("leaving out 1 data test(s) that also read stg_dynamodb__customers, which this data directory has not "
            "built: relationships_fct_orders_customer_id__id__ref_stg_dynamodb__customers_") in out
    results = _results(data_dir)
    assert _names(results, "model") == {"stg_dynamodb__orders", "int_orders__lines_unnested", "fct_orders",
                                        "fct_order_lines"}
    assert results["unit_test.dynamodb_lakehouse.stg_dynamodb__orders.orders_amount_cast_is_exact"] == "pass"
    assert set(results.values()) <= {"success", "pass", "warn"}, results


def test_what_table_counts_is_what_dbt_selects_for_every_table(tmp_path: Path) -> None:
    tables: dict[str, list[str]] = {}
    for contract in load_checked_contracts().values():
        tables.setdefault(contract.table, []).append(contract.raw_table)
    table_selection(tmp_path, ["build"], "orders", tables["orders"])  # parses the project once
    manifest = read_manifest(tmp_path / "dbt" / "target")
    for table, raw_tables in sorted(tables.items()):
        selected = table_nodes(manifest, table, raw_tables)
        listed = run_dbt(["ls", *selected.arguments, "--resource-type", *RUN_BY_BUILD, "--output", "json",
                          "--output-keys", "unique_id", "--log-level", "none"], tmp_path)
        assert listed.success, listed.exception
        assert set(listed_ids(listed.result)) == {uid for uid in selected.nodes
                                                  if uid.split(".", 1)[0] in RUN_BY_BUILD}, table
