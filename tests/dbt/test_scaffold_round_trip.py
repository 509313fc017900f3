"""A new single-table design from contract to tested models with no SQL written by hand:
the dbt project is copied to a temporary folder, a contract `shop` is added, `scaffold
--history` writes its dbt files, change records of both AWS formats (Kinesis Data
Streams for DynamoDB and DynamoDB Streams) go through the real pipeline into the local
Parquet sink, and one `dbt build` of the new models runs green with their tests."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from project_copy import copy_contracts, copy_project

from streaming.contracts.loader import CONTRACTS_DIR_ENV, load_contracts
from streaming.contracts.model import contracts_of_table
from streaming.io.formats.parquet.sink import LocalParquetSink
from streaming.io.quarantine_writer import QuarantineWriter
from streaming.operations.scaffold import scaffold
from streaming.pipeline.batch import Pipeline
from streaming.pipeline.envelope import ENVELOPE_SCHEMA
from streaming.runtime.dbt_runner import PROJECT_DIR, failure_summary, run_dbt

SHOP_CONTRACT = """\
table: shop
description: A small shop, every item kind in one DynamoDB table.
key:
  partition_key: pk
  sort_key: sk
attributes:
  pk:
    type: S
    description: CUSTOMER#<customer id>.
  sk:
    type: S
    description: <KIND>#<id>.
partitioning:
  column: customer_bucket
  expression: "substring(pk, -1, 1)"
unrouted_table: shop_unrouted
entities:
  carts:
    raw_table: shop_carts
    description: Shopping carts.
    match:
      sort_key_prefix: "CART#"
    attributes:
      total:
        type: N
        cast: decimal(10,2)
        description: Cart total.
      ownerEmail:
        type: S
        pii: true
        description: The owner's e-mail.
  wishes:
    raw_table: shop_wishes
    description: Wish-list entries.
    match:
      sort_key_prefix: "WISH#"
    attributes:
      sku:
        type: S
        description: Product wished for.
