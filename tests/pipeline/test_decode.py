"""decode_batch: both AWS record formats, every attribute type, every quarantine reason."""
from __future__ import annotations

import base64
import dataclasses
import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from boto3.dynamodb.types import TypeDeserializer
from change_records import CONTRACTS, T0_SECONDS, change_record
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from streaming.contracts.loader import load_contracts
from streaming.contracts.model import PIPELINE_COLUMNS, ContractError, TableContract
from streaming.contracts.spark_schema import raw_schema
from streaming.pipeline.decode import QUARANTINE_COLUMNS, decode_batch, decode_projections, decoded_and_kept
from streaming.pipeline.envelope import ENVELOPE_SCHEMA

pytestmark = pytest.mark.spark

FIXTURES = Path(__file__).parents[1] / "fixtures" / "records"


@pytest.fixture(scope="module")
def contracts(tmp_path_factory) -> dict[str, TableContract]:
    directory = tmp_path_factory.mktemp("contracts")
    for name, document in CONTRACTS.items():
        (directory / f"{name}.yml").write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return load_contracts(directory)


@pytest.fixture(scope="module")
def customers_only(contracts) -> dict[str, TableContract]:
    """For the tests whose records are all customers': the orders' contract, with its
    nested attributes, would only add Spark planning to each of their decodes."""
    return {"customers": contracts["customers"]}


def customer(
    event_name: str = "INSERT",
    customer_id: str = "cust-1",
    name: str = "Ada",
    email: str | None = "ada@example.com",
    **options: Any,
) -> dict[str, Any]:
    keys = {"id": {"S": customer_id}, "custName": {"S": name}}
    image = None
    if event_name != "REMOVE":
        image = dict(keys)
        if email is not None:
            image["email"] = {"S": email}
    return change_record("customers", event_name, keys, image, **options)


KINESIS_SEQUENCE = "49640912345678901234567890123456789012345678901234567890"  # 56 digits


def payload_text(record: dict[str, Any] | str | None) -> str | None:
    return json.dumps(record) if isinstance(record, dict) else record


def envelope(
    spark: SparkSession, *records: dict[str, Any] | str | None, kinesis_sequence: str | None = KINESIS_SEQUENCE
) -> DataFrame:
    """One envelope row per record (dicts become JSON text, anything else is sent as is)."""
    rows = [(payload_text(record), kinesis_sequence, f"test:{index}") for index, record in enumerate(records)]
    return spark.createDataFrame(rows, ENVELOPE_SCHEMA)


def utc(*args: int) -> datetime:
    """A UTC instant as PySpark collects timestamps: naive, in the Python process's local zone."""
    return datetime(*args, tzinfo=timezone.utc).astimezone().replace(tzinfo=None)


def utc_digits(collected: datetime) -> str:
    """`yyyyMMddHHmmssSSSSSS` in UTC of a collected (naive, local) timestamp."""
    return collected.astimezone(timezone.utc).strftime("%Y%m%d%H%M%S%f")


def without(record: dict[str, Any], *path: str) -> dict[str, Any]:
    node = record
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return record


def with_value(record: dict[str, Any], value: Any, *path: str) -> dict[str, Any]:
    node = record
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return record


# -- one shared batch ------------------------------------------------------------------------
# Spark compiles a plan per query, so the single-record cases below are decoded together,
# in one batch, and each test looks up what became of its own record.

CASES: dict[str, tuple[dict[str, Any] | str | None, str | None]] = {}


def case(name: str, record: dict[str, Any] | str | None, kinesis_sequence: str | None = KINESIS_SEQUENCE) -> str:
    """Register a record for the shared batch; its eventID becomes `name` to find its row."""
    assert name not in CASES, name
    if isinstance(record, dict):
        record["eventID"] = name
    CASES[name] = (record, kinesis_sequence)
    return name


@dataclasses.dataclass(frozen=True)
class Outcome:
    table: str | None  # None: quarantined
    row: dict[str, Any]


@pytest.fixture(scope="module")
def outcomes(spark, contracts) -> dict[str, Outcome]:
    return decode_cases(spark, contracts)


def decode_cases(spark: SparkSession, contracts: dict[str, TableContract]) -> dict[str, Outcome]:
    """Every case decoded in one batch, as process_batch decodes one: the decoded records
    kept apart from the decode's plan, then split (decoded_and_kept), so the batch is
    decoded once for its three outputs instead of once for each."""
    rows = [(payload_text(record), sequence, name) for name, (record, sequence) in CASES.items()]
    with decoded_and_kept(spark.createDataFrame(rows, ENVELOPE_SCHEMA), contracts) as (tables, quarantine):
        found: list[tuple[str, Outcome]] = [
            (row["_event_id"], Outcome(table, row.asDict(recursive=True)))
            for table, frame in tables.items()
            for row in frame.collect()
        ]
        found += [(row["source_ref"], Outcome(None, row.asDict())) for row in quarantine.collect()]
    # Every record comes out exactly once, in some table or in the quarantine.
    assert sorted(name for name, _ in found) == sorted(CASES)
    return dict(found)


def decoded(outcomes: dict[str, Outcome], name: str, table: str = "customers") -> dict[str, Any]:
    outcome = outcomes[name]
    assert outcome.table == table, outcome.row
    return outcome.row


def reason(outcomes: dict[str, Outcome], name: str) -> str:
    outcome = outcomes[name]
    assert outcome.table is None, f"{name} was not quarantined"
    return outcome.row["reason"]


# -- formats, table routing, metadata --------------------------------------------------------

FORMAT_CASES = (
    case("format-streams", customer(fmt="streams", created=T0_SECONDS, sequence_number="5" * 21)),
    case("format-kinesis", customer(fmt="kinesis", created=T0_SECONDS * 1000)),
)


def test_both_aws_formats_decode_to_the_same_row(outcomes):
    streams, kinesis = (decoded(outcomes, name) for name in FORMAT_CASES)

    columns = {"id", "cust_name", "email", "registration_date", "id_suffix"}
    columns |= {"_event_ts", "_event_name", "_source_table"}
    assert {k: streams[k] for k in columns} == {k: kinesis[k] for k in columns} == {
        "id": "cust-1",
        "cust_name": "Ada",
        "email": "ada@example.com",
        "registration_date": None,
        "id_suffix": "1",
        "_event_ts": utc(2023, 11, 14, 22, 13, 20),
        "_event_name": "INSERT",
        "_source_table": "customers",  # from eventSourceARN, and from tableName
    }
    # DynamoDB's own sequence number when present, else the Kinesis one.
    assert streams["_sequence_number"] == ("5" * 21).rjust(64, "0")
    assert kinesis["_sequence_number"] == KINESIS_SEQUENCE.rjust(64, "0")


SAMPLE_CASES = tuple(
    case(f"sample-{path.stem}", json.loads(path.read_text(encoding="utf-8")))
    for path in sorted(FIXTURES.glob("*.json"))
)


