"""Backfill the raw tables of a DynamoDB table from an export (full or incremental) through the stream's pipeline.

An export is validated against its manifests, replayed as change records
(`streaming.io.dynamodb_export.export_to_change_records`) and handed to the same
`Pipeline.process_batch` the stream uses, as one batch read. The decoder routes each
item as it routes a stream record, so the export of a single-table design fills every
entity's raw table and the unrouted one (`lakehouse backfill --table app`). Its batch id is derived
from the export id and is negative, so it never collides with a stream's batch ids
(which start at 0) and a retry of the same export overwrites exactly the folders the
first attempt wrote.

Nothing of a backfill is visible to readers before its checks pass. With a sink that
stages its tables (SinkCapabilities.stages_tables: the local Parquet change log) the batch
is written under `<data root>/backfills/_staging/<export-id>/output/` (outside `raw/` and
`quarantine/`, which readers list), checked there, and only then renamed into the live
folders, one folder rename each. With any other sink (one whose write is a commit, which
a rename cannot move) the writes are held back until the batch's counts are checked,
then made. A failed run is recorded as "failed" and leaves live raw as it was.

Each run is recorded in `<data root>/backfills/<export-id>.json`, a recorded one-off batch
(streaming/operations/batches/recorded_batch.py); `reprocess` replays the succeeded backfills into
a new location, so a rebuilt raw table keeps its bootstrap.

A backfill never writes beside a stream: both hold the data directory's lock while they
run, so a running stream is stopped for a backfill and started again after it
(docs/operations.md, "Initial load"). Which wrote first does not change the current
state: the ordering value decides it.
"""
from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streaming.contracts.model import TableContract, contracts_of_table
from streaming.errors import OperatorError
from streaming.io import layout as raw_layout
from streaming.io.dynamodb_export import (
    INCREMENTAL_EXPORT,
    ExportManifest,
    ExportValidationError,
    export_to_change_records,
    read_export_manifest,
    refused_export_lines,
)
from streaming.io.layout import DataLayout
from streaming.io.quarantine_writer import QuarantineWriter
from streaming.io.sinks import SinkName
from streaming.operations.batches.recorded_batch import BACKFILLS, one_off_batch, recording
from streaming.pipeline.sink_capabilities import SinkCapabilities
from streaming.runtime.startup import load_checked_contracts

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from streaming.pipeline.batch import BatchReport, Pipeline

log = logging.getLogger(__name__)

Printer = Callable[[str], None]


class BackfillError(OperatorError, RuntimeError):
    """A backfill cannot start or its result failed the after-write check."""


def backfill_run_id(export_id: str) -> int:
    """The batch id of an export's backfill: distinct per export, the same on every retry."""
    return BACKFILLS.batch_id(export_id)


@dataclass(frozen=True)
class BackfillPlan:
    manifest: ExportManifest
    # The raw tables of the exported DynamoDB table, keyed by raw table: one for a plain
    # table, each entity's and the unrouted one for a single-table design.
    contracts: Mapping[str, TableContract]
    data_root: Path
    batch_id: int

    @property
    def key_contract(self) -> TableContract:
        """Any of the table's contracts: they share the table name and the key, all an
        export replay reads (routing is the decoder's)."""
        return next(iter(self.contracts.values()))

    @property
    def raw_tables(self) -> list[str]:
        return list(self.contracts)

    @property
    def run_log(self) -> Path:
        return run_log_path(self.data_root, self.manifest.export_id)

    @property
    def staging_dir(self) -> Path:
        return BACKFILLS.directory(self.data_root) / raw_layout.BACKFILL_STAGING_FOLDER / self.manifest.export_id

    @property
    def input_dir(self) -> Path:
        """The export's change records as JSON lines, the batch's input."""
        return self.staging_dir / raw_layout.BACKFILL_INPUT_FOLDER

    @property
    def output_root(self) -> Path:
        """A data root of its own (raw/, quarantine/) the batch is written to and checked in."""
        return self.staging_dir / raw_layout.BACKFILL_OUTPUT_FOLDER

    def describe(self) -> list[str]:
        """What the backfill reads and writes, for a dry run and for the log."""
        manifest = self.manifest
        if manifest.export_type == INCREMENTAL_EXPORT:
            when = f"changes from {_iso(manifest.export_from_time)} to {_iso(manifest.export_to_time)}"
        else:
            when = f"export time {_iso(manifest.export_time)}"
        lines = [
            f"read  {manifest.export_type} {manifest.export_id} of table {manifest.table_name} ({when})",
            f"      {len(manifest.data_files)} data files, {manifest.item_count} items, "
            f"{sum(_size(f.path) for f in manifest.data_files)} bytes compressed",
        ]
        lines += [f"      {f.path}  items={f.item_count}  bytes={_size(f.path)}" for f in manifest.data_files]
        lines += [
            f"write raw table {contract.raw_table} at "
            f"{raw_layout.change_log_dir(DataLayout(self.data_root).raw, contract)}/<ingest hour>/"
            f"{raw_layout.batch_folder(self.batch_id)}"
            for contract in self.contracts.values()
        ]
        lines += [
            f"      quarantine {DataLayout(self.data_root).quarantine / raw_layout.batch_folder(self.batch_id)}",
            f"      run log {self.run_log}",
        ]
        return lines


