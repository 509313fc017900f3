"""Rebuild the raw tables in a new location, then switch readers to it (and back).

Reprocessing never touches the live raw tables: it replays the recorded backfills and
streams the retained landing files (available-now, with a fresh checkpoint) into a new
data root. Readers move only on `switch`:

* locally, `<data dir>/active_raw.json` names the active data root (streaming.io.layout
  reads and replaces it atomically); `stream`, `status` and dbt follow it;
* on AWS, `switch_glue_table` points the Glue table (and its partitions) at the new
  S3 prefix, keeping the previous one in the table parameters for a rollback.
"""
from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streaming.atomic_files import write_json_atomically
from streaming.errors import OperatorError
from streaming.io.dynamodb_export import ExportValidationError
from streaming.io.layout import (
    POINTER_FILE,
    RAW_DIR_ENV,
    REPROCESS_MARKER,
    ActiveRaw,
    DataLayout,
    change_log_dir,
    read_pointer,
    uri,
    write_pointer,
)
from streaming.io.sinks import SinkName
from streaming.io.sources import local_landing_files
from streaming.operations.batches.backfill import BackfillError, plan_backfill, run_backfill
from streaming.operations.batches.quarantine_replay import repeat_replays
from streaming.operations.batches.recorded_batch import BACKFILLS, QUARANTINE_REPLAYS
from streaming.operations.status import StatusReport, status
from streaming.runtime.data_lock import hold_data_dir
from streaming.runtime.spark_session import session_for
from streaming.runtime.startup import LandingFiles, StreamOptions, load_checked_contracts, start_stream
from streaming.runtime.stream_identity import record_table_batches
from streaming.runtime.stream_loop import refusal_of

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streaming.contracts.model import TableContract
    from streaming.pipeline.batch import Pipeline

log = logging.getLogger(__name__)

Printer = Callable[[str], None]

# Glue table parameter holding the location before the last switch (for --rollback).
PREVIOUS_LOCATION_PARAMETER = "lakehouse.previous_location"
# The fields of GetTable's Table that TableInput accepts (UpdateTable rejects the others).
_TABLE_INPUT_FIELDS = (
    "Name", "Description", "Owner", "LastAccessTime", "LastAnalyzedTime", "Retention", "StorageDescriptor",
    "PartitionKeys", "ViewOriginalText", "ViewExpandedText", "TableType", "Parameters", "TargetTable",
    "ViewDefinition",
)
_PARTITION_INPUT_FIELDS = ("Values", "LastAccessTime", "StorageDescriptor", "Parameters", "LastAnalyzedTime")
_BATCH_UPDATE_PARTITION_LIMIT = 100


class SwitchError(OperatorError):
    """The switch (or rollback) cannot be made; nothing was changed."""


# --------------------------------------------------------------------------- local pointer


def switch_local(data_dir: Path, to: Path, contracts: Mapping[str, TableContract]) -> ActiveRaw:
    """Point readers of `data_dir` at the data root `to`; the current one becomes `previous`.

    `to` must be a finished `lakehouse reprocess` of this data directory (or the data
    directory itself): any other folder holding raw tables may hold anything, and
    readers would follow it without a check.
    """
    current = read_pointer(data_dir)
    target = to.resolve()
    if target == current.data_root.resolve():
        raise SwitchError(f"{target} is already the active data root")
    if target != data_dir.resolve():
        _require_finished_reprocess(data_dir, target)
    missing = [c.changes_table for c in contracts.values() if not (DataLayout(target).raw / c.changes_table).is_dir()]
    if missing:
        raise SwitchError(f"{DataLayout(target).raw} has no table(s) {missing}; reprocess into it before switching")
    return write_pointer(data_dir, target, current.data_root.resolve())


