"""AWS Glue 5.1 streaming job: Kinesis (DynamoDB CDC) -> raw Hudi tables.

Job parameters (Glue passes them as `--name value`):

    --JOB_NAME              set by Glue
    --stream_arn            Kinesis data stream that DynamoDB writes its changes to
    --raw_base_path         s3://bucket/prefix; per contract <raw_base_path>/<raw_table> (current
                            state) and <raw_base_path>/<raw_table>_changes (change log)
    --database              Glue Catalog database the Hudi tables are synced to
    --quarantine_root       s3://bucket/prefix; bad records go to <root>/quarantine/_batch_id=<n>/
    --checkpoint_location   s3://bucket/prefix for the Structured Streaming checkpoint; its query
                            id names the stream in the Hudi commits, so a replayed batch is not
                            inserted twice
    --starting_position     optional: trim_horizon (default), latest, earliest or a timestamp
                            yyyy-mm-ddTHH:MM:SS+HH:MM (offset required, e.g. 2026-04-04T08:00:00-04:00)
    --window_size           optional: micro-batch interval, default "100 seconds"
    --contracts_path        optional: folder of table contracts (default: the packaged ones)
    --sync_mode             optional: hms (default), glue or none; how the tables reach the catalog
    --retain_hours          optional: hours the Hudi cleaner keeps replaced file versions for
                            running queries, default 24

Glue settings the job needs:

    --datalake-formats hudi          Glue's built-in Hudi 1.0.2
    --conf spark.serializer=org.apache.spark.serializer.KryoSerializer
    --enable-glue-datacatalog        with sync_mode hms (the default): Spark's Hive metastore
                                     client is then the Glue Data Catalog; without it the job
                                     stops at start instead of failing after its first commit
    --extra-py-files                 this package
    --additional-python-modules      PyYAML at pyproject.toml's pin (the contracts are YAML;
                                     deploy/job_arguments.py says why it is not left to Glue)

No argument sets the Parquet list structure (parquet.avro.write-old-list-structure=false,
which lets a list hold a NULL): the Hudi sink sets it on Glue's session before each write
(streaming/io/formats/hudi/options.py, HUDI_HADOOP_CONF).

DynamoDB side: set ApproximateCreationDateTimePrecision=MICROSECOND on the table's Kinesis
streaming destination. Records of Kinesis Data Streams for DynamoDB carry no sequence
number, so the change time is the only order between two writes to one item; at
MILLISECOND precision two writes within one millisecond tie and their order is arbitrary.

awsglue is imported inside `main()` only, so the parsing and option building below
import and test anywhere.
"""
from __future__ import annotations

import json
import logging
import re
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

# The job writes the production format (DESIGN.md), named here once: its sink and the
# check that Glue loaded its jars come from the format's room, and the job parameters
# --sync_mode and --retain_hours are that format's options.
from streaming.io.formats.hudi.format import HUDI as JOB_FORMAT
from streaming.io.formats.hudi.options import DEFAULT_RETAIN_HOURS, DEFAULT_SYNC_MODE, GLUE_SYNC_TOOL, SYNC_MODES, SyncMode
from streaming.io.formats.raw_format import JobSinkSettings
from streaming.io.layout import CHECKPOINT_METADATA_FILE, uri
from streaming.runtime.stream_identity import query_id_in_metadata
from streaming.runtime.trigger import DEFAULT_INTERVAL, Trigger

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from streaming.contracts.model import TableContract
    from streaming.io.quarantine_writer import QuarantineWriter
    from streaming.io.storage import HadoopFiles
    from streaming.pipeline.batch import RawSink

log = logging.getLogger(__name__)

REQUIRED_ARGS = ("JOB_NAME", "stream_arn", "raw_base_path", "database", "quarantine_root", "checkpoint_location")
OPTIONAL_ARGS: Mapping[str, str | None] = {
    "starting_position": "trim_horizon",
    "window_size": DEFAULT_INTERVAL,
    "contracts_path": None,
    "sync_mode": DEFAULT_SYNC_MODE,
    "retain_hours": str(DEFAULT_RETAIN_HOURS),
}
_STARTING_POSITIONS = frozenset({"latest", "trim_horizon", "earliest"})
# Glue's Kinesis connection documents startingPosition timestamps as yyyy-mm-ddTHH:MM:SS
# with a numeric UTC offset (example "2023-04-04T08:00:00-04:00"): no "Z", no fractions
# (https://docs.aws.amazon.com/glue/latest/dg/aws-glue-programming-etl-connect-kinesis-home.html,
# KinesisStreamingSourceOptions.StartingPosition in the Glue API reference).
_GLUE_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{2}:\d{2}$")
_WINDOW = re.compile(r"^(?P<count>\d+) (?P<unit>second|seconds|minute|minutes)$")
_STREAM_ARN = re.compile(r"^arn:aws[a-z-]*:kinesis:[a-z0-9-]+:\d{12}:stream/[A-Za-z0-9_.-]+$")

