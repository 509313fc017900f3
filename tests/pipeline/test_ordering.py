"""drop_duplicate_events and latest_per_key on decoded change events."""
from __future__ import annotations

import json
import random
from datetime import timezone
from typing import Any

import pytest
import yaml
from change_records import CONTRACTS, T0_SECONDS, change_record
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streaming.contracts.loader import load_contracts
from streaming.contracts.model import TableContract
from streaming.pipeline.decode import decode_records, kept_apart_from_its_plan, release_kept, split_by_table
from streaming.pipeline.envelope import ENVELOPE_SCHEMA
from streaming.pipeline.ordering import drop_duplicate_events, latest_per_key
from streaming.samples.raw_fixtures import ordering_value

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def customers(tmp_path_factory) -> TableContract:
    directory = tmp_path_factory.mktemp("order-contracts")
    (directory / "customers.yml").write_text(yaml.safe_dump(CONTRACTS["customers"], sort_keys=False), encoding="utf-8")
    return load_contracts(directory)["customers"]


def event(
    event_name: str,
    customer_id: str,
    name: str,
    second: float,
    event_id: str,
    email: str | None = None,
    fmt: str = "kinesis",
    sequence_number: str | None = None,
) -> dict[str, Any]:
    """A customers change `second` seconds after T0 (ms precision unless fmt="streams")."""
    keys = {"id": {"S": customer_id}, "custName": {"S": name}}
    image = None if event_name == "REMOVE" else {**keys, "email": {"S": email or f"{event_id}@example.com"}}
    created = T0_SECONDS + second if fmt == "streams" else round((T0_SECONDS + second) * 1000)
    return change_record(
        "customers",
        event_name,
        keys,
        image,
        fmt=fmt,
        event_id=event_id,
        created=created,
        sequence_number=sequence_number,
    )


# The decoded batches of this module, freed when its tests are done.
_KEPT: list[DataFrame] = []


@pytest.fixture(scope="module", autouse=True)
def _release_decoded_batches():
    yield
    for kept in _KEPT:
        release_kept(kept)


def decoded_events(spark, contract: TableContract, records: list[tuple[dict[str, Any], str]]) -> DataFrame:
    """Decode (record, kinesis sequence number) pairs; every record must decode. The
    decoded records are kept apart from the decode's plan, as process_batch keeps them
    before it orders them (streaming/pipeline/batch.py): each record is decoded once, and
    the ordering's plans start from the kept rows instead of planning the decode again."""
    rows = [(json.dumps(record), sequence, f"order-test:{index}") for index, (record, sequence) in enumerate(records)]
    contracts = {contract.table: contract}
    kept = kept_apart_from_its_plan(decode_records(spark.createDataFrame(rows, ENVELOPE_SCHEMA), contracts))
    _KEPT.append(kept)
    tables, quarantine = split_by_table(kept, contracts)
    assert quarantine.count() == 0
    return tables[contract.table]


def winners(df: DataFrame, contract: TableContract) -> dict[tuple[str, str], dict[str, Any]]:
    rows = latest_per_key(drop_duplicate_events(df, contract), contract).collect()
    result = {(row["id"], row["cust_name"]): row.asDict() for row in rows}
    assert len(result) == len(rows), "latest_per_key returned a key twice"
    return result


# Three items; (c-1, Ada) and (c-1, Bob) share the partition key, so only the full key
# keeps them apart. Kinesis sequence numbers grow with arrival in the stream.
HISTORY: list[dict[str, Any]] = [
    event("INSERT", "c-1", "Ada", 0, "ada-1", "ada@one.example"),
    event("MODIFY", "c-1", "Ada", 1, "ada-2", "ada@two.example"),
    event("INSERT", "c-1", "Bob", 1.5, "bob-1"),
    event("MODIFY", "c-1", "Ada", 2.25, "ada-3", "ada@three.example"),
    event("INSERT", "c-2", "Cy", 3, "cy-1"),
    event("MODIFY", "c-1", "Bob", 4, "bob-2"),
    event("REMOVE", "c-2", "Cy", 5, "cy-2"),
    event("REMOVE", "c-1", "Bob", 6, "bob-3"),
    event("INSERT", "c-2", "Cy", 7, "cy-3", "cy@again.example"),  # re-created after its delete
]


def kinesis_sequence(position: int) -> str:
    return f"4964{position:052d}"