@dataclass(frozen=True)
class BackfillResult:
    export_dir: str
    export_id: str
    export_type: str
    table: str
    raw_tables: list[str]
    batch_id: int
    items: int
    # Rows landed, in all and per raw table. An item that moves from one entity to another
    # (an incremental export's line whose OldImage is of another entity) lands a row in
    # each, so `landed` may exceed the items by those moves.
    landed: int
    landed_per_table: dict[str, int]
    quarantined: int
    started_at: str
    seconds: float

    def summary(self) -> str:
        per_table = " ".join(f"{table}={rows}" for table, rows in self.landed_per_table.items())
        return (
            f"backfill {self.export_id} batch={self.batch_id}: items={self.items} landed={self.landed} "
            f"({per_table}) quarantined={self.quarantined} took={self.seconds:.1f}s"
        )


def run_log_path(data_root: Path, export_id: str) -> Path:
    return BACKFILLS.path(data_root, export_id)


def plan_backfill(
    export_dir: Path | str,
    contracts: Mapping[str, TableContract],
    data_root: Path,
    table: str | None = None,
) -> BackfillPlan:
    """Validate the export (manifests, checksums, item counts, every line) and name what it will write.

    A line that cannot become a change record (not UTF-8, not JSON, no Item, a key
    attribute missing) refuses the whole export, dry run or not, with counts per
    problem and the first lines of each: such an export is damaged, and replaying
    the rest would load it partially.
    """
    manifest = read_export_manifest(export_dir)
    if table is not None and table != manifest.table_name:
        raise ExportValidationError(
            f"{manifest.export_dir} is an export of table {manifest.table_name!r}, not {table!r}"
        )
    table_contracts = contracts_of_table(contracts, manifest.table_name)
    if not table_contracts:
        known = sorted({contract.table for contract in contracts.values()})
        raise ExportValidationError(
            f"{manifest.export_dir}: no table contract for table {manifest.table_name!r} "
            f"(known: {known}); add one before backfilling it"
        )
    plan = BackfillPlan(manifest, table_contracts, data_root, backfill_run_id(manifest.export_id))
    refused = refused_export_lines(manifest, plan.key_contract)
    if refused.total:
        heading = f"{manifest.export_dir}: the backfill refuses this export"
        raise ExportValidationError("\n".join([heading, *refused.lines()]))
    return plan


def stage_change_records(plan: BackfillPlan, out: Printer = print) -> dict[str, str]:
    """Write the export's change records as one JSON-lines file per data file.

    Returns staged file name -> export data file, for `source_ref`. Records come out of
    `export_to_change_records` in data-file order with one record per item, so the
    manifest's item counts tell where each data file ends.
    """
    shutil.rmtree(plan.staging_dir, ignore_errors=True)
    plan.input_dir.mkdir(parents=True)
    records = export_to_change_records(plan.manifest.export_dir, plan.key_contract)
    staged: dict[str, str] = {}
    total = len(plan.manifest.data_files)
    for number, data_file in enumerate(plan.manifest.data_files, start=1):
        name = data_file.path.name.removesuffix(".json.gz") + ".jsonl"
        with (plan.input_dir / name).open("w", encoding="utf-8") as staged_file:
            for _ in range(data_file.item_count):
                staged_file.write(next(records) + "\n")
        staged[name] = str(data_file.path)
        out(f"  [{number}/{total}] {data_file.path.name}: {data_file.item_count} items")
    return staged


