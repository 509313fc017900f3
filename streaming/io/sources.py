"""Source adapters: each turns its input into the change envelope, whose columns
streaming.pipeline.envelope defines (ENVELOPE_SCHEMA, docs/architecture.md); landing
files add `source_error`, a reason found while splitting the file into records.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming import DataStreamReader

from streaming.io.firehose_error_output import ERROR_OUTPUT_PATTERN, is_error_output
from streaming.io.landing_ledger import LandedFile, record_batch
from streaming.io.storage import hadoop_glob_literal
from streaming.pipeline.envelope import SOURCE_ERROR, envelope_columns
from streaming.s3_locations import url_scheme

# With classification json and inferSchema true, Glue's Kinesis source hands the
# micro-batch the record data as JSON text in this column (some Glue releases spell it
# with a dot); the schema is only inferred when the frame becomes a DynamicFrame.
GLUE_KINESIS_DATA_COLUMNS = ("$json$data_infer_schema$_temporary$", "$json$data_infer_schema$.temporary$")
# Added by the source option addRecordTimestamp=true: when the stream received the record.
GLUE_KINESIS_ARRIVAL_COLUMN = "__src_timestamp"

# Spark's binaryFile source lists files as (path, modificationTime, length, content) and
# reads a file's bytes only when `content` is selected (BinaryFileFormat.parse, apache/spark
# sql/core/src/main/scala/org/apache/spark/sql/execution/datasources/binaryfile/
# BinaryFileFormat.scala): selecting the other three lists files without reading them. A
# streaming file source needs the schema spelled out.
BINARY_FILE_SCHEMA = T.StructType(
    [
        T.StructField("path", T.StringType(), False),
        T.StructField("modificationTime", T.TimestampType(), False),
        T.StructField("length", T.LongType(), False),
        T.StructField("content", T.BinaryType(), True),
    ]
)
# The file source skips a file older than `maxFileAge` (default 7 days) relative to the
# newest file it has seen (FileStreamOptions.maxFileAgeMs and FileStreamSource.SeenFilesMap
# .isNewFile, apache/spark sql/core/src/main/scala/org/apache/spark/sql/execution/streaming/):
# a file copied in with an old modification time would be dropped silently. A century keeps
# every file; the price is that the map of seen files is never purged, so the driver keeps
# one entry per landing file ever processed (the checkpoint's file log keeps them anyway).
NEVER_TOO_OLD = "36500d"

MiB = 1024 * 1024
# A catch-up run (availableNow after downtime) splits the backlog into micro-batches of
# about this many landing bytes. Each batch has a fixed cost (planning the decode, a
# stats job, three writes, two checkpoint commits; a few seconds), so small batches
# waste most of a catch-up on it: at 2M events, 100-file batches of 65 MB ran at about
# half the events/s of one 2.6 GB batch (docs/performance.md). The decoded batch is
# cached with spill to disk and every shuffle spills, so a batch's size bounds local
# disk and the work a failed batch repeats, not driver memory: one 2.6 GB batch ran in
# a 1 GB driver heap.
DEFAULT_MAX_BYTES_PER_TRIGGER = 512 * MiB
# A file count derived from the byte budget never exceeds this: the driver lists each
# batch's files and writes them to the landing ledger.
MAX_FILES_PER_TRIGGER = 10_000
# When the landing folder is empty at start, files are assumed to be this large: the
# default of Firehose's S3 buffering hint (BufferingHints.SizeInMBs,
# https://docs.aws.amazon.com/firehose/latest/APIReference/API_BufferingHints.html).
ASSUMED_FILE_BYTES = 5 * MiB


class SourceShapeError(ValueError):
    """The source frame does not have the columns this adapter maps."""


def _listed(files: DataFrame) -> list[LandedFile]:
    """The files of a binaryFile frame; collecting them reads no file content."""
    rows = files.select("path", "length", F.unix_millis("modificationTime").alias("modified_ms")).collect()
    return [LandedFile(row.path, row.length, row.modified_ms) for row in rows]


def _paths_frame(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """One row per path, spread over the cores (one partition each, up to twice their
    number), built in the JVM: rows from a Python list (`parallelize`, `createDataFrame`)
    go through a pickling Python worker, a second kind besides the splitter's Arrow
    workers, with a daemon of its own (about 0.2 GiB resident for the two kinds together)."""
    partitions = max(1, min(len(paths), 2 * spark.sparkContext.defaultParallelism))
    # One literal, parsed once by the optimizer (constant folding): any text a path holds
    # survives JSON, where a separator character might not.
    listed = F.from_json(F.lit(json.dumps(list(paths))), T.ArrayType(T.StringType()))
    return spark.range(len(paths), numPartitions=partitions).select(
        F.element_at(listed, F.col("id").cast("int") + 1).alias("path"))


def files_envelope(spark: SparkSession, files: Sequence[LandedFile]) -> DataFrame:
    """Envelope of every record in `files`, split on the executors (landing_reader), with
    `source_ref` = `<path>#<byte offset>` and the splitter's `source_error`."""
    from streaming.io.landing_reader import split_landing_files

    records = _paths_frame(spark, [file.path for file in files]).mapInArrow(
        split_landing_files, "payload binary, source_ref string, source_error string"
    )
    # No UTF-8 check in the payload's cast to text: decode quarantines invalid bytes as `invalid_utf8`.
    return records.select(*envelope_columns(payload=F.col("payload"), source_ref=F.col("source_ref")), SOURCE_ERROR)


