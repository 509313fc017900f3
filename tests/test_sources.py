"""Source adapters produce the change envelope."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from pyspark.sql import types as T

from streaming.sources import (
    ENVELOPE_COLUMNS,
    SourceShapeError,
    glue_kinesis_envelope,
    landing_files_batch,
    landing_files_stream,
)

pytestmark = pytest.mark.spark

STREAM_ARN = "arn:aws:kinesis:eu-west-1:123456789012:stream/ddb-cdc"


def land(landing: Path, relative: str, text: str) -> Path:
    path = landing / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def landing(tmp_path):
    root = tmp_path / "landing"
    first = land(root, "2026/11/01/00/cdc-000001.jsonl", '{"a": 1}\n\n   \n{"a": 2}\n')
    second = land(root, "2026/11/01/01/cdc-000002.jsonl", '{"a": 3}\r\n\t\r\nnot json at all\r\n')
    land(root, "2026/11/01/01/notes.txt", "a stray file that is not landing data\n")
    return root, first, second


def test_batch_envelope_skips_blank_lines_only(spark, landing):
    root, first, second = landing
    envelope = landing_files_batch(spark, str(root))

    assert tuple(envelope.columns) == ENVELOPE_COLUMNS
    rows = sorted((row.payload, Path(row.source_ref.removeprefix("file:")).name, row.kinesis_sequence_number)
                  for row in envelope.collect())
    assert rows == sorted([
        ('{"a": 1}', first.name, None),
        ('{"a": 2}', first.name, None),
        ('{"a": 3}', second.name, None),
        ("not json at all", second.name, None),
    ])
    assert dict(envelope.dtypes) == {"payload": "string", "kinesis_sequence_number": "string", "source_ref": "string"}


def test_stream_envelope_one_file_per_trigger(spark, landing, tmp_path):
    root, first, second = landing
    batches: list[tuple[int, list[tuple[str, str]]]] = []

    def collect(df, batch_id):
        batches.append((batch_id, sorted((r.payload, Path(r.source_ref).name) for r in df.collect())))

    stream = landing_files_stream(spark, str(root), max_files_per_trigger=1)
    assert stream.isStreaming and tuple(stream.columns) == ENVELOPE_COLUMNS
    query = (
        stream.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()

    assert len(batches) == 2
    assert sorted(row for _, rows in batches for row in rows) == sorted([
        ('{"a": 1}', first.name), ('{"a": 2}', first.name), ('{"a": 3}', second.name),
        ("not json at all", second.name),
    ])
    assert all(len({name for _, name in rows}) == 1 for _, rows in batches)


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
