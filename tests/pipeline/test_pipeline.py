"""process_batch end to end: decode -> order -> sinks, on handcrafted and generated CDC."""
from __future__ import annotations

import base64
import json
import logging
import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from streaming.contracts.loader import load_contracts
from streaming.contracts.model import AttributeSpec, TableContract
from streaming.contracts.spark_schema import change_log_schema
from streaming.errors import OperatorError
from pipelines import pipeline_at
from streaming.io.formats.parquet.sink import LocalParquetSink
from streaming.io.quarantine_writer import QuarantineWriter
from streaming.io.sources import landing_files_batch
from streaming.pipeline.batch import Pipeline, RecordsLostError, UnusableStreamViewType
from streaming.pipeline.envelope import ENVELOPE_SCHEMA
from streaming.pipeline.ordering import latest_per_key
from streaming.pipeline.sink_capabilities import SinkCapabilities
from streaming.samples.generator import generate_cdc, write_landing_files

pytestmark = pytest.mark.spark

FIXED_NOW = datetime(2026, 11, 2, tzinfo=timezone.utc)
GENERATOR_OPTIONS = {"seed": 11, "customers": 12, "orders_per_customer": 2, "malformed_rate": 0.06}


def change(table: str, name: str, keys: dict, image: dict | None, seconds: int, sequence: int, event_id: str) -> str:
    """One DynamoDB Streams record as a JSON line."""
    dynamodb = {"Keys": keys, "ApproximateCreationDateTime": seconds, "SequenceNumber": str(sequence)}
    if image is not None:
        dynamodb["NewImage"] = image
    return json.dumps({
        "eventID": event_id,
        "eventName": name,
        "eventSource": "aws:dynamodb",
        "eventSourceARN": f"arn:aws:dynamodb:eu-west-1:123456789012:table/{table}/stream/2026-11-01T00:00:00.000",
        "dynamodb": dynamodb,
    })


def customer(cust_id: str, email: str, seconds: int, sequence: int, event_id: str, name: str = "INSERT") -> str:
    keys = {"id": {"S": cust_id}, "custName": {"S": "Ana"}}
    image = {**keys, "email": {"S": email}, "registrationDate": {"S": "2026-01-01T00:00:00Z"}}
    return change("customers", name, keys, image, seconds, sequence, event_id)


def order(customer_id: str, order_id: str, seconds: int, sequence: int, event_id: str) -> str:
    keys = {"customerId": {"S": customer_id}, "orderId": {"S": order_id}}
    image = {**keys, "status": {"S": "PLACED"}, "amount": {"N": "12.50"}, "isGift": {"BOOL": False},
             "tags": {"SS": ["promo"]}, "receiptDigest": {"B": base64.b64encode(b"digest").decode()}}
    return change("orders", "INSERT", keys, image, seconds, sequence, event_id)


@pytest.fixture(scope="module")
def customers_only(two_table_contracts):
    """For the tests whose records are customers' (or of no contracted table): each further
    contract adds its decode to every batch's plan, and a write of its empty table."""
    return {"customers": two_table_contracts["customers"]}


def envelope_of(spark, lines: list[str], ref: str = "test"):
    return spark.createDataFrame([(line, None, ref) for line in lines], ENVELOPE_SCHEMA)


def read_raw(spark, root: Path, contract: TableContract):
    """The change log as a reader sees it: hive partitions `_ingest_hour` and `_batch_id`."""
    return spark.read.schema(change_log_schema(contract)).parquet(str(root / "raw" / contract.changes_table))


def batch_dirs(parent: Path) -> list[str]:
    """Batch folders of a change log (`<hour>/_batch_id=<n>`) or of the quarantine."""
    return sorted(path.name for path in [*parent.glob("_batch_id=*"), *parent.glob("_ingest_hour=*/_batch_id=*")])


