"""Start-up: the one path from contracts to a running stream, for every runner.

A runner says where its stream reads, writes and keeps its checkpoint (its `StreamEnds`);
`start_stream` runs these steps over them, in this order, so that none can skip one:

1. `claim_stream`: the stream id of the checkpoint and the raw tables (locally the data
   root's stream identity, claimed on first use and refused when they belong to different
   streams; on Glue the checkpoint's query id), then `check_contract_changes` against the
   versions the raw tables were written with. `lakehouse stream` runs this step itself
   before Spark starts, so that a refusal costs no JVM, and hands the stream id in.
2. `checked_pipeline`: the runner's sinks, each contract's partition expression evaluated
   by Spark and each raw table's decode planned; only then are the contract versions
   registered (a version is never left behind by a start that could not write), then the
   pipeline.
3. A stream that waits for files (a processing-time trigger) warms up: the pipeline
   decodes one record and writes nothing (`Pipeline.warm_up`), and a raw sink that can
   (`WarmingSink`) runs its write path on scratch tables, so that the first file does
   not wait on the first batch's one-off costs; an available-now stream's files are
   already there, and would only wait for them earlier.
4. `before_stream`, what the runner writes through the pipeline first: `lakehouse
   reprocess` replays its backfills here.
5. The source (locally, landing files changed since they were read and Firehose error
   output left unread are reported, and the byte budget becomes a file count), and the
   query starts (stream_loop.run_stream).

The runners: `lakehouse stream`, `lakehouse reprocess` and the benchmarks over
`LandingFiles` (a local data root), the Glue job over `glue_job.KinesisToRaw`. The
one-off batches beside the stream (backfill, the quarantine and unrouted replays) start no
query: they take step 2 alone (`local_pipeline`).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

from streaming.contracts.evolution import ContractRegistry, check_contracts, register_contracts
from streaming.contracts.loader import choose_contracts, load_contract_folder
from streaming.contracts.model import ContractError, TableContract
from streaming.contracts.spark_schema import check_partition_expression
from streaming.errors import OperatorError
from streaming.io.firehose_error_output import error_output_warnings
from streaming.io.formats.raw_format import WarmingSink
from streaming.io.jvm_errors import first_line
from streaming.io.landing_ledger import changed_files
from streaming.io.layout import QUERY_NAME, DataLayout
from streaming.io.quarantine_writer import QuarantineWriter
from streaming.io.sinks import SinkName, choose_sink
from streaming.io.sources import LandingStream, files_per_trigger, landing_files_stream
from streaming.pipeline.batch import BatchMetricsPublisher, Pipeline, QuarantineSink, RawSink
from streaming.pipeline.decode import decode_records, table_rows
from streaming.pipeline.envelope import ENVELOPE_SCHEMA
from streaming.runtime.stream_identity import claim_stream_identity
from streaming.runtime.stream_loop import run_stream
from streaming.runtime.trigger import DEFAULT_INTERVAL, Trigger

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

Printer = Callable[[str], None]
# Benchmarks wrap the sinks (the kill drill's crash points); production passes None.
SinkWrapper = Callable[[RawSink, QuarantineWriter], tuple[RawSink, QuarantineSink]]


class StartupError(OperatorError):
    """A sink or a contract setting cannot be used in this session."""


class StreamEnds(Protocol):
    """Where one runner's stream reads, writes and keeps its checkpoint: all that differs
    between runners. The steps in between are `start_stream`'s."""

    @property
    def raw_root(self) -> str | Path:
        """The raw tables, under which the contract versions they were written with are kept."""

    @property
    def checkpoint_dir(self) -> str: ...

    @property
    def trigger(self) -> Trigger: ...

    @property
    def interval(self) -> str: ...

    @property
    def query_name(self) -> str: ...

    @property
    def catalog(self) -> str | None:
        """The Hive metastore (`thrift://host:port`) each commit is synced to, which a batch
        that can no longer reach it names; None when the runner names none."""

    def stream_id(self, contracts: Mapping[str, TableContract]) -> str:
        """The id the raw sink marks its commits with: the checkpoint's, one per stream."""

    def sinks(
        self, spark: SparkSession, contracts: Mapping[str, TableContract], stream_id: str
    ) -> tuple[RawSink, QuarantineWriter]: ...

    def source(self, spark: SparkSession, report: Printer) -> DataFrame | LandingStream: ...


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
    # A Hive metastore (`thrift://host:port`, the local Athena's of `make athena-local`)
    # that each Hudi commit is synced to, as the Glue job syncs to the Glue Data Catalog.
    catalog: str | None = None

    def __post_init__(self) -> None:
        if self.catalog:
            check_metastore_uri(self.catalog)