def test_shuffled_and_duplicated_events_give_the_in_order_result(spark, customers):
    in_order = [(record, kinesis_sequence(index)) for index, record in enumerate(HISTORY)]
    rng = random.Random(7)
    # Redeliveries of the same change carry a new, later Kinesis sequence number.
    redelivered = [(record, kinesis_sequence(100 + index)) for index, record in enumerate(rng.sample(HISTORY, 5))]
    shuffled = in_order + redelivered
    rng.shuffle(shuffled)

    expected = winners(decoded_events(spark, customers, in_order), customers)
    actual = winners(decoded_events(spark, customers, shuffled), customers)

    assert actual == expected
    # The last change per key in the true history, independently of the code.
    assert {key: (row["_event_id"], row["_is_deleted"], row["email"]) for key, row in actual.items()} == {
        ("c-1", "Ada"): ("ada-3", False, "ada@three.example"),
        ("c-1", "Bob"): ("bob-3", True, None),
        ("c-2", "Cy"): ("cy-3", False, "cy@again.example"),
    }


def test_a_late_older_event_does_not_undo_a_delete(spark, customers):
    arrivals = [
        (event("INSERT", "c-9", "Dee", 0, "dee-1"), kinesis_sequence(1)),
        (event("REMOVE", "c-9", "Dee", 10, "dee-3"), kinesis_sequence(2)),
        (event("MODIFY", "c-9", "Dee", 5, "dee-2"), kinesis_sequence(3)),  # older change, arriving last
    ]

    (winner,) = winners(decoded_events(spark, customers, arrivals), customers).values()

    assert (winner["_event_id"], winner["_is_deleted"]) == ("dee-3", True)


def test_same_second_changes_are_ordered_by_sequence_number(spark, customers):
    # DynamoDB Streams has whole seconds: the sequence number decides, numerically.
    arrivals = [
        (event("MODIFY", "c-5", "Eve", 0, "eve-later", fmt="streams", sequence_number="1000000000000000000000"), None),
        (event("MODIFY", "c-5", "Eve", 0, "eve-earlier", fmt="streams", sequence_number="999999999999999999999"), None),
    ]

    (winner,) = winners(decoded_events(spark, customers, arrivals), customers).values()

    assert winner["_event_id"] == "eve-later"


@pytest.mark.parametrize("reverse", [False, True])
def test_equal_ordering_values_are_broken_by_event_id(spark, customers, reverse):
    sequence = kinesis_sequence(1)
    arrivals = [
        (event("MODIFY", "c-6", "Fay", 0, "fay-a"), sequence),
        (event("MODIFY", "c-6", "Fay", 0, "fay-b"), sequence),
    ]
    if reverse:
        arrivals.reverse()

    (winner,) = winners(decoded_events(spark, customers, arrivals), customers).values()

    assert winner["_event_id"] == "fay-b"


# Two writes to one item in one millisecond, as Kinesis Data Streams for DynamoDB
# records landed by Firehose carry them: no sequence number of either kind. Event ids
# are the UUIDs such records carry.
SAME_MILLISECOND = [
    event("MODIFY", "c-9", "Ivy", 0, "0d6b2a64-4f8e-4a4e-9d3c-5b1f0c6a7e21", "ivy@first.example"),
    event("MODIFY", "c-9", "Ivy", 0, "f3a1c9e0-7b2d-4c55-8e6f-9a0b1c2d3e4f", "ivy@second.example"),
]