def test_hand_written_aws_samples_decode(outcomes):
    modify = decoded(outcomes, "sample-dynamodb_streams_modify")
    remove = decoded(outcomes, "sample-kinesis_remove_ttl")

    assert (modify["id"], modify["cust_name"], modify["email"]) == ("cust-0007", "Ada Lovelace", "ada@example.com")
    assert (modify["_event_name"], modify["_is_deleted"], modify["_is_ttl_delete"]) == ("MODIFY", False, False)
    assert modify["_sequence_number"] == "111100000000012345678901".rjust(64, "0")
    assert json.loads(modify["_extra_attributes"]) == {"loyaltyTier": {"S": "gold"}}
    assert remove["_event_ts"] == utc(2023, 11, 14, 22, 15, 0, 123456)
    assert (remove["_is_deleted"], remove["_is_ttl_delete"]) == (True, True)
    assert (remove["id"], remove["cust_name"], remove["email"]) == ("cust-0007", "Ada Lovelace", None)
    assert remove["_extra_attributes"] is None


EVENT_TIME_CASES = [
    (case(f"time-{index}", customer(fmt=fmt, created=created, precision=precision)), expected)
    for index, (fmt, created, precision, expected) in enumerate(
        [
            ("streams", T0_SECONDS, None, utc(2023, 11, 14, 22, 13, 20)),
            ("streams", 1_700_000_000.123456, None, utc(2023, 11, 14, 22, 13, 20, 123456)),
            ("streams", 1_700_000_000.5, None, utc(2023, 11, 14, 22, 13, 20, 500000)),
            ("kinesis", 1_700_000_000_123, None, utc(2023, 11, 14, 22, 13, 20, 123000)),
            ("kinesis", 1_700_000_000_123, "MILLISECOND", utc(2023, 11, 14, 22, 13, 20, 123000)),
            ("kinesis", 1_700_000_000_123.5, None, utc(2023, 11, 14, 22, 13, 20, 123500)),
            ("kinesis", 1_700_000_000_123_456, None, utc(2023, 11, 14, 22, 13, 20, 123456)),
            ("kinesis", 1_700_000_000_123_456, "MICROSECOND", utc(2023, 11, 14, 22, 13, 20, 123456)),
            # A stated precision wins over the magnitude: 1.7e9 µs is early 1970.
            ("kinesis", 1_700_000_000, "MICROSECOND", utc(1970, 1, 1, 0, 28, 20)),
        ]
    )
]


@pytest.mark.parametrize(("name", "expected"), EVENT_TIME_CASES)
def test_event_time_keeps_microseconds_in_every_unit(outcomes, name, expected):
    assert decoded(outcomes, name)["_event_ts"] == expected


SEQUENCE_CASES = (
    case("sequence-short", customer(fmt="streams", sequence_number="123", created=1_700_000_000.000001)),
    case("sequence-64-digits", customer(fmt="kinesis", sequence_number="9" * 64)),
)


def test_ordering_value_is_utc_time_then_sequence_padded_to_64_digits_then_event_id_in_hex(outcomes):
    short, longest = (decoded(outcomes, name) for name in SEQUENCE_CASES)

    assert short["_sequence_number"] == "0" * 61 + "123"
    assert longest["_sequence_number"] == "9" * 64
    for row in (short, longest):
        event_id_hex = row["_event_id"].encode("utf-8").hex().upper()
        assert row["_ordering_value"] == utc_digits(row["_event_ts"]) + row["_sequence_number"] + event_id_hex
    assert short["_ordering_value"].startswith("20231114221320000001")


def test_ordering_value_stays_utc_in_another_session_time_zone(spark, customers_only):
    # 05:30 UTC is 01:30 in New York, inside the hour that repeats at the DST fall-back.
    created = int(datetime(2023, 11, 5, 5, 30, tzinfo=timezone.utc).timestamp() * 1000)
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        tables, _ = decode_batch(envelope(spark, customer(created=created)), customers_only)
        (row,) = tables["customers"].select("_ordering_value").collect()
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")

    assert row["_ordering_value"][:20] == "20231105053000000000"


def test_the_decode_projections_are_built_once_per_set_of_contracts(spark, contracts, customers_only):
    decode_projections.cache_clear()
    rows = []
    # Each streaming query hands foreachBatch a session of its own: a second stream of
    # the process reuses the projections all the same.
    for session, created in ((spark, 1_700_000_000_000), (spark.newSession(), 1_700_000_001_000)):
        tables, _ = decode_batch(envelope(session, customer(created=created)), customers_only)
        rows += tables["customers"].select("_event_ts").collect()
    # Another set of contracts: projections of its own.
    decode_batch(envelope(spark, customer()), contracts)

    info = decode_projections.cache_info()
    # The second batch reused the first one's projections and still read its own record.
    assert (info.misses, info.hits) == (2, 1)
    assert [row["_event_ts"] for row in rows] == [utc(2023, 11, 14, 22, 13, 20), utc(2023, 11, 14, 22, 13, 21)]


BAD_SEQUENCE_CASES = [
    case("bad-sequence-65-digits", customer(sequence_number="1" * 65), None),  # would need truncation
    case("bad-sequence-letters", customer(sequence_number="12a4"), None),
    case("bad-sequence-sign", customer(sequence_number="-5"), None),
    case("bad-sequence-kinesis-text", customer(), "shardId-000000000000"),
]


@pytest.mark.parametrize("name", BAD_SEQUENCE_CASES)
def test_unusable_sequence_numbers_are_quarantined(outcomes, name):
    assert reason(outcomes, name) == "invalid_sequence_number"


def test_record_without_any_sequence_number_orders_by_event_time_alone(spark, customers_only):
    # Kinesis Data Streams for DynamoDB records carry no SequenceNumber, and files
    # landed by Firehose carry no Kinesis one either: such a record must still land.
    record = customer(fmt="kinesis")
    assert "SequenceNumber" not in record["dynamodb"]
    tables, quarantine = decode_batch(envelope(spark, record, kinesis_sequence=None), customers_only)

    assert quarantine.count() == 0
    (row,) = tables["customers"].select("_sequence_number", "_ordering_value").collect()
    assert row["_sequence_number"] == "0" * 64
    assert row["_ordering_value"][20:84] == "0" * 64


# -- attribute types ---------------------------------------------------------------------

THIRTY_EIGHT_DIGITS = "12345678901234567890.123456789012345678"
ORDER_KEYS = {"customerId": {"S": "cust-42"}, "orderId": {"S": "ord-1"}}


def full_order(**overrides: Any) -> dict[str, Any]:
    """An orders INSERT with every type; `name=None` drops an attribute, a dict replaces it."""
    image = {
        **ORDER_KEYS,
        "amount": {"N": THIRTY_EIGHT_DIGITS},
        "isGift": {"BOOL": False},
        "giftMessage": {"NULL": True},
        "tags": {"SS": ["vip", "b2b"]},
        "packageWeightsKg": {"NS": ["1.50", "-2E+3", "0.000000000000000000000000000000000001"]},
        "receiptDigest": {"B": base64.b64encode(b"\x00\xffdigest").decode()},
        "attachmentChecksums": {"BS": [base64.b64encode(b"one").decode(), base64.b64encode(b"two").decode()]},
        "lineItems": {
            "L": [
                {"M": {"sku": {"S": "A-1"}, "quantity": {"N": "2"}, "unitPrice": {"N": "9.99"}}},
                {"M": {"sku": {"S": "B-2"}, "quantity": {"N": "1"}}},
            ]
        },
        "shippingAddress": {"M": {"city": {"S": "Ghent"}, "postcode": {"NULL": True}}},
        "couponCode": {"S": "WELCOME"},
        "history": {"L": [{"N": "1"}, {"M": {"note": {"S": 'say "hi"'}}}]},
    }
    for name, descriptor in overrides.items():
        if descriptor is None:
            image.pop(name)
        else:
            image[name] = descriptor
    return change_record("orders", "INSERT", ORDER_KEYS, image)


