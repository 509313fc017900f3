"""Routing single-table designs: every record lands in exactly one entity's raw table, or the unrouted one.

The cases are decoded together in one batch (one Spark plan); each test looks up its own
records by eventID. Records are built as AWS sends them: Kinesis Data Streams for DynamoDB
(tableName, epoch milliseconds, no sequence number) and DynamoDB Streams (table in the
stream ARN, epoch seconds, SequenceNumber).
"""
from __future__ import annotations

import json
import logging
import shutil
from datetime import datetime, timezone
from typing import Any

import pytest
import yaml

from streaming.contracts.loader import SAMPLE_CONTRACTS_DIR, load_contracts
from streaming.contracts.spark_schema import change_log_schema
from streaming.io.formats.parquet.sink import LocalParquetSink
from streaming.io.quarantine_writer import QuarantineWriter
from streaming.pipeline.batch import Pipeline
from streaming.pipeline.decode import decode_records, split_by_table
from streaming.pipeline.envelope import ENVELOPE_SCHEMA
from streaming.pipeline.ordering import latest_per_key

pytestmark = pytest.mark.spark

T0 = 1_700_000_000
# An attribute-routed single-table design: the item's `kind` says its entity, so a Put
# can turn one entity's item into another's at the same key.
THINGS = {
    "table": "things",
    "key": {"partition_key": "pk", "sort_key": "sk"},
    "attributes": {"pk": {"type": "S"}, "sk": {"type": "S"}},
    "partitioning": {"column": "pk_suffix", "expression": "substring(pk, -1, 1)"},
    "entities": {
        "people": {"raw_table": "thing_people", "match": {"attribute": "kind", "equals": "PERSON"},
                   "attributes": {"name": {"type": "S"}}},
        "bills": {"raw_table": "thing_bills", "match": {"attribute": "kind", "equals": "BILL"},
                  "attributes": {"total": {"type": "N"}}},
    },
}

# A design keeping each item's own record under one constant sort key (`PROFILE`): the
# partition key prefix tells users from orgs, and a whole-key rule keeps `PROFILE#2` out.
ACCOUNTS = {
    "table": "accounts",
    "key": {"partition_key": "pk", "sort_key": "sk"},
    "attributes": {"pk": {"type": "S"}, "sk": {"type": "S"}},
    "partitioning": {"column": "pk_suffix", "expression": "substring(pk, -1, 1)"},
    "entities": {
        "users": {"raw_table": "account_users",
                  "match": {"partition_key_prefix": "USER#", "sort_key_equals": "PROFILE"}},
        "orgs": {"raw_table": "account_orgs",
                 "match": {"partition_key_prefix": "ORG#", "sort_key_equals": "PROFILE"}},
    },
}


@pytest.fixture(scope="module")
def contracts(tmp_path_factory):
    directory = tmp_path_factory.mktemp("contracts")
    shutil.copy(SAMPLE_CONTRACTS_DIR / "app.yml", directory / "app.yml")
    (directory / "things.yml").write_text(yaml.safe_dump(THINGS, sort_keys=False), encoding="utf-8")
    (directory / "accounts.yml").write_text(yaml.safe_dump(ACCOUNTS, sort_keys=False), encoding="utf-8")
    return load_contracts(directory)


def account_keys(partition: str, sort: str) -> dict[str, Any]:
    return {"pk": {"S": partition}, "sk": {"S": sort}}


