"""Hostile change records for the decoder fuzz drill.

Every generated record carries a marker `fz<n>z` (in its eventID, or in the text for
records that are not JSON) so that the drill can find it again in the quarantine, and
its item keys carry a prefix naming what must happen to it:

- `bad-`: malformed; must be quarantined, with the reason the architecture pins
  (`reason_prefix`) when there is one;
- `odd-`: hostile but valid DynamoDB (huge strings, 38-digit numbers, big sets, odd
  Unicode, deep unnamed maps); must land;
- no prefix: the ordinary good records mixed in; must land.
"""
from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from streaming.pipeline import reasons
from streaming.samples.generator import generate_cdc

Expect = Literal["quarantine", "land"]
Record = dict[str, Any]
BAD_PREFIX = "bad-"
ODD_PREFIX = "odd-"


@dataclass(frozen=True)
class FuzzRecord:
    line: bytes
    kind: str
    expect: Expect
    reason_prefix: str | None
    marker: str


def marker(number: int) -> str:
    return f"fz{number:06d}z"


def base_records(seed: int, customers: int, key_prefix: str = "") -> dict[str, list[Record]]:
    """Clean INSERT records (DynamoDB Streams format, one per key) of both tables, parsed."""
    cdc = generate_cdc(seed=seed, customers=customers, updates_per_item=0, delete_rate=0.0, ttl_delete_rate=0.0,
                       duplicate_rate=0.0, out_of_order_rate=0.0, malformed_rate=0.0, record_format="streams")
    by_table: dict[str, list[Record]] = {"customers": [], "orders": []}
    for line in cdc.records:
        if key_prefix:
            line = line.replace('"cust-', f'"{key_prefix}cust-')
        record = json.loads(line)
        by_table[record["eventSourceARN"].split(":table/")[1].split("/")[0]].append(record)
    return by_table


def _dump(record: Record) -> bytes:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _images(record: Record) -> list[Record]:
    stream = record["dynamodb"]
    return [stream[name] for name in ("Keys", "NewImage", "OldImage") if name in stream]


def _set_attribute(record: Record, name: str, value: Any) -> bytes:
    record["dynamodb"]["NewImage"][name] = value
    return _dump(record)


def _drop_key(record: Record, name: str) -> bytes:
    for image in _images(record):
        image.pop(name, None)
    return _dump(record)


_RAW_PLACEHOLDER = "__raw_attribute__"


def _nested_json(depth: int) -> bytes:
    """A DynamoDB map `depth` levels deep, as text (too deep for Python's json encoder)."""
    return b'{"M":{"level":' * depth + b'{"S":"bottom"}' + b"}}" * depth


def _set_raw_attribute(record: Record, name: str, raw: bytes) -> bytes:
    return _set_attribute(record, name, _RAW_PLACEHOLDER).replace(f'"{_RAW_PLACEHOLDER}"'.encode(), raw, 1)


Mutation = Callable[[Record, random.Random], bytes]