NULLABLE = (
    "amount",
    "isGift",
    "tags",
    "packageWeightsKg",
    "receiptDigest",
    "attachmentChecksums",
    "lineItems",
    "shippingAddress",
)
NULLABLE_COLUMNS = (
    "amount",
    "is_gift",
    "tags",
    "package_weights_kg",
    "receipt_digest",
    "attachment_checksums",
    "line_items",
    "shipping_address",
)
case("order-full", full_order())
case("order-absent", full_order(**{name: None for name in NULLABLE}))
case("order-nulls", full_order(**{name: {"NULL": True} for name in NULLABLE}))
case("order-no-extras", full_order(couponCode=None, history=None))


def test_every_attribute_type_decodes_exactly(outcomes):
    row = decoded(outcomes, "order-full", "orders")

    assert {key: value for key, value in row.items() if not key.startswith("_")} == {
        "customer_id": "cust-42",
        "order_id": "ord-1",
        "amount": THIRTY_EIGHT_DIGITS,
        "is_gift": False,
        "gift_message": None,
        "tags": ["vip", "b2b"],
        "package_weights_kg": ["1.50", "-2E+3", "0.000000000000000000000000000000000001"],
        "receipt_digest": bytearray(b"\x00\xffdigest"),
        "attachment_checksums": [bytearray(b"one"), bytearray(b"two")],
        "line_items": [
            {"sku": "A-1", "quantity": "2", "unit_price": "9.99"},
            {"sku": "B-2", "quantity": "1", "unit_price": None},
        ],
        "shipping_address": {"city": "Ghent", "postcode": None},
        "customer_suffix": "2",
    }


@pytest.mark.parametrize("name", ["order-absent", "order-nulls"])
def test_absent_and_null_attributes_are_null_not_empty(outcomes, name):
    row = decoded(outcomes, name, "orders")

    assert {column: row[column] for column in NULLABLE_COLUMNS} == dict.fromkeys(NULLABLE_COLUMNS)


def test_unknown_attributes_are_kept_as_dynamodb_json(outcomes):
    row = decoded(outcomes, "order-full", "orders")

    assert json.loads(row["_extra_attributes"]) == {
        "couponCode": {"S": "WELCOME"},
        "history": {"L": [{"N": "1"}, {"M": {"note": {"S": 'say "hi"'}}}]},
    }
    assert decoded(outcomes, "order-no-extras", "orders")["_extra_attributes"] is None


# -- undeclared nested fields ----------------------------------------------------------------
# Fields inside a declared M value (also inside the M items of a declared L) that the
# contract does not name are kept in `_extra_attributes` under their DynamoDB document
# path: `attr.field`, `attr[index].field` with a 0-based index, as DynamoDB writes paths
# in expressions (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.Attributes.html).

