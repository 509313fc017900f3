"""Source adapters: each turns its input into the change envelope.

Envelope columns (docs/architecture.md): `payload` (one change record as JSON text),
`kinesis_sequence_number` (nullable), `source_ref` (where the record came from).
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

ENVELOPE_COLUMNS = ("payload", "kinesis_sequence_number", "source_ref")
LANDING_FILE_GLOB = "*.jsonl"

# With classification json and inferSchema true, Glue's Kinesis source hands the
# micro-batch the record data as JSON text in this column (some Glue releases spell it
# with a dot); the schema is only inferred when the frame becomes a DynamicFrame.
GLUE_KINESIS_DATA_COLUMNS = ("$json$data_infer_schema$_temporary$", "$json$data_infer_schema$.temporary$")
# Added by the source option addRecordTimestamp=true: when the stream received the record.
GLUE_KINESIS_ARRIVAL_COLUMN = "__src_timestamp"


class SourceShapeError(ValueError):
    """The source frame does not have the columns this adapter maps."""


def lines_to_envelope(lines: DataFrame) -> DataFrame:
    """Text lines (`value`) read from landing files -> envelope; blank lines are skipped.

    `source_ref` is taken from the scan, so it must run on the frame the text source
    returns, before any shuffle.
    """
    return (
        lines.select(F.col("value").alias("payload"), F.input_file_name().alias("source_ref"))
        # Spark's trim only strips spaces; a line of tabs or \r is blank too.
        .where(F.col("payload").rlike(r"\S"))
        .select(
            "payload",
            F.lit(None).cast("string").alias("kinesis_sequence_number"),
            "source_ref",
        )
    )


# A catch-up run (availableNow after downtime) splits the backlog into batches of
# this many files, so one batch never has to hold an unbounded backlog in memory.
DEFAULT_MAX_FILES_PER_TRIGGER = 100


def landing_files_stream(
    spark: SparkSession, landing_dir: str, max_files_per_trigger: int | None = None
) -> DataFrame:
    """Streaming envelope over every `*.jsonl` below `landing_dir` (yyyy/mm/dd/hh folders)."""
    files_per_trigger = DEFAULT_MAX_FILES_PER_TRIGGER if max_files_per_trigger is None else max_files_per_trigger
    if files_per_trigger < 1:
        raise ValueError("max_files_per_trigger must be at least 1")
    reader = (
        spark.readStream.format("text")
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", LANDING_FILE_GLOB)
        .option("maxFilesPerTrigger", str(files_per_trigger))
    )
    return lines_to_envelope(reader.load(landing_dir))


def landing_files_batch(spark: SparkSession, path: str) -> DataFrame:
    """The same envelope as a one-off batch read (backfills, replays of landed files)."""
    lines = (
        spark.read.format("text")
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", LANDING_FILE_GLOB)
        .load(path)
    )
    return lines_to_envelope(lines)


def _glue_data_column(df: DataFrame) -> Column:
    for name in GLUE_KINESIS_DATA_COLUMNS:
        if name in df.columns:
            return F.col(f"`{name}`")
    raise SourceShapeError(
        "the Kinesis frame has no record data column; expected one of "
        f"{', '.join(GLUE_KINESIS_DATA_COLUMNS)} (Glue Kinesis source with classification "
        f"'json' and inferSchema 'true'), got columns {df.columns}"
    )


def glue_kinesis_envelope(df: DataFrame, stream_arn: str) -> DataFrame:
    """Glue Kinesis source frame -> envelope.

    Glue exposes neither the Kinesis sequence number nor the shard, so the sequence
    number stays null (decode then relies on `dynamodb.SequenceNumber`) and
    `source_ref` names the stream plus, when present, the arrival time.
    """
    arrival = (
        F.col(GLUE_KINESIS_ARRIVAL_COLUMN).cast("string")
        if GLUE_KINESIS_ARRIVAL_COLUMN in df.columns
        else F.lit(None).cast("string")
    )
    return df.select(
        _glue_data_column(df).cast("string").alias("payload"),
        F.lit(None).cast("string").alias("kinesis_sequence_number"),
        F.concat_ws("@", F.lit(stream_arn), arrival).alias("source_ref"),
    )