def test_two_tables_routed_and_bad_records_quarantined(spark, tmp_path, two_table_contracts, caplog):
    lines = [
        customer("c-1", "ana@example.com", 1_700_000_000, 100, "e1"),
        order("c-1", "o-1", 1_700_000_001, 101, "e2"),
        "{this is not json",
        change("orders", "INSERT", {"customerId": {"S": "c-1"}}, {"customerId": {"S": "c-1"}, "status": {"S": "PAID"}},
               1_700_000_002, 102, "e3"),
    ]
    with caplog.at_level(logging.INFO, logger="streaming.pipeline.batch"):
        pipeline = pipeline_at(tmp_path, two_table_contracts, FIXED_NOW)
        report = pipeline.process_batch(envelope_of(spark, lines), 0)

    assert report.records_in == 4
    assert {table: rows for table, rows in report.landed.items() if rows} == {"customers": 1, "orders": 1}
    assert report.quarantined == 2
    assert report.duplicates_dropped == 0
    assert report.max_event_ts == datetime(2023, 11, 14, 22, 13, 21, tzinfo=timezone.utc)
    assert report.lag_seconds == (FIXED_NOW - report.max_event_ts).total_seconds()
    assert (f"customers=1 orders=1 quarantined=2 unrouted=0 duplicates_dropped=0 "
            "lag=1083 d 1 h took=") in caplog.text  # 1083 days, 1:46:39 behind FIXED_NOW

    (cust,) = read_raw(spark, tmp_path, two_table_contracts["customers"]).collect()
    assert (cust.id, cust.cust_name, cust.email, cust.id_suffix, cust._batch_id) == ("c-1", "Ana", "ana@example.com", "1", 0)
    assert cust._ingested_at == FIXED_NOW.replace(tzinfo=None)  # the session time zone is UTC
    assert cust._ingest_hour == "2026-11-02-00"
    (placed,) = read_raw(spark, tmp_path, two_table_contracts["orders"]).collect()
    assert (placed.customer_id, placed.order_id, placed.amount, placed.tags, placed.receipt_digest) == (
        "c-1", "o-1", "12.50", ["promo"], bytearray(b"digest"))
    assert sorted(read_raw(spark, tmp_path, two_table_contracts["orders"]).columns) == sorted(
        change_log_schema(two_table_contracts["orders"]).fieldNames())
    assert {path.relative_to(tmp_path).parent.as_posix() for path in (tmp_path / "raw").rglob("*.parquet")} == {
        "raw/customers_changes/_ingest_hour=2026-11-02-00/_batch_id=0",
        "raw/orders_changes/_ingest_hour=2026-11-02-00/_batch_id=0"}

    quarantine = spark.read.parquet(str(tmp_path / "quarantine")).collect()
    assert sorted((row.reason, row._source_table, row._batch_id) for row in quarantine) == [
        ("invalid_json", None, 0), ("missing_key:orderId", "orders", 0)]
    assert {row.source_ref for row in quarantine} == {"test"}


def test_every_distinct_change_of_a_batch_lands_once(spark, tmp_path, customers_only):
    first = customer("c-2", "old@example.com", 1_700_000_000, 200, "e1")
    lines = [first, first, customer("c-2", "new@example.com", 1_700_000_005, 201, "e2", name="MODIFY")]

    report = pipeline_at(tmp_path, customers_only, FIXED_NOW).process_batch(envelope_of(spark, lines), 3)

    assert (report.records_in, report.duplicates_dropped, report.landed["customers"]) == (3, 1, 2)
    rows = read_raw(spark, tmp_path, customers_only["customers"]).orderBy("_ordering_value").collect()
    assert [(row.email, row._event_name, row._event_id, row._batch_id) for row in rows] == [
        ("old@example.com", "INSERT", "e1", 3), ("new@example.com", "MODIFY", "e2", 3)]