_PATH_STEP = re.compile(r'\.([^.\[\]"]+)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


def descriptor_at(image: dict[str, Any], path: str) -> dict[str, Any]:
    """The descriptor an `_extra_attributes` path names inside a DynamoDB JSON image."""
    first = re.match(r'[^.\[\]"]+|\[("(?:[^"\\]|\\.)*")\]', path)
    assert first, path
    descriptor = image[json.loads(first.group(1)) if first.group(1) else first.group(0)]
    rest = path[first.end():]
    while rest:
        step = _PATH_STEP.match(rest)
        assert step, path
        name, index, quoted = step.groups()
        descriptor = descriptor["L"][int(index)] if index is not None else descriptor["M"][name or json.loads(quoted)]
        rest = rest[step.end():]
    return descriptor


def assert_kept_exactly(row: dict[str, Any], image: dict[str, Any], paths: set[str]) -> None:
    """`_extra_attributes` holds exactly `paths`, each with the descriptor found at that
    path in the original image, and deserialises (boto3, the AWS SDK's own reader of
    DynamoDB JSON) to the same Python value as the original field."""
    extras = json.loads(row["_extra_attributes"])
    assert set(extras) == paths
    for path, descriptor in extras.items():
        original = descriptor_at(image, path)
        assert descriptor == original, path
        assert python_value(descriptor) == python_value(original), path
    # Members sorted by path, so the same image always gives the same text.
    assert list(extras) == sorted(extras)


def python_value(descriptor: dict[str, Any]) -> Any:
    """A DynamoDB JSON descriptor as boto3 reads it; binaries arrive base64 encoded on the
    wire and boto3 expects them decoded, as botocore hands them over."""

    def decoded_binaries(node: dict[str, Any]) -> dict[str, Any]:
        if "B" in node:
            return {"B": base64.b64decode(node["B"])}
        if "BS" in node:
            return {"BS": [base64.b64decode(text) for text in node["BS"]]}
        if "M" in node:
            return {"M": {name: decoded_binaries(value) for name, value in node["M"].items()}}
        if "L" in node:
            return {"L": [decoded_binaries(item) for item in node["L"]]}
        return node

    return TypeDeserializer().deserialize(decoded_binaries(descriptor))


def order_image(record: dict[str, Any]) -> dict[str, Any]:
    return record["dynamodb"]["NewImage"]


def line_item(sku: str, **undeclared: dict[str, Any]) -> dict[str, Any]:
    return {"M": {"sku": {"S": sku}, "quantity": {"N": "1"}, **undeclared}}


NESTED_ORDERS = {
    "nested-address-and-second-item": full_order(
        couponCode=None,
        history=None,
        shippingAddress={"M": {"city": {"S": "Ghent"}, "line2": {"S": "Flat 2"}}},
        lineItems={"L": [line_item("A-1"), line_item("B-2", discount={"N": "0.15"})]},
    ),
    "nested-several-items": full_order(
        couponCode=None,
        history=None,
        lineItems={
            "L": [
                line_item("A-1", giftWrap={"BOOL": True}),
                line_item("B-2"),
                line_item("C-3", discount={"N": "-2E+1"}, serials={"SS": ["s1", "s2"]}),
                line_item("D-4", note={"NULL": True}),
            ]
        },
    ),
    "nested-with-top-level": full_order(  # keeps couponCode and history, both top-level
        shippingAddress={"M": {"city": {"S": "Ghent"}, "geo": {"M": {"lat": {"N": "51.05"}}}}},
        lineItems={"L": [line_item("A-1", photo={"B": base64.b64encode(b"\x89PNG").decode()})]},
    ),
    # A field name holding path characters is quoted, so it cannot pass for a deeper path.
    "nested-quoted-names": full_order(
        couponCode=None,
        history=None,
        **{"promo.code": {"S": "top"}},
        shippingAddress={"M": {"city": {"S": "Ghent"}, 'door "B".2': {"S": "nested"}}},
    ),
}
for _name, _record in NESTED_ORDERS.items():
    case(_name, _record)
case(
    "nested-null-address",
    full_order(couponCode=None, history=None, shippingAddress={"NULL": True}, lineItems={"L": [{"NULL": True}]}),
)
# A giftMessage whose NULL flag is not a boolean makes the whole image miss its typed
# schema, so it is decoded attribute by attribute; its nested extras are kept all the same.
case(
    "nested-image-misfit",
    full_order(
        couponCode=None,
        history=None,
        giftMessage={"S": "Enjoy", "NULL": "no"},
        shippingAddress={"M": {"city": {"S": "Ghent"}, "line2": {"S": "Flat 2"}}},
    ),
)
# Not a DynamoDB descriptor at all: still kept as it came, never dropped.
case(
    "nested-bare-value",
    full_order(couponCode=None, history=None, shippingAddress={"M": {"city": {"S": "Ghent"}, "floor": 3}}),
)
# A tombstone read from an OldImage that has undeclared nested fields.
_NESTED_OLD_IMAGE = order_image(NESTED_ORDERS["nested-address-and-second-item"])
case(
    "nested-remove", without(change_record("orders", "REMOVE", ORDER_KEYS, None, _NESTED_OLD_IMAGE), "dynamodb", "Keys")
)


def test_undeclared_fields_in_an_m_value_and_in_an_l_item_are_kept_by_path(outcomes):
    name = "nested-address-and-second-item"
    row = decoded(outcomes, name, "orders")

    assert json.loads(row["_extra_attributes"]) == {
        "shippingAddress.line2": {"S": "Flat 2"},
        "lineItems[1].discount": {"N": "0.15"},
    }
    assert_kept_exactly(row, order_image(NESTED_ORDERS[name]), {"shippingAddress.line2", "lineItems[1].discount"})
    # The declared fields still land in their typed columns.
    assert row["shipping_address"] == {"city": "Ghent", "postcode": None}
    assert [item["sku"] for item in row["line_items"]] == ["A-1", "B-2"]


def test_undeclared_fields_of_several_list_items_are_kept_with_their_item_index(outcomes):
    name = "nested-several-items"
    row = decoded(outcomes, name, "orders")

    assert_kept_exactly(
        row,
        order_image(NESTED_ORDERS[name]),
        {"lineItems[0].giftWrap", "lineItems[2].discount", "lineItems[2].serials", "lineItems[3].note"},
    )


def test_top_level_and_nested_undeclared_fields_are_kept_together(outcomes):
    name = "nested-with-top-level"
    row = decoded(outcomes, name, "orders")

    assert_kept_exactly(
        row, order_image(NESTED_ORDERS[name]), {"couponCode", "history", "shippingAddress.geo", "lineItems[0].photo"}
    )


def test_names_with_path_characters_are_quoted_at_every_level(outcomes):
    name = "nested-quoted-names"
    row = decoded(outcomes, name, "orders")

    expected = {'["promo.code"]', 'shippingAddress["door \\"B\\".2"]'}
    assert_kept_exactly(row, order_image(NESTED_ORDERS[name]), expected)


def test_nested_fields_are_kept_when_the_image_is_decoded_attribute_by_attribute(outcomes):
    name = "nested-image-misfit"
    row = decoded(outcomes, name, "orders")

    assert_kept_exactly(row, order_image(CASES[name][0]), {"shippingAddress.line2"})


def test_a_nested_value_that_is_not_a_descriptor_is_kept_as_sent(outcomes):
    row = decoded(outcomes, "nested-bare-value", "orders")

    assert json.loads(row["_extra_attributes"]) == {"shippingAddress.floor": 3}
    assert row["shipping_address"] == {"city": "Ghent", "postcode": None}


@pytest.mark.parametrize("name", ["order-no-extras", "nested-null-address", "nested-remove"])
def test_nothing_undeclared_at_any_level_or_a_tombstone_leaves_extra_attributes_null(outcomes, name):
    # order-no-extras has M and L values with declared fields only; an M value or an L
    # item that is {"NULL": true} holds nothing; a tombstone keeps no image values.
    row = decoded(outcomes, name, "orders")

    assert row["_extra_attributes"] is None


# A contract with M inside M and L inside L items, loaded from its own YAML file.
DEEP_CONTRACT = {
    "table": "shipments",
    "raw_table": "shipments",
    "key": {"partition_key": "shipmentId"},
    "attributes": {
        "shipmentId": {"type": "S"},
        "route": {
            "type": "M",
            "fields": {"carrier": {"type": "S"}, "origin": {"type": "M", "fields": {"city": {"type": "S"}}}},
        },
        "legs": {
            "type": "L",
            "items": {
                "type": "M",
                "fields": {"stops": {"type": "L", "items": {"type": "M", "fields": {"code": {"type": "S"}}}}},
            },
        },
    },
    "partitioning": {"column": "shipment_suffix", "expression": "substring(shipment_id, -1, 1)"},
}


def test_undeclared_fields_are_kept_at_any_depth(spark, tmp_path):
    (tmp_path / "shipments.yml").write_text(yaml.safe_dump(DEEP_CONTRACT, sort_keys=False), encoding="utf-8")
    contracts = load_contracts(tmp_path)
    keys = {"shipmentId": {"S": "ship-1"}}
    deep = {
        **keys,
        "route": {
            "M": {
                "carrier": {"S": "DHL"},
                "eta": {"S": "tomorrow"},
                "origin": {"M": {"city": {"S": "Ghent"}, "gate": {"N": "7"}}},
            }
        },
        "legs": {
            "L": [
                {"M": {"stops": {"L": [{"M": {"code": {"S": "GNT"}}}]}}},
                {
                    "M": {
                        "stops": {
                            "L": [{"M": {"code": {"S": "BRU"}}}, {"M": {"code": {"S": "LGG"}, "dock": {"S": "D4"}}}]
                        }
                    }
                },
            ]
        },
        "priority": {"BOOL": True},
    }
    plain = {
        **keys,
        "route": {"M": {"origin": {"M": {"city": {"S": "Ghent"}}}}},
        "legs": {"L": [{"M": {"stops": {"L": []}}}]},
    }
    # A bare value beside a declared M field makes Spark drop the outline of `route`
    # (its fields are read as M outlines there); the exact path must still find it.
    bare = {**keys, "route": {"M": {"origin": {"M": {"city": {"S": "Ghent"}}}, "legacy": 5}}}
    records = [
        change_record("shipments", "INSERT", keys, deep, event_id="deep"),
        change_record("shipments", "MODIFY", keys, plain, event_id="plain"),
        change_record("shipments", "MODIFY", keys, bare, event_id="bare"),
    ]

    tables, quarantine = decode_batch(envelope(spark, *records), contracts)
    rows = {row["_event_id"]: row.asDict(recursive=True) for row in tables["shipments"].collect()}

    assert quarantine.count() == 0
    assert_kept_exactly(rows["deep"], deep, {"route.eta", "route.origin.gate", "legs[1].stops[1].dock", "priority"})
    assert rows["deep"]["route"] == {"carrier": "DHL", "origin": {"city": "Ghent"}}
    assert rows["plain"]["_extra_attributes"] is None
    assert json.loads(rows["bare"]["_extra_attributes"]) == {"route.legacy": 5}


VALID_NUMBERS = [
    (case(f"number-ok-{index}", full_order(amount={"N": number})), number)
    for index, number in enumerate(
        ["0", "-0.5", ".5", "5.", "+7", "1E+10", "-1.5e-130", THIRTY_EIGHT_DIGITS]
        + ["1" * 38 + "000000", "0.0000" + "9" * 38]  # trailing and leading zeros are not significant
    )
]


@pytest.mark.parametrize(("name", "number"), VALID_NUMBERS)
def test_valid_numbers_round_trip_unchanged(outcomes, name, number):
    assert decoded(outcomes, name, "orders")["amount"] == number


BAD_VALUES = [
    (case(f"bad-value-{index}", full_order(**{attribute: descriptor})), expected)
    for index, (attribute, descriptor, expected) in enumerate(
        [
            ("amount", {"N": "1.2.3"}, "invalid_number:amount"),
            ("amount", {"N": "abc"}, "invalid_number:amount"),
            ("amount", {"N": ""}, "invalid_number:amount"),
            ("amount", {"N": "1e"}, "invalid_number:amount"),
            ("amount", {"N": "NaN"}, "invalid_number:amount"),
            ("amount", {"N": "1" * 39}, "invalid_number:amount"),  # 39 significant digits
            ("packageWeightsKg", {"NS": ["1", "one"]}, "invalid_number:packageWeightsKg"),
            ("lineItems", {"L": [{"M": {"quantity": {"N": "2x"}}}]}, "invalid_number:lineItems[].quantity"),
            ("amount", {"S": "12"}, "type_mismatch:amount:N"),
            ("amount", {"NULL": False}, "type_mismatch:amount:N"),
            ("isGift", {"BOOL": "yes"}, "type_mismatch:isGift:BOOL"),
            ("isGift", {"S": "true"}, "type_mismatch:isGift:BOOL"),
            ("tags", {"S": "vip"}, "type_mismatch:tags:SS"),
            ("tags", {"L": [{"S": "vip"}]}, "type_mismatch:tags:SS"),
            ("receiptDigest", {"B": "not base64!"}, "type_mismatch:receiptDigest:B"),
            ("receiptDigest", {"B": "AAA"}, "type_mismatch:receiptDigest:B"),
            ("receiptDigest", {"S": "AAAA"}, "type_mismatch:receiptDigest:B"),
            ("attachmentChecksums", {"BS": ["AAAA", "A"]}, "type_mismatch:attachmentChecksums:BS"),
            ("lineItems", {"SS": ["A-1"]}, "type_mismatch:lineItems:L"),
            ("lineItems", {"L": [{"S": "A-1"}]}, "type_mismatch:lineItems[]:M"),
            ("lineItems", {"L": [{"M": {"sku": {"N": "1"}}}]}, "type_mismatch:lineItems[].sku:S"),
            ("shippingAddress", {"S": "Ghent"}, "type_mismatch:shippingAddress:M"),
            ("shippingAddress", {"M": {"city": {"N": "9000"}}}, "type_mismatch:shippingAddress.city:S"),
            ("customerId", {"N": "42"}, "type_mismatch:customerId:S"),
        ]
    )
]
# Several bad attributes: the first in contract order is reported.
BAD_VALUES.append(
    (
        case("bad-value-first-wins", full_order(tags={"S": "x"}, amount={"N": "x"}, isGift={"N": "1"})),
        "invalid_number:amount",
    )
)


@pytest.mark.parametrize(("name", "expected"), BAD_VALUES)
def test_bad_attribute_values_are_quarantined_with_their_path(outcomes, name, expected):
    assert reason(outcomes, name) == expected


# -- INSERT / MODIFY / REMOVE --------------------------------------------------------------

STALE_IMAGE = full_order(amount={"S": "not a number"})["dynamodb"]["NewImage"]
case("remove-from-keys", change_record("orders", "REMOVE", ORDER_KEYS, None, STALE_IMAGE))
case(
    "remove-from-old-image",
    without(change_record("orders", "REMOVE", ORDER_KEYS, None, STALE_IMAGE), "dynamodb", "Keys"),
)


@pytest.mark.parametrize("name", ["remove-from-keys", "remove-from-old-image"])
def test_remove_is_a_tombstone_with_key_partition_and_metadata_only(outcomes, contracts, name):
    row = decoded(outcomes, name, "orders")

    assert (row["customer_id"], row["order_id"], row["customer_suffix"]) == ("cust-42", "ord-1", "2")
    assert (row["_event_name"], row["_is_deleted"], row["_is_ttl_delete"]) == ("REMOVE", True, False)
    other_columns = [c for c in contracts["orders"].business_columns if c not in ("customer_id", "order_id")]
    # The OldImage's values (even an invalid one) are neither kept nor validated.
    assert {column: row[column] for column in other_columns} == dict.fromkeys(other_columns)
    assert row["_extra_attributes"] is None


def identity(kind: str, principal: str) -> dict[str, Any]:
    return {"userIdentity": {"type": kind, "principalId": principal}}


TTL_CASES = [
    (case(f"ttl-{index}", record), event_name, expected)
    for index, (record, event_name, expected) in enumerate(
        [
            (customer("REMOVE", ttl=True, fmt="kinesis"), "REMOVE", True),
            (customer("REMOVE", ttl=True, fmt="streams"), "REMOVE", True),
            (customer("REMOVE", ttl=False), "REMOVE", False),
            (customer("MODIFY", ttl=True), "MODIFY", False),
            (customer("REMOVE") | identity("Service", "replication.dynamodb.amazonaws.com"), "REMOVE", False),
            (customer("REMOVE") | identity("User", "dynamodb.amazonaws.com"), "REMOVE", False),
        ]
    )
]


@pytest.mark.parametrize(("name", "event_name", "expected"), TTL_CASES)
def test_ttl_delete_flag(outcomes, name, event_name, expected):
    row = decoded(outcomes, name)

    assert row["_is_ttl_delete"] is expected
    assert row["_is_deleted"] is (event_name == "REMOVE")


# -- record-level quarantine -----------------------------------------------------------------

OTHER_ARN = "arn:aws:kinesis:eu-west-1:123456789012:stream/orders"
RECORD_PROBLEMS = [
    (case(f"record-{index}", record), expected)
    for index, (record, expected) in enumerate(
        [
            ("{not json", "invalid_json"),
            (None, "invalid_json"),
            ("[1, 2]", "invalid_json"),
            ('"INSERT"', "invalid_json"),
            (with_value(customer(), "oops", "dynamodb"), "invalid_json"),
            (customer(fmt="kinesis") | {"tableName": "inventory"}, "unknown_table"),
            (without(customer(fmt="kinesis"), "tableName"), "no_table_name"),
            (without(customer(fmt="streams"), "eventSourceARN"), "no_table_name"),
            (with_value(customer(fmt="streams"), OTHER_ARN, "eventSourceARN"), "no_table_name"),  # not a table
            (customer() | {"eventName": "UPSERT"}, "unknown_event_name"),
            (without(customer(), "eventName"), "unknown_event_name"),
            (without(customer(), "dynamodb", "ApproximateCreationDateTime"), "missing_event_time"),
            (with_value(customer(), "soon", "dynamodb", "ApproximateCreationDateTime"), "missing_event_time"),
            (with_value(customer(), -5, "dynamodb", "ApproximateCreationDateTime"), "missing_event_time"),
            (with_value(customer(), 10**18, "dynamodb", "ApproximateCreationDateTime"), "missing_event_time"),
            (customer(precision="NANOSECOND"), "missing_event_time"),
            (without(customer("INSERT"), "dynamodb", "NewImage"), "missing_new_image"),
            (without(customer("MODIFY"), "dynamodb", "NewImage"), "missing_new_image"),
            (with_value(customer(), {"id": {"S": "cust-1"}}, "dynamodb", "NewImage"), "missing_key:custName"),
            (
                with_value(customer(), {"custName": {"S": "Ada"}, "id": {"NULL": True}}, "dynamodb", "NewImage"),
                "missing_key:id",
            ),
            (without(customer("REMOVE"), "dynamodb", "Keys"), "missing_key:id"),  # and no OldImage either
            # DynamoDB refuses an empty key value, and Hudi's key generators fail a whole write on one.
            (with_value(customer(), {"id": {"S": ""}, "custName": {"S": "Ada"}}, "dynamodb", "NewImage"),
             "missing_key:id"),
            (with_value(customer("REMOVE"), {"id": {"S": "c-1"}, "custName": {"S": ""}}, "dynamodb", "Keys"),
             "missing_key:custName"),
            # Hudi's record key of (id, cust_name) is `id:<v>,cust_name:<v>`, unescaped: ("a,cust_name:b", "c")
            # and ("a", "b,cust_name:c") would share one, so a value holding `,<key column>:` is refused.
            (with_value(customer(), {"id": {"S": "a,cust_name:b"}, "custName": {"S": "c"}}, "dynamodb", "NewImage"),
             "ambiguous_key:id"),
            (with_value(customer("REMOVE"), {"id": {"S": "a"}, "custName": {"S": "x,id:y"}}, "dynamodb", "Keys"),
             "ambiguous_key:custName"),
            # several problems: the first in the documented order wins
            (
                without(
                    without(customer() | {"eventName": "X"}, "dynamodb", "ApproximateCreationDateTime"),
                    "dynamodb",
                    "NewImage",
                ),
                "unknown_event_name",
            ),
            (without(customer(sequence_number="x"), "dynamodb", "ApproximateCreationDateTime"), "missing_event_time"),
            (without(customer(sequence_number="x"), "dynamodb", "NewImage"), "invalid_sequence_number"),
            (with_value(full_order(), {"customerId": {"N": "1"}}, "dynamodb", "NewImage"), "missing_key:orderId"),
            # An image that is not a JSON object, even one this event does not read.
            (with_value(customer(), "x", "dynamodb", "NewImage"), "invalid_json"),
            (with_value(customer(), [{"id": {"S": "cust-1"}}], "dynamodb", "NewImage"), "invalid_json"),
            (with_value(customer("MODIFY"), 5, "dynamodb", "OldImage"), "invalid_json"),
            (with_value(customer("REMOVE"), "x", "dynamodb", "Keys"), "invalid_json"),
        ]
    )
]


@pytest.mark.parametrize(("name", "expected"), RECORD_PROBLEMS)
def test_record_level_problems_are_quarantined_with_their_reason(outcomes, name, expected):
    assert reason(outcomes, name) == expected

    record, _ = CASES[name]
    assert outcomes[name].row["payload"] == payload_text(record)  # as received
    assert outcomes[name].row["source_ref"] == name


# Keys of real single-table designs hold `#`, `,` and `:`; only `,<key column>:` is refused.
case("key-with-separators", with_value(customer(), {"id": {"S": "TENANT#t1,USER#u:7"}, "custName": {"S": "a:b,c"}},
                                       "dynamodb", "NewImage"))


def test_a_key_with_separators_other_than_hudis_lands(outcomes):
    row = decoded(outcomes, "key-with-separators")

    assert (row["id"], row["cust_name"]) == ("TENANT#t1,USER#u:7", "a:b,c")


# Images are read as JSON text, so one sent as a string holding an object's text is
# indistinguishable from the object: it decodes as the image (documented leniency).
case(
    "image-as-json-text",
    with_value(customer(name="Bea"), json.dumps(customer(name="Bea")["dynamodb"]["NewImage"]), "dynamodb", "NewImage"),
)


def test_an_image_sent_as_json_text_decodes_as_the_image(outcomes):
    assert decoded(outcomes, "image-as-json-text")["cust_name"] == "Bea"


def test_quarantine_names_the_table_when_it_is_known(outcomes):
    table_of = {name: outcomes[name].row["_source_table"] for name in ("record-0", "record-5", "bad-value-0")}

    assert table_of == {"record-0": None, "record-5": "inventory", "bad-value-0": "orders"}


# -- text UTF-8 cannot hold ------------------------------------------------------------------
# JSON may escape a lone UTF-16 surrogate (`\ud800`); no UTF-8 text holds one, so Spark once
# wrote it to raw as `?`. Such a record is quarantined, exactly as it arrived; a surrogate
# pair is one character and lands, as does the text `\ud800` written with an escaped backslash.
# json.dumps writes a Python string's lone surrogate as that escape.
LONE_SURROGATE_CASES = (
    case("surrogate-high-streams", customer(fmt="streams", email="\ud800x")),
    case("surrogate-high-kinesis", customer(fmt="kinesis", email="\ud800x")),
    case("surrogate-low", customer(email="x\udc00")),
    case("surrogate-pair-reversed", customer(email="\ude00\ud83d")),
    case("surrogate-high-twice", customer(email="\ud83d\ud83d\ude00")),
    case("surrogate-in-a-key", customer(customer_id="cust-\udbff")),
    case("surrogate-undeclared", with_value(customer(), {"S": "\ud800"}, "dynamodb", "NewImage", "nickname")),
    case("surrogate-in-a-name", with_value(customer(), {"S": "x"}, "dynamodb", "NewImage", "nick\udfffname")),
    case("surrogate-in-the-old-image", customer("MODIFY", fmt="streams", old_image={"email": {"S": "\ud800"}})),
)
case("surrogate-pair", customer(email="\ud83d\ude00 x"))
case("surrogate-escaped-backslash", customer(email="\\ud800x \\\\\ud83d\ude00"))


@pytest.mark.parametrize("name", LONE_SURROGATE_CASES)
def test_a_lone_surrogate_anywhere_in_a_record_is_quarantined_as_it_arrived(outcomes, name):
    assert reason(outcomes, name) == "lone_surrogate"

    record, _ = CASES[name]
    assert outcomes[name].row["payload"] == payload_text(record)


def test_a_surrogate_pair_and_an_escaped_backslash_land_exactly(outcomes):
    for name in ("surrogate-pair", "surrogate-escaped-backslash"):
        record, _ = CASES[name]
        sent = json.loads(payload_text(record))["dynamodb"]["NewImage"]["email"]["S"]
        assert decoded(outcomes, name)["email"] == sent
    assert decoded(outcomes, "surrogate-pair")["email"] == "\U0001f600 x"
    assert decoded(outcomes, "surrogate-escaped-backslash")["email"] == "\\ud800x \\\\\U0001f600"


# -- batch-level guarantees ------------------------------------------------------------------


def test_every_record_lands_in_exactly_one_output(spark, contracts):
    records: list[Any] = [
        customer(event_id="c-insert"),
        customer("MODIFY", event_id="c-modify", fmt="streams"),
        customer("REMOVE", event_id="c-remove", ttl=True),
        full_order() | {"eventID": "o-insert"},
        full_order(amount={"N": "x"}) | {"eventID": "o-bad"},
        customer() | {"tableName": "inventory", "eventID": "unknown"},
        without(customer(event_id="no-image"), "dynamodb", "NewImage"),
        "garbage",
        None,
    ]

    tables, quarantine = decode_batch(envelope(spark, *records), contracts)
    landed = {name: [row["_event_id"] for row in frame.select("_event_id").collect()] for name, frame in tables.items()}
    quarantined = [row["source_ref"] for row in quarantine.select("source_ref").collect()]

    assert sum(len(ids) for ids in landed.values()) + len(quarantined) == len(records)
    assert {name: sorted(ids) for name, ids in landed.items()} == {
        "customers": ["c-insert", "c-modify", "c-remove"],
        "orders": ["o-insert"],
    }
    assert sorted(quarantined) == ["test:4", "test:5", "test:6", "test:7", "test:8"]


def test_ansi_mode_gives_the_same_outcomes(spark, contracts, outcomes):
    # With ANSI SQL a failed cast or overflow raises; one bad record must not fail a batch.
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        under_ansi = decode_cases(spark, contracts)
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")

    assert under_ansi == outcomes


def test_output_schemas_follow_the_raw_schema_and_the_quarantine_layout(spark, contracts):
    tables, quarantine = decode_batch(envelope(spark, customer()), contracts)

    for name, frame in tables.items():
        expected = [(f.name, f.dataType) for f in raw_schema(contracts[name]) if f.name not in PIPELINE_COLUMNS]
        assert [(f.name, f.dataType) for f in frame.schema] == expected
    assert [(f.name, f.dataType) for f in quarantine.schema] == [(name, T.StringType()) for name in QUARANTINE_COLUMNS]


def test_partition_expression_reading_a_non_key_column_is_a_contract_error(spark, contracts):
    broken = dataclasses.replace(contracts["customers"], partition_expression="substring(email, 1, 1)")

    with pytest.raises(ContractError, match="may use only the key columns"):
        decode_batch(envelope(spark, customer()), {"customers": broken})


def test_invalid_utf8_in_a_value_is_quarantined_readably_while_valid_records_land(spark, customers_only, tmp_path):
    from streaming.io.sources import landing_files_batch

    bad = json.dumps(customer(customer_id="cust-bad", email="x@example.com")).encode()
    bad = bad.replace(b"x@example.com", b"x\xff\xfe@example.com")
    good = json.dumps(customer(customer_id="cust-good", event_id="event-2")).encode()
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "part.jsonl").write_bytes(bad + b"\n" + good + b"\n")

    tables, quarantine = decode_batch(landing_files_batch(spark, str(landing)), customers_only)

    assert [row["id"] for row in tables["customers"].collect()] == ["cust-good"]
    (row,) = quarantine.collect()
    assert row["reason"] == "invalid_utf8"
    # What is kept is valid text (the bad bytes replaced), so the quarantine stays readable.
    assert "x\ufffd\ufffd@example.com" in row["payload"]
    row["payload"].encode("utf-8")