@dataclass(frozen=True)
class LandingFiles:
    """A local data root's ends: its landing files in; the chosen raw sink, the quarantine
    and the checkpoint under `target`."""

    target: DataLayout
    landing: Path
    options: StreamOptions = StreamOptions()

    @property
    def raw_root(self) -> Path:
        return self.target.raw

    @property
    def checkpoint_dir(self) -> str:
        return str(self.target.checkpoint(self.options.checkpoint_name))

    @property
    def trigger(self) -> Trigger:
        return self.options.trigger

    @property
    def interval(self) -> str:
        return self.options.interval

    @property
    def query_name(self) -> str:
        return self.options.query_name

    @property
    def catalog(self) -> str | None:
        return self.options.catalog

    def stream_id(self, contracts: Mapping[str, TableContract]) -> str:
        return claim_stream_identity(self.target.root, self.target.checkpoint(self.options.checkpoint_name),
                                     self.landing, contracts)

    def sinks(
        self, spark: SparkSession, contracts: Mapping[str, TableContract], stream_id: str
    ) -> tuple[RawSink, QuarantineWriter]:
        return local_sinks(spark, self.target, contracts, self.options.sink, stream_id,
                           metastore_uri=self.options.catalog)

    def source(self, spark: SparkSession, report: Printer) -> LandingStream:
        for changed in changed_files(self.target.landing_ledger):
            report(f"WARNING: {changed.warning()}")
        for warning in error_output_warnings(self.landing):
            report(f"WARNING: {warning}")
        size = files_per_trigger(spark, str(self.landing), self.options.max_files_per_trigger,
                                 self.options.max_bytes_per_trigger)
        source = landing_files_stream(spark, str(self.landing), ledger_dir=str(self.target.landing_ledger),
                                      trigger_size=size)
        report(f"streaming {self.landing} -> {self.target.raw} (trigger {self.trigger}; {size.explanation}) ...")
        return source


@dataclass(frozen=True)
class StartedStream:
    query: StreamingQuery
    # What a runner writes through after the stream (reprocess repeats quarantine replays).
    pipeline: Pipeline
    source: DataFrame | LandingStream


def load_checked_contracts(
    contracts_dir: str | Path | None = None, report: Printer | None = None
) -> dict[str, TableContract]:
    """The table contracts of `contracts_dir` (default: choose_contracts's), validated.
    A command that acts on the tables passes `report`, told when they are the samples
    fallen back on."""
    chosen = choose_contracts(contracts_dir)
    try:
        contracts = load_contract_folder(chosen.folder)
    except ContractError as exc:
        raise StartupError(f"invalid table contracts: {exc}") from exc
    notice = chosen.fallback_notice()
    if report is not None and notice is not None:
        report(notice)
    return contracts


def check_contract_changes(raw_root: str | Path, contracts: Mapping[str, TableContract], report: Printer) -> None:
    """The contracts against the versions the raw tables under `raw_root` were written with:
    additions are reported, a rename or a type change is refused. Step 2 registers them."""
    check_contracts(ContractRegistry(raw_root), contracts, report=report)


def check_metastore_uri(uri: str) -> None:
    """Refuse any catalog but a Hive metastore URI, `thrift://host:port`, the form
    hive.metastore.uris takes; whether one answers there is known once Spark runs
    (io.hive_metastore.create_database)."""
    parts = urlsplit(uri)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "thrift" or not parts.hostname or port is None or parts.path not in ("", "/"):
        raise StartupError(f"catalog {uri!r}: give a Hive metastore as thrift://host:port "
                           "(`make athena-local` prints its own)")


def claim_stream(ends: StreamEnds, contracts: Mapping[str, TableContract], report: Printer) -> str:
    """Step 1: the stream id of `ends`, with the contracts checked against its raw tables."""
    stream_id = ends.stream_id(contracts)
    check_contract_changes(ends.raw_root, contracts, report)
    return stream_id


def local_sinks(
    spark: SparkSession, target: DataLayout, contracts: Mapping[str, TableContract], sink: SinkName | None,
    stream_id: str, *, metastore_uri: str | None = None,
) -> tuple[RawSink, QuarantineWriter]:
    """A local data root's raw sink (`sink`, or the default; synced to `metastore_uri`
    when given) and its quarantine."""
    try:
        raw_sink = choose_sink(sink, spark, data_dir=str(target.root), contracts=contracts, stream_id=stream_id,
                               metastore_uri=metastore_uri)
    except (RuntimeError, ValueError) as exc:
        raise StartupError(str(exc)) from exc
    return raw_sink, QuarantineWriter(str(target.root))