def test_a_key_changed_three_times_in_one_batch_gives_three_rows(spark, tmp_path, customers_only):
    lines = [
        customer("c-3", "v3@example.com", 1_700_000_030, 303, "e3", name="MODIFY"),
        customer("c-3", "v1@example.com", 1_700_000_010, 301, "e1"),
        customer("c-3", "v2@example.com", 1_700_000_020, 302, "e2", name="MODIFY"),
    ]

    report = pipeline_at(tmp_path, customers_only, FIXED_NOW).process_batch(envelope_of(spark, lines), 0)

    assert report.landed["customers"] == 3
    rows = read_raw(spark, tmp_path, customers_only["customers"]).orderBy("_ordering_value").collect()
    assert [(row._event_id, row._event_name, row.email) for row in rows] == [
        ("e1", "INSERT", "v1@example.com"), ("e2", "MODIFY", "v2@example.com"), ("e3", "MODIFY", "v3@example.com")]


def test_replaying_a_batch_overwrites_exactly_its_folders(spark, tmp_path, two_table_contracts):
    pipeline = pipeline_at(tmp_path, two_table_contracts, FIXED_NOW)
    pipeline.process_batch(envelope_of(spark, [customer("c-1", "a@x.org", 1_700_000_000, 1, "e1"),
                                               order("c-1", "o-1", 1_700_000_000, 2, "e2"), "garbage"]), 0)
    pipeline.process_batch(envelope_of(spark, [customer("c-9", "z@x.org", 1_700_000_100, 3, "e3")]), 1)
    assert batch_dirs(tmp_path / "raw" / "orders_changes") == ["_batch_id=0"]
    assert batch_dirs(tmp_path / "quarantine") == ["_batch_id=0"]

    # The replay of batch 0 sees different input: only one customer, no order, nothing bad.
    replay = pipeline.process_batch(envelope_of(spark, [customer("c-1", "b@x.org", 1_700_000_000, 1, "e1")]), 0)

    assert replay.landed["customers"] == 1 and sum(replay.landed.values()) == 1
    customers = read_raw(spark, tmp_path, two_table_contracts["customers"]).collect()
    assert sorted((row._batch_id, row.id, row.email) for row in customers) == [
        (0, "c-1", "b@x.org"), (1, "c-9", "z@x.org")]
    assert batch_dirs(tmp_path / "raw" / "orders_changes") == []
    assert batch_dirs(tmp_path / "quarantine") == []


@pytest.mark.parametrize("lose", ["run_time", "planned"])
def test_a_decode_that_loses_records_stops_the_batch_before_writing(spark, tmp_path, two_table_contracts, monkeypatch, lose):
    """The orders' rows vanish: at run time (a filter only the data answers), or in a plan
    Spark proves empty (`limit(0)`). Either way Spark's optimizer drops the write's own
    count of them, so they are counted by a job of their own, and the batch stops."""
    import streaming.pipeline.batch as pipeline_module

    real_rows = pipeline_module.table_rows

    def lossy_rows(decoded, contracts, table):
        rows = real_rows(decoded, contracts, table)
        if table != "orders":
            return rows
        return rows.where(F.col("_event_id") != "e2") if lose == "run_time" else rows.limit(0)

    monkeypatch.setattr(pipeline_module, "table_rows", lossy_rows)
    monkeypatch.setattr(pipeline_module, "OBSERVED_FIGURES_WAIT_S", 2.0)
    lines = [customer("c-1", "a@x.org", 1_700_000_000, 1, "e1"), order("c-1", "o-1", 1_700_000_000, 2, "e2")]
    with pytest.raises(RecordsLostError, match="2 records in, but 1 decoded"):
        pipeline_at(tmp_path, two_table_contracts, FIXED_NOW).process_batch(envelope_of(spark, lines), 0)
    # The customers' rows were staged (their count comes from that write) and then removed.
    assert not [path for path in tmp_path.rglob("*") if path.is_file()]