# A record no JSON parser here should be made to read whole: nested 3,000 deep (DynamoDB
# allows 32 levels) and a 5,000-digit number (Python reads at most 4,300 into an int).
def too_deep(customer_id: str) -> str:
    text = json.dumps(customer(customer_id=customer_id, email="deep@example.com"))
    nested = '{"M": {"x": ' * 1_500 + '{"NULL": true}' + "}}" * 1_500
    return text.replace('"email": {"S": "deep@example.com"}', f'"email": {{"S": "deep@example.com"}}, "deep": {nested}')


def too_long(customer_id: str) -> str:
    text = json.dumps(customer(customer_id=customer_id, created=1_234_567))
    return text.replace("1234567", "9" * 5_000)


def test_records_too_deep_or_too_long_to_parse_are_quarantined_from_landing_files(spark, customers_only, tmp_path):
    from streaming.io.sources import landing_files_batch

    lines = [too_deep("cust-deep"), too_long("cust-long"), json.dumps(customer(customer_id="cust-good"))]
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "part.jsonl").write_text("\n".join(lines) + "\n")

    tables, quarantine = decode_batch(landing_files_batch(spark, str(landing)), customers_only)

    assert [row["id"] for row in tables["customers"].collect()] == ["cust-good"]
    rows = sorted(quarantine.collect(), key=lambda row: int(row["source_ref"].split("#")[1]))
    assert [(row["reason"], row["payload"]) for row in rows] == [("invalid_json", lines[0]), ("invalid_json", lines[1])]


