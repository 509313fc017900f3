"""The cheap test that decides which records build `_extra_attributes`
(`extras.may_hold_undeclared`): it may say yes to an image with nothing undeclared (the
build then finds nothing), never no to one with an undeclared field at any depth. And it
must say no to plain images, or every record pays for the build again.

The oracle is the build itself, run for every record (the test forced to yes), over the
sample generator's records and images made to trip a key count: names that are type
keys, nested names that are declared elsewhere, escaped quotes before colons, JSON nulls.
"""
from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from packaged_contracts import packaged_contracts_dir
from streaming.contracts.loader import load_contracts
from streaming.contracts.model import TableContract
from streaming.pipeline import decode, extras
from streaming.pipeline.attributes import typed_image
from streaming.pipeline.envelope import ENVELOPE_SCHEMA, parse_projections, project
from streaming.samples.generator import generate_cdc

pytestmark = pytest.mark.spark

ORDER_KEYS = {"customerId": {"S": "cust-7"}, "orderId": {"S": "ord-1"}}
PLAIN_ORDER = {
    **ORDER_KEYS,
    "status": {"S": "PAID"},
    "amount": {"N": "12.50"},
    "isGift": {"BOOL": False},
    "giftMessage": {"NULL": True},
    "tags": {"SS": ["vip"]},
    "lineItems": {"L": [{"M": {"sku": {"S": "A-1"}, "quantity": {"N": "1"}}}, {"NULL": True}]},
    "shippingAddress": {"M": {"city": {"S": "Ghent"}}},
}
# eventID -> (the image, whether it holds an undeclared field)
EDGE_IMAGES: dict[str, tuple[dict[str, Any], bool]] = {
    "plain": (PLAIN_ORDER, False),
    # Names that are descriptor keys, at the top and inside an M.
    "top-level-type-key": ({**PLAIN_ORDER, "S": {"S": "x"}}, True),
    "nested-null-key": ({**PLAIN_ORDER, "shippingAddress": {"M": {"city": {"S": "Ghent"}, "NULL": {"BOOL": True}}}}, True),
    # A name declared at the top level, inside an M, and one declared inside the M, at the top.
    "top-level-name-nested": ({**PLAIN_ORDER, "shippingAddress": {"M": {"amount": {"N": "1"}}}}, True),
    "nested-name-top-level": ({**PLAIN_ORDER, "city": {"S": "Ghent"}}, True),
    # An undeclared field in the second list item only, and an item holding only one.
    "second-item": (
        {**PLAIN_ORDER, "lineItems": {"L": [{"M": {"sku": {"S": "A"}}}, {"M": {"sku": {"S": "B"}, "note": {"S": "n"}}}]}},
        True,
    ),
    "item-only-undeclared": ({**PLAIN_ORDER, "lineItems": {"L": [{"M": {"giftWrap": {"BOOL": True}}}]}}, True),
    # An undeclared name holding a quote and a colon, and one holding nothing but a colon.
    "name-with-quote-colon": ({**PLAIN_ORDER, 'a":b': {"S": "1"}}, True),
    "name-colon": ({**PLAIN_ORDER, ":": {"S": "1"}}, True),
    # Undeclared fields of one key each: a bare value and an empty object.
    "bare-nested-value": ({**PLAIN_ORDER, "shippingAddress": {"M": {"city": {"S": "Ghent"}, "floor": 3}}}, True),
    "empty-object": ({**PLAIN_ORDER, "legacy": {}}, True),
    # Nothing undeclared, but more key ends than keys the typed image accounts for: the
    # build runs and finds nothing.
    "escaped-quote-before-colon": ({**PLAIN_ORDER, "status": {"S": 'say "x": y'}}, False),
    "declared-json-null": ({**PLAIN_ORDER, "currency": None}, False),
    "descriptor-with-two-keys": ({**PLAIN_ORDER, "status": {"S": "PAID", "N": "1"}}, False),
    "empty-m": ({**PLAIN_ORDER, "shippingAddress": {"M": {}}}, False),
    "null-m": ({**PLAIN_ORDER, "shippingAddress": {"NULL": True}}, False),
}
# The images above the key count cannot tell from ones with an undeclared field.
COUNTED_AS_POSSIBLE = {"escaped-quote-before-colon", "declared-json-null", "descriptor-with-two-keys"}