# The GetRecords example of the DynamoDB Streams API reference, a KEYS_ONLY stream (tests/pipeline/test_decode.py
# names its source), with the stream ARN of the same examples file as Lambda would add it.
FORUM_STREAM_ARN = "arn:aws:dynamodb:us-west-2:111122223333:table/Forum/stream/2015-05-20T20:51:10.252"
FORUM_CONTRACT = """\
table: Forum
raw_table: forum
key: {partition_key: ForumName, sort_key: Subject}
attributes: {ForumName: {type: S}, Subject: {type: S}}
partitioning: {column: forum_initial, expression: "substring(forum_name, 1, 1)"}
"""


def forum_records(view_type: str) -> list[str]:
    sample = json.loads((Path(__file__).parents[1] / "fixtures" / "aws" / "getrecords_api_example_output.json").read_text())
    records = [record | {"eventSourceARN": FORUM_STREAM_ARN} for record in sample["Records"]]
    for record in records:
        record["dynamodb"]["StreamViewType"] = view_type
    return [json.dumps(record) for record in records]


@pytest.mark.parametrize("view_type", ["KEYS_ONLY", "OLD_IMAGE"])
def test_a_stream_without_new_images_is_refused_before_anything_is_written(
        spark, tmp_path, customers_only, view_type):
    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "forum.yml").write_text(FORUM_CONTRACT)
    with_forum = {**customers_only, **load_contracts(tmp_path / "contracts")}
    lines = [customer("c-1", "a@x.org", 1_700_000_000, 1, "e1"), *forum_records(view_type)]

    with pytest.raises(UnusableStreamViewType) as refused:
        pipeline_at(tmp_path, with_forum, FIXED_NOW).process_batch(
            envelope_of(spark, lines, ref="landing/part-0.json#0"), 7)

    message = str(refused.value)
    assert isinstance(refused.value, OperatorError)  # exit code 2, message without a traceback
    assert f"batch 7 refused, nothing of it was written: table Forum's stream sends StreamViewType " \
           f"{view_type} records (3 in this batch, e.g. landing/part-0.json#0)" in message
    assert "NEW_IMAGE or NEW_AND_OLD_IMAGES" in message and "landing files stay where they are" in message
    assert not (tmp_path / "raw").exists() and not (tmp_path / "quarantine").exists()


def test_records_of_a_table_without_a_contract_do_not_stop_the_batch_whatever_their_view_type(
        spark, tmp_path, customers_only):
    report = pipeline_at(tmp_path, customers_only, FIXED_NOW).process_batch(
        envelope_of(spark, forum_records("KEYS_ONLY")), 0)
    assert (report.records_in, report.quarantined) == (3, 3)  # unknown_table, as any table without a contract


def test_kinesis_data_streams_records_state_no_view_type_and_land(spark, tmp_path, customers_only):
    # "the table sends out a data record that captures ... a snapshot of the record before the
    # modification [and] after the modification" (Kinesis Data Streams for DynamoDB has no view type:
    # https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/kds.html, "How Kinesis Data
    # Streams works with DynamoDB"); the sample is a real record of such a stream.
    record = json.loads((Path(__file__).parents[1] / "fixtures" / "aws" / "kds_record_insert.json").read_text())
    assert "StreamViewType" not in record["dynamodb"]
    record["tableName"] = "customers"
    record["dynamodb"]["Keys"] = {"id": {"S": "c-1"}, "custName": {"S": "Ana"}}
    record["dynamodb"]["NewImage"] |= record["dynamodb"]["Keys"]
    report = pipeline_at(tmp_path, customers_only, FIXED_NOW).process_batch(
        envelope_of(spark, [json.dumps(record)]), 0)
    assert report.landed["customers"] == 1


# ---------------------------------------------------------------- generated CDC, end to end

