"""Source adapters produce the change envelope."""
from __future__ import annotations

import datetime as dt
import gzip
import json
import os
from pathlib import Path

import pytest
from pyspark.sql import types as T

from streaming.io.landing_ledger import LandedFile, changed_files
from streaming.io.sources import (
    ASSUMED_FILE_BYTES,
    DEFAULT_MAX_BYTES_PER_TRIGGER,
    MAX_FILES_PER_TRIGGER,
    SourceShapeError,
    TriggerSize,
    files_envelope,
    files_per_trigger,
    glue_kinesis_envelope,
    landing_files_batch,
    landing_files_stream,
)
from streaming.pipeline.envelope import ENVELOPE_COLUMNS
from streaming.runtime.stream_loop import run_stream

pytestmark = pytest.mark.spark

STREAM_ARN = "arn:aws:kinesis:eu-west-1:123456789012:stream/ddb-cdc"


FIREHOSE_NAME = "ddb-cdc-1-2026-11-01-00-14-09-0b3c1c1e-6d4f-4b5e-9a53-2f1d7c1e9a10"


def land(landing: Path, relative: str, data: bytes) -> Path:
    path = landing / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.fixture
def landing(tmp_path):
    """Objects as Firehose names and fills them, and what else may sit under the prefix."""
    root = tmp_path / "landing"
    files = {
        # Default Firehose: no extension, records back to back on one line.
        "plain": land(root, f"2026/11/01/00/{FIREHOSE_NAME}", b'{"a":1}{"a":2} xyz{"a":3}'),
        # GZIP compression: `.gz`.
        "gzip": land(root, f"2026/11/01/01/{FIREHOSE_NAME}.gz", gzip.compress(b'{"b":1}\n{"b":2},\n')),
        # A GZIP object whose suffix got lost on a copy.
        "gzip_no_suffix": land(root, "2026/11/01/02/copied", gzip.compress(b'{"c":1}{"c":1,"c":2}')),
        "jsonl": land(root, "2026/11/01/03/cdc-000002.jsonl", b'{"d":1}\r\n\t\r\nnot json at all\r\n'),
    }
    # Hidden and temporary objects are not landing data.
    land(root, "2026/11/01/03/_temporary-upload", b'{"hidden":1}')
    land(root, "2026/11/01/03/.partial", b'{"hidden":2}')
    land(root, "_staging/2026/x", b'{"hidden":3}')
    return root, files


def rows_of(envelope) -> list[tuple[str, str, str | None]]:
    return sorted((row.payload, row.source_ref.split("/")[-1], row.source_error) for row in envelope.collect())


def expected_rows(files: dict[str, Path]) -> list[tuple[str, str, str | None]]:
    plain, gz, copied, jsonl = (files[key].name for key in ("plain", "gzip", "gzip_no_suffix", "jsonl"))
    return sorted([
        ('{"a":1}', f"{plain}#0", None),
        ('{"a":2} xyz', f"{plain}#7", "trailing_garbage"),
        ('{"a":3}', f"{plain}#18", None),
        ('{"b":1}', f"{gz}#0", None),
        ('{"b":2},', f"{gz}#8", "trailing_garbage"),
        ('{"c":1}', f"{copied}#0", None),
        ('{"c":1,"c":2}', f"{copied}#7", "duplicate_key"),
        ('{"d":1}', f"{jsonl}#0", None),
        ("not json at all", f"{jsonl}#12", "invalid_json"),
    ])


def test_batch_envelope_reads_every_object_by_records_not_lines(spark, landing):
    root, files = landing
    envelope = landing_files_batch(spark, str(root))

    assert tuple(envelope.columns) == (*ENVELOPE_COLUMNS, "source_error")
    assert dict(envelope.dtypes) == {"payload": "string", "kinesis_sequence_number": "string",
                                     "source_ref": "string", "source_error": "string"}
    assert rows_of(envelope) == expected_rows(files)
    assert {row.kinesis_sequence_number for row in envelope.collect()} == {None}
    assert all(row.source_ref.startswith("file:") for row in envelope.collect())