def test_records_too_deep_or_too_long_to_parse_are_quarantined_from_kinesis(spark, customers_only):
    # Kinesis records reach the decoder without the landing splitter's check.
    tables, quarantine = decode_batch(
        envelope(spark, too_deep("cust-deep"), too_long("cust-long"), customer(customer_id="cust-good")),
        customers_only)

    assert [row["id"] for row in tables["customers"].collect()] == ["cust-good"]
    assert sorted((row["source_ref"], row["reason"]) for row in quarantine.collect()) == [
        ("test:0", "invalid_json"), ("test:1", "invalid_json")]


# -- real AWS samples ------------------------------------------------------------------------
# Byte-exact copies under tests/fixtures/aws/, one per accepted record shape
# (docs/architecture.md, "Accepted change records"):
# - lambda_dynamodb_update_event.json: the Lambda test event `sam local generate-event dynamodb
#   update` writes (aws/aws-sam-cli samcli/lib/generated_sample_events/events/dynamodb/
#   DynamoDBUpdate.json, its placeholders filled with the defaults of event-mapping.json);
# - kds_record_insert.json: the data of a Kinesis Data Streams for DynamoDB record, as Firehose
#   writes it to S3 (aws-powertools/powertools-lambda-typescript packages/parser/tests/events/
#   kinesis/dynamodb-stream.json, first record's `data`, base64-decoded);
# - getrecords_cli_output.json: DynamoDB Streams GetRecords output (aws/aws-cli
#   awscli/examples/dynamodbstreams/get-records.rst), which names no table;
# - getrecords_api_example_output.json: the GetRecords example of the API reference
#   (boto/botocore botocore/data/dynamodbstreams/2012-08-10/examples-1.json), a KEYS_ONLY
#   stream; tests/pipeline/test_pipeline.py refuses it.