def python_value(descriptor: dict | None, spec: AttributeSpec):
    """A DynamoDB JSON descriptor as the raw column's Python value (independent of decode)."""
    if descriptor is None or descriptor.get("NULL") is True:
        return None
    value = descriptor[spec.type]
    if spec.type == "B":
        return base64.b64decode(value)
    if spec.type == "BS":
        return [base64.b64decode(item) for item in value]
    if spec.type == "L":
        return [python_value(item, spec.items) for item in value]
    if spec.type == "M":
        return {field.column: python_value(value.get(field.name), field) for field in spec.fields}
    return value


def comparable(value):
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, list):
        return [comparable(item) for item in value]
    if isinstance(value, dict):
        return {key: comparable(item) for key, item in value.items()}
    return value


@pytest.mark.parametrize("record_format", ["streams", "mixed"])
def test_generated_cdc_converges_to_the_expected_state(spark, tmp_path, two_table_contracts, record_format):
    options = {**GENERATOR_OPTIONS, "record_format": record_format}
    truth = generate_cdc(**options)
    summary = write_landing_files(tmp_path / "landing", records_per_file=50, **options)
    assert len(summary.files) >= 3
    pipeline = pipeline_at(tmp_path, two_table_contracts, FIXED_NOW)

    reports = [pipeline.process_batch(landing_files_batch(spark, str(path)), batch_id)
               for batch_id, path in enumerate(summary.files)]

    assert sum(report.records_in for report in reports) == summary.records
    assert sum(report.quarantined for report in reports) == summary.malformed
    quarantine = spark.read.parquet(str(tmp_path / "quarantine"))
    by_reason = {row.reason: row["count"] for row in quarantine.groupBy("reason").count().collect()}
    assert by_reason == summary.malformed_by_reason

    for table, expected in truth.expected_state.items():
        contract = two_table_contracts[table]
        final = latest_per_key(read_raw(spark, tmp_path, contract), contract).collect()
        key_columns = contract.key_columns
        actual = {tuple(row[column] for column in key_columns): row for row in final}
        assert set(actual) == set(expected), table
        for key, item in expected.items():
            row = actual[key]
            assert row._is_deleted == (item is None), (table, key)
            if item is None:
                assert row._is_ttl_delete == (key in truth.ttl_deleted[table]), (table, key)
                continue
            want = {spec.column: comparable(python_value(item.get(spec.name), spec)) for spec in contract.attributes}
            got = {spec.column: comparable(row.asDict(recursive=True)[spec.column]) for spec in contract.attributes}
            assert got == want, (table, key)


def test_each_batch_report_reaches_the_metrics_publisher(spark, tmp_path, customers_only):
    published = []

    class Recording:
        def publish(self, report):
            published.append(report)

    pipeline = Pipeline(customers_only, LocalParquetSink(str(tmp_path)), QuarantineWriter(str(tmp_path)),
                        clock=lambda: FIXED_NOW, metrics=Recording())
    report = pipeline.process_batch(envelope_of(spark, [customer("c-4", "d@x.org", 1_700_000_000, 1, "e1"), "junk"]), 5)

    assert published == [report]
    assert (report.batch_id, report.landed["customers"], report.quarantined) == (5, 1, 1)


class CachedFramesAtWrite:
    """A sink recording how many cached datasets exist when each table is written; it reads
    its changes once when `reads_changes_once` says so."""

    def __init__(self, spark, reads_changes_once: bool) -> None:
        self.spark = spark
        self.capabilities = SinkCapabilities(reads_changes_once=reads_changes_once)
        self.seen: dict[str, tuple[int, int]] = {}

    def write(self, changes, contract, batch_id, rows=None) -> None:
        cached = self.spark.sparkContext._jsc.getPersistentRDDs().size()
        self.seen[contract.table] = (cached, changes.count())