def staged_envelope(spark: SparkSession, staging_dir: Path, staged: Mapping[str, str]) -> DataFrame:
    """The staged records as the change envelope, `source_ref` naming the export data file."""
    from pyspark.sql import functions as F

    from streaming.io.sources import landing_files_batch

    names = F.create_map(*[F.lit(part) for name, path in staged.items() for part in (name, path)])
    envelope = landing_files_batch(spark, str(staging_dir))
    # Landing source_refs read `<path>#<byte offset>`; the offset is within the staged file.
    staged_name = F.regexp_extract("source_ref", r"([^/]+\.jsonl)#[0-9]+$", 1)
    return envelope.withColumn("source_ref", F.coalesce(F.element_at(names, staged_name), F.col("source_ref")))


def run_backfill(
    spark: SparkSession,
    plan: BackfillPlan,
    pipeline: Pipeline,
    *,
    out: Printer = print,
) -> BackfillResult:
    """Stage, process as one batch, check, publish to the live tables, record the run.

    `pipeline` is the one writing the live tables; the batch goes through a copy of it
    that writes somewhere readers do not look until the checks passed.
    """
    started_at = datetime.now(timezone.utc)
    started = time.monotonic()
    manifest = plan.manifest
    log.info("backfill export=%s table=%s batch=%d started", manifest.export_id, manifest.table_name, plan.batch_id)
    try:
        with recording(plan.run_log, {**_run_identity(plan), "started_at": started_at.isoformat()}) as run:
            out(f"staging {manifest.item_count} change records from {len(manifest.data_files)} data files ...")
            staged = stage_change_records(plan, out)
            out(f"processing one batch (batch id {plan.batch_id}) ...")
            envelope = staged_envelope(spark, plan.input_dir, staged)
            if pipeline.sink.capabilities.stages_tables:
                report = _process_in_staging_folder(plan, pipeline, envelope)
            else:
                report = _process_with_held_writes(plan, pipeline, envelope)
    finally:
        shutil.rmtree(plan.staging_dir, ignore_errors=True)
    landed = _landed_per_table(plan, report)
    result = BackfillResult(
        **_run_identity(plan),
        items=manifest.item_count,
        landed=sum(landed.values()),
        landed_per_table=landed,
        quarantined=report.quarantined,
        started_at=started_at.isoformat(),
        seconds=time.monotonic() - started,
    )
    run.succeeded(**asdict(result))
    out(result.summary())
    return result


def _process_in_staging_folder(plan: BackfillPlan, pipeline: Pipeline, envelope: DataFrame) -> BatchReport:
    """Write the batch under `plan.output_root`, check it there, then rename it into the live folders."""
    from streaming.pipeline.batch import Pipeline

    # The same sink class, rooted in the staging folder (a subclass keeps its behaviour).
    staged_sink = type(pipeline.sink)(str(plan.output_root))
    staged = Pipeline(pipeline.contracts, staged_sink, QuarantineWriter(str(plan.output_root)),
                      clock=pipeline.clock, metrics=pipeline.metrics)
    report = staged.process_batch(envelope, plan.batch_id)
    _check_counts(plan, report)
    _check_written_rows(plan, report)
    _publish_staged_folders(plan, pipeline)
    return report


def _process_with_held_writes(plan: BackfillPlan, pipeline: Pipeline, envelope: DataFrame) -> BatchReport:
    """Run the batch with its writes held back; make them only once the counts are right.

    The held frames are materialised while the batch runs (`_held`), so writing them
    later neither decodes the batch again nor plans the whole decode once more per
    table (which ran a 1 GB driver out of heap compiling it): the price of a sink whose
    output cannot be published by a rename is one more copy of the batch on the executors.
    """
    from streaming.pipeline.batch import Pipeline

    held_raw, held_quarantine = _HeldRawWrites(), _HeldQuarantineWrites()
    staged = Pipeline(pipeline.contracts, held_raw, held_quarantine,  # type: ignore[arg-type]
                      clock=pipeline.clock, metrics=pipeline.metrics)
    report = staged.process_batch(envelope, plan.batch_id)
    _check_counts(plan, report)
    for frame, contract, batch_id, rows in held_raw.writes:
        pipeline.sink.write(frame, contract, batch_id, rows=rows)
    for frame, batch_id, rows in held_quarantine.writes:
        pipeline.quarantine.write(frame, batch_id, rows=rows)
    return report