def order_insert(event_id: str, image: dict[str, Any]) -> str:
    """A Kinesis Data Streams for DynamoDB record of an orders INSERT."""
    return json.dumps({
        "awsRegion": "eu-west-1",
        "eventID": event_id,
        "eventName": "INSERT",
        "recordFormat": "application/json",
        "tableName": "orders",
        "dynamodb": {"ApproximateCreationDateTime": 1764547200000, "Keys": ORDER_KEYS, "NewImage": image,
                     "SizeBytes": 100},
        "eventSource": "aws:dynamodb",
    })


@pytest.fixture(scope="module")
def contracts(tmp_path_factory) -> dict[str, TableContract]:
    return load_contracts(packaged_contracts_dir(tmp_path_factory.mktemp("extras") / "contracts", "customers", "orders"))


@pytest.fixture(scope="module")
def envelope(spark: SparkSession) -> DataFrame:
    generated = generate_cdc(customers=40, malformed_rate=0.0)
    payloads = generated.records + [order_insert(event_id, image) for event_id, (image, _) in EDGE_IMAGES.items()]
    rows = [(payload, None, f"test:{index}") for index, payload in enumerate(payloads)]
    return spark.createDataFrame(rows, ENVELOPE_SCHEMA).cache()


def extras_per_record(envelope: DataFrame, contracts: dict[str, TableContract]) -> dict[tuple[str, str], str | None]:
    """(raw table, eventID) -> `_extra_attributes` of every row the decode lands."""
    tables, _ = decode.decode_batch(envelope, contracts)
    return {
        (table, row["_event_id"]): row["_extra_attributes"]
        for table, rows in tables.items()
        for row in rows.select("_event_id", "_extra_attributes").collect()
    }


def fast_path_answers(envelope: DataFrame, contract: TableContract) -> dict[str, bool]:
    """eventID -> `may_hold_undeclared` of each of the table's INSERT/MODIFY images."""
    parsed = project(envelope, parse_projections({contract.table}, False))
    rows = (
        parsed.where((F.col("_source_table") == contract.table) & ~F.col("_is_deleted"))
        .select("_event_id", extras.may_hold_undeclared(contract, typed_image(contract)).alias("may_hold"))
        .collect()
    )
    return {row["_event_id"]: row["may_hold"] for row in rows}


@pytest.fixture(scope="module")
def with_check(envelope, contracts):
    return extras_per_record(envelope, contracts)


@pytest.fixture(scope="module")
def built_for_every_record(envelope, contracts):
    decode.decode_projections.cache_clear()
    check = extras.may_hold_undeclared
    extras.may_hold_undeclared = lambda *_: F.lit(True)
    try:
        return extras_per_record(envelope, contracts)
    finally:
        extras.may_hold_undeclared = check
        decode.decode_projections.cache_clear()


def test_the_check_keeps_every_undeclared_field_the_build_finds(with_check, built_for_every_record):
    assert with_check == built_for_every_record
    found = {key for key, value in built_for_every_record.items() if value is not None}
    # The oracle run saw undeclared fields in generated records and in the edge images.
    assert {event_id for _, event_id in found} >= {event_id for event_id, (_, holds) in EDGE_IMAGES.items() if holds}
    assert any(not event_id.startswith(tuple(EDGE_IMAGES)) for _, event_id in found)


def test_edge_images_decode_to_what_they_hold(with_check):
    for event_id, (_, holds) in EDGE_IMAGES.items():
        assert (with_check[("orders", event_id)] is not None) == holds, event_id
    assert json.loads(with_check[("orders", "top-level-type-key")]) == {"S": {"S": "x"}}
    assert json.loads(with_check[("orders", "nested-null-key")]) == {"shippingAddress.NULL": {"BOOL": True}}
    assert json.loads(with_check[("orders", "top-level-name-nested")]) == {"shippingAddress.amount": {"N": "1"}}
    assert json.loads(with_check[("orders", "second-item")]) == {"lineItems[1].note": {"S": "n"}}
    assert json.loads(with_check[("orders", "name-with-quote-colon")]) == {'["a\\":b"]': {"S": "1"}}


def test_images_with_nothing_undeclared_skip_the_build(envelope, contracts, built_for_every_record):
    for table, contract in contracts.items():
        answers = fast_path_answers(envelope, contract)
        plain = {event_id for (raw, event_id), value in built_for_every_record.items()
                 if raw == contract.raw_table and value is None and event_id in answers}
        assert len(plain) > 20, table
        expected_yes = COUNTED_AS_POSSIBLE if table == "orders" else set()
        assert {event_id for event_id in plain if answers[event_id]} == expected_yes, table
        assert all(answers[event_id] for (raw, event_id), value in built_for_every_record.items()
                   if raw == contract.raw_table and value is not None and event_id in answers)