def record(
    table: str,
    event_name: str,
    keys: dict[str, Any],
    new: dict[str, Any] | None,
    old: dict[str, Any] | None,
    event_id: str,
    *,
    fmt: str = "kinesis",
    seconds: int = T0,
) -> str:
    dynamodb: dict[str, Any] = {"Keys": keys}
    if new is not None:
        dynamodb["NewImage"] = new
    if old is not None:
        dynamodb["OldImage"] = old
    if fmt == "streams":
        dynamodb |= {"ApproximateCreationDateTime": seconds, "SequenceNumber": str(seconds * 10),
                     "StreamViewType": "NEW_AND_OLD_IMAGES"}
        arn = f"arn:aws:dynamodb:eu-west-1:123456789012:table/{table}/stream/2026-11-01T00:00:00.000"
        return json.dumps({"eventID": event_id, "eventName": event_name, "eventSource": "aws:dynamodb",
                           "eventSourceARN": arn, "dynamodb": dynamodb})
    dynamodb["ApproximateCreationDateTime"] = seconds * 1000
    return json.dumps({"eventID": event_id, "eventName": event_name, "tableName": table,
                       "recordFormat": "application/json", "eventSource": "aws:dynamodb", "dynamodb": dynamodb})


def app_keys(tenant: str, sort_key: str) -> dict[str, Any]:
    return {"pk": {"S": f"TENANT#{tenant}"}, "sk": {"S": sort_key}}


def thing(key: str, kind: str | None, **values: dict[str, Any]) -> dict[str, Any]:
    image = {"pk": {"S": key}, "sk": {"S": key}, **values}
    if kind is not None:
        image["kind"] = {"S": kind}
    return image


USER = {**app_keys("t1", "USER#u1"), "email": {"S": "ana@example.com"}, "role": {"S": "ADMIN"}}
INVOICE = {**app_keys("t1", "INVOICE#i1"), "amount": {"N": "120.50"}, "currency": {"S": "EUR"},
           "lines": {"L": [{"M": {"sku": {"S": "A-1"}, "qty": {"N": "2"}}}]}}
AUDIT = {**app_keys("t1", "AUDIT#0001"), "action": {"S": "login"}, "weird.name": {"N": "1"}}
PERSON_KEY = {"pk": {"S": "k1"}, "sk": {"S": "k1"}}

CASES = [
    ("app", "INSERT", USER, "kinesis", "user-kinesis"),
    ("app", "INSERT", INVOICE, "streams", "invoice-streams"),
    ("app", "INSERT", {**app_keys("t1", "TENANT#t1"), "name": {"S": "Acme"}}, "kinesis", "tenant-kinesis"),
    ("app", "INSERT", AUDIT, "streams", "audit-streams"),
    ("app", "INSERT", AUDIT, "kinesis", "audit-kinesis"),
    ("app", "INSERT", {**app_keys("t1", "INVOICE#i2"), "amount": {"S": "lots"}}, "kinesis", "invoice-mistyped"),
]


