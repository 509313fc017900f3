"""Issue 31, item 3, and issue 45, A1-A4: infer -> scaffold -> stream -> dbt build, with the
proposal unedited.

Two tables: AWS's public AnOnlineShop model (tests/fixtures/inference/README.md), and
the generator's `app`, whose packaged app.yml the proposal replaces. Each contract is
what `lakehouse contract infer` writes, untouched; scaffold writes the dbt side into a
copy of the project; the items go through the real pipeline as change records; one
`dbt build` of the table's models runs green. Every item lands in its entity or in the
unrouted table, none in quarantine.

Then three single-table designs in public shapes (battle_royale, constant_sort_keys,
github_accounts: own records under `#METADATA#` or a constant sort key, a kind with one
value in its sort key, one sort key prefix under two partition key prefixes, and a type
attribute), through both sinks: every kind lands in an entity of its own, nothing in the
unrouted tables, and every raw value equals what boto3's TypeDeserializer reads from the
item."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest
from boto3.dynamodb.types import TypeDeserializer
from project_copy import copy_contracts, copy_project

from lakehouse_dbt.hudi_raw import load_hudi_tables, read_hudi_snapshot
from streaming.contracts.loader import CONTRACTS_DIR_ENV, load_contracts
from streaming.contracts.model import AttributeSpec, TableContract, contracts_of_table
from streaming.io import layout as raw_layout
from streaming.io.formats.hudi.format import HUDI
from streaming.io.formats.hudi.sink import HudiSink
from streaming.io.formats.parquet.sink import LocalParquetSink
from streaming.io.quarantine_writer import QuarantineWriter
from streaming.operations.contract_infer import infer_table_contract
from streaming.operations.scaffold import scaffold
from streaming.pipeline.batch import Pipeline
from streaming.pipeline.envelope import ENVELOPE_SCHEMA
from streaming.runtime.dbt_runner import failure_summary, run_dbt
from streaming.samples.generator import generate_cdc, land_cdc

MODEL = Path(__file__).parents[1] / "fixtures" / "inference" / "AnOnlineShop_facets.json"
TABLE = "OnlineShop"
T0_MS = 1_793_000_000_000  # 2026-10-27


FIXTURES = MODEL.parent
# table -> its items, in the shapes of public single-table designs (fixtures README).
SINGLE_TABLE_DESIGNS = {"BattleRoyale": "battle_royale.jsonl", "Accounts": "constant_sort_keys.jsonl",
                        "GitHub": "github_accounts.jsonl"}


def model_items() -> list[dict]:
    (table,) = json.loads(MODEL.read_text())["DataModel"]
    return [item for facet in table["TableFacets"] for item in facet["TableData"]]


def insert_record(item: dict, number: int, table: str = TABLE) -> str:
    keys = {"PK": item["PK"], "SK": item["SK"]}
    return json.dumps({"awsRegion": "eu-west-1", "eventID": f"{table}-{number}", "eventName": "INSERT",
                       "userIdentity": None, "recordFormat": "application/json", "tableName": table,
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


# --------------------------------------------------------------------------- single-table designs, both sinks


def design_items(table: str) -> list[dict]:
    items = [json.loads(line) for line in (FIXTURES / SINGLE_TABLE_DESIGNS[table]).read_text().splitlines()]
    assert len({(item["PK"]["S"], item["SK"]["S"]) for item in items}) == len(items), "one item per key"
    return items


@pytest.fixture(scope="module", params=["parquet", "hudi"])
def designs_round_trip(request: pytest.FixtureRequest, spark, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The three designs inferred, scaffolded, streamed in one batch through one sink, built."""
    sink_name = request.param
    session = request.getfixturevalue("hudi_spark") if sink_name == "hudi" else spark
    root = tmp_path_factory.mktemp(f"infer_designs_{sink_name}")
    contracts_dir = copy_contracts(root / "contracts", {})
    project, data_dir = copy_project(root / "project"), root / "data"
    lines = []
    for table, file_name in SINGLE_TABLE_DESIGNS.items():
        infer_table_contract(table, sample=FIXTURES / file_name, out=contracts_dir / f"{table}.yml",
                             max_items=10_000, min_entity_items=2, echo=lambda line: None)
        lines += [insert_record(item, number, table) for number, item in enumerate(design_items(table))]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CONTRACTS_DIR_ENV, str(contracts_dir))
        every_contract = load_contracts()
        for table in SINGLE_TABLE_DESIGNS:
            scaffold(table, project_dir=project, contracts=every_contract)
        # Only the designs' raw tables are streamed: each further contract adds planning time.
        contracts = {name: contract for name, contract in every_contract.items()
                     if contract.table in SINGLE_TABLE_DESIGNS}
        sink = (HudiSink(str(data_dir / "raw"), "raw", contracts, sync_mode="none", stream_id="infer-designs")
                if sink_name == "hudi" else LocalParquetSink(str(data_dir)))
        envelope = session.createDataFrame([(line, None, "infer-designs") for line in lines], ENVELOPE_SCHEMA)
        report = Pipeline(contracts, sink, QuarantineWriter(str(data_dir))).process_batch(envelope, 0)
        entities = sorted(name for name, contract in contracts.items() if not contract.unrouted)
        args = ["build", "--project-dir", str(project), "--profiles-dir", str(project),
                "--select", *(f"source:dynamodb.{raw_table}_changes+" for raw_table in entities)]
        if sink_name == "hudi":
            # As `lakehouse dbt` does: hudi-rs loads the Hudi tables into DuckDB for dbt to read.
            load_hudi_tables(data_dir, {name: str(path) for name, path in HUDI.tables_in(data_dir / "raw").items()})
            # dbt's tests run on the Parquet side; the sink differential shows both sinks give the same tables.
            args += ["--vars", "{raw_format: hudi}", "--exclude-resource-type", "test", "unit_test"]
        result = run_dbt(args, data_dir)
    return {"sink": sink_name, "data_dir": data_dir, "contracts": contracts, "report": report, "result": result,
            "entities": entities}