AWS_SAMPLES = Path(__file__).parents[1] / "fixtures" / "aws"
MUSIC_STREAM_ARN = "arn:aws:dynamodb:us-west-1:123456789012:table/Music/stream/2019-10-22T18:02:01.576"
KDS_SAMPLE_TABLE = "PowertoolsEventsStack-DynamoDBTable59784FC0-8NKAMTERTAXY"
SAMPLE_TABLE_CONTRACTS: dict[str, dict[str, Any]] = {
    "ExampleTableWithStream": {
        "table": "ExampleTableWithStream",
        "raw_table": "example_table_with_stream",
        "key": {"partition_key": "Id"},
        "attributes": {"Id": {"type": "N"}, "Message": {"type": "S"}},
        "partitioning": {"column": "id_suffix", "expression": "substring(id, -1, 1)"},
    },
    "Music": {
        "table": "Music",
        "raw_table": "music",
        "key": {"partition_key": "Artist", "sort_key": "SongTitle"},
        "attributes": {"Artist": {"type": "S"}, "SongTitle": {"type": "S"}, "AlbumTitle": {"type": "S"},
                       "Awards": {"type": "N"}},
        "partitioning": {"column": "artist_initial", "expression": "substring(artist, 1, 1)"},
    },
    KDS_SAMPLE_TABLE: {
        "table": KDS_SAMPLE_TABLE,
        "raw_table": "powertools_events",
        "key": {"partition_key": "id"},
        "attributes": {"id": {"type": "S"}, "data": {"type": "S"}},
        "partitioning": {"column": "id_suffix", "expression": "substring(id, -1, 1)"},
    },
}