@pytest.mark.parametrize(("reads_changes_once", "cached_at_write"), [(True, 1), (False, 3)])
def test_changes_are_cached_only_for_a_sink_that_reads_them_twice(
        spark, tmp_path, two_table_contracts, reads_changes_once, cached_at_write):
    # The local change log reads a batch's changes once: they are left uncached (the ordering
    # step runs again for the write); Hudi reads them twice: they are kept.
    lines = [
        customer("c-1", "ana@example.com", 1_700_000_000, 100, "e1"),
        customer("c-1", "ana@example.com", 1_700_000_000, 100, "e1"),  # delivered twice
        order("c-1", "o-1", 1_700_000_001, 101, "e2"),
    ]
    sink = CachedFramesAtWrite(spark, reads_changes_once)
    before = spark.sparkContext._jsc.getPersistentRDDs().size()
    pipeline = Pipeline(two_table_contracts, sink, QuarantineWriter(str(tmp_path)), clock=lambda: FIXED_NOW)
    report = pipeline.process_batch(envelope_of(spark, lines), 0)

    # The decoded records, plus one frame of changes per table when the sink reads them twice.
    assert sink.seen == {"customers": (before + cached_at_write, 1), "orders": (before + cached_at_write, 1)}
    assert report.landed == {"customers": 1, "orders": 1} and report.duplicates_dropped == 1
    assert spark.sparkContext._jsc.getPersistentRDDs().size() == before
    assert LocalParquetSink.capabilities.reads_changes_once


class ThreadRecordingSink:
    """A sink that may write tables at once; it records the thread of each write and fails
    the tables it is told to."""

    capabilities = SinkCapabilities(writes_tables_concurrently=True)

    def __init__(self, failing: set[str]) -> None:
        self.failing = failing
        self.threads: dict[str, str] = {}

    def write(self, changes, contract, batch_id, rows=None) -> None:
        self.threads[contract.table] = threading.current_thread().name
        if contract.table in self.failing:
            raise OSError(f"disk full writing {contract.table}")


def test_a_sink_that_allows_it_gets_its_tables_written_at_once_and_one_failure_fails_the_batch(
        spark, tmp_path, two_table_contracts):
    lines = [customer("c-1", "a@x.org", 1_700_000_000, 1, "e1"), order("c-1", "o-1", 1_700_000_000, 2, "e2")]
    sink = ThreadRecordingSink(failing=set())
    Pipeline(two_table_contracts, sink, QuarantineWriter(str(tmp_path))).process_batch(envelope_of(spark, lines), 0)
    assert set(sink.threads) == {"customers", "orders"}
    assert all(name.startswith("raw-write") for name in sink.threads.values())

    failing = ThreadRecordingSink(failing={"customers"})
    with pytest.raises(OSError, match="disk full writing customers"):
        Pipeline(two_table_contracts, failing, QuarantineWriter(str(tmp_path))).process_batch(
            envelope_of(spark, lines), 1)
    # The other table was still written, and nothing reached the quarantine or the commit.
    assert set(failing.threads) == {"customers", "orders"}
    assert not (tmp_path / "quarantine" / "_batch_id=1").exists()


def persisted_rdd_ids(spark) -> set[int]:
    return set(spark.sparkContext._jsc.getPersistentRDDs().keySet())


class PlanRecordingSink(LocalParquetSink):
    """The local change log, recording the analysed plan of each table's rows it stages."""

    def __init__(self, root: Path) -> None:
        super().__init__(str(root))
        self.plans: dict[str, str] = {}

    def stage(self, changes, contract, batch_id, ingest_hour):
        if changes is not None:
            self.plans[contract.table] = changes._jdf.queryExecution().analyzed().toString()
        return super().stage(changes, contract, batch_id, ingest_hour)