def landed_rows(round_trip: dict, contract: TableContract) -> list[dict[str, Any]]:
    """The raw table's current rows as the sink wrote them, read back without Spark."""
    raw = round_trip["data_dir"] / "raw"
    with duckdb.connect() as con:
        if round_trip["sink"] == "hudi":
            con.register("landed", read_hudi_snapshot(str(raw / contract.raw_table)))
        else:
            files = [str(path) for path in raw_layout.change_log_files(raw_layout.change_log_dir(raw, contract))]
            con.read_parquet(files, union_by_name=True).create_view("landed")
        cursor = con.execute("select * from landed")
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]


def same_value(spec: AttributeSpec, landed: Any, expected: Any) -> bool:
    """Whether a raw value holds what TypeDeserializer reads (numbers stay exact text)."""
    if expected is None or isinstance(expected, (bool, str)):
        return landed == expected
    if isinstance(expected, Decimal):
        return landed is not None and Decimal(landed) == expected
    if isinstance(expected, set):
        return landed is not None and sorted(landed) == sorted(expected)
    if isinstance(expected, list):
        assert spec.items is not None
        return landed is not None and len(landed) == len(expected) and all(
            same_value(spec.items, one, other) for one, other in zip(landed, expected))
    assert isinstance(expected, dict)
    return landed is not None and all(
        same_value(field, landed[field.column], expected.get(field.name)) for field in spec.fields)


def test_every_kind_of_the_designs_lands_in_an_entity_of_its_own_and_none_unrouted(designs_round_trip: dict) -> None:
    report, contracts = designs_round_trip["report"], designs_round_trip["contracts"]
    items = sum(len(design_items(table)) for table in SINGLE_TABLE_DESIGNS)
    assert (report.records_in, report.quarantined, report.unrouted) == (items, 0, 0)
    landed = {table: count for table, count in report.landed.items() if count}
    assert landed == {
        "battle_royale_game_users": 12, "battle_royale_users": 6, "battle_royale_games": 5,
        "accounts_country_states": 15, "accounts_order_statuses": 14, "accounts_orders": 6, "accounts_users": 6,
        "accounts_devices": 5, "accounts_orgs": 5,
        "git_hub_repo_issues": 8, "git_hub_users": 6, "git_hub_organizations": 6, "git_hub_repos": 5}
    assert sum(landed.values()) == items
    assert {contracts[table].route.sort_key_equals for table in ("accounts_users", "accounts_orgs")} == {"PROFILE"}


def test_the_designs_unedited_proposals_build_green(designs_round_trip: dict) -> None:
    result = designs_round_trip["result"]
    assert result.success, failure_summary(result)
    built = {node.node.name for node in result.result if str(node.status) == "success"}
    assert {f"stg_dynamodb__{raw_table}" for raw_table in designs_round_trip["entities"]} <= built
    tested = [node for node in result.result if node.node.resource_type == "test"]
    assert (len(tested) > 100) == (designs_round_trip["sink"] == "parquet")
    with duckdb.connect(str(designs_round_trip["data_dir"] / "lakehouse.duckdb"), read_only=True) as con:
        states = con.execute("select count(*) from lakehouse_staging.stg_dynamodb__accounts_country_states").fetchone()
        players = con.execute("select count(*) from lakehouse_staging.stg_dynamodb__battle_royale_game_users").fetchone()
    assert (states, players) == ((15,), (12,))


def test_every_landed_value_is_what_boto3_reads_from_the_item(designs_round_trip: dict) -> None:
    deserialize = TypeDeserializer().deserialize
    contracts = designs_round_trip["contracts"]
    compared = 0
    for table in SINGLE_TABLE_DESIGNS:
        items = {(item["PK"]["S"], item["SK"]["S"]): item for item in design_items(table)}
        for contract in contracts_of_table(contracts, table).values():
            if contract.unrouted:
                continue  # empty: the first test shows no row landed there
            for row in landed_rows(designs_round_trip, contract):
                item = items.pop((row["PK".lower()], row["SK".lower()]))
                for spec in contract.attributes:
                    expected = deserialize(item[spec.name]) if spec.name in item else None
                    assert same_value(spec, row[spec.column], expected), (contract.raw_table, spec.name, row)
                    compared += spec.name in item
                # What the contract does not declare is kept whole in _extra_attributes.
                undeclared = {name for name in item if name not in {spec.name for spec in contract.attributes}}
                extra = json.loads(row["_extra_attributes"]) if row["_extra_attributes"] else {}
                assert set(extra) == undeclared, (contract.raw_table, extra)
        assert items == {}, f"{table}: items that landed nowhere: {sorted(items)}"
    assert compared > 300
