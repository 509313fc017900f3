"""AWS Glue 5.1 streaming job: Kinesis (DynamoDB CDC) -> raw Hudi tables.

Job parameters (Glue passes them as `--name value`):

    --JOB_NAME              set by Glue
    --stream_arn            Kinesis data stream that DynamoDB writes its changes to
    --raw_base_path         s3://bucket/prefix; each raw table is <raw_base_path>/<raw_table>
    --database              Glue Catalog database the Hudi tables are synced to
    --quarantine_root       s3://bucket/prefix; bad records go to <root>/quarantine/_batch_id=<n>/
    --checkpoint_location   s3://bucket/prefix for the Structured Streaming checkpoint
    --starting_position     optional: trim_horizon (default), latest, earliest or an ISO timestamp
    --window_size           optional: micro-batch interval, default "100 seconds"
    --contracts_path        optional: folder of table contracts (default: the packaged ones)
    --sync_mode             optional: hms (default; Glue's metastore is the Glue Catalog), glue, none

Run it with `--datalake-formats hudi` (Glue's built-in Hudi 1.0.2) and
`--conf spark.serializer=org.apache.spark.serializer.KryoSerializer`; ship this package
with `--extra-py-files`. awsglue is imported inside `main()` only, so the parsing and
option building below import and test anywhere.
"""
from __future__ import annotations

import logging
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from streaming.hudi_options import SyncMode
from streaming.runner import DEFAULT_INTERVAL

log = logging.getLogger(__name__)

REQUIRED_ARGS = ("JOB_NAME", "stream_arn", "raw_base_path", "database", "quarantine_root", "checkpoint_location")
OPTIONAL_ARGS: Mapping[str, str | None] = {
    "starting_position": "trim_horizon",
    "window_size": DEFAULT_INTERVAL,
    "contracts_path": None,
    "sync_mode": "hms",
}
_STARTING_POSITIONS = frozenset({"latest", "trim_horizon", "earliest"})
_ISO_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
_WINDOW = re.compile(r"^\d+ (second|seconds|minute|minutes)$")
_STREAM_ARN = re.compile(r"^arn:aws[a-z-]*:kinesis:[a-z0-9-]+:\d{12}:stream/[A-Za-z0-9_.-]+$")
_SYNC_MODES = ("hms", "glue", "none")


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
    elif not _ISO_TIMESTAMP.match(starting_position):
        raise JobArgumentError(
            f"--starting_position {starting_position!r}: use latest, trim_horizon, earliest "
            "or a timestamp like 2025-01-31T08:00:00Z"
        )
    window_size = str(values["window_size"])
    if not _WINDOW.match(window_size):
        raise JobArgumentError(f"--window_size {window_size!r}: use e.g. '100 seconds' or '2 minutes'")
    sync_mode = str(values["sync_mode"])
    if sync_mode not in _SYNC_MODES:
        raise JobArgumentError(f"--sync_mode {sync_mode!r}: use one of {', '.join(_SYNC_MODES)}")
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
        sync_mode=sync_mode,  # type: ignore[arg-type]  # checked against _SYNC_MODES above
    )


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


def main(argv: Sequence[str] | None = None) -> None:
    from awsglue.context import GlueContext
    from awsglue.job import Job
    from awsglue.utils import getResolvedOptions
    from pyspark.context import SparkContext

    from streaming.contract import check_partition_expression, load_contracts
    from streaming.pipeline import Pipeline
    from streaming.runner import run_stream
    from streaming.sinks import HudiSink, QuarantineWriter
    from streaming.sources import glue_kinesis_envelope
    from streaming.spark import hudi_bundle_available

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("streaming").setLevel(logging.INFO)
    argv = list(sys.argv if argv is None else argv)
    resolved = getResolvedOptions(argv, resolvable_args(argv))
    settings = job_settings(resolved)

    glue_context = GlueContext(SparkContext.getOrCreate())
    spark = glue_context.spark_session
    job = Job(glue_context)
    job.init(settings.job_name, resolved)
    if not hudi_bundle_available(spark):
        raise RuntimeError("Hudi is not on the classpath: add the job parameter --datalake-formats hudi")

    contracts = load_contracts(settings.contracts_path)
    for contract in contracts.values():
        check_partition_expression(spark, contract)
    pipeline = Pipeline(
        contracts,
        HudiSink(settings.raw_base_path, settings.database, contracts, sync_mode=settings.sync_mode),
        QuarantineWriter(settings.quarantine_root),
    )
    kinesis = glue_context.create_data_frame.from_options(
        connection_type="kinesis",
        connection_options=kinesis_source_options(settings),
        transformation_ctx="kinesis_source",
    )
    query = run_stream(
        spark,
        pipeline,
        glue_kinesis_envelope(kinesis, settings.stream_arn),
        checkpoint_dir=settings.checkpoint_location,
        trigger="processing-time",
        interval=settings.window_size,
        query_name=settings.job_name,
    )
    log.info("streaming %s into %s (window %s)", settings.stream_arn, settings.raw_base_path, settings.window_size)
    query.awaitTermination()
    job.commit()


if __name__ == "__main__":
    main()