def test_each_tables_write_is_planned_from_the_kept_decoded_rows_not_from_the_decode(
        spark, tmp_path, two_table_contracts):
    # Over the decode's projections, every table's write would carry each parse of the
    # batch (from_json) into its analysis, its plan description and each of its tasks.
    lines = [customer("c-1", "a@x.org", 1_700_000_000, 1, "e1"), order("c-1", "o-1", 1_700_000_000, 2, "e2")]
    sink = PlanRecordingSink(tmp_path)
    before = persisted_rdd_ids(spark)

    report = Pipeline(two_table_contracts, sink, QuarantineWriter(str(tmp_path)), clock=lambda: FIXED_NOW).process_batch(
        envelope_of(spark, lines), 0)

    assert report.landed == {"customers": 1, "orders": 1}
    assert set(sink.plans) == {"customers", "orders"}
    for plan in sink.plans.values():
        assert "LogicalRDD" in plan and "from_json" not in plan, plan
    # What the batch kept is released with it.
    assert persisted_rdd_ids(spark) == before


class ExecutorLosingSink(LocalParquetSink):
    """Before the batch's first write, drops what the batch kept in the block manager, as
    the loss of the executor holding it does on a cluster."""

    def __init__(self, root: Path, spark, kept_before: set[int]) -> None:
        super().__init__(str(root))
        self.spark = spark
        self.kept_before = kept_before
        self.lost = 0

    def stage(self, changes, contract, batch_id, ingest_hour):
        if changes is not None and not self.lost:
            persisted = self.spark.sparkContext._jsc.getPersistentRDDs()
            for rdd_id in persisted_rdd_ids(self.spark) - self.kept_before:
                persisted[rdd_id].unpersist(True)
                self.lost += 1
        return super().stage(changes, contract, batch_id, ingest_hour)


def test_a_batch_whose_kept_decoded_rows_are_lost_runs_again_and_lands_once(
        spark, tmp_path, two_table_contracts, caplog):
    lines = [customer("c-1", "a@x.org", 1_700_000_000, 1, "e1"), order("c-1", "o-1", 1_700_000_000, 2, "e2"),
             "not json"]
    sink = ExecutorLosingSink(tmp_path, spark, persisted_rdd_ids(spark))
    pipeline = Pipeline(two_table_contracts, sink, QuarantineWriter(str(tmp_path)), clock=lambda: FIXED_NOW)

    with caplog.at_level(logging.WARNING, logger="streaming.pipeline.batch"):
        report = pipeline.process_batch(envelope_of(spark, lines), 4)

    assert sink.lost >= 1
    assert "batch 4: decoded records were lost with an executor; running the batch again" in caplog.text
    assert (report.records_in, report.quarantined, report.landed) == (3, 1, {"customers": 1, "orders": 1})
    for table in ("customers", "orders"):
        rows = read_raw(spark, tmp_path, two_table_contracts[table]).collect()
        assert [(row._event_id, row._batch_id) for row in rows] == [("e1" if table == "customers" else "e2", 4)]
    assert spark.read.parquet(str(tmp_path / "quarantine")).count() == 1
    assert persisted_rdd_ids(spark) == sink.kept_before


class SinkThatMustNotWrite:
    capabilities = SinkCapabilities()

    def write(self, changes, contract, batch_id, rows=None):
        raise AssertionError(f"the warm-up wrote {contract.raw_table}")


class QuarantineThatMustNotWrite:
    def write(self, rows, batch_id, rows_count=None, **kwargs):
        raise AssertionError("the warm-up wrote the quarantine")


def test_the_warm_up_runs_every_raw_tables_decode_and_writes_nothing(spark, tmp_path):
    """Issue 46: Pipeline.warm_up runs a job per raw table's rows and distinct changes
    (the plans each batch runs) on one record of no table, and neither sink is called."""
    contracts = load_contracts()
    pipeline = Pipeline(contracts, SinkThatMustNotWrite(), QuarantineThatMustNotWrite())
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("warm-up-test", "the decode warm-up")
    try:
        pipeline.warm_up(spark)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    jobs = tracker.getJobIdsForGroup("warm-up-test")
    assert len(jobs) >= 2 * len(contracts)
    assert all(tracker.getJobInfo(job).status == "SUCCEEDED" for job in jobs)
    assert list(tmp_path.iterdir()) == []