def hudi_upserts(batches: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """The row Hudi's current-state table keeps for one key after upserting `batches`
    in order: within a batch the pipeline's latest_per_key picks the row; across
    batches DefaultHoodieRecordPayload keeps the stored row when its ordering value is
    greater and lets the incoming row win a tie (DESIGN.md, "Hudi ordering"; apache/hudi
    hudi-common/src/main/java/org/apache/hudi/common/model/DefaultHoodieRecordPayload.java,
    needUpdatingPersistedRecord: `persistedOrderingVal.compareTo(incomingOrderingVal) <= 0`)."""
    stored: dict[str, Any] | None = None
    for incoming in batches:
        (row,) = incoming
        if stored is None or stored["_ordering_value"] <= row["_ordering_value"]:
            stored = row
    assert stored is not None
    return stored


@pytest.mark.parametrize("reverse", [False, True])
def test_two_writes_in_one_millisecond_have_one_winner_in_spark_and_hudi(spark, customers, reverse):
    arrivals = [(record, None) for record in (reversed(SAME_MILLISECOND) if reverse else SAME_MILLISECOND)]
    decoded = [row.asDict() for row in decoded_events(spark, customers, arrivals).collect()]

    assert decoded[0]["_event_ts"] == decoded[1]["_event_ts"]
    assert decoded[0]["_sequence_number"] == decoded[1]["_sequence_number"] == "0" * 64
    # The event id ends the value, so two distinct changes never tie.
    assert decoded[0]["_ordering_value"] != decoded[1]["_ordering_value"]
    in_one_batch = winners(decoded_events(spark, customers, arrivals), customers)[("c-9", "Ivy")]
    one_per_batch = hudi_upserts([[row] for row in decoded])
    assert in_one_batch["_event_id"] == one_per_batch["_event_id"] == "f3a1c9e0-7b2d-4c55-8e6f-9a0b1c2d3e4f"


def test_raw_fixtures_build_the_ordering_value_the_decoder_builds(spark, customers):
    """The dbt tests write raw rows with samples.raw_fixtures; its ordering values must be
    the decoder's, or those tests would check another rule than the job's."""
    (row,) = decoded_events(spark, customers, [(SAME_MILLISECOND[0], None)]).collect()

    rebuilt = ordering_value(row["_event_ts"].astimezone(timezone.utc), row["_sequence_number"], row["_event_id"])

    assert rebuilt == row["_ordering_value"]


def test_a_record_without_an_event_id_still_never_ties_with_another_change(spark, customers):
    records = [{**record, "eventID": None} for record in SAME_MILLISECOND]

    values = {row["_ordering_value"] for row in decoded_events(spark, customers, [(r, None) for r in records]).collect()}

    assert len(values) == 2


def test_duplicates_collapse_to_the_first_delivery(spark, customers):
    change = event("INSERT", "c-7", "Gus", 0, "gus-1")
    events = decoded_events(
        spark, customers, [(change, kinesis_sequence(9)), (change, kinesis_sequence(3)), (change, kinesis_sequence(5))]
    )

    rows = drop_duplicate_events(events, customers).collect()

    first_delivery = kinesis_sequence(3).rjust(64, "0")
    assert [(row["_event_id"], row["_sequence_number"]) for row in rows] == [("gus-1", first_delivery)]


@pytest.mark.parametrize("reverse", [False, True], ids=["ann_first", "zed_first"])
def test_copies_of_one_event_differing_in_content_keep_the_one_that_sorts_first(spark, customers, reverse):
    # One eventID, one time, one sequence number, two contents: not something DynamoDB
    # sends, but the batch keeps the same one whichever arrives first (issue 30, item 17).
    copies = [event("MODIFY", "c-9", "Ida", 0, "ida-1", email) for email in ("zed@example.com", "ann@example.com")]
    records = [(copy, kinesis_sequence(4)) for copy in (reversed(copies) if reverse else copies)]

    rows = drop_duplicate_events(decoded_events(spark, customers, records), customers).collect()

    assert [(row["_event_id"], row["email"]) for row in rows] == [("ida-1", "ann@example.com")]


def test_events_without_an_id_are_never_merged(spark, customers):
    events = decoded_events(
        spark,
        customers,
        [
            (event("INSERT", "c-8", "Hal", 0, "x"), kinesis_sequence(1)),
            (event("MODIFY", "c-8", "Hal", 1, "y"), kinesis_sequence(2)),
        ],
    ).withColumn("_event_id", F.lit(None).cast("string"))

    assert drop_duplicate_events(events, customers).count() == 2


def test_latest_per_key_shuffles_once_and_uses_no_window(spark, customers):
    events = decoded_events(spark, customers, [(HISTORY[0], kinesis_sequence(0))])

    plan = latest_per_key(events, customers)._jdf.queryExecution().executedPlan().toString()

    assert plan.count("Exchange hashpartitioning") == 1
    assert "Window" not in plan


def test_deduplicating_then_picking_the_latest_shuffles_once(spark, customers):
    events = decoded_events(spark, customers, [(HISTORY[0], kinesis_sequence(0))])

    winners_plan = latest_per_key(drop_duplicate_events(events, customers), customers)
    plan = winners_plan._jdf.queryExecution().executedPlan().toString()

    assert plan.count("Exchange") == 1
