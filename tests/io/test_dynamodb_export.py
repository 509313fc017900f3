"""DynamoDB export files: the AWS layout, validation, and replay as change records."""
from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from streaming.contracts.loader import load_contracts
from streaming.io.dynamodb_export import (
    ExportLineError,
    ExportValidationError,
    export_to_change_records,
    read_export_manifest,
    refused_export_lines,
    snapshot_ordering,
)
from streaming.samples.export_writer import write_full_export, write_incremental_export
from streaming.samples.generator import generate_cdc

UTC = timezone.utc
CONTRACTS = load_contracts()
EXPORT_TIME = datetime(2026, 11, 1, 1, 30, 0, 123000, tzinfo=UTC)
# Fields of manifest-summary.json as the DynamoDB developer guide shows them.
DOCUMENTED_SUMMARY_FIELDS = {
    "version", "exportArn", "startTime", "endTime", "tableArn", "tableId", "exportTime", "s3Bucket",
    "s3Prefix", "s3SseAlgorithm", "s3SseKmsKeyId", "manifestFilesS3Key", "billedSizeBytes", "itemCount",
    "outputFormat",
}


@pytest.fixture(scope="module")
def cdc():
    return generate_cdc(seed=21, customers=40, malformed_rate=0.0)


@pytest.fixture()
def full_export(tmp_path: Path, cdc) -> tuple[Path, dict[tuple[str, ...], Any]]:
    items = cdc.state_at("orders", EXPORT_TIME)
    return write_full_export(tmp_path, "orders", items.values(), EXPORT_TIME, files=3), items


def md5_base64(path: Path) -> str:
    return base64.b64encode(hashlib.md5(path.read_bytes()).digest()).decode("ascii")


def data_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()]


def rewrite_manifest_files(export_dir: Path, change) -> None:
    """Edit manifest-files.json and keep its .checksum consistent, as a careless tool would."""
    path = export_dir / "manifest-files.json"
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    change(entries)
    content = "".join(json.dumps(entry) + "\n" for entry in entries).encode()
    path.write_bytes(content)
    (export_dir / "manifest-files.checksum").write_text(hashlib.md5(content).hexdigest())


def test_full_export_has_the_documented_layout(full_export, tmp_path: Path):
    export_dir, items = full_export
    assert export_dir.parent == tmp_path / "AWSDynamoDB"
    assert re.fullmatch(r"\d{14}-[0-9a-f]{8}", export_dir.name)
    for name in ("_started", "manifest-summary.json", "manifest-summary.checksum",
                 "manifest-files.json", "manifest-files.checksum"):
        assert (export_dir / name).is_file(), name
    summary = json.loads((export_dir / "manifest-summary.json").read_text())
    assert DOCUMENTED_SUMMARY_FIELDS <= set(summary)
    assert summary["outputFormat"] == "DYNAMODB_JSON" and summary["exportType"] == "FULL_EXPORT"
    assert summary["itemCount"] == len(items) > 0
    assert summary["exportTime"] == "2026-11-01T01:30:00.123Z"
    assert summary["tableArn"].endswith(":table/orders")
    assert summary["exportArn"] == f"{summary['tableArn']}/export/{export_dir.name}"
    assert summary["manifestFilesS3Key"] == f"AWSDynamoDB/{export_dir.name}/manifest-files.json"

    entries = [json.loads(line) for line in (export_dir / "manifest-files.json").read_text().splitlines()]
    assert len(entries) == 3
    exported = []
    for entry in entries:
        assert set(entry) == {"itemCount", "md5Checksum", "etag", "dataFileS3Key"}
        assert re.fullmatch(rf"AWSDynamoDB/{export_dir.name}/data/[a-z2-7]{{26}}\.json\.gz", entry["dataFileS3Key"])
        data_file = tmp_path / entry["dataFileS3Key"]
        assert entry["md5Checksum"] == md5_base64(data_file)
        lines = data_lines(data_file)
        assert len(lines) == entry["itemCount"]
        assert all(set(line) == {"Item"} for line in lines)
        exported.extend(line["Item"] for line in lines)
    key = lambda item: (item["customerId"]["S"], item["orderId"]["S"])  # noqa: E731
    assert {key(item): item for item in exported} == items