def test_every_path_reaches_the_splitter_as_listed_and_no_pickling_worker_is_started(spark, tmp_path):
    # Names holding the characters a list literal or a separator could break on.
    names = ['with "quotes"', "new\nline", "comma,semicolon;", "back\\slash", "caf\u00e9 \u6771", "[0-9]*"]
    files = [LandedFile(str(land(tmp_path, name, b'{"n":%d}' % index)), 7, 0) for index, name in enumerate(names)]

    envelope = files_envelope(spark, files)

    assert sorted((row.source_ref, row.payload) for row in envelope.collect()) == sorted(
        (f"{file.path}#0", '{"n":%d}' % index) for index, file in enumerate(files))
    plan = envelope._jdf.queryExecution().executedPlan().toString()
    # Rows from a Python list would be an RDD scan fed by a pickling worker (and its daemon).
    assert "Range" in plan and "ExistingRDD" not in plan
    assert envelope.rdd.getNumPartitions() == min(len(files), 2 * spark.sparkContext.defaultParallelism)


def run_landing_stream(spark, stream, checkpoint: Path) -> list[tuple[int, list]]:
    batches: list[tuple[int, list]] = []

    class Collect:
        def process_batch(self, envelope, batch_id):
            batches.append((batch_id, rows_of(envelope)))

    run_stream(spark, Collect(), stream, checkpoint_dir=str(checkpoint), query_name="sources_test")  # type: ignore[arg-type]
    return batches


def test_stream_envelope_one_file_per_trigger(spark, landing, tmp_path):
    root, files = landing
    stream = landing_files_stream(spark, str(root), max_files_per_trigger=1)
    assert stream.files.isStreaming

    batches = run_landing_stream(spark, stream, tmp_path / "checkpoint")

    assert len(batches) == len(files)
    assert sorted(row for _, rows in batches for row in rows) == expected_rows(files)
    assert all(len({ref.split("#")[0] for _, ref, _ in rows}) == 1 for _, rows in batches)


def test_a_file_copied_in_with_an_old_modification_time_is_still_read(spark, tmp_path):
    # Spark's default maxFileAge (7 days, relative to the newest file seen) would skip it.
    root = tmp_path / "landing"
    first = land(root, "2026/11/23/10/first", b'{"n":1}')
    checkpoint = tmp_path / "checkpoint"
    assert run_landing_stream(spark, landing_files_stream(spark, str(root)), checkpoint)[0][1] == [
        ('{"n":1}', "first#0", None)]

    late = land(root, "2026/10/24/10/copied-late", b'{"n":2}')
    month_ago = first.stat().st_mtime - 30 * 86_400
    os.utime(late, (month_ago, month_ago))
    batches = run_landing_stream(spark, landing_files_stream(spark, str(root)), checkpoint)

    assert [rows for _, rows in batches] == [[('{"n":2}', "copied-late#0", None)]]


def test_the_ledger_names_a_file_changed_after_it_was_read(spark, tmp_path):
    root = tmp_path / "landing"
    kept = land(root, "2026/11/23/10/kept", b'{"n":1}')
    appended = land(root, "2026/11/23/10/appended", b'{"n":2}')
    ledger = tmp_path / "raw" / "_landing"
    checkpoint = tmp_path / "checkpoint"
    run_landing_stream(spark, landing_files_stream(spark, str(root), ledger_dir=str(ledger)), checkpoint)
    assert changed_files(ledger) == []
    entries = [json.loads(path.read_text()) for path in sorted(ledger.glob("batch-*.json"))]
    assert sorted(Path(f["path"]).name for entry in entries for f in entry["files"]) == ["appended", "kept"]

    with appended.open("ab") as out:
        out.write(b'{"n":3}')
    later = appended.stat().st_mtime + 60
    os.utime(appended, (later, later))
    batches = run_landing_stream(spark, landing_files_stream(spark, str(root), ledger_dir=str(ledger)), checkpoint)

    assert batches == []  # the stream never reads a file twice: the appended record is not read
    (changed,) = changed_files(ledger)
    assert changed.path.endswith("/appended") and (changed.processed_length, changed.length) == (7, 14)
    assert "appended" in changed.warning() and "must never be appended" in changed.warning()
    assert kept.stat().st_size == 7