def is_hidden_landing_name(name: str) -> bool:
    """A file or folder name Spark's file listing skips (see `_landing_listing`)."""
    return (name.startswith("_") and "=" not in name) or name.startswith(".") or name.endswith("._COPYING_")


def local_landing_files(landing: Path) -> list[Path]:
    """The files below a local landing folder that the stream reads (hidden names and
    Firehose error output skipped)."""
    if not landing.is_dir():
        return []
    return sorted(
        path for path in landing.rglob("*")
        if path.is_file() and not any(is_hidden_landing_name(part) for part in path.relative_to(landing).parts)
        and not is_error_output(str(path))
    )


def _landing_listing(reader: DataStreamReader | DataFrameReader) -> DataStreamReader | DataFrameReader:
    # Spark's file index already leaves out names starting with `_` or `.` (temporary and
    # hidden files) and ending in `._COPYING_` (HadoopFSUtils.shouldFilterOutPathName,
    # apache/spark core/src/main/scala/org/apache/spark/util/HadoopFSUtils.scala); every
    # other object is landing data, whatever its name or extension, but Firehose's error
    # output (`_landing_files`).
    return reader.format("binaryFile").schema(BINARY_FILE_SCHEMA).option("recursiveFileLookup", "true")


def _load_landing(reader: DataStreamReader | DataFrameReader, path: str) -> DataFrame:
    """The landing objects below `path`, without Firehose's error output
    (streaming/io/firehose_error_output.py). The file sources glob the path they load
    (DataSource.checkAndGlobPathIfNecessary, FileStreamSource), so it is escaped: a
    folder named `da[t]a` must not read the landing files of `data`."""
    listing = _landing_listing(reader).load(hadoop_glob_literal(path))
    return listing.where(~F.col("path").rlike(ERROR_OUTPUT_PATTERN))


@dataclass(frozen=True)
class TriggerSize:
    """How many landing files one micro-batch takes, and why."""

    files: int
    explanation: str

    def __post_init__(self) -> None:
        if self.files < 1:
            raise ValueError("max_files_per_trigger must be at least 1")


@dataclass(frozen=True)
class LandingStream:
    """The landing objects as a stream. Each micro-batch of `files` lists the new files;
    `batch_envelope` records them in the ledger (when there is one) and reads their records."""

    files: DataFrame
    # How many files each micro-batch takes, and why.
    trigger_size: TriggerSize
    ledger_dir: str | None = None

    def batch_envelope(self, files: DataFrame, batch_id: int) -> DataFrame:
        listed = _listed(files)
        if self.ledger_dir is not None:
            record_batch(self.ledger_dir, batch_id, listed)
        return files_envelope(files.sparkSession, listed)