def test_manifest_is_read_and_validated(full_export):
    export_dir, items = full_export
    manifest = read_export_manifest(export_dir)
    assert manifest.export_type == "FULL_EXPORT" and manifest.table_name == "orders"
    assert manifest.item_count == len(items) == sum(f.item_count for f in manifest.data_files)
    assert manifest.export_time == EXPORT_TIME
    assert all(f.path.is_file() for f in manifest.data_files)


def test_a_corrupted_data_file_fails_the_checksum(full_export):
    export_dir, _ = full_export
    data_file = read_export_manifest(export_dir).data_files[0].path
    data_file.write_bytes(gzip.compress(b'{"Item":{"customerId":{"S":"forged"}}}\n'))
    with pytest.raises(ExportValidationError, match="md5"):
        read_export_manifest(export_dir)


def test_a_missing_data_file_is_reported(full_export):
    export_dir, _ = full_export
    data_file = read_export_manifest(export_dir).data_files[1].path
    data_file.unlink()
    with pytest.raises(ExportValidationError, match=f"missing.*{data_file.name}"):
        read_export_manifest(export_dir)


def test_item_counts_must_match_the_data(full_export):
    export_dir, _ = full_export

    def overstate(entries):
        entries[0]["itemCount"] += 1

    rewrite_manifest_files(export_dir, overstate)
    with pytest.raises(ExportValidationError, match="itemCount"):
        read_export_manifest(export_dir)


def test_a_tampered_manifest_fails_its_checksum_file(full_export):
    export_dir, _ = full_export
    path = export_dir / "manifest-summary.json"
    path.write_text(path.read_text().replace('"itemCount": ', '"itemCount": 1'))
    with pytest.raises(ExportValidationError, match="manifest-summary.checksum"):
        read_export_manifest(export_dir)


@pytest.mark.parametrize("name", ["manifest-summary.json", "manifest-files.json"])
def test_a_missing_manifest_is_reported(full_export, name):
    export_dir, _ = full_export
    (export_dir / name).unlink()
    with pytest.raises(ExportValidationError, match=f"{name} is missing"):
        read_export_manifest(export_dir)


def test_full_export_lines_become_inserts_placed_by_the_export_time(full_export):
    export_dir, items = full_export
    records = [json.loads(line) for line in export_to_change_records(export_dir, CONTRACTS["orders"])]
    assert len(records) == len(items)
    manifest = read_export_manifest(export_dir)
    export_us = int(EXPORT_TIME.timestamp()) * 1_000_000 + EXPORT_TIME.microsecond
    event_ids = set()
    for record in records:
        assert record["eventName"] == "INSERT" and record["tableName"] == "orders"
        assert record["recordFormat"] == "application/json" and record["eventSource"] == "aws:dynamodb"
        dynamodb = record["dynamodb"]
        placed_us, sequence_number = snapshot_ordering(export_us)
        assert dynamodb["ApproximateCreationDateTime"] == placed_us
        assert dynamodb["ApproximateCreationDateTimePrecision"] == "MICROSECOND"
        assert dynamodb["SequenceNumber"] == sequence_number == str(export_us)
        key = (dynamodb["Keys"]["customerId"]["S"], dynamodb["Keys"]["orderId"]["S"])
        assert set(dynamodb["Keys"]) == {"customerId", "orderId"}
        assert dynamodb["NewImage"] == items[key] and "OldImage" not in dynamodb
        assert re.fullmatch(rf"export:{manifest.export_id}:[a-z2-7]{{26}}:\d+", record["eventID"])
        event_ids.add(record["eventID"])
    assert len(event_ids) == len(records)
    assert list(export_to_change_records(export_dir, CONTRACTS["orders"])) == [json.dumps(r, separators=(",", ":"))
                                                                     for r in records]