# What --enable-glue-datacatalog sets: Spark's Hive client talks to the Glue Data Catalog.
GLUE_CATALOG_CLIENT_FACTORY = "com.amazonaws.glue.catalog.metastore.AWSGlueDataCatalogHiveClientFactory"
METASTORE_CLIENT_FACTORY_KEYS = (
    "spark.hadoop.hive.metastore.client.factory.class",
    "hive.metastore.client.factory.class",
)


class JobArgumentError(ValueError):
    """A job parameter is missing or malformed; the message names it."""


@dataclass(frozen=True)
class GlueJobSettings:
    job_name: str
    stream_arn: str
    raw_base_path: str
    database: str
    quarantine_root: str
    checkpoint_location: str
    starting_position: str
    window_size: str
    contracts_path: str | None
    sync_mode: SyncMode
    retain_hours: int

    @property
    def window_seconds(self) -> int:
        """The micro-batch interval in seconds (at most one commit per table per interval)."""
        match = _WINDOW.match(self.window_size)
        assert match is not None  # checked by job_settings
        return int(match["count"]) * (60 if match["unit"].startswith("minute") else 1)


def resolvable_args(argv: Sequence[str]) -> list[str]:
    """Names to hand to getResolvedOptions: it fails on any listed name that is absent,
    so optional parameters are listed only when the job was given them."""
    given = {arg[2:].split("=", 1)[0] for arg in argv if arg.startswith("--")}
    return [*REQUIRED_ARGS, *(name for name in OPTIONAL_ARGS if name in given)]


def job_settings(resolved: Mapping[str, str]) -> GlueJobSettings:
    """Resolved job parameters -> validated settings, with defaults for optional ones."""
    missing = [name for name in REQUIRED_ARGS if not resolved.get(name)]
    if missing:
        raise JobArgumentError(f"missing job parameters: {', '.join('--' + name for name in missing)}")
    values = {name: resolved.get(name) or default for name, default in OPTIONAL_ARGS.items()}
    stream_arn = resolved["stream_arn"]
    if not _STREAM_ARN.match(stream_arn):
        raise JobArgumentError(f"--stream_arn {stream_arn!r} is not a Kinesis data stream ARN")
    starting_position = str(values["starting_position"])
    if starting_position.lower() in _STARTING_POSITIONS:
        starting_position = starting_position.lower()
    elif not _is_glue_timestamp(starting_position):
        raise JobArgumentError(
            f"--starting_position {starting_position!r}: use latest, trim_horizon, earliest or a timestamp "
            "yyyy-mm-ddTHH:MM:SS with its UTC offset, e.g. 2026-04-04T08:00:00-04:00 (or +00:00 for UTC)"
        )
    window_size = str(values["window_size"])
    window = _WINDOW.match(window_size)
    if not window or int(window["count"]) < 1:
        raise JobArgumentError(f"--window_size {window_size!r}: use e.g. '100 seconds' or '2 minutes'")
    sync_mode = str(values["sync_mode"])
    if sync_mode not in SYNC_MODES:
        raise JobArgumentError(f"--sync_mode {sync_mode!r}: use one of {', '.join(SYNC_MODES)}")
    retain_hours_text = str(values["retain_hours"])
    if not retain_hours_text.isdigit() or int(retain_hours_text) < 1:
        raise JobArgumentError(f"--retain_hours {retain_hours_text!r}: use a whole number of hours, at least 1")
    for name in ("raw_base_path", "quarantine_root", "checkpoint_location"):
        if not resolved[name].startswith("s3://"):
            raise JobArgumentError(f"--{name} {resolved[name]!r} must be an s3:// location")
    return GlueJobSettings(
        job_name=resolved["JOB_NAME"],
        stream_arn=stream_arn,
        raw_base_path=resolved["raw_base_path"],
        database=resolved["database"],
        quarantine_root=resolved["quarantine_root"],
        checkpoint_location=resolved["checkpoint_location"],
        starting_position=starting_position,
        window_size=window_size,
        contracts_path=values["contracts_path"],
        sync_mode=sync_mode,  # type: ignore[arg-type]  # checked against SYNC_MODES above
        retain_hours=int(retain_hours_text),
    )