def _require_finished_reprocess(data_dir: Path, target: Path) -> None:
    marker = DataLayout(target).reprocess_marker
    if not marker.is_file():
        raise SwitchError(
            f"{target} was not made by `lakehouse reprocess` (it has no {REPROCESS_MARKER}); readers switch only "
            f"to a rebuilt copy: run `lakehouse reprocess --to <new folder>` and switch to that folder"
        )
    try:
        made = json.loads(marker.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SwitchError(f"{marker} is not valid JSON ({exc}); reprocess into a new folder") from exc
    if made.get("from_data_dir") != str(data_dir.resolve()):
        raise SwitchError(
            f"{target} is a reprocess of data directory {made.get('from_data_dir')}, not of {data_dir.resolve()}; "
            f"run `lakehouse reprocess --data-dir {data_dir} --to <new folder>`"
        )
    if not made.get("finished_at"):
        raise SwitchError(
            f"the reprocess into {target} has not finished; run the same `lakehouse reprocess --to {target}` "
            "again (it resumes), then switch"
        )


def rollback_local(data_dir: Path) -> ActiveRaw:
    """Point readers back at the data root active before the last switch."""
    current = read_pointer(data_dir)
    if current.previous is None:
        raise SwitchError(f"{data_dir / POINTER_FILE}: no earlier switch to roll back")
    return write_pointer(data_dir, current.previous, current.data_root)


# --------------------------------------------------------------------------- reprocess


@dataclass(frozen=True)
class ReprocessPlan:
    data_dir: Path
    landing: Path
    landing_files: tuple[Path, ...]
    backfills: tuple[Mapping[str, Any], ...]
    target: Path

    @property
    def checkpoint(self) -> Path:
        return DataLayout(self.target).checkpoint()

    def describe(self) -> list[str]:
        size = sum(path.stat().st_size for path in self.landing_files)
        live = read_pointer(self.data_dir).data_root
        lines = [f"read  {len(self.landing_files)} landing files ({size} bytes) under {self.landing}"]
        lines += [f"      backfill {run['export_id']} of {run['table']} from {run['export_dir']}"
                  for run in self.backfills]
        replays = QUARANTINE_REPLAYS.succeeded(live)
        if replays:
            lines.append(f"      then repeat {len(replays)} quarantine replay(s) on what the new root quarantines")
        lines += [
            f"write raw tables under {DataLayout(self.target).raw}",
            f"      quarantine {DataLayout(self.target).quarantine}, checkpoint {self.checkpoint} (fresh)",
            f"live  {DataLayout(live).raw} stays untouched; `lakehouse switch --to {self.target}` moves readers",
        ]
        return lines


def plan_reprocess(data_dir: Path, to: Path, from_landing: Path | None = None) -> ReprocessPlan:
    """Check that `to` is a new (or an interrupted reprocess's) location, away from the live data."""
    landing = (from_landing or DataLayout(data_dir).landing).resolve()
    files = tuple(local_landing_files(landing))
    if not files:
        raise SwitchError(f"no landing files under {landing} to reprocess")
    target = to.resolve()
    live = read_pointer(data_dir).data_root.resolve()
    protected_folders = ((live, "the live data root"), (data_dir.resolve(), "the data directory"),
                         (landing, "the landing folder"))
    for protected, what in protected_folders:
        if target == protected or protected.is_relative_to(target):
            raise SwitchError(f"--to {target} would write over {what} {protected}; choose a new location")
        # Inside: the rebuild would sit among the live folders (the stream reading its
        # own output, `demo` clearing it); it belongs beside them.
        if target.is_relative_to(protected):
            raise SwitchError(
                f"--to {target} is inside {what} {protected}; choose a location outside it, "
                f"e.g. {protected.parent / (protected.name + '-reprocessed')}"
            )
    if target.exists() and not target.is_dir():
        raise SwitchError(f"--to {target} is not a folder; choose a new location")
    if target.exists() and not os.access(target, os.R_OK | os.W_OK | os.X_OK):
        raise SwitchError(f"--to {target} cannot be read or written (permission denied); choose a new location")
    marker = DataLayout(target).reprocess_marker
    if target.exists() and any(target.iterdir()) and not marker.is_file():
        raise SwitchError(f"{target} exists and was not made by `lakehouse reprocess`; choose a new location")
    if marker.is_file():
        earlier = json.loads(marker.read_text(encoding="utf-8"))
        if earlier.get("landing") != str(landing):
            raise SwitchError(
                f"{target} is a reprocess of {earlier.get('landing')}, not of {landing}; choose a new location"
            )
    backfills = tuple(BACKFILLS.succeeded(live))
    gone = [run["export_dir"] for run in backfills if not Path(run["export_dir"]).is_dir()]
    if gone:
        raise SwitchError(f"the live tables were backfilled from exports that are gone: {gone}; "
                          "restore them (or re-export) before reprocessing")
    return ReprocessPlan(data_dir, landing, files, backfills, target)


def run_reprocess(
    spark: SparkSession,
    plan: ReprocessPlan,
    contracts: Mapping[str, TableContract],
    options: StreamOptions,
    *,
    out: Printer = print,
) -> float:
    """Replay the backfills, stream the landing files into `plan.target`, then repeat the
    recorded quarantine replays (`streaming.operations.batches.quarantine_replay`); returns seconds.

    The start-up is the stream's (streaming.runtime.startup.start_stream), on the target,
    with the backfills written through its pipeline before the stream starts; its stream
    identity is claimed once the target is marked as this reprocess's. Safe to retry: the
    backfills overwrite their own batch folders, and the stream resumes from the target's
    checkpoint.
    """
    started = time.monotonic()
    target = DataLayout(plan.target)
    marker = {"landing": str(plan.landing), "from_data_dir": str(plan.data_dir.resolve()),
              "started_at": datetime.now(timezone.utc).isoformat()}
    write_json_atomically(target.reprocess_marker, marker)

    def replay_backfills(pipeline: Pipeline) -> None:
        for number, run in enumerate(plan.backfills, start=1):
            out(f"[backfill {number}/{len(plan.backfills)}] {run['export_id']} ({run['table']})")
            backfill = plan_backfill(run["export_dir"], contracts, plan.target, run["table"])
            run_backfill(spark, backfill, pipeline, out=out)
        out(f"{len(plan.landing_files)} landing files into {target.raw} (available-now)")

    stream = start_stream(spark, LandingFiles(target, plan.landing, options), contracts, out,
                          before_stream=replay_backfills)
    record_table_batches(plan.target, contracts)
    # After the stream: a replay repeats only what the new root quarantined as well.
    read_by_target = [*plan.landing_files, *(Path(run["export_dir"]) for run in plan.backfills)]
    repeat_replays(spark, read_pointer(plan.data_dir).data_root, plan.target, stream.pipeline.contracts,
                   stream.pipeline.sink, read_by_target, out=out)
    # A table without rows has no change-log folder, and `switch` accepts only a root
    # with every contracted table: an empty folder says the rebuild found none.
    for contract in contracts.values():
        change_log_dir(target.raw, contract).mkdir(parents=True, exist_ok=True)
    # `switch` accepts only a finished reprocess.
    marker["finished_at"] = datetime.now(timezone.utc).isoformat()
    write_json_atomically(target.reprocess_marker, marker)
    seconds = time.monotonic() - started
    log.info("reprocess of %s into %s finished in %.1fs", plan.landing, plan.target, seconds)
    return seconds


def reprocess(
    layout: DataLayout,
    to: Path,
    *,
    from_landing: Path | None = None,
    sink: SinkName | None = None,
    max_files_per_trigger: int | None = None,
    max_bytes_per_trigger: int | None = None,
    contracts_dir: str | None = None,
    dry_run: bool = False,
    spark: SparkSession | None = None,
    out: Printer = print,
) -> StatusReport | None:
    """`lakehouse reprocess`: rebuild every raw table under `to` (backfills, then landing
    files); the live tables stay as they are."""
    from pyspark.errors import StreamingQueryException

    contracts = load_checked_contracts(contracts_dir)
    plan = plan_reprocess(layout.root, to, from_landing)
    if dry_run:
        for line in plan.describe():
            out(line)
        out("dry run: nothing was written")
        return None
    # Named apart from a running stream's query; the checkpoint folder is the stream's.
    options = StreamOptions(sink=sink, max_files_per_trigger=max_files_per_trigger,
                            max_bytes_per_trigger=max_bytes_per_trigger, query_name="reprocess")
    with hold_data_dir(layout.root, "reprocess", report=out):
        # Printed once the lock is held, so that a refused reprocess shows no plan as if it ran.
        for line in plan.describe():
            out(line)
        with session_for(spark, out) as session:
            try:
                seconds = run_reprocess(session, plan, contracts, options, out=out)
            except (StreamingQueryException, BackfillError, ExportValidationError) as exc:
                refusal = refusal_of(options.query_name) if isinstance(exc, StreamingQueryException) else None
                raise OperatorError(
                    f"reprocess stopped (run it again to resume from its checkpoint): {refusal or exc}"
                ) from exc
    rebuilt = status(DataLayout(plan.target), contracts_dir=contracts_dir)
    for line in rebuilt.lines():
        out(line)
    out(f"reprocess finished in {seconds:.1f}s; check it with "
        f"`lakehouse reconcile --source {read_pointer(layout.root).raw_dir} --target {DataLayout(plan.target).raw}`, "
        f"then `lakehouse switch --to {plan.target}`")
    return rebuilt


def switch(
    layout: DataLayout,
    to: str | None,
    *,
    rollback: bool = False,
    glue_database: str | None = None,
    table: str | None = None,
    contracts_dir: str | None = None,
    glue_client: object | None = None,
    out: Printer = print,
) -> None:
    """`lakehouse switch`: point readers at another raw location (the local pointer, or
    Glue table locations), or roll back."""
    if rollback == (to is not None):
        raise SwitchError("give either --to <location> or --rollback")
    contracts = load_checked_contracts(contracts_dir)
    if table is not None:
        # A DynamoDB table names all of its raw tables (a single-table design's entities too).
        contracts = {name: c for name, c in contracts.items() if table in (name, c.table)}
        if not contracts:
            raise SwitchError(f"no table contract named {table!r}")
    if glue_database is None:
        with hold_data_dir(layout.root, "switch", report=out):
            active = rollback_local(layout.root) if rollback else switch_local(layout.root, Path(to or ""), contracts)
        out(f"active data root: {active.data_root} (previous: {active.previous})")
        out(f"dbt reads it with: export {RAW_DIR_ENV}={active.raw_dir}")
        return
    glue = glue_client or _glue_client()
    for contract in contracts.values():
        if rollback:
            moved = rollback_glue_table(glue, glue_database, contract.raw_table)
        else:
            moved = switch_glue_table(glue, glue_database, contract.raw_table,
                                      uri(to or "", contract.raw_table))
        out(f"glue {moved.database}.{moved.table}: {moved.previous_location} -> {moved.location} "
            f"({moved.partitions_moved} partitions)")


def _glue_client() -> object:
    import boto3

    # Region and credentials come from the standard chain (env, profile, instance role).
    return boto3.client("glue")


# --------------------------------------------------------------------------- Glue Catalog


@dataclass(frozen=True)
class GlueSwitch:
    database: str
    table: str
    previous_location: str
    location: str
    partitions_moved: int


def switch_glue_table(glue: Any, database: str, table: str, location: str) -> GlueSwitch:
    """Point a Glue table and its partitions at `location`, keeping the old one for rollback.

    Partition locations below the old table location move to the same relative place
    below the new one; a Spark datasource `path` serde parameter moves with them.
    """
    current = glue.get_table(DatabaseName=database, Name=table)["Table"]
    old_location = current.get("StorageDescriptor", {}).get("Location", "")
    if not old_location:
        raise SwitchError(f"glue table {database}.{table} has no StorageDescriptor.Location")
    if old_location.rstrip("/") == location.rstrip("/"):
        raise SwitchError(f"glue table {database}.{table} already points at {location}")
    table_input = {name: current[name] for name in _TABLE_INPUT_FIELDS if name in current}
    table_input["StorageDescriptor"] = _relocated(current["StorageDescriptor"], old_location, location)
    table_input["Parameters"] = {**current.get("Parameters", {}), PREVIOUS_LOCATION_PARAMETER: old_location}
    moved = _relocate_partitions(glue, database, table, old_location, location)
    glue.update_table(DatabaseName=database, TableInput=table_input)
    log.info("glue %s.%s: %s -> %s (%d partitions)", database, table, old_location, location, moved)
    return GlueSwitch(database, table, old_location, location, moved)


def rollback_glue_table(glue: Any, database: str, table: str) -> GlueSwitch:
    """Switch a Glue table back to the location it had before the last switch."""
    parameters = glue.get_table(DatabaseName=database, Name=table)["Table"].get("Parameters", {})
    previous = parameters.get(PREVIOUS_LOCATION_PARAMETER)
    if not previous:
        raise SwitchError(f"glue table {database}.{table} has no {PREVIOUS_LOCATION_PARAMETER}: nothing to roll back")
    return switch_glue_table(glue, database, table, previous)


def _relocated(descriptor: Mapping[str, Any], old: str, new: str) -> dict[str, Any]:
    moved = dict(descriptor)
    moved["Location"] = _moved_path(descriptor["Location"], old, new)
    serde = descriptor.get("SerdeInfo")
    if serde and "path" in serde.get("Parameters", {}):
        moved["SerdeInfo"] = {**serde, "Parameters": {**serde["Parameters"],
                                                       "path": _moved_path(serde["Parameters"]["path"], old, new)}}
    return moved


def _moved_path(path: str, old: str, new: str) -> str:
    old_prefix, new_prefix = old.rstrip("/"), new.rstrip("/")
    if path.rstrip("/") == old_prefix:
        return new_prefix if not path.endswith("/") else new_prefix + "/"
    if path.startswith(old_prefix + "/"):
        return new_prefix + path[len(old_prefix):]
    return path  # a partition kept elsewhere on purpose stays where it is


def _relocate_partitions(glue: Any, database: str, table: str, old: str, new: str) -> int:
    entries = []
    for partition in _partitions(glue, database, table):
        descriptor = partition.get("StorageDescriptor", {})
        if _moved_path(descriptor.get("Location", ""), old, new) == descriptor.get("Location", ""):
            continue
        partition_input = {name: partition[name] for name in _PARTITION_INPUT_FIELDS if name in partition}
        partition_input["StorageDescriptor"] = _relocated(descriptor, old, new)
        entries.append({"PartitionValueList": partition["Values"], "PartitionInput": partition_input})
    for chunk in _chunks(entries, _BATCH_UPDATE_PARTITION_LIMIT):
        response = glue.batch_update_partition(DatabaseName=database, TableName=table, Entries=chunk)
        if response.get("Errors"):
            raise SwitchError(f"glue {database}.{table}: partitions not moved: {response['Errors'][:3]}")
    return len(entries)


def _partitions(glue: Any, database: str, table: str) -> Iterator[Mapping[str, Any]]:
    for page in glue.get_paginator("get_partitions").paginate(DatabaseName=database, TableName=table):
        yield from page.get("Partitions", [])


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]