def checked_pipeline(
    spark: SparkSession,
    contracts: Mapping[str, TableContract],
    raw_sink: RawSink,
    quarantine: QuarantineSink,
    *,
    raw_root: str | Path,
    metrics: BatchMetricsPublisher | None = None,
) -> Pipeline:
    """Step 2: every partition expression checked by Spark and every raw table's decode
    planned on an empty batch; only then are the contract versions registered under
    `raw_root`, and the pipeline made. A start that dies before this point (Java missing,
    a plan Spark refuses) leaves no registered version that no row follows, which would
    otherwise bind the next start's contract."""
    for contract in contracts.values():
        check_partition_expression(spark, contract)
    plan_raw_tables(spark, contracts)
    register_contract_versions(raw_root, contracts)
    return Pipeline(contracts, raw_sink, quarantine, metrics=metrics)


def plan_raw_tables(spark: SparkSession, contracts: Mapping[str, TableContract]) -> None:
    """Every raw table's decode planned on an empty batch: Spark analyses each plan as it
    is built, so a contract Spark cannot plan fails here, before anything is registered."""
    decoded = decode_records(spark.createDataFrame([], ENVELOPE_SCHEMA), contracts)
    for table in contracts:
        table_rows(decoded, contracts, table)


def register_contract_versions(raw_root: str | Path, contracts: Mapping[str, TableContract]) -> None:
    """The versions `check_contract_changes` passed, registered beside the raw tables."""
    register_contracts(ContractRegistry(raw_root), contracts, datetime.now(timezone.utc))


def local_pipeline(
    spark: SparkSession, target: DataLayout, contracts: Mapping[str, TableContract], sink: SinkName | None,
    *, stream_id: str,
) -> Pipeline:
    """Step 2 alone, for the one-off batches written beside the stream on a local data root
    (backfill, the quarantine and unrouted replays): the stream's sinks and checks, no query."""
    return checked_pipeline(spark, contracts, *local_sinks(spark, target, contracts, sink, stream_id),
                            raw_root=target.raw)


def warm_up(spark: SparkSession, pipeline: Pipeline, raw_sink: RawSink, report: Printer) -> None:
    """Step 3. It only moves one-off costs ahead of the first file, so a warm-up that fails
    is reported and the stream goes on: its first batch pays them, and fails itself if
    what failed here was the sink."""
    started = time.monotonic()
    sink_warms_up = isinstance(raw_sink, WarmingSink)
    try:
        pipeline.warm_up(spark)
        if sink_warms_up:
            raw_sink.warm_up(spark)
    except Exception as exc:  # an optimisation must not stop the stream
        report(f"warm-up failed, so the first batch pays its one-off costs: {type(exc).__name__}: "
               f"{first_line(exc)}")
        return
    report(f"warmed up in {time.monotonic() - started:.1f} s: the decode"
           + (", and the raw sink's write path" if sink_warms_up else ""))


def start_stream(
    spark: SparkSession,
    ends: StreamEnds,
    contracts: Mapping[str, TableContract],
    report: Printer,
    *,
    stream_id: str | None = None,
    metrics: BatchMetricsPublisher | None = None,
    wrap_sinks: SinkWrapper | None = None,
    before_stream: Callable[[Pipeline], None] | None = None,
) -> StartedStream:
    """Steps 1-5 (step 1 skipped when the caller already claimed `stream_id`). An
    available-now stream has drained its source when this returns."""
    if stream_id is None:
        stream_id = claim_stream(ends, contracts, report)
    raw_sink, quarantine = ends.sinks(spark, contracts, stream_id)
    sinks: tuple[RawSink, QuarantineSink] = wrap_sinks(raw_sink, quarantine) if wrap_sinks else (raw_sink, quarantine)
    pipeline = checked_pipeline(spark, contracts, *sinks, raw_root=ends.raw_root, metrics=metrics)
    if ends.trigger == "processing-time":
        warm_up(spark, pipeline, raw_sink, report)
    if before_stream is not None:
        before_stream(pipeline)
    source = ends.source(spark, report)
    query = run_stream(spark, pipeline, source, checkpoint_dir=ends.checkpoint_dir, trigger=ends.trigger,
                       interval=ends.interval, query_name=ends.query_name, raw_root=str(ends.raw_root),
                       catalog=ends.catalog)
    return StartedStream(query, pipeline, source)