def _held(frame: DataFrame) -> DataFrame:
    """`frame` computed now (while the batch's cache is live) and cut from its plan; its
    blocks stay on the executors (memory, then disk) until the frame is dropped."""
    return frame.localCheckpoint(eager=True)


class _HeldRawWrites:
    """A raw sink that only keeps what it was asked to write."""

    # Each write keeps its frame, one at a time; the pipeline caches the changes for it.
    capabilities = SinkCapabilities()

    def __init__(self) -> None:
        self.writes: list[tuple[DataFrame, TableContract, int, int | None]] = []

    def write(self, changes: DataFrame, contract: TableContract, batch_id: int, rows: int | None = None) -> None:
        self.writes.append((_held(changes), contract, batch_id, rows))


class _HeldQuarantineWrites:
    """A quarantine writer that only keeps what it was asked to write."""

    def __init__(self) -> None:
        self.writes: list[tuple[DataFrame, int, int | None]] = []

    def write(self, df: DataFrame, batch_id: int, rows: int | None = None) -> None:
        self.writes.append((_held(df), batch_id, rows))


def _publish_staged_folders(plan: BackfillPlan, pipeline: Pipeline) -> None:
    """Move each staged batch folder into the live raw and quarantine folders.

    Each is one rename (the staging folder is on the same file system, below the data
    root), so a reader sees a batch folder whole or not at all. A retry's earlier
    folders of the same batch id are removed first, under any ingest hour.
    """
    live_root = Path(pipeline.sink.root)  # type: ignore[attr-defined]
    batch = raw_layout.batch_folder(plan.batch_id)
    # (live folders this batch replaces, staged folder -> its live place)
    replacements: list[tuple[list[Path], list[tuple[Path, Path]]]] = []
    for contract in pipeline.contracts.values():
        staged_table = raw_layout.change_log_dir(DataLayout(plan.output_root).raw, contract)
        live_table = raw_layout.change_log_dir(DataLayout(live_root).raw, contract)
        replacements.append((
            sorted(live_table.glob(f"*/{batch}")),
            [(folder, live_table / folder.parent.name / batch) for folder in sorted(staged_table.glob(f"*/{batch}"))],
        ))
    staged_quarantine = DataLayout(plan.output_root).quarantine / batch
    live_quarantine = DataLayout(Path(pipeline.quarantine.root)).quarantine / batch
    replacements.append((
        [live_quarantine] if live_quarantine.is_dir() else [],
        [(staged_quarantine, live_quarantine)] if staged_quarantine.is_dir() else [],
    ))
    for earlier, moves in replacements:
        for folder in earlier:
            shutil.rmtree(folder)
        for staged, target in moves:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staged, target)


def _run_identity(plan: BackfillPlan) -> dict[str, Any]:
    return {
        "export_dir": str(plan.manifest.export_dir.resolve()),
        "export_id": plan.manifest.export_id,
        "export_type": plan.manifest.export_type,
        "table": plan.manifest.table_name,
        "raw_tables": plan.raw_tables,
        "batch_id": plan.batch_id,
    }


def _landed_per_table(plan: BackfillPlan, report: BatchReport) -> dict[str, int]:
    return {raw_table: report.landed.get(raw_table, 0) for raw_table in plan.raw_tables}


def _check_counts(plan: BackfillPlan, report: BatchReport) -> None:
    """Every item of the export accounted for: read, and landed or quarantined."""
    items = plan.manifest.item_count
    landed = sum(_landed_per_table(plan, report).values())
    if report.records_in != items:
        raise BackfillError(f"backfill read {report.records_in} records but the export lists {items} items")
    # An export holds one line per item, so nothing collapses: each line lands in one raw
    # table or is quarantined, and a line moving its item to another entity also lands a
    # tombstone in the raw table the item left (BatchReport.moved).
    if landed + report.quarantined != items + report.moved:
        raise BackfillError(
            f"backfill of {items} items landed {landed} (moves between entities: {report.moved}) and "
            f"quarantined {report.quarantined}; an export has one line per item, so some rows were merged or lost"
        )