@pytest.fixture(scope="module")
def decoded(spark, contracts):
    lines = [(record(table, name, {k: image[k] for k in ("pk", "sk")}, image, None, event_id, fmt=fmt), None, event_id)
             for table, name, image, fmt, event_id in CASES]
    lines += [
        # A REMOVE carries the key: Keys only (a NEW_IMAGE stream) routes by the sort key prefix.
        (record("app", "REMOVE", app_keys("t1", "USER#u9"), None, None, "user-remove-keys-only"), None, "r1"),
        (record("app", "REMOVE", app_keys("t1", "AUDIT#9"), None, None, "audit-remove", fmt="streams"), None, "r2"),
        # Attribute routes: a REMOVE routes by its OldImage; without one it cannot be routed.
        (record("things", "REMOVE", PERSON_KEY, None, thing("k1", "PERSON"), "person-remove"), None, "r3"),
        (record("things", "REMOVE", PERSON_KEY, None, None, "thing-remove-no-old-image"), None, "r4"),
        (record("things", "INSERT", PERSON_KEY, thing("k1", None), None, "thing-without-kind"), None, "r5"),
        # A Put turning a PERSON into a BILL at the same key.
        (record("things", "MODIFY", PERSON_KEY, thing("k1", "BILL", total={"N": "9"}),
                thing("k1", "PERSON", name={"S": "Ana"}), "person-becomes-bill", fmt="streams"), None, "r6"),
        # The same move, but the new item is mistyped: quarantined, and no tombstone either.
        (record("things", "MODIFY", PERSON_KEY, thing("k1", "BILL", total={"S": "x"}),
                thing("k1", "PERSON"), "bill-mistyped"), None, "r7"),
        # Whole sort keys: the constant routes by partition key prefix; a longer key is no match.
        (record("accounts", "INSERT", account_keys("USER#u1", "PROFILE"), account_keys("USER#u1", "PROFILE"), None,
                "user-profile"), None, "r9"),
        (record("accounts", "INSERT", account_keys("ORG#o1", "PROFILE"), account_keys("ORG#o1", "PROFILE"), None,
                "org-profile", fmt="streams"), None, "r10"),
        (record("accounts", "INSERT", account_keys("USER#u1", "PROFILE#2"), account_keys("USER#u1", "PROFILE#2"),
                None, "user-profile-2"), None, "r11"),
        (record("accounts", "REMOVE", account_keys("ORG#o2", "PROFILE"), None, None, "org-remove-keys-only"), None,
         "r12"),
        # A MODIFY within one entity leaves nothing behind.
        (record("things", "MODIFY", PERSON_KEY, thing("k1", "PERSON", name={"S": "Bo"}),
                thing("k1", "PERSON", name={"S": "Ana"}), "person-renamed"), None, "r8"),
    ]
    # Decoded once and kept, as Pipeline.process_batch keeps a batch's decoded records: each
    # raw table's rows are then read from the kept records, instead of planning the whole
    # decode again for every table (decode_batch's fenced frame is for a single read).
    records = decode_records(spark.createDataFrame(lines, ENVELOPE_SCHEMA), contracts).cache()
    tables, quarantine = split_by_table(records, contracts)
    rows: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for raw_table, frame in tables.items():
        for row in frame.collect():
            rows.setdefault(row["_event_id"], []).append((raw_table, row.asDict(recursive=True)))
    for row in quarantine.collect():
        rows.setdefault(json.loads(row["payload"])["eventID"], []).append(("quarantine", row.asDict()))
    records.unpersist()
    return rows


def landed(decoded, event_id: str) -> list[str]:
    return sorted(raw_table for raw_table, _ in decoded[event_id])


@pytest.mark.parametrize(
    ("event_id", "raw_table"),
    [
        ("user-kinesis", "app_users"),
        ("invoice-streams", "app_invoices"),
        ("tenant-kinesis", "app_tenants"),
        ("audit-streams", "app_unrouted"),
        ("audit-kinesis", "app_unrouted"),
        ("user-remove-keys-only", "app_users"),
        ("audit-remove", "app_unrouted"),
        ("person-remove", "thing_people"),
        ("thing-remove-no-old-image", "things_unrouted"),
        ("thing-without-kind", "things_unrouted"),
        ("person-renamed", "thing_people"),
        ("user-profile", "account_users"),
        ("org-profile", "account_orgs"),
        ("user-profile-2", "accounts_unrouted"),
        ("org-remove-keys-only", "account_orgs"),
    ],
)
def test_each_record_lands_in_exactly_one_raw_table(decoded, event_id, raw_table):
    assert landed(decoded, event_id) == [raw_table]


def test_an_entity_row_is_typed_by_its_entitys_attributes(decoded):
    ((_, user),) = decoded["user-kinesis"]
    assert (user["pk"], user["sk"], user["email"], user["role"], user["tenant_bucket"]) == (
        "TENANT#t1", "USER#u1", "ana@example.com", "ADMIN", "1")
    ((_, invoice),) = decoded["invoice-streams"]
    assert (invoice["amount"], invoice["currency"], invoice["lines"]) == ("120.50", "EUR", [{"sku": "A-1", "qty": "2"}])
    assert invoice["_extra_attributes"] is None