def aws_sample(name: str) -> Any:
    return json.loads((AWS_SAMPLES / name).read_text(encoding="utf-8"))


def ttl_delete(record: dict[str, Any], identity: dict[str, str] | None, event_id: str) -> dict[str, Any]:
    """`record` (an INSERT) turned into the REMOVE of its item, with `identity` as its userIdentity."""
    removed = json.loads(json.dumps(record))
    removed["eventID"], removed["eventName"] = event_id, "REMOVE"
    removed["dynamodb"]["OldImage"] = removed["dynamodb"].pop("NewImage")
    if identity is not None:
        removed["userIdentity"] = identity
    return removed


@pytest.fixture(scope="module")
def sample_outcomes(spark, tmp_path_factory) -> dict[str, Outcome]:
    directory = tmp_path_factory.mktemp("sample_contracts")
    for name, document in SAMPLE_TABLE_CONTRACTS.items():
        (directory / f"{name}.yml").write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    getrecords = aws_sample("getrecords_cli_output.json")["Records"]
    # The fix docs/architecture.md gives for GetRecords output: each record gets the ARN of
    # the stream it was read from (here the one in the example's shard iterator).
    with_arn = [record | {"eventID": f"arn-{record['eventID']}", "eventSourceARN": MUSIC_STREAM_ARN}
                for record in getrecords]
    # A TTL delete carries userIdentity; its members are `PrincipalId` and `Type` in the
    # GetRecords API (shape Identity, botocore/data/dynamodbstreams/2012-08-10/service-2.json;
    # https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_streams_Identity.html)
    # and `principalId` and `type` as Lambda and Kinesis Data Streams deliver them (the
    # spelling of https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_streams_Record.html).
    ttl = {"getrecords": {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"},
           "lambda": {"principalId": "dynamodb.amazonaws.com", "type": "Service"},
           "user": None}
    lambda_event = aws_sample("lambda_dynamodb_update_event.json")
    cases = {
        **{f"lambda-{n}": record for n, record in enumerate(lambda_event["Records"])},
        "kds": aws_sample("kds_record_insert.json"),
        **{f"getrecords-{n}": record for n, record in enumerate(getrecords)},
        **{f"getrecords-with-arn-{n}": record for n, record in enumerate(with_arn)},
        **{f"remove-{who}": ttl_delete(with_arn[1], identity, f"remove-{who}") for who, identity in ttl.items()},
    }
    rows = [(json.dumps(record), None, name) for name, record in cases.items()]
    contracts = load_contracts(directory)
    # Decoded once for its outputs, as decode_cases does.
    with decoded_and_kept(spark.createDataFrame(rows, ENVELOPE_SCHEMA), contracts) as (tables, quarantine):
        names = {record["eventID"]: name for name, record in cases.items()}
        found = [(names[row["_event_id"]], Outcome(table, row.asDict(recursive=True)))
                 for table, frame in tables.items() for row in frame.collect()]
        found += [(row["source_ref"], Outcome(None, row.asDict())) for row in quarantine.collect()]
    assert sorted(name for name, _ in found) == sorted(cases)
    return dict(found)


def test_the_lambda_test_event_lands_insert_modify_and_remove(sample_outcomes):
    rows = [decoded(sample_outcomes, f"lambda-{n}", "example_table_with_stream") for n in range(3)]
    assert [(row["_event_name"], row["id"], row["message"], row["_is_ttl_delete"]) for row in rows] == [
        ("INSERT", "101", "New item!", False), ("MODIFY", "101", "This item has changed", False),
        ("REMOVE", "101", None, False)]
    assert {row["_event_ts"] for row in rows} == {utc(2015, 4, 9, 0, 0, 0)}
    assert rows[2]["_sequence_number"] == "4421584500000000017450439093".rjust(64, "0")


def test_a_kinesis_data_streams_record_lands_by_its_table_name(sample_outcomes):
    row = decoded(sample_outcomes, "kds", "powertools_events")
    assert (row["id"], row["data"], row["_event_name"]) == ("record-1qit2y819gi", "data-x6aq7ckdpgk", "INSERT")
    assert row["_event_ts"] == utc(2024, 11, 18, 10, 9, 15, 370000)  # epoch milliseconds
    assert row["_is_ttl_delete"] is False  # "userIdentity": null


def test_getrecords_output_names_no_table_and_is_quarantined_saying_so(sample_outcomes):
    assert [reason(sample_outcomes, f"getrecords-{n}") for n in range(3)] == ["no_table_name"] * 3


def test_getrecords_output_with_its_stream_arn_lands(sample_outcomes):
    rows = [decoded(sample_outcomes, f"getrecords-with-arn-{n}", "music") for n in range(3)]
    assert [(row["artist"], row["song_title"], row["album_title"], row["awards"]) for row in rows] == [
        ("No One You Know", "Call Me Today", "Somewhat Famous", "1"),
        ("Acme Band", "Happy Day", "Songs About Life", "10"),
        ("Acme Band", "Happy Day", "Updated Album Title", "10")]
    assert rows[0]["_event_ts"] == utc(2019, 10, 23, 16, 43, 48)


@pytest.mark.parametrize(("who", "expected"), [("getrecords", True), ("lambda", True), ("user", False)])
def test_a_ttl_delete_is_flagged_in_either_spelling_of_its_identity(sample_outcomes, who, expected):
    row = decoded(sample_outcomes, f"remove-{who}", "music")
    assert (row["_is_deleted"], row["_is_ttl_delete"]) == (True, expected)
