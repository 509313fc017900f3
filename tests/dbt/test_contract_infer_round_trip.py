"""Issue 31, item 3: infer -> scaffold -> stream -> dbt build, with the proposal unedited.

Two tables: AWS's public AnOnlineShop model (tests/fixtures/inference/README.md), and
the generator's `app`, whose packaged app.yml the proposal replaces. Each contract is
what `lakehouse contract infer` writes, untouched; scaffold writes the dbt side into a
copy of the project; the items go through the real pipeline as change records; one
`dbt build` of the table's models runs green. Every item lands in its entity or in the
unrouted table, none in quarantine."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from project_copy import copy_contracts, copy_project

from streaming.contracts.loader import CONTRACTS_DIR_ENV, load_contracts
from streaming.contracts.model import contracts_of_table
from streaming.io.sinks import LocalParquetSink, QuarantineWriter
from streaming.operations.contract_infer import infer_table_contract
from streaming.operations.scaffold import scaffold
from streaming.pipeline.batch import Pipeline
from streaming.pipeline.envelope import ENVELOPE_SCHEMA
from streaming.runtime.dbt_runner import failure_summary, run_dbt
from streaming.samples.generator import generate_cdc, land_cdc

MODEL = Path(__file__).parents[1] / "fixtures" / "inference" / "AnOnlineShop_facets.json"
TABLE = "OnlineShop"
T0_MS = 1_793_000_000_000  # 2026-10-27


def model_items() -> list[dict]:
    (table,) = json.loads(MODEL.read_text())["DataModel"]
    return [item for facet in table["TableFacets"] for item in facet["TableData"]]


def insert_record(item: dict, number: int) -> str:
    keys = {"PK": item["PK"], "SK": item["SK"]}
    return json.dumps({"awsRegion": "eu-west-1", "eventID": f"shop-{number}", "eventName": "INSERT",
                       "userIdentity": None, "recordFormat": "application/json", "tableName": TABLE,
                       "dynamodb": {"ApproximateCreationDateTime": T0_MS + number * 1000, "Keys": keys,
                                    "NewImage": item}, "eventSource": "aws:dynamodb"})


def stream_and_build(spark, table: str, contracts_dir: Path, project: Path, lines: list[str], data_dir: Path,
                     *, force: bool = False) -> dict:
    """Scaffold `table` from the contracts in `contracts_dir`, land `lines` through the
    pipeline of its raw tables, and build its models."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CONTRACTS_DIR_ENV, str(contracts_dir))
        contracts = load_contracts()
        raw_tables = contracts_of_table(contracts, table)
        scaffold(table, project_dir=project, contracts=contracts, force=force)
        envelope = spark.createDataFrame([(line, None, "infer-round-trip") for line in lines], ENVELOPE_SCHEMA)
        report = Pipeline(raw_tables, LocalParquetSink(str(data_dir)), QuarantineWriter(str(data_dir))).process_batch(
            envelope, 0)
        entities = sorted(contract.raw_table for contract in raw_tables.values() if not contract.unrouted)
        result = run_dbt(["build", "--project-dir", str(project), "--profiles-dir", str(project),
                          "--select", *(f"source:dynamodb.{raw_table}_changes+" for raw_table in entities),
                          "--exclude", "mart_freshness"], data_dir)
    return {"data_dir": data_dir, "report": report, "result": result, "entities": entities,
            "contract_text": (contracts_dir / f"{table}.yml").read_text()}


@pytest.fixture(scope="module")
def shop_round_trip(spark, tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("infer_round_trip")
    contracts_dir = copy_contracts(root / "contracts", {})
    infer_table_contract(TABLE, sample=MODEL, out=contracts_dir / "OnlineShop.yml", max_items=10_000,
                         min_entity_items=2, echo=lambda line: None)
    lines = [insert_record(item, number) for number, item in enumerate(model_items())]
    return stream_and_build(spark, TABLE, contracts_dir, copy_project(root / "project"), lines, root / "data")


@pytest.fixture(scope="module")
def app_round_trip(spark, tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("infer_app_round_trip")
    contracts_dir = copy_contracts(root / "contracts", {})
    cdc = generate_cdc(seed=13, customers=10, tenants=8, malformed_rate=0.0)
    land_cdc(root / "landing", cdc)
    infer_table_contract("app", landing=root / "landing", out=contracts_dir / "app.yml", force=True,
                         max_items=10_000, min_entity_items=2, echo=lambda line: None)
    lines = [line for line in cdc.records if '"tableName":"app"' in line or ":table/app/stream/" in line]
    # The committed app models are scaffold's own, so scaffold rewrites them for the new contract.
    return stream_and_build(spark, "app", contracts_dir, copy_project(root / "project"), lines, root / "data")


def test_every_item_lands_in_its_entity_or_unrouted_and_none_in_quarantine(shop_round_trip: dict) -> None:
    report = shop_round_trip["report"]
    assert (report.records_in, report.quarantined) == (20, 0)
    assert {table: count for table, count in report.landed.items() if count} == {
        "online_shop_customers": 3, "online_shop_products": 2, "online_shop_warehouses": 2,
        "online_shop_warehouse_items": 3, "online_shop_order_items": 2, "online_shop_shipments": 2,
        "online_shop_shipment_items": 3, "online_shop_payments": 2, "online_shop_unrouted": 1}


def test_the_unedited_proposal_builds_green_with_its_tests(shop_round_trip: dict) -> None:
    result = shop_round_trip["result"]
    assert result.success, failure_summary(result)
    built = {node.node.name for node in result.result if str(node.status) == "success"}
    assert {f"stg_dynamodb__{raw_table}" for raw_table in shop_round_trip["entities"]} <= built
    assert "REVIEW: unrouted kind invoice" in shop_round_trip["contract_text"]


def test_the_inferred_casts_and_names_type_the_staging_columns(shop_round_trip: dict) -> None:
    with duckdb.connect(str(shop_round_trip["data_dir"] / "lakehouse.duckdb"), read_only=True) as con:
        rows = con.sql("select sk, date_value, typeof(date_value) from "
                       "lakehouse_staging.stg_dynamodb__online_shop_shipments order by sk").fetchall()
    assert [(sk, str(date_value), kind) for sk, date_value, kind in rows] == [
        ("sh#88899", "2020-06-22 08:20:00", "TIMESTAMP"), ("sh#98765", "2020-06-22 10:20:00", "TIMESTAMP")]


def test_the_inferred_app_contract_lands_every_change_and_builds_green(app_round_trip: dict) -> None:
    report, result = app_round_trip["report"], app_round_trip["result"]
    assert report.quarantined == 0
    assert app_round_trip["entities"] == ["app_apikeys", "app_audits", "app_invoices", "app_tenants", "app_users"]
    assert all(report.landed[raw_table] > 0 for raw_table in app_round_trip["entities"])
    assert report.landed.get("app_unrouted", 0) == 0
    assert result.success, failure_summary(result)
    built = {node.node.name for node in result.result if str(node.status) == "success"}
    assert {"stg_dynamodb__app_audits", "stg_dynamodb__app_apikeys", "agg_daily_invoiced_amount_by_tenant"} <= built