def _is_glue_timestamp(text: str) -> bool:
    if not _GLUE_TIMESTAMP.match(text):
        return False
    try:
        datetime.fromisoformat(text)
    except ValueError:  # e.g. month 13 or an offset beyond 24 hours
        return False
    return True


class CatalogAccessError(RuntimeError):
    """The job could not sync its tables to the catalog the way --sync_mode asks."""


def catalog_access_problem(
    sync_mode: SyncMode, spark_conf: Mapping[str, str], class_loadable: Callable[[str], bool]
) -> str | None:
    """Why the chosen catalog sync cannot work in this job, or None when it can.

    Checked at start: Hudi syncs after each commit, so a sync that cannot reach the
    catalog would otherwise fail only after the first batch is written.
    - hms: Hudi's HiveSyncTool talks to Spark's Hive metastore client, which is the Glue
      Data Catalog only when the job runs with --enable-glue-datacatalog (it sets the
      AWS Glue client factory); otherwise it is a local Derby metastore that Athena never sees.
    - glue: the AwsGlueCatalogSyncTool class must be on the classpath (hudi-aws).
    """
    if sync_mode == "hms":
        factories = {spark_conf.get(key) for key in METASTORE_CLIENT_FACTORY_KEYS} - {None}
        if GLUE_CATALOG_CLIENT_FACTORY not in factories:
            found = ", ".join(sorted(str(value) for value in factories)) or "none"
            return (
                "--sync_mode hms syncs through Spark's Hive metastore client, but it is not the Glue Data Catalog "
                f"(hive.metastore.client.factory.class: {found}); run the job with --enable-glue-datacatalog, "
                "or use --sync_mode glue"
            )
    elif sync_mode == "glue":
        if not class_loadable(GLUE_SYNC_TOOL):
            return (
                f"--sync_mode glue needs {GLUE_SYNC_TOOL} (hudi-aws), which this job cannot load; "
                "run with --datalake-formats hudi, or use --sync_mode hms with --enable-glue-datacatalog"
            )
    return None


def require_catalog_access(
    sync_mode: SyncMode, spark_conf: Mapping[str, str], class_loadable: Callable[[str], bool]
) -> None:
    problem = catalog_access_problem(sync_mode, spark_conf, class_loadable)
    if problem:
        raise CatalogAccessError(problem)


def kinesis_source_options(settings: GlueJobSettings) -> dict[str, str]:
    """connection_options for glueContext.create_data_frame.from_options("kinesis", ...).

    classification json with inferSchema true keeps each record's JSON text in one
    column (the schema is only inferred if the frame becomes a DynamicFrame), which is
    what the envelope needs: decode, not Glue, parses the DynamoDB JSON.
    """
    return {
        "streamARN": settings.stream_arn,
        "startingPosition": settings.starting_position,
        "classification": "json",
        "inferSchema": "true",
        "addRecordTimestamp": "true",
        "emitConsumerLagMetrics": "true",
    }


def checkpoint_query_id(files: HadoopFiles, checkpoint_dir: str) -> str:
    """The streaming query id of a checkpoint: the HudiSink's stream id.

    Spark keeps it in `<checkpoint>/metadata` as `{"id": "<uuid>"}` (StreamMetadata) and,
    when the file is absent, writes a new random one at query start. Writing it here
    first, the same way, gives the sink the id before the query starts; a new checkpoint,
    even at the same location, is a new stream whose batch ids never match the old one's.
    """
    path = uri(checkpoint_dir, CHECKPOINT_METADATA_FILE)
    if not files.exists(path):
        files.write_text(path, json.dumps({"id": str(uuid.uuid4())}))
    try:
        return query_id_in_metadata(files.read_text(path))
    except ValueError as exc:
        raise JobArgumentError(f"--checkpoint_location: {path}: {exc}") from exc