def files_per_trigger(
    spark: SparkSession,
    landing_dir: str,
    max_files_per_trigger: int | None = None,
    max_bytes_per_trigger: int | None = None,
) -> TriggerSize:
    """The file count per micro-batch that keeps a batch near `max_bytes_per_trigger`.

    Spark 3.5's file source admits files only by count (`FileStreamOptions` of
    spark-sql 3.5.6 has `maxFilesPerTrigger` and no byte limit; Spark 4's `FileStreamSource`
    adds `maxBytesPerTrigger`), so the budget becomes a count when
    the stream starts: budget / the mean size of the files in the landing folder now
    (listed, not read), at least 1, at most `MAX_FILES_PER_TRIGGER`. A batch of files
    larger than that mean holds more bytes: at most the count times the largest file.
    An explicit `max_files_per_trigger` caps the count; `max_bytes_per_trigger` defaults
    to `DEFAULT_MAX_BYTES_PER_TRIGGER`.
    """
    if max_bytes_per_trigger is None:
        max_bytes_per_trigger = DEFAULT_MAX_BYTES_PER_TRIGGER
    if max_bytes_per_trigger < 1:
        raise ValueError("max_bytes_per_trigger must be at least 1")
    if max_files_per_trigger is not None and max_files_per_trigger < 1:
        raise ValueError("max_files_per_trigger must be at least 1")
    files, total_bytes = _landing_size(spark, landing_dir)
    mean_bytes = total_bytes / files if files else ASSUMED_FILE_BYTES
    count = max(1, min(MAX_FILES_PER_TRIGGER, int(max_bytes_per_trigger // max(mean_bytes, 1))))
    seen = (f"the mean of the {files:,} landing files now there" if files
            else "no landing files yet: Firehose's default buffer size assumed")
    explanation = (f"{count:,} files per micro-batch: about {_mib(max_bytes_per_trigger)} at "
                   f"{_mib(mean_bytes)} a file ({seen})")
    if max_files_per_trigger is not None and max_files_per_trigger < count:
        return TriggerSize(max_files_per_trigger, f"{max_files_per_trigger:,} files per micro-batch (--max-files-per-trigger)")
    return TriggerSize(count, explanation)


def _mib(size: float) -> str:
    return f"{size / MiB:,.1f} MiB"


def _landing_size(spark: SparkSession, landing_dir: str) -> tuple[int, int]:
    """(files, bytes) below `landing_dir` as the stream will list them; (0, 0) when the
    folder does not exist yet. No file is read. A local folder (a path without a scheme)
    is listed here, as `local_landing_files` lists what the stream reads: as a Spark job
    the listing cost a fresh `lakehouse stream` about 1 s of CPU before its first batch
    (a cold JVM planning and running one more job). Any other location (`s3://`,
    `file:`) is listed by one Spark job."""
    local = Path(landing_dir)
    if url_scheme(landing_dir) is None and not local.is_file():
        sizes = [path.stat().st_size for path in local_landing_files(local)]
        return len(sizes), sum(sizes)
    try:
        row = _load_landing(spark.read, landing_dir).agg(
            F.count(F.lit(1)).alias("files"), F.sum("length").alias("bytes")
        ).first()
    except AnalysisException as exc:
        if exc.getErrorClass() == "PATH_NOT_FOUND":
            return 0, 0
        raise
    return (row["files"], row["bytes"] or 0) if row is not None else (0, 0)


def landing_files_stream(
    spark: SparkSession,
    landing_dir: str,
    max_files_per_trigger: int | None = None,
    ledger_dir: str | None = None,
    *,
    trigger_size: TriggerSize | None = None,
) -> LandingStream:
    """Every object below `landing_dir` (Firehose's yyyy/MM/dd/HH folders or any other
    layout), GZIP or not, as a stream; `ledger_dir` keeps what each batch read
    (streaming/io/landing_ledger.py). Batch size: `trigger_size` when the caller has sized it,
    else the default byte budget capped by `max_files_per_trigger` (`files_per_trigger`)."""
    if trigger_size is None:
        trigger_size = files_per_trigger(spark, landing_dir, max_files_per_trigger)
    reader = (
        spark.readStream
        .option("maxFileAge", NEVER_TOO_OLD)
        .option("maxFilesPerTrigger", str(trigger_size.files))
    )
    files = _load_landing(reader, landing_dir).select("path", "length", "modificationTime")
    return LandingStream(files, trigger_size, ledger_dir)


def landing_files_batch(spark: SparkSession, path: str) -> DataFrame:
    """The same envelope as a one-off batch read (backfills, replays of landed files)."""
    return files_envelope(spark, _listed(_load_landing(spark.read, path)))


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
    return df.select(*envelope_columns(payload=_glue_data_column(df),
                                       source_ref=F.concat_ws("@", F.lit(stream_arn), arrival)))
