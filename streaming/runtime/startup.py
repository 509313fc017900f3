"""Start-up: the one path from contracts and a data root to a running stream.

Every runner goes through these steps, in this order, so that none of them can skip one:

1. `claim_local_stream` (local runs, before Spark starts, so that a refusal costs no JVM):
   the stream identity of the data root (a checkpoint and raw tables of one stream), then
   `check_contract_changes`.
2. `checked_pipeline`: each contract's partition expression evaluated by Spark, then the
   pipeline over the given sinks.
3. `start_landing_stream`: landing files changed since they were read and Firehose error
   output left unread are reported, the byte budget becomes a file count, and the query
   starts (stream_loop.run_stream).

`start_stream` runs all three for `lakehouse stream` and the benchmarks; `lakehouse
reprocess` runs them with its backfills between 2 and 3; the Glue job runs
`check_contract_changes` and `checked_pipeline` over its Hudi sink and Kinesis source.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from streaming.contracts.evolution import ContractRegistry, guard_contracts
from streaming.contracts.loader import load_contracts
from streaming.contracts.model import ContractError, TableContract
from streaming.contracts.spark_schema import check_partition_expression
from streaming.errors import OperatorError
from streaming.io.firehose_error_output import error_output_warnings
from streaming.io.landing_ledger import changed_files
from streaming.io.layout import QUERY_NAME, DataLayout
from streaming.io.sinks import QuarantineWriter, SinkName, choose_sink
from streaming.io.sources import TriggerSize, files_per_trigger, landing_files_stream
from streaming.pipeline.batch import BatchMetricsPublisher, Pipeline, QuarantineSink, RawSink
from streaming.runtime.stream_identity import claim_stream_identity
from streaming.runtime.stream_loop import run_stream
from streaming.runtime.trigger import DEFAULT_INTERVAL, Trigger

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

Printer = Callable[[str], None]
# Benchmarks wrap the sinks (the kill drill's crash points); production passes None.
SinkWrapper = Callable[[RawSink, QuarantineWriter], tuple[RawSink, QuarantineSink]]


class StartupError(OperatorError):
    """A sink or a contract setting cannot be used in this session."""


@dataclass(frozen=True)
class StreamOptions:
    """How a local stream runs: what `lakehouse stream` takes on its command line."""

    trigger: Trigger = "available-now"
    interval: str = DEFAULT_INTERVAL
    sink: SinkName | None = None
    max_files_per_trigger: int | None = None
    max_bytes_per_trigger: int | None = None
    # The Spark query's name, and the checkpoint folder's under <data root>/checkpoints/.
    # `reprocess` names its query apart but keeps the stream's folder, so that the stream
    # continues from the rebuilt checkpoint after `lakehouse switch`.
    query_name: str = QUERY_NAME
    checkpoint_name: str = QUERY_NAME


def load_checked_contracts(contracts_dir: str | Path | None = None) -> dict[str, TableContract]:
    """The table contracts of `contracts_dir` (default: the packaged ones), validated."""
    try:
        return load_contracts(contracts_dir)
    except ContractError as exc:
        raise StartupError(f"invalid table contracts: {exc}") from exc


def check_contract_changes(raw_root: str | Path, contracts: Mapping[str, TableContract], report: Printer) -> None:
    """The contracts against the versions the raw tables under `raw_root` were written with:
    additions are registered and reported, a rename or a type change is refused."""
    guard_contracts(ContractRegistry(raw_root), contracts, datetime.now(timezone.utc), report=report)


def claim_local_stream(
    target: DataLayout, landing: Path, contracts: Mapping[str, TableContract], report: Printer,
    checkpoint_name: str = QUERY_NAME,
) -> str:
    """Step 1: the stream id of `target`'s checkpoint and raw tables (claimed on first
    use, refused when they belong to different streams), with the contracts checked."""
    stream_id = claim_stream_identity(target.root, target.checkpoint(checkpoint_name), landing, contracts)
    check_contract_changes(target.raw, contracts, report)
    return stream_id


def checked_pipeline(
    spark: SparkSession,
    contracts: Mapping[str, TableContract],
    raw_sink: RawSink,
    quarantine: QuarantineSink,
    metrics: BatchMetricsPublisher | None = None,
) -> Pipeline:
    """Step 2: every partition expression checked by Spark, then the pipeline."""
    for contract in contracts.values():
        check_partition_expression(spark, contract)
    return Pipeline(contracts, raw_sink, quarantine, metrics=metrics)


def local_pipeline(
    spark: SparkSession,
    target: DataLayout,
    contracts: Mapping[str, TableContract],
    sink: SinkName,
    *,
    stream_id: str | None = None,
    metrics: BatchMetricsPublisher | None = None,
    wrap_sinks: SinkWrapper | None = None,
) -> Pipeline:
    """Step 2 for a local data root: the chosen raw sink and the quarantine under `target`."""
    try:
        raw_sink = choose_sink(sink, spark, data_dir=str(target.root), contracts=contracts, stream_id=stream_id)
    except (RuntimeError, ValueError) as exc:
        raise StartupError(str(exc)) from exc
    quarantine = QuarantineWriter(str(target.root))
    sinks: tuple[RawSink, QuarantineSink] = wrap_sinks(raw_sink, quarantine) if wrap_sinks else (raw_sink, quarantine)
    return checked_pipeline(spark, contracts, *sinks, metrics=metrics)


def start_landing_stream(
    spark: SparkSession,
    pipeline: Pipeline,
    target: DataLayout,
    landing: Path,
    options: StreamOptions,
    report: Printer,
) -> tuple[StreamingQuery, TriggerSize]:
    """Step 3: the landing files as a stream into `pipeline`, checkpointed under `target`.
    An available-now stream has drained the landing files when this returns."""
    for changed in changed_files(target.landing_ledger):
        report(f"WARNING: {changed.warning()}")
    for warning in error_output_warnings(landing):
        report(f"WARNING: {warning}")
    size = files_per_trigger(spark, str(landing), options.max_files_per_trigger, options.max_bytes_per_trigger)
    source = landing_files_stream(spark, str(landing), ledger_dir=str(target.landing_ledger), trigger_size=size)
    report(f"streaming {landing} -> {target.raw} (trigger {options.trigger}; {size.explanation}) ...")
    query = run_stream(
        spark,
        pipeline,
        source,
        checkpoint_dir=str(target.checkpoint(options.checkpoint_name)),
        trigger=options.trigger,
        interval=options.interval,
        query_name=options.query_name,
    )
    return query, size


def start_stream(
    spark: SparkSession,
    target: DataLayout,
    landing: Path,
    contracts: Mapping[str, TableContract],
    options: StreamOptions,
    report: Printer,
    *,
    stream_id: str | None = None,
    metrics: BatchMetricsPublisher | None = None,
    wrap_sinks: SinkWrapper | None = None,
) -> tuple[StreamingQuery, TriggerSize]:
    """Steps 1-3 (step 1 skipped when the caller already claimed `stream_id`)."""
    if stream_id is None:
        stream_id = claim_local_stream(target, landing, contracts, report, options.checkpoint_name)
    pipeline = local_pipeline(spark, target, contracts, options.sink, stream_id=stream_id, metrics=metrics,
                              wrap_sinks=wrap_sinks)
    return start_landing_stream(spark, pipeline, target, landing, options, report)