def test_firehose_error_output_is_not_read_as_landing_data(spark, tmp_path):
    # Firehose's failed-record documents, under its default and a custom error prefix.
    root = tmp_path / "landing"
    failed = b'{"attemptsMade":1,"errorCode":"Lambda.Unhandled","rawData":"eyJldmVudElEIjoiMSJ9"}'
    land(root, f"2026/11/23/10/{FIREHOSE_NAME}", b'{"n":1}')
    land(root, f"processing-failed/2026/11/23/10/{FIREHOSE_NAME}", failed)
    land(root, f"errors/result=format-conversion-failed/2026/11/23/{FIREHOSE_NAME}", failed)

    assert rows_of(landing_files_batch(spark, str(root))) == [('{"n":1}', f"{FIREHOSE_NAME}#0", None)]
    batches = run_landing_stream(spark, landing_files_stream(spark, str(root)), tmp_path / "checkpoint")
    assert [row for _, rows in batches for row in rows] == [('{"n":1}', f"{FIREHOSE_NAME}#0", None)]
    assert "the mean of the 1 landing files" in files_per_trigger(spark, str(root)).explanation


@pytest.mark.parametrize("data_column", ["$json$data_infer_schema$_temporary$", "$json$data_infer_schema$.temporary$"])
def test_glue_kinesis_frame_to_envelope(spark, data_column):
    schema = T.StructType([T.StructField(data_column, T.StringType()), T.StructField("__src_timestamp", T.TimestampType())])
    arrived = dt.datetime(2026, 11, 1, 8, 30, 5)
    glue_frame = spark.createDataFrame([('{"eventName": "INSERT"}', arrived)], schema)

    envelope = glue_kinesis_envelope(glue_frame, STREAM_ARN)

    assert tuple(envelope.columns) == ENVELOPE_COLUMNS
    (row,) = envelope.collect()
    assert row.payload == '{"eventName": "INSERT"}'
    assert row.kinesis_sequence_number is None
    assert row.source_ref == f"{STREAM_ARN}@2026-11-01 08:30:05"


def test_glue_kinesis_frame_without_record_timestamp(spark):
    glue_frame = spark.createDataFrame([("{}",)], "`$json$data_infer_schema$_temporary$` string")
    (row,) = glue_kinesis_envelope(glue_frame, STREAM_ARN).collect()
    assert (row.payload, row.source_ref) == ("{}", STREAM_ARN)


def test_glue_kinesis_frame_with_a_parsed_schema_is_rejected(spark):
    parsed = spark.createDataFrame([("INSERT",)], "eventName string")
    with pytest.raises(SourceShapeError, match="inferSchema"):
        glue_kinesis_envelope(parsed, STREAM_ARN)


def test_the_byte_budget_becomes_a_file_count_from_the_landing_files(spark, tmp_path):
    root = tmp_path / "landing"
    for n in range(10):
        land(root, f"2026/11/23/10/f{n:02d}", b'{"n":1}'.ljust(1000, b" "))
    land(root, "2026/11/23/10/_in-progress", b"x" * 1_000_000)  # hidden: not landing data, not counted

    assert files_per_trigger(spark, str(root), max_bytes_per_trigger=3_500).files == 3
    assert files_per_trigger(spark, str(root), max_bytes_per_trigger=10).files == 1  # never fewer than one
    assert files_per_trigger(spark, str(root), max_files_per_trigger=2, max_bytes_per_trigger=3_500).files == 2
    size = files_per_trigger(spark, str(root), max_files_per_trigger=50, max_bytes_per_trigger=3_500)
    assert size.files == 3 and "10 landing files" in size.explanation

    # Batches of the stream follow the count: 10 files of 1,000 bytes, about 3,500 bytes a batch.
    stream = landing_files_stream(spark, str(root), trigger_size=files_per_trigger(spark, str(root), None, 3_500))
    batches = run_landing_stream(spark, stream, tmp_path / "checkpoint")
    assert [len({ref.split("#")[0] for _, ref, _ in rows}) for _, rows in batches] == [3, 3, 3, 1]