def test_export_of_another_table_is_refused(full_export):
    export_dir, _ = full_export
    with pytest.raises(ExportValidationError, match="not 'customers'"):
        list(export_to_change_records(export_dir, CONTRACTS["customers"]))


def test_unknown_table_cannot_be_exported(tmp_path: Path):
    with pytest.raises(ValueError, match="no table contract"):
        write_full_export(tmp_path, "inventory", [], EXPORT_TIME)


def test_an_item_without_its_key_cannot_be_exported(tmp_path: Path):
    with pytest.raises(ValueError, match=r"lacks key attribute\(s\) \['orderId'\]"):
        write_full_export(tmp_path, "orders", [{"customerId": {"S": "cust-000001"}}], EXPORT_TIME)


def test_incremental_export_layout_and_replay(tmp_path: Path, cdc):
    window_start = datetime(2026, 11, 1, 0, 30, tzinfo=UTC)
    window_end = datetime(2026, 11, 1, 3, 0, tzinfo=UTC)
    changes = cdc.changes_between("orders", window_start, window_end)
    export_dir = write_incremental_export(tmp_path, "orders", changes, window_start, window_end)

    summary = json.loads((export_dir / "manifest-summary.json").read_text())
    assert summary["exportType"] == "INCREMENTAL_EXPORT" and summary["outputView"] == "NEW_AND_OLD_IMAGES"
    assert summary["exportFromTime"] == "2026-11-01T00:30:00.000Z"
    assert summary["exportToTime"] == "2026-11-01T03:00:00.000Z"
    manifest = read_export_manifest(export_dir)
    assert manifest.item_count == len(changes)
    # Incremental exports share one data folder beside the export folders.
    assert all(f.path.parent == tmp_path / "AWSDynamoDB" / "data" for f in manifest.data_files)
    first_line = data_lines(manifest.data_files[0].path)[0]
    assert set(first_line) <= {"Metadata", "Keys", "NewImage", "OldImage"}
    assert re.fullmatch(r"\d{16}", first_line["Metadata"]["WriteTimestampMicros"]["N"])

    state = cdc.state_at("orders", window_start - timedelta(microseconds=1))
    names = set()
    for line in export_to_change_records(export_dir, CONTRACTS["orders"]):
        record = json.loads(line)
        dynamodb = record["dynamodb"]
        names.add(record["eventName"])
        key = (dynamodb["Keys"]["customerId"]["S"], dynamodb["Keys"]["orderId"]["S"])
        # The exact write time travels as the sequence number (snapshot_ordering).
        assert window_start.timestamp() * 1e6 <= int(dynamodb["SequenceNumber"]) < window_end.timestamp() * 1e6
        if record["eventName"] == "REMOVE":
            assert "NewImage" not in dynamodb and dynamodb["OldImage"] == state.pop(key)
        else:
            assert ("OldImage" in dynamodb) == (record["eventName"] == "MODIFY")
            state[key] = dynamodb["NewImage"]
    assert names == {"INSERT", "MODIFY", "REMOVE"}
    assert state == cdc.state_at("orders", window_end - timedelta(microseconds=1))


@pytest.mark.parametrize("export_time", [EXPORT_TIME, EXPORT_TIME.replace(microsecond=0)],
                         ids=["export-in-mid-second", "export-on-a-whole-second"])
