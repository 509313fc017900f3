"""Landing objects in Firehose's shapes through the whole pipeline: every record counted."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from pipelines import pipeline_at
from streaming.io.landing_reader import MAX_RECORD_BYTES
from streaming.io.layout import DataLayout
from streaming.io.sources import landing_files_batch, landing_files_stream
from streaming.runtime.startup import LandingFiles, StreamOptions, start_stream
from streaming.runtime.stream_loop import run_stream
from streaming.samples.generator import write_landing_files

pytestmark = pytest.mark.spark

FIXED_NOW = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)
GENERATOR_OPTIONS = {"seed": 41, "customers": 8, "orders_per_customer": 2, "malformed_rate": 0.08}


@pytest.fixture(scope="module")
def customers_only(two_table_contracts):
    """For the tests whose records are all customers': each further contract only adds
    Spark planning to every batch."""
    return {"customers": two_table_contracts["customers"]}


def customer_record(customer_id: str, event_id: str) -> bytes:
    return json.dumps({
        "eventID": event_id, "eventName": "INSERT", "eventSource": "aws:dynamodb", "tableName": "customers",
        "dynamodb": {"ApproximateCreationDateTime": 1_790_000_000, "SequenceNumber": "100",
                     "Keys": {"id": {"S": customer_id}, "custName": {"S": "Ada"}},
                     "NewImage": {"id": {"S": customer_id}, "custName": {"S": "Ada"},
                                  "email": {"S": f"{customer_id}@example.com"}}},
    }, separators=(",", ":")).encode()


def test_every_record_of_a_concatenated_object_lands_or_is_quarantined(spark, tmp_path, customers_only):
    good = [customer_record(f"cust-{n}", f"event-{n}") for n in range(3)]
    duplicated = customer_record("cust-dup", "event-dup").replace(b'"eventName":"INSERT"',
                                                                    b'"eventName":"INSERT","eventName":"REMOVE"')
    # Twice the reader's limit: the limit, not the size beyond it, decides.
    huge = customer_record("cust-huge", "event-huge").replace(b'@example.com"',
                                                              b'@' + b"x" * (2 * MAX_RECORD_BYTES) + b'"')
    landing = tmp_path / "landing" / "2026" / "11" / "23" / "11"
    landing.mkdir(parents=True)
    (landing / "ddb-cdc-1-2026-11-23-11-02-03-6f1e0a52-3a0c-4d0e-8f7f-2c3a1f7d9b01").write_bytes(
        good[0] + good[1] + b" xyz" + good[2] + duplicated + huge + customer_record("cust-last", "event-last"))

    pipeline = pipeline_at(tmp_path, customers_only, FIXED_NOW)
    report = pipeline.process_batch(landing_files_batch(spark, str(tmp_path / "landing")), 0)

    assert report.records_in == 6
    assert report.landed["customers"] == 3 and sum(report.landed.values()) == 3
    assert report.quarantined == 3
    quarantine = spark.read.parquet(str(tmp_path / "quarantine"))
    reasons = sorted((row.reason, len(row.payload)) for row in quarantine.collect())
    assert [reason for reason, _ in reasons] == ["duplicate_key", "record_too_large", "trailing_garbage"]
    assert dict(reasons)["record_too_large"] == 4096
    landed = spark.read.parquet(str(tmp_path / "raw" / "customers_changes"))
    assert sorted(row.id for row in landed.collect()) == ["cust-0", "cust-2", "cust-last"]


def test_a_lone_surrogate_is_quarantined_exactly_as_it_arrived_and_the_rest_lands(spark, tmp_path, customers_only):
    # JSON escapes a lone surrogate as `\ud800`; Parquet's UTF-8 cannot hold it, and it once
    # landed as `?x`. One record of each AWS format holds one; the pair beside them is one character.
    def with_email(record: bytes, email: str) -> bytes:
        # appended to the address, as JSON escapes it
        return record.replace(b'@example.com"', b"@example.com" + json.dumps(email).encode()[1:], 1)

    def kinesis_format(record: bytes) -> bytes:
        document = json.loads(record)
        del document["dynamodb"]["SequenceNumber"]
        document["dynamodb"]["ApproximateCreationDateTime"] *= 1000
        return json.dumps(document).encode()

    streams_bad = with_email(customer_record("cust-bad-1", "event-1"), "\ud800x")
    kinesis_bad = kinesis_format(with_email(customer_record("cust-bad-2", "event-2"), "\udc00x"))
    pair = kinesis_format(with_email(customer_record("cust-pair", "event-4"), "\U0001f600x"))
    good = [customer_record("cust-good", "event-3"), pair]
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "part.jsonl").write_bytes(b"\n".join([streams_bad, good[0], kinesis_bad, good[1]]) + b"\n")

    pipeline = pipeline_at(tmp_path, customers_only, FIXED_NOW)
    report = pipeline.process_batch(landing_files_batch(spark, str(landing)), 0)

    assert (report.records_in, report.landed["customers"], report.quarantined) == (4, 2, 2)
    quarantine = spark.read.parquet(str(tmp_path / "quarantine")).collect()
    assert sorted((row.reason, row.payload) for row in quarantine) == sorted([
        ("lone_surrogate", streams_bad.decode()), ("lone_surrogate", kinesis_bad.decode())])
    landed = spark.read.parquet(str(tmp_path / "raw" / "customers_changes")).collect()
    assert sorted((row.id, row.email) for row in landed) == [
        ("cust-good", "cust-good@example.com"), ("cust-pair", "cust-pair@example.com\U0001f600x")]


def raw_rows(spark, root: Path, table: str) -> list[tuple]:
    frame = spark.read.parquet(str(root / "raw" / table)).drop("_ingested_at", "_batch_id", "_ingest_hour")
    return sorted((tuple(row) for row in frame.collect()), key=repr)


def stream_landing(spark, root: Path, contracts, query_name: str):
    pipeline = pipeline_at(root, contracts, FIXED_NOW)
    reports = []

    class Recording:
        def process_batch(self, envelope, batch_id):
            reports.append(pipeline.process_batch(envelope, batch_id))

    # One batch of all files: a duplicate delivered in two batches lands twice, so with
    # batches of a few files the rows would depend on how each layout's files are grouped.
    run_stream(spark, Recording(), landing_files_stream(spark, str(root / "landing")),  # type: ignore[arg-type]
               checkpoint_dir=str(root / "checkpoint"), query_name=query_name)
    return reports


def test_the_stream_lands_the_same_from_jsonl_and_from_gzipped_firehose_objects(spark, tmp_path, two_table_contracts):
    jsonl, firehose = tmp_path / "jsonl", tmp_path / "firehose"
    summary = write_landing_files(jsonl / "landing", records_per_file=30, **GENERATOR_OPTIONS)
    firehose_summary = write_landing_files(firehose / "landing", records_per_file=30, file_layout="firehose", gzip=True,
                                           **GENERATOR_OPTIONS)
    assert all(path.name.endswith(".gz") and path.name.startswith("lakehouse-cdc-1-")
               for path in firehose_summary.files)

    for root in (jsonl, firehose):
        reports = stream_landing(spark, root, two_table_contracts, f"layout_{root.name}")
        assert sum(report.records_in for report in reports) == summary.records
        assert sum(report.quarantined for report in reports) == summary.malformed
        quarantine = spark.read.parquet(str(root / "quarantine"))
        assert {row.reason: row["count"] for row in quarantine.groupBy("reason").count().collect()} == \
            summary.malformed_by_reason

    for table in ("customers_changes", "orders_changes"):
        assert raw_rows(spark, jsonl, table) == raw_rows(spark, firehose, table)
        assert raw_rows(spark, jsonl, table)


def test_the_stream_skips_firehose_error_output_and_says_so_at_start(spark, tmp_path, customers_only):
    target = DataLayout(tmp_path / "data")
    hour = target.landing / "2026" / "11" / "23" / "11"
    hour.mkdir(parents=True)
    (hour / "ddb-cdc-1-2026-11-23-11-02-03-6f1e0a52").write_bytes(customer_record("cust-1", "event-1"))
    failed = target.landing / "processing-failed" / "2026" / "11" / "23" / "11"
    failed.mkdir(parents=True)
    (failed / "ddb-cdc-1-2026-11-23-11-02-04-7a2b").write_bytes(
        b'{"attemptsMade":4,"errorCode":"Lambda.FunctionError","rawData":"eyJldmVudElEIjoiMiJ9"}')
    printed: list[str] = []

    options = StreamOptions(sink="parquet", query_name="error_output_test", checkpoint_name="error_output_test")
    query = start_stream(spark, LandingFiles(target, target.landing, options), customers_only, printed.append).query

    assert query.exception() is None
    (warning,) = [line for line in printed if line.startswith("WARNING")]
    assert f"{target.landing / 'processing-failed'}: 1 Firehose error-output object(s) not read" in warning
    assert [row.id for row in spark.read.parquet(str(target.raw / "customers_changes")).collect()] == ["cust-1"]
    assert not list(target.quarantine.rglob("*.parquet"))


def test_a_keys_only_stream_stops_lakehouse_stream_and_a_restart_after_moving_its_files_loses_nothing(
        spark, tmp_path):
    from streaming.cli.exit_codes import REFUSED, exit_code_of, message_of
    from streaming.operations.stream import stream

    # Forum's contract alone: the stream is refused for its table, and each further
    # contract only adds Spark planning to both starts.
    contracts_dir = tmp_path / "contracts"
    contracts_dir.mkdir()
    (contracts_dir / "forum.yml").write_text(
        "table: Forum\nraw_table: forum\nkey: {partition_key: ForumName, sort_key: Subject}\n"
        "attributes: {ForumName: {type: S}, Subject: {type: S}}\n"
        'partitioning: {column: forum_initial, expression: "substring(forum_name, 1, 1)"}\n')
    # The API reference's GetRecords example (a KEYS_ONLY stream), each record with its stream's ARN.
    arn = "arn:aws:dynamodb:us-west-2:111122223333:table/Forum/stream/2015-05-20T20:51:10.252"
    sample = json.loads((Path(__file__).parents[1] / "fixtures" / "aws" / "getrecords_api_example_output.json").read_text())
    target = DataLayout(tmp_path / "data")
    hour = target.landing / "2026" / "11" / "23" / "11"
    hour.mkdir(parents=True)
    keys_only = hour / "keys-only.json"
    keys_only.write_text("".join(json.dumps(record | {"eventSourceARN": arn}) + "\n" for record in sample["Records"]))

    with pytest.raises(Exception) as refused:
        stream(target, sink="parquet", contracts_dir=str(contracts_dir), spark=spark, out=lambda _: None)

    assert exit_code_of(refused.value) == REFUSED
    message = message_of(refused.value)
    assert message.startswith("batch 0 refused, nothing of it was written: table Forum's stream sends "
                              f"StreamViewType KEYS_ONLY records (3 in this batch, e.g. file:{keys_only}#0)")
    assert "Traceback" not in message and "NEW_AND_OLD_IMAGES" in message
    assert not target.raw.joinpath("forum_changes").exists() and not target.quarantine.exists()

    # What the message says to do: the stream fixed, the refused file moved out, then a restart.
    keys_only.rename(tmp_path / "keys-only.json")
    fixed = sample["Records"][0] | {"eventSourceARN": arn, "eventID": "after-the-fix"}
    fixed["dynamodb"] = fixed["dynamodb"] | {"StreamViewType": "NEW_AND_OLD_IMAGES",
                                             "NewImage": fixed["dynamodb"]["Keys"]}
    (hour / "new-and-old-images.json").write_text(json.dumps(fixed) + "\n")
    stream(target, sink="parquet", contracts_dir=str(contracts_dir), spark=spark, out=lambda _: None)
    landed = spark.read.parquet(str(target.raw / "forum_changes")).collect()
    assert [(row._event_id, row.subject) for row in landed] == [("after-the-fix", "DynamoDB Thread 3")]
