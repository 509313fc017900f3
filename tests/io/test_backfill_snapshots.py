"""Issue 21 item 16: a backfilled export row is the item's snapshot at the export time,
not a change event, and it sorts against stream changes by one provable rule
(streaming.io.dynamodb_export.snapshot_ordering): a change stamped with the snapshot's
second or later wins, a change stamped earlier is contained in it and loses.

DynamoDB Streams stamps ApproximateCreationDateTime in whole seconds, rounded down
(DynamoDB Streams API reference, StreamRecord:
https://docs.aws.amazon.com/amazondynamodbstreams/latest/APIReference/API_StreamRecord.html),
so a write made after an export within the export's own second carries a stamp
before the export time. Before, such a write lost to the export's image.

The marts' side (snapshots are not registrations, and add a history version only when
they show something new) is tested by dbt unit tests in the YAML of
dbt_project/models/intermediate and dbt_project/models/marts."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest
from change_records import change_record

from streaming.contracts.loader import load_contracts
from streaming.io.dynamodb_export import SNAPSHOT_EVENT_ID_PREFIX, export_to_change_records, snapshot_ordering
from streaming.pipeline.decode import decode_batch
from streaming.pipeline.envelope import ENVELOPE_SCHEMA
from streaming.pipeline.ordering import drop_duplicate_events, latest_per_key
from streaming.samples.export_writer import IncrementalChange, write_full_export, write_incremental_export

CONTRACTS = load_contracts()
CUSTOMERS = CONTRACTS["customers"]
# The decoder is given only the table these tests are about: every further contract adds
# planning time to each decode and none of them receives a record here.
DECODED = {"customers": CUSTOMERS}
MACRO = Path(__file__).parents[2] / "macros" / "staging" / "backfill_snapshots.sql"
EXPORTED = datetime(2026, 11, 1, 1, 30, 5, 123000, tzinfo=timezone.utc)  # AWS: millisecond precision
EXPORTED_SECOND = int(EXPORTED.timestamp())
KEYS = {"id": {"S": "c1"}, "custName": {"S": "Ann"}}


def _item(email: str) -> dict:
    return {**KEYS, "email": {"S": email}, "registrationDate": {"S": "2024-01-01T00:00:00Z"}}


def test_the_marts_recognise_snapshots_by_the_prefix_the_backfill_writes():
    (pattern,) = re.findall(r"like '([^']*)'", MACRO.read_text(encoding="utf-8"))

    assert pattern == SNAPSHOT_EVENT_ID_PREFIX + "%"


def test_a_snapshot_sorts_just_before_its_second_and_keeps_its_exact_time_as_sequence_number():
    taken_us = EXPORTED_SECOND * 1_000_000 + 123_000

    placed_us, sequence_number = snapshot_ordering(taken_us)

    assert placed_us == EXPORTED_SECOND * 1_000_000 - 1
    assert sequence_number == str(taken_us)
    # A snapshot taken on a whole second still sorts before every change stamped with it.
    assert snapshot_ordering(EXPORTED_SECOND * 1_000_000)[0] == EXPORTED_SECOND * 1_000_000 - 1


def _winner(spark, lines: list[str]) -> dict:
    rows = [(line, None, f"snapshot-test:{index}") for index, line in enumerate(lines)]
    tables, quarantine = decode_batch(spark.createDataFrame(rows, ENVELOPE_SCHEMA), DECODED)
    assert quarantine.count() == 0
    (winner,) = latest_per_key(drop_duplicate_events(tables["customers"], CUSTOMERS), CUSTOMERS).collect()
    return winner.asDict()


def _streams_modify(email: str, stamped_second: int, event_id: str) -> str:
    return json.dumps(change_record("customers", "MODIFY", KEYS, _item(email), _item("old@example.com"),
                                    fmt="streams", event_id=event_id, created=stamped_second))


@pytest.fixture()
def full_export_lines(tmp_path) -> list[str]:
    export_dir = write_full_export(tmp_path, "customers", [_item("exported@example.com")], EXPORTED)
    return list(export_to_change_records(export_dir, CUSTOMERS))


@pytest.mark.spark
def test_a_write_stamped_with_the_export_second_beats_the_snapshot(spark, full_export_lines):
    # Written at 01:30:05.600, after the export at 01:30:05.123; Streams stamps it 01:30:05.
    later = _streams_modify("later@example.com", EXPORTED_SECOND, "streams-later")

    for lines in ([*full_export_lines, later], [later, *full_export_lines]):
        assert _winner(spark, lines)["email"] == "later@example.com"


@pytest.mark.spark
def test_a_write_stamped_before_the_export_second_is_contained_in_the_snapshot(spark, full_export_lines):
    earlier = _streams_modify("earlier@example.com", EXPORTED_SECOND - 1, "streams-earlier")

    winner = _winner(spark, [earlier, *full_export_lines])

    assert winner["email"] == "exported@example.com"
    assert winner["_event_id"].startswith(SNAPSHOT_EVENT_ID_PREFIX)


@pytest.mark.spark
def test_an_incremental_export_in_the_same_second_beats_the_full_export(spark, tmp_path, full_export_lines):
    written_us = EXPORTED_SECOND * 1_000_000 + 400_000  # 01:30:05.400, after the full export's .123
    change = IncrementalChange(KEYS, _item("incremental@example.com"), _item("exported@example.com"), written_us)
    export_dir = write_incremental_export(tmp_path / "incremental", "customers", [change], EXPORTED,
                                          datetime(2026, 11, 1, 1, 45, tzinfo=timezone.utc))
    incremental = list(export_to_change_records(export_dir, CUSTOMERS))

    for lines in ([*full_export_lines, *incremental], [*incremental, *full_export_lines]):
        assert _winner(spark, lines)["email"] == "incremental@example.com"