# (kind, table of the source record, expected outcome, pinned reason prefix, mutation)
KINDS: list[tuple[str, str, Expect, str | None, Mutation]] = [
    ("truncated_json", "orders", "quarantine", reasons.INVALID_JSON,
     lambda r, g: _dump(r)[: g.randrange(40, len(_dump(r)) - 2)]),
    ("not_json", "customers", "quarantine", reasons.INVALID_JSON,
     lambda r, g: f"this is not json {r['eventID']} {g.random()}".encode()),
    ("json_array", "customers", "quarantine", reasons.INVALID_JSON, lambda r, g: f'["{r["eventID"]}", 1, 2]'.encode()),
    ("json_string", "customers", "quarantine", reasons.INVALID_JSON, lambda r, g: json.dumps(r["eventID"]).encode()),
    ("dynamodb_not_object", "customers", "quarantine", reasons.INVALID_JSON,
     lambda r, g: _dump({**r, "dynamodb": "x"})),
    ("images_not_objects", "orders", "quarantine", None,
     lambda r, g: _dump({**r, "dynamodb": {**r["dynamodb"], "NewImage": [1, 2], "Keys": "k"}})),
    ("invalid_utf8_structural", "customers", "quarantine", reasons.INVALID_UTF8, lambda r, g: b"\xff\xfe" + _dump(r)[1:]),
    ("invalid_utf8_in_value", "customers", "quarantine", reasons.INVALID_UTF8,
     lambda r, g: _set_attribute(r, "email", {"S": "PLACEHOLDER"}).replace(b"PLACEHOLDER", b"bad\xc3\x28mail")),
    ("no_table", "customers", "quarantine", reasons.NO_TABLE_NAME,
     lambda r, g: _dump({k: v for k, v in r.items() if k != "eventSourceARN"})),
    ("unknown_table", "orders", "quarantine", reasons.UNKNOWN_TABLE,
     lambda r, g: _dump({**r, "eventSourceARN": r["eventSourceARN"].replace("table/orders", "table/inventory")})),
    ("unknown_event_name", "customers", "quarantine", reasons.UNKNOWN_EVENT_NAME, lambda r, g: _dump({**r, "eventName": "UPSERT"})),
    ("event_name_number", "customers", "quarantine", None, lambda r, g: _dump({**r, "eventName": 7})),
    ("no_event_time", "orders", "quarantine", reasons.MISSING_EVENT_TIME,
     lambda r, g: _dump({**r, "dynamodb": {k: v for k, v in r["dynamodb"].items() if k != "ApproximateCreationDateTime"}})),
    ("event_time_text", "customers", "quarantine", reasons.MISSING_EVENT_TIME,
     lambda r, g: _dump({**r, "dynamodb": {**r["dynamodb"], "ApproximateCreationDateTime": "yesterday"}})),
    ("event_time_huge", "customers", "quarantine", reasons.MISSING_EVENT_TIME,
     lambda r, g: _dump({**r, "dynamodb": {**r["dynamodb"], "ApproximateCreationDateTime": 10**30}})),
    ("event_time_negative", "customers", "quarantine", reasons.MISSING_EVENT_TIME,
     lambda r, g: _dump({**r, "dynamodb": {**r["dynamodb"], "ApproximateCreationDateTime": -5}})),
    ("event_time_unknown_precision", "orders", "quarantine", reasons.MISSING_EVENT_TIME,
     lambda r, g: _dump({**r, "dynamodb": {**r["dynamodb"], "ApproximateCreationDateTimePrecision": "NANOSECOND"}})),
    ("sequence_not_digits", "customers", "quarantine", reasons.INVALID_SEQUENCE_NUMBER,
     lambda r, g: _dump({**r, "dynamodb": {**r["dynamodb"], "SequenceNumber": "12ab"}})),
    ("sequence_too_long", "customers", "quarantine", reasons.INVALID_SEQUENCE_NUMBER,
     lambda r, g: _dump({**r, "dynamodb": {**r["dynamodb"], "SequenceNumber": "9" * 70}})),
    ("no_new_image", "orders", "quarantine", reasons.MISSING_NEW_IMAGE,
     lambda r, g: _dump({**r, "dynamodb": {k: v for k, v in r["dynamodb"].items() if k != "NewImage"}})),
    ("missing_partition_key", "customers", "quarantine", reasons.missing_key("id"), lambda r, g: _drop_key(r, "id")),
    ("missing_sort_key", "orders", "quarantine", reasons.missing_key("orderId"), lambda r, g: _drop_key(r, "orderId")),
    ("null_key", "orders", "quarantine", reasons.missing_key("customerId"),
     lambda r, g: _set_attribute(r, "customerId", {"NULL": True})),
    ("key_wrong_type", "customers", "quarantine", reasons.type_mismatch("id", "S"), lambda r, g: _set_attribute(r, "id", {"N": "5"})),
    ("string_as_number", "orders", "quarantine", reasons.type_mismatch("amount", "N"),
     lambda r, g: _set_attribute(r, "amount", {"S": "12.50"})),
    ("bool_as_string", "orders", "quarantine", reasons.type_mismatch("isGift", "BOOL"),
     lambda r, g: _set_attribute(r, "isGift", {"S": "true"})),
    ("set_as_string", "orders", "quarantine", reasons.type_mismatch("tags", "SS"), lambda r, g: _set_attribute(r, "tags", {"S": "promo"})),
    ("map_as_list", "orders", "quarantine", reasons.type_mismatch("shippingAddress", "M"),
     lambda r, g: _set_attribute(r, "shippingAddress", {"L": []})),
    ("list_item_wrong_type", "orders", "quarantine", f"{reasons.TYPE_MISMATCH}:lineItems",
     lambda r, g: _set_attribute(r, "lineItems", {"L": [{"S": "not a map"}]})),
    ("binary_not_base64", "orders", "quarantine", reasons.type_mismatch("receiptDigest", "B"),
     lambda r, g: _set_attribute(r, "receiptDigest", {"B": "!!not base64!!"})),
    ("unknown_descriptor", "customers", "quarantine", f"{reasons.TYPE_MISMATCH}:email",
     lambda r, g: _set_attribute(r, "email", {"Q": "x"})),
    ("bare_value", "customers", "quarantine", f"{reasons.TYPE_MISMATCH}:email", lambda r, g: _set_attribute(r, "email", "plain")),
    ("deep_map_in_string_field", "orders", "quarantine", f"{reasons.TYPE_MISMATCH}:shippingAddress",
     lambda r, g: _set_raw_attribute(r, "shippingAddress", b'{"M":{"street":' + _nested_json(200) + b"}}")),
    ("number_39_digits", "orders", "quarantine", reasons.invalid_number("amount"),
     lambda r, g: _set_attribute(r, "amount", {"N": "1" * 39})),
    ("number_39_digits_fraction", "orders", "quarantine", reasons.invalid_number("amount"),
     lambda r, g: _set_attribute(r, "amount", {"N": "12345678901234567890." + "1" * 19})),
    ("number_garbage", "orders", "quarantine", reasons.invalid_number("amount"),
     lambda r, g: _set_attribute(r, "amount", {"N": g.choice(["1e", "--1", "", "0x1F", "1.2.3", "NaN", "Infinity"])})),
    ("number_set_garbage", "orders", "quarantine", reasons.invalid_number("packageWeightsKg"),
     lambda r, g: _set_attribute(r, "packageWeightsKg", {"NS": ["1.5", "heavy"]})),
    ("nested_number_garbage", "orders", "quarantine", reasons.invalid_number("lineItems"),
     lambda r, g: _set_attribute(r, "lineItems", {"L": [{"M": {"sku": {"S": "A"}, "quantity": {"N": "two"},
                                                              "unitPrice": {"N": "1.00"}}}]})),
    # Hostile but valid: must land.
    ("huge_string", "customers", "land", None, lambda r, g: _set_attribute(r, "email", {"S": "x" * 1_000_000})),
    ("odd_unicode", "customers", "land", None,
     lambda r, g: _set_attribute(r, "email", {"S": "\u0000\u202e\U0001f600 \"quoted\" \\ \u00e9\n"})),
    ("number_38_digits", "orders", "land", None,
     lambda r, g: _set_attribute(r, "amount", {"N": "12345678901234567890.123456789012345678"})),
    ("big_string_set", "orders", "land", None,
     lambda r, g: _set_attribute(r, "tags", {"SS": [f"tag-{n}" for n in range(2000)]})),
    ("deep_unnamed_map", "customers", "land", None, lambda r, g: _set_raw_attribute(r, "preferences", _nested_json(50))),
    # DynamoDB itself allows 32 levels; Spark's JSON parser rejects this depth outright.
    ("very_deep_unnamed_map", "customers", "quarantine", reasons.INVALID_JSON,
     lambda r, g: _set_raw_attribute(r, "preferences", _nested_json(2000))),
]