def test_a_backfill_plus_overlapping_cdc_converges_to_the_true_state(tmp_path: Path, cdc, export_time):
    """Winner per key = greatest (event time, sequence number), as the pipeline orders.

    DynamoDB Streams records carry whole seconds, so a change made later within the
    export's own second is stamped before the export time: snapshot_ordering places
    the export's rows before that second, wherever in it the export was taken.
    """
    export_dir = write_full_export(tmp_path, "orders", cdc.state_at("orders", export_time).values(), export_time)
    winners: dict[tuple[str, str], tuple[tuple[int, int], dict[str, Any]]] = {}
    for line in [*export_to_change_records(export_dir, CONTRACTS["orders"]), *cdc.records]:
        record = json.loads(line)
        if "tableName" in record:
            table = record["tableName"]
            precision = record["dynamodb"].get("ApproximateCreationDateTimePrecision")
            scale = 1 if precision == "MICROSECOND" else 1000
        else:
            table, scale = record["eventSourceARN"].split(":table/")[1].split("/")[0], 1_000_000
        if table != "orders":
            continue
        dynamodb = record["dynamodb"]
        # Without a DynamoDB sequence number the Kinesis one (never "0") takes its place.
        ordering = (dynamodb["ApproximateCreationDateTime"] * scale, int(dynamodb.get("SequenceNumber", "1")))
        key = (dynamodb["Keys"]["customerId"]["S"], dynamodb["Keys"]["orderId"]["S"])
        if key not in winners or ordering > winners[key][0]:
            winners[key] = (ordering, record)
    converged = {key: (None if record["eventName"] == "REMOVE" else record["dynamodb"]["NewImage"])
                 for key, (_, record) in winners.items()}
    assert converged == cdc.expected_state["orders"]


# --------------------------------------------------------------------------- manifests that point elsewhere
# The layout is AWS's (DynamoDB developer guide, "DynamoDB table export output format",
# https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/S3DataExport.Output.html):
# manifest-summary.json and manifest-files.json in <prefix>/AWSDynamoDB/<export-id>/, whose
# dataFileS3Key entries name the gzipped JSON-lines files in <export-id>/data/ (full export)
# or in the shared AWSDynamoDB/data/ (incremental export).


def rewrite_summary(export_dir: Path, **changes: Any) -> None:
    path = export_dir / "manifest-summary.json"
    content = json.dumps({**json.loads(path.read_text()), **changes}, indent=2).encode()
    path.write_bytes(content)
    (export_dir / "manifest-summary.checksum").write_text(hashlib.md5(content).hexdigest())