"""
T0 = 1_793_000_000  # 2026-10-27, epoch seconds


def _keys(pk: str, sk: str) -> dict:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def streams_record(name: str, pk: str, sk: str, image: dict | None, seconds: int, sequence: int, event_id: str) -> str:
    """DynamoDB Streams, as Lambda delivers it: the table in eventSourceARN, seconds, a sequence number."""
    dynamodb = {"Keys": _keys(pk, sk), "ApproximateCreationDateTime": seconds, "SequenceNumber": str(sequence),
                "StreamViewType": "NEW_AND_OLD_IMAGES"}
    if image is not None:
        dynamodb["NewImage"] = {**_keys(pk, sk), **image}
    return json.dumps({"eventID": event_id, "eventName": name, "eventSource": "aws:dynamodb",
                       "eventSourceARN": "arn:aws:dynamodb:eu-west-1:123456789012:table/shop/stream/2026-10-01T00:00:00.000",
                       "dynamodb": dynamodb})


def kinesis_record(name: str, pk: str, sk: str, image: dict | None, seconds: int, event_id: str) -> str:
    """Kinesis Data Streams for DynamoDB, as Firehose lands it: tableName, milliseconds, no sequence number."""
    dynamodb = {"Keys": _keys(pk, sk), "ApproximateCreationDateTime": seconds * 1000}
    if image is not None:
        dynamodb["NewImage"] = {**_keys(pk, sk), **image}
    return json.dumps({"awsRegion": "eu-west-1", "eventID": event_id, "eventName": name, "userIdentity": None,
                       "recordFormat": "application/json", "tableName": "shop", "dynamodb": dynamodb,
                       "eventSource": "aws:dynamodb"})


def _cart(total: str, email: str) -> dict:
    return {"total": {"N": total}, "ownerEmail": {"S": email}}


RECORDS = [
    kinesis_record("INSERT", "CUSTOMER#c1", "CART#1", _cart("12.50", "ann@example.com"), T0, "k1"),
    streams_record("MODIFY", "CUSTOMER#c1", "CART#1", _cart("20.00", "ann@example.com"), T0 + 10, 2, "s2"),
    # Delivered twice in the batch: lands once.
    streams_record("MODIFY", "CUSTOMER#c1", "CART#1", _cart("20.00", "ann@example.com"), T0 + 10, 2, "s2"),
    # Three decimals do not fit decimal(10,2): kept, flagged.
    streams_record("INSERT", "CUSTOMER#c2", "CART#1", _cart("1.005", "bob@example.com"), T0 + 20, 3, "s3"),
    kinesis_record("INSERT", "CUSTOMER#c3", "CART#9", _cart("5.00", "cy@example.com"), T0 + 30, "k4"),
    kinesis_record("REMOVE", "CUSTOMER#c3", "CART#9", None, T0 + 40, "k5"),
    streams_record("INSERT", "CUSTOMER#c1", "WISH#w1", {"sku": {"S": "LAMP"}}, T0 + 50, 6, "s6"),
    # A kind the contract does not know: unrouted, with its change record.
    kinesis_record("INSERT", "CUSTOMER#c1", "AUDIT#1", {"what": {"S": "login"}}, T0 + 60, "k7"),
]


@pytest.fixture(scope="module")
def shop_build(spark, tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("scaffold_round_trip")
    project = copy_project(root / "project")
    contracts_dir = copy_contracts(root / "contracts", {"shop.yml": SHOP_CONTRACT})
    data_dir = root / "data"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CONTRACTS_DIR_ENV, str(contracts_dir))
        contracts = load_contracts()
        written = scaffold("shop", project_dir=project, contracts=contracts, history=True).written
        envelope = spark.createDataFrame([(line, None, "round-trip") for line in RECORDS], ENVELOPE_SCHEMA)
        # The stream of the shop table alone: a pipeline writes every table it is given.
        shop = contracts_of_table(contracts, "shop")
        report = Pipeline(shop, LocalParquetSink(str(data_dir)), QuarantineWriter(str(data_dir))).process_batch(
            envelope, 0)
        result = run_dbt(["build", "--project-dir", str(project), "--profiles-dir", str(project),
                          "--select", "source:dynamodb.shop_carts_changes+", "source:dynamodb.shop_wishes_changes+",
                          "--exclude", "mart_freshness"], data_dir)
    return {"project": project, "data_dir": data_dir, "written": written, "report": report, "result": result}


def _query(data_dir: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(data_dir / "lakehouse.duckdb"), read_only=True) as con:
        return con.sql(sql).fetchall()


def test_scaffolded_models_build_green_with_their_tests_warning_of_a_bad_cast(shop_build: dict) -> None:
    result = shop_build["result"]
    assert result.success, failure_summary(result)
    statuses = {node.node.name: str(node.status) for node in result.result}
    assert {"stg_dynamodb__shop_carts", "stg_dynamodb__shop_carts_changes", "dim_shop_carts_history",
            "stg_dynamodb__shop_wishes", "stg_dynamodb__shop_wishes_changes", "dim_shop_wishes_history"} <= set(statuses)
    tests = {name: status for name, status in statuses.items() if status in ("pass", "warn", "fail", "error")}
    # Issue 30 item 2: the cart total 1.005 does not fit decimal(10,2); the build warns, naming the column.
    assert len(tests) >= 30 and {name: status for name, status in tests.items() if status != "pass"} == {
        "fits_contract_cast_stg_dynamodb__shop_carts_total": "warn"}
    assert any(name.startswith("holds_latest_raw_change_stg_dynamodb__shop_carts") for name in tests)
    assert any(name.startswith("unique_stg_dynamodb__shop_carts_item_key") for name in tests)


def test_both_aws_formats_land_per_entity_and_unrouted(shop_build: dict) -> None:
    report = shop_build["report"]
    assert (report.records_in, report.quarantined, report.duplicates_dropped) == (8, 0, 1)
    assert {table: report.landed[table] for table in ("shop_carts", "shop_wishes", "shop_unrouted")} == {
        "shop_carts": 5, "shop_wishes": 1, "shop_unrouted": 1}
    assert _query(shop_build["data_dir"], "select pk, sk, _change_record like '%AUDIT#1%' from raw.shop_unrouted") == [
        ("CUSTOMER#c1", "AUDIT#1", True)]


def test_current_state_is_typed_keyed_and_flagged(shop_build: dict) -> None:
    rows = _query(shop_build["data_dir"], "select item_key, total, total_text, owner_email, is_deleted, quality_issues, "
                                          "last_event_name from lakehouse_staging.stg_dynamodb__shop_carts order by 1")
    assert [(key, None if total is None else str(total), text, email, deleted, issues, event)
            for key, total, text, email, deleted, issues, event in rows] == [
        ("CUSTOMER#c1|CART#1", "20.00", "20.00", "ann@example.com", False, None, "MODIFY"),
        ("CUSTOMER#c2|CART#1", None, "1.005", "bob@example.com", False, "total_invalid", "INSERT"),
        ("CUSTOMER#c3|CART#9", None, None, None, True, None, "REMOVE"),
    ]
    assert _query(shop_build["data_dir"], "select count(*), count(distinct _event_id) "
                                          "from lakehouse_staging.stg_dynamodb__shop_carts_changes") == [(5, 5)]


def test_history_has_every_version_and_no_clear_pii(shop_build: dict) -> None:
    rows = _query(shop_build["data_dir"], "select pk, sk, version_number, total, owner_email, is_current, is_deleted "
                                          "from lakehouse_marts.dim_shop_carts_history order by pk, sk, version_number")
    assert [(pk, sk, number, None if total is None else str(total), current, deleted)
            for pk, sk, number, total, _email, current, deleted in rows] == [
        ("CUSTOMER#c1", "CART#1", 1, "12.50", False, False),
        ("CUSTOMER#c1", "CART#1", 2, "20.00", True, False),
        ("CUSTOMER#c2", "CART#1", 1, None, True, False),
        ("CUSTOMER#c3", "CART#9", 1, "5.00", False, True),
    ]
    emails = {row[4] for row in rows}
    assert not emails & {"ann@example.com", "bob@example.com", "cy@example.com"}
    assert all(len(email) == 64 for email in emails)  # keyed HMAC-SHA-256 pseudonyms


def test_scaffold_wrote_the_shop_files_and_the_contract_macros(shop_build: dict) -> None:
    written = {str(path) for path in shop_build["written"]}
    assert "dbt_project/models/staging/stg_dynamodb__shop_carts.sql" in written
    assert "dbt_project/models/marts/dim_shop_wishes_history.sql" in written
    casts = (shop_build["project"] / "macros/contracts/contract_casts.sql").read_text()
    assert '"shop_carts": {' in casts and '"decimal(10,2)"' in casts
    assert not (PROJECT_DIR / "dbt_project/models/staging/stg_dynamodb__shop_carts.sql").exists()