def hostile_records(bad: int, odd_per_kind: int = 3, seed: int = 3) -> list[FuzzRecord]:
    """At least `bad` malformed records cycling through every malformed kind, plus
    `odd_per_kind` of each valid-but-hostile kind."""
    rng = random.Random(seed)
    malformed = [kind for kind in KINDS if kind[2] != "land"]
    valid = [kind for kind in KINDS if kind[2] == "land"]
    plan = [malformed[n % len(malformed)] for n in range(max(bad, len(malformed)))]
    plan += [kind for kind in valid for _ in range(odd_per_kind)]
    needed = len(plan)
    bad_sources = base_records(seed, customers=needed // 4 + 10, key_prefix=BAD_PREFIX)
    odd_sources = base_records(seed + 1, customers=len(valid) * odd_per_kind + 5, key_prefix=ODD_PREFIX)
    cursors = {"customers": 0, "orders": 0}
    records = []
    for number, (kind, table, expect, reason, mutate) in enumerate(plan):
        pool = (odd_sources if expect == "land" else bad_sources)[table]
        source = copy.deepcopy(pool[cursors[table] % len(pool)])
        cursors[table] += 1
        source["eventID"] = marker(number)
        records.append(FuzzRecord(mutate(source, rng), kind, expect, reason, marker(number)))
    return records