def plant_copy(data_file: Path, destination: Path) -> None:
    """An intact copy of a data file elsewhere: md5 and item count still match the manifest."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_bytes(data_file.read_bytes())


def point_first_entry_at(export_dir: Path, key: str) -> None:
    def repoint(entries):
        entries[0]["dataFileS3Key"] = key

    rewrite_manifest_files(export_dir, repoint)


@pytest.mark.parametrize(
    ("key", "planted", "message"),
    [
        ("AWSDynamoDB/{id}/data/../../../outside/{name}", "outside/{name}", r"'\.\.' segment"),
        ("AWSDynamoDB/../outside/AWSDynamoDB/{id}/data/{name}", "outside/AWSDynamoDB/{id}/data/{name}",
         r"'\.\.' segment"),
        ("/{root}/AWSDynamoDB/{id}/data/{name}", None, "URL or absolute path"),
        ("s3://another-bucket/AWSDynamoDB/{id}/data/{name}", None, "URL or absolute path"),
        ("AWSDynamoDB/01700000000000-0badc0de/data/{name}", "AWSDynamoDB/01700000000000-0badc0de/data/{name}",
         "not a file of the export's data folder"),
        ("another-prefix/AWSDynamoDB/{id}/data/{name}", None, "not this export's s3Prefix"),
    ],
)
def test_a_data_file_key_outside_the_export_is_refused(full_export, tmp_path, key, planted, message):
    export_dir, _ = full_export
    first = read_export_manifest(export_dir).data_files[0].path
    fields = {"id": export_dir.name, "name": first.name, "root": str(tmp_path).strip("/")}
    if planted:
        plant_copy(first, tmp_path / planted.format(**fields))
    point_first_entry_at(export_dir, key.format(**fields))

    with pytest.raises(ExportValidationError, match=message) as refused:
        read_export_manifest(export_dir)
    assert "manifest-files.json line 1" in str(refused.value)


def test_a_data_file_key_with_or_without_the_export_prefix_is_read(full_export):
    """AWS's example summary has s3Prefix "2020-Nov" with keys starting at AWSDynamoDB/;
    keys that carry the prefix are read the same way."""
    export_dir, items = full_export
    rewrite_summary(export_dir, s3Bucket="ddb-orders-export", s3Prefix="2026-Nov")
    first = read_export_manifest(export_dir).data_files[0]
    point_first_entry_at(export_dir, "2026-Nov/" + first.s3_key)

    manifest = read_export_manifest(export_dir)

    assert manifest.data_files[0].path == first.path and manifest.item_count == len(items)


# --------------------------------------------------------------------------- lines a replay refuses


def replace_data_file(export_dir: Path, index: int, lines: list[bytes]) -> Path:
    """Rewrite one data file and every manifest field that describes it, so only the lines are wrong."""
    manifest = read_export_manifest(export_dir)
    data_file = manifest.data_files[index].path
    data_file.write_bytes(gzip.compress(b"".join(line + b"\n" for line in lines), mtime=0))

    def describe(entries):
        entries[index]["itemCount"] = len(lines)
        entries[index]["md5Checksum"] = md5_base64(data_file)
        entries[index]["etag"] = hashlib.md5(data_file.read_bytes()).hexdigest()

    rewrite_manifest_files(export_dir, describe)
    rewrite_summary(export_dir, itemCount=manifest.item_count - manifest.data_files[index].item_count + len(lines))
    return data_file


def test_every_line_a_replay_would_refuse_is_counted_with_examples(full_export):
    export_dir, _ = full_export
    good = data_lines(read_export_manifest(export_dir).data_files[0].path)
    keyless = [{"Item": {k: v for k, v in row["Item"].items() if k != "orderId"}} for row in good[:2]]
    data_file = replace_data_file(export_dir, 0, [
        json.dumps(good[0]).encode(),
        b'{"Item": {"customerId": {"S": "c-1"}, "orderId": {"S": "o-1"}',  # cut short
        json.dumps(keyless[0]).encode(),
        b"\xff\xfe not text",
        json.dumps(keyless[1]).encode(),
        b"[1, 2]",
    ])
    manifest = read_export_manifest(export_dir)

    refused = refused_export_lines(manifest, CONTRACTS["orders"])

    assert refused.lines_checked == manifest.item_count
    assert refused.counts == {"not JSON": 1, "missing key attribute": 2, "not UTF-8": 1, "not a JSON object": 1}
    assert refused.examples["missing key attribute"] == [
        f"{data_file} line 3: missing key attribute (Item lacks ['orderId'])",
        f"{data_file} line 5: missing key attribute (Item lacks ['orderId'])",
    ]
    assert refused.examples["not UTF-8"] == [f"{data_file} line 4: not UTF-8 (byte 0xff at column 1)"]
    assert refused.lines()[0] == f"5 of {manifest.item_count} export lines cannot be replayed:"
    # The replay itself stops at the first of them, with the same words.
    with pytest.raises(ExportLineError, match=f"{re.escape(str(data_file))} line 2: not JSON"):
        list(export_to_change_records(export_dir, CONTRACTS["orders"]))


def test_an_incremental_line_without_the_contract_key_is_refused(tmp_path: Path, cdc):
    window_start, window_end = datetime(2026, 11, 1, 0, 30, tzinfo=UTC), datetime(2026, 11, 1, 3, 0, tzinfo=UTC)
    changes = cdc.changes_between("orders", window_start, window_end)
    export_dir = write_incremental_export(tmp_path, "orders", changes, window_start, window_end, files=1)
    rows = data_lines(read_export_manifest(export_dir).data_files[0].path)
    rows[0]["Keys"].pop("orderId")
    replace_data_file(export_dir, 0, [json.dumps(row).encode() for row in rows])

    refused = refused_export_lines(read_export_manifest(export_dir), CONTRACTS["orders"])

    assert refused.counts == {"missing key attribute": 1}
    assert "line 1: missing key attribute (Keys lacks ['orderId'])" in refused.examples["missing key attribute"][0]