def _check_written_rows(plan: BackfillPlan, report: BatchReport) -> None:
    """Each staged change log holds as many rows as the batch reported landed there."""
    for raw_table, landed in _landed_per_table(plan, report).items():
        staged_table = raw_layout.change_log_dir(DataLayout(plan.output_root).raw, plan.contracts[raw_table])
        written = _parquet_rows(sorted(staged_table.glob(f"*/{raw_layout.batch_folder(plan.batch_id)}")))
        if written != landed:
            raise BackfillError(f"batch {plan.batch_id} wrote {written} rows of {raw_table}, "
                                f"but {landed} landed; nothing was published")


def _parquet_rows(folders: list[Path]) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(path).metadata.num_rows for folder in folders for path in folder.glob("*.parquet"))


def _iso(moment: datetime | None) -> str:
    return moment.isoformat() if moment is not None else "n/a"


def _size(path: Path) -> int:
    return path.stat().st_size


@dataclass(frozen=True)
class ExportBackfill:
    """`lakehouse backfill` as a one-off batch (recorded_batch.OneOffBatch): one export
    into its table's raw tables."""

    export_dir: Path
    table: str | None

    command = "backfill"
    reads_existing_data = False
    errors = (BackfillError, ExportValidationError)

    def plan(self, target: DataLayout, contracts: Mapping[str, TableContract]) -> BackfillPlan:
        try:
            return plan_backfill(self.export_dir, contracts, target.root, self.table)
        except ValueError as exc:  # ExportValidationError included
            raise BackfillError(str(exc)) from exc

    def nothing_to_do(self, plan: BackfillPlan) -> list[str]:
        """A backfill recorded as succeeded is not written again. Its batch may sit under
        later stream commits, and a change log written by inserts alone would take its rows a
        second time, so the run log, not the sink, says whether it already landed."""
        recorded = next((run for run in BACKFILLS.succeeded(plan.data_root) if run.get("batch_id") == plan.batch_id),
                        None)
        if recorded is None:
            return []
        return [
            f"backfill of export {plan.manifest.export_id} into {plan.manifest.table_name} already succeeded "
            f"(landed={recorded.get('landed')} quarantined={recorded.get('quarantined')}, "
            f"started {recorded.get('started_at')}; run log {plan.run_log}): nothing to do",
            "its rows are in raw already; to load the export again, rebuild raw with `lakehouse reprocess` "
            "(docs/operations.md)",
        ]

    def describe(self, plan: BackfillPlan) -> list[str]:
        return [f"export {plan.manifest.export_dir} is valid", *plan.describe()]

    def written_contracts(
        self, plan: BackfillPlan, contracts: Mapping[str, TableContract]
    ) -> Mapping[str, TableContract]:
        """The exported table's raw tables alone: the batch writes nothing else, and each
        other contract would only add its decode to the plan."""
        return plan.contracts

    def retry_heading(self, plan: BackfillPlan) -> str:
        return f"backfill failed (safe to retry: it rewrites batch {plan.batch_id})"

    def run(self, spark: SparkSession, plan: BackfillPlan, pipeline: Pipeline, out: Printer) -> BackfillResult:
        return run_backfill(spark, plan, pipeline, out=out)


def backfill(
    layout: DataLayout,
    export_dir: Path,
    *,
    table: str | None = None,
    dry_run: bool = False,
    sink: SinkName | None = None,
    contracts_dir: str | None = None,
    spark: SparkSession | None = None,
    out: Printer = print,
) -> BackfillResult | None:
    """`lakehouse backfill`: load a DynamoDB export into its raw tables (one, or each entity's
    and the unrouted one) as one batch; a dry run only describes it."""
    batch = ExportBackfill(export_dir, table)
    if dry_run:
        # A dry run writes nothing, so it plans without the data directory's lock.
        contracts = load_checked_contracts(contracts_dir)
        plan = batch.plan(layout.active(), contracts)
        for line in batch.nothing_to_do(plan) or batch.describe(plan):
            out(line)
        out("dry run: nothing was written")
        return None
    return one_off_batch(layout, batch, sink=sink, contracts_dir=contracts_dir, spark=spark, out=out)