def test_an_unrouted_row_keeps_its_keys_its_image_and_its_change_record(decoded):
    ((_, audit),) = decoded["audit-streams"]
    assert (audit["pk"], audit["sk"], audit["_event_name"]) == ("TENANT#t1", "AUDIT#0001", "INSERT")
    assert json.loads(audit["_extra_attributes"]) == {"action": {"S": "login"}, '["weird.name"]': {"N": "1"}}
    assert json.loads(audit["_change_record"])["dynamodb"]["NewImage"] == AUDIT


def test_a_mistyped_entity_item_is_quarantined_with_its_attribute(decoded):
    ((where, row),) = decoded["invoice-mistyped"]
    assert (where, row["reason"], row["_source_table"]) == ("quarantine", "type_mismatch:amount:N", "app")


def test_an_item_changing_entity_lands_a_tombstone_where_it_left(decoded):
    moved = dict(decoded["person-becomes-bill"])
    assert sorted(moved) == ["thing_bills", "thing_people"]
    bill, left = moved["thing_bills"], moved["thing_people"]
    assert (bill["_event_name"], bill["_is_deleted"], bill["total"]) == ("MODIFY", False, "9")
    assert (left["_event_name"], left["_is_deleted"], left["_is_ttl_delete"], left["name"]) == (
        "REMOVE", True, False, None)
    assert (left["pk"], left["sk"], left["pk_suffix"]) == ("k1", "k1", "1")
    assert (left["_event_id"], left["_ordering_value"]) == (bill["_event_id"], bill["_ordering_value"])


def test_a_quarantined_move_lands_nothing_anywhere(decoded):
    assert landed(decoded, "bill-mistyped") == ["quarantine"]


FIXED_NOW = datetime(2026, 11, 2, tzinfo=timezone.utc)


def test_a_batch_counts_unrouted_and_moved_items_and_each_key_is_current_in_one_entity(
    spark, tmp_path, contracts, caplog
):
    lines = [
        record("things", "INSERT", PERSON_KEY, thing("k1", "PERSON", name={"S": "Ana"}), None, "p1", seconds=T0),
        record("things", "INSERT", PERSON_KEY, thing("k1", "PERSON", name={"S": "Ana"}), None, "p1", seconds=T0),
        record("things", "MODIFY", PERSON_KEY, thing("k1", "BILL", total={"N": "9"}),
               thing("k1", "PERSON", name={"S": "Ana"}), "p2", seconds=T0 + 5),
        record("app", "INSERT", app_keys("t1", "AUDIT#1"), AUDIT, None, "a1"),
        record("app", "INSERT", app_keys("t1", "USER#u1"), USER, None, "u1"),
    ]
    pipeline = Pipeline(contracts, LocalParquetSink(str(tmp_path)), QuarantineWriter(str(tmp_path)),
                        clock=lambda: FIXED_NOW)
    envelope = spark.createDataFrame([(line, None, "test") for line in lines], ENVELOPE_SCHEMA)
    with caplog.at_level(logging.INFO, logger="streaming.pipeline.batch"):
        report = pipeline.process_batch(envelope, 0)

    assert (report.records_in, report.quarantined, report.duplicates_dropped) == (5, 0, 1)
    assert (report.unrouted, report.moved) == (1, 1)
    assert {table: rows for table, rows in report.landed.items() if rows} == {
        "app_users": 1, "app_unrouted": 1, "thing_people": 2, "thing_bills": 1}
    assert "quarantined=0 unrouted=1 duplicates_dropped=1" in caplog.text

    def current(raw_table: str) -> list[tuple[str, bool]]:
        contract = contracts[raw_table]
        changes = spark.read.schema(change_log_schema(contract)).parquet(str(tmp_path / "raw" / contract.changes_table))
        return [(row.pk, row._is_deleted) for row in latest_per_key(changes, contract).collect()]

    assert current("thing_people") == [("k1", True)]
    assert current("thing_bills") == [("k1", False)]