def test_the_byte_budget_before_any_file_landed_assumes_firehose_sized_files(spark, tmp_path):
    size = files_per_trigger(spark, str(tmp_path / "not-yet"), max_bytes_per_trigger=50 * ASSUMED_FILE_BYTES)
    assert size.files == 50 and "no landing files yet" in size.explanation
    (tmp_path / "empty").mkdir()
    assert files_per_trigger(spark, str(tmp_path / "empty"), max_bytes_per_trigger=50 * ASSUMED_FILE_BYTES).files == 50


def test_a_local_landing_folder_is_sized_as_sparks_listing_sizes_it(spark, tmp_path):
    # A local folder is listed in Python (no Spark job at a stream's start); a `file:` URL,
    # like an s3:// one, by Spark's binaryFile listing. Both leave out the same names.
    root = tmp_path / "la[n]ding"
    sizes = {"2026/11/23/10/a": 300, "2026/11/23/11/b.gz": 5_000, "_ingest_hour=1/c": 70, "d._COPYING_x": 9}
    for relative, size in sizes.items():
        land(root, relative, b"{}".ljust(size, b" "))
    for hidden in ("2026/11/23/10/_in-progress", "2026/.hidden/e", "_staging/f", "g._COPYING_",
                   "processing-failed/2026/h", "errors/result=splunk-failed/i"):
        land(root, hidden, b"x" * 1_000_000)

    jobs = spark.sparkContext.statusTracker()
    before = set(jobs.getJobIdsForGroup())
    local = files_per_trigger(spark, str(root), max_bytes_per_trigger=1_000_000)
    assert set(jobs.getJobIdsForGroup()) == before, "a local folder is sized without a Spark job"
    through_spark = files_per_trigger(spark, f"file:{root}", max_bytes_per_trigger=1_000_000)

    # 1,000,000 bytes at the mean of 5,379 bytes in 4 files.
    assert local == through_spark == TriggerSize(743, local.explanation)
    assert "the mean of the 4 landing files" in local.explanation
    assert files_per_trigger(spark, str(tmp_path / "not-yet")) == files_per_trigger(spark, f"file:{tmp_path}/not-yet")


def test_the_default_budget_turns_many_small_files_into_few_large_batches(spark, tmp_path):
    root = tmp_path / "landing"
    for n in range(3):
        land(root, f"f{n}", b"{}".ljust(64 * 1024, b" "))
    size = files_per_trigger(spark, str(root))
    # 512 MiB / 64 KiB is 8,192 files, under the cap of what the driver lists per batch.
    assert size.files == DEFAULT_MAX_BYTES_PER_TRIGGER // (64 * 1024) == 8_192 <= MAX_FILES_PER_TRIGGER


def test_the_file_source_of_this_spark_has_no_byte_limit_of_its_own(spark):
    # Why files_per_trigger exists. Once Spark's own FileStreamOptions reads
    # maxBytesPerTrigger (Spark 4), pass the budget to it instead and retire the estimate.
    options = spark._jvm.java.lang.Class.forName("org.apache.spark.sql.execution.streaming.FileStreamOptions")
    methods = {method.getName() for method in options.getMethods()}
    assert "maxFilesPerTrigger" in methods
    assert "maxBytesPerTrigger" not in methods