def session_catalog_conf(spark: SparkSession) -> dict[str, str]:
    """The Spark conf, plus the Hadoop conf's metastore client factory (where Glue may set it)."""
    conf = {key: value for key, value in spark.sparkContext.getConf().getAll()}
    hadoop_factory = spark.sparkContext._jsc.hadoopConfiguration().get(METASTORE_CLIENT_FACTORY_KEYS[1])
    if hadoop_factory is not None:
        conf[METASTORE_CLIENT_FACTORY_KEYS[1]] = str(hadoop_factory)
    return conf


@dataclass(frozen=True)
class KinesisToRaw:
    """The job's ends for streaming.runtime.startup.start_stream: the Kinesis data stream
    in; the Hudi tables, the quarantine and the checkpoint on S3 out."""

    settings: GlueJobSettings
    glue_context: Any  # awsglue.context.GlueContext, which exists only inside Glue

    @property
    def raw_root(self) -> str:
        return self.settings.raw_base_path

    @property
    def checkpoint_dir(self) -> str:
        return self.settings.checkpoint_location

    @property
    def trigger(self) -> Trigger:
        # The job runs until it is stopped: one micro-batch, and so one commit per table, a window.
        return "processing-time"

    @property
    def interval(self) -> str:
        return self.settings.window_size

    @property
    def query_name(self) -> str:
        return self.settings.job_name

    @property
    def catalog(self) -> str | None:
        # The Glue Data Catalog, reached through Glue's own client: no address to restart.
        return None

    def stream_id(self, contracts: Mapping[str, TableContract]) -> str:
        from streaming.io.storage import HadoopFiles

        return checkpoint_query_id(HadoopFiles(self.glue_context.spark_session), self.settings.checkpoint_location)

    def sinks(
        self, spark: SparkSession, contracts: Mapping[str, TableContract], stream_id: str
    ) -> tuple[RawSink, QuarantineWriter]:
        from streaming.io.quarantine_writer import QuarantineWriter

        settings = self.settings
        raw_sink = JOB_FORMAT.job_sink(
            spark, JobSinkSettings(settings.raw_base_path, settings.database, settings.sync_mode,
                                   settings.retain_hours, settings.window_seconds), contracts, stream_id)
        return raw_sink, QuarantineWriter(settings.quarantine_root)

    def source(self, spark: SparkSession, report: Callable[[str], None]) -> DataFrame:
        from streaming.io.sources import glue_kinesis_envelope

        kinesis = self.glue_context.create_data_frame.from_options(
            connection_type="kinesis",
            connection_options=kinesis_source_options(self.settings),
            transformation_ctx="kinesis_source",
        )
        return glue_kinesis_envelope(kinesis, self.settings.stream_arn)


def main(argv: Sequence[str] | None = None) -> None:
    from awsglue.context import GlueContext
    from awsglue.job import Job
    from awsglue.utils import getResolvedOptions
    from pyspark.context import SparkContext

    from streaming.io.metrics import CloudWatchMetricsPublisher
    from streaming.io.storage import jvm_class_loadable
    from streaming.runtime.jvm_lookups import remember_jvm_classes
    from streaming.runtime.startup import load_checked_contracts, start_stream

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("streaming").setLevel(logging.INFO)
    argv = list(sys.argv if argv is None else argv)
    resolved = getResolvedOptions(argv, resolvable_args(argv))
    settings = job_settings(resolved)

    glue_context = GlueContext(SparkContext.getOrCreate())
    spark = glue_context.spark_session
    remember_jvm_classes(spark)  # as local_session does for every other runner
    job = Job(glue_context)
    job.init(settings.job_name, resolved)
    JOB_FORMAT.require_jars(spark, glue_job=True)
    require_catalog_access(
        settings.sync_mode, session_catalog_conf(spark), lambda name: jvm_class_loadable(spark, name)
    )

    # The stream's start-up (streaming/runtime/startup.py): among its steps, a renamed
    # column or changed type is refused against the versions the raw tables were written
    # with (stored under <raw_base_path>/_contracts/), and additions are registered.
    contracts = load_checked_contracts(settings.contracts_path)
    started = start_stream(spark, KinesisToRaw(settings, glue_context), contracts, log.info,
                           metrics=CloudWatchMetricsPublisher(settings.job_name))
    log.info("streaming %s into %s (window %s)", settings.stream_arn, settings.raw_base_path, settings.window_size)
    started.query.awaitTermination()
    job.commit()


if __name__ == "__main__":
    main()
