"""Rebuild the raw tables in a new location, then switch readers to it (and back).

Reprocessing never touches the live raw tables: it replays the recorded backfills and
streams the retained landing files (available-now, with a fresh checkpoint) into a new
data root. Readers move only on `switch`:

* locally, `<data dir>/active_raw.json` names the active data root; it is replaced
  atomically (temp file + `os.replace`). `stream` and `status` follow it, and
  `dbt_env` hands dbt the raw folder as `LAKEHOUSE_RAW_DIR`;
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

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streaming.contract import TableContract
    from streaming.pipeline import Pipeline

log = logging.getLogger(__name__)

Printer = Callable[[str], None]

POINTER_FILE = "active_raw.json"
RAW_DIR_ENV = "LAKEHOUSE_RAW_DIR"
REPROCESS_MARKER = "reprocess.json"
REPROCESS_QUERY = "landing_to_raw"
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


class SwitchError(RuntimeError):
    """The switch (or rollback) cannot be made; nothing was changed."""


# --------------------------------------------------------------------------- local pointer


@dataclass(frozen=True)
class ActiveRaw:
    """Which data root readers use; `previous` is where `rollback` goes."""

    data_root: Path
    previous: Path | None
    switched_at: str | None

    @property
    def raw_dir(self) -> Path:
        return self.data_root / "raw"


def read_pointer(data_dir: Path) -> ActiveRaw:
    """The active data root of `data_dir`: the pointer's target, or `data_dir` itself."""
    path = data_dir / POINTER_FILE
    if not path.is_file():
        return ActiveRaw(data_dir, None, None)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        previous = document.get("previous")
        return ActiveRaw(Path(document["data_root"]), Path(previous) if previous else None, document.get("switched_at"))
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise SwitchError(f"{path} is not a valid raw pointer ({exc}); fix or delete it") from exc


def dbt_env(data_dir: Path) -> dict[str, str]:
    """Environment for `lakehouse_dbt.runner.run_dbt(extra_env=...)`: the active raw folder."""
    return {RAW_DIR_ENV: str(read_pointer(data_dir).raw_dir.resolve())}


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
    missing = [c.changes_table for c in contracts.values() if not (target / "raw" / c.changes_table).is_dir()]
    if missing:
        raise SwitchError(f"{target}/raw has no table(s) {missing}; reprocess into it before switching")
    return _write_pointer(data_dir, target, current.data_root.resolve())


def _require_finished_reprocess(data_dir: Path, target: Path) -> None:
    marker = target / REPROCESS_MARKER
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
    return _write_pointer(data_dir, current.previous, current.data_root)


def _write_pointer(data_dir: Path, target: Path, previous: Path) -> ActiveRaw:
    switched_at = datetime.now(timezone.utc).isoformat()
    document = {"data_root": str(target), "raw_dir": str(target / "raw"), "previous": str(previous),
                "switched_at": switched_at}
    data_dir.mkdir(parents=True, exist_ok=True)
    temporary = data_dir / f".{POINTER_FILE}.tmp"
    temporary.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    os.replace(temporary, data_dir / POINTER_FILE)
    log.info("switched raw readers of %s to %s (previous %s)", data_dir, target, previous)
    return ActiveRaw(target, previous, switched_at)


# --------------------------------------------------------------------------- reprocess


@dataclass(frozen=True)
class ReprocessPlan:
    data_dir: Path
    landing: Path
    target: Path
    landing_files: tuple[Path, ...]
    backfills: tuple[Mapping[str, Any], ...]

    @property
    def checkpoint(self) -> Path:
        return self.target / "checkpoints" / REPROCESS_QUERY

    def describe(self) -> list[str]:
        from streaming.operations.quarantine import replay_runs

        size = sum(path.stat().st_size for path in self.landing_files)
        live = read_pointer(self.data_dir).data_root
        lines = [f"read  {len(self.landing_files)} landing files ({size} bytes) under {self.landing}"]
        lines += [f"      backfill {run['export_id']} of {run['table']} from {run['export_dir']}"
                  for run in self.backfills]
        replays = [run for run in replay_runs(live) if run["status"] == "succeeded"]
        if replays:
            lines.append(f"      then repeat {len(replays)} quarantine replay(s) on what the new root quarantines")
        lines += [
            f"write raw tables under {self.target / 'raw'}",
            f"      quarantine {self.target / 'quarantine'}, checkpoint {self.checkpoint} (fresh)",
            f"live  {live / 'raw'} stays untouched; `lakehouse switch --to {self.target}` moves readers",
        ]
        return lines


def plan_reprocess(data_dir: Path, to: Path, from_landing: Path | None = None) -> ReprocessPlan:
    """Check that `to` is a new (or an interrupted reprocess's) location, away from the live data."""
    from streaming.operations.backfill import recorded_backfills

    landing = (from_landing or data_dir / "landing").resolve()
    from streaming.sources import local_landing_files

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
    marker = target / REPROCESS_MARKER
    if target.exists() and any(target.iterdir()) and not marker.is_file():
        raise SwitchError(f"{target} exists and was not made by `lakehouse reprocess`; choose a new location")
    if marker.is_file():
        earlier = json.loads(marker.read_text(encoding="utf-8"))
        if earlier.get("landing") != str(landing):
            raise SwitchError(
                f"{target} is a reprocess of {earlier.get('landing')}, not of {landing}; choose a new location"
            )
    backfills = tuple(recorded_backfills(live))
    gone = [run["export_dir"] for run in backfills if not Path(run["export_dir"]).is_dir()]
    if gone:
        raise SwitchError(f"the live tables were backfilled from exports that are gone: {gone}; "
                          "restore them (or re-export) before reprocessing")
    return ReprocessPlan(data_dir, landing, target, files, backfills)


def run_reprocess(
    spark: SparkSession,
    plan: ReprocessPlan,
    make_pipeline: Callable[[str], Pipeline],
    contracts: Mapping[str, TableContract],
    *,
    out: Printer = print,
) -> float:
    """Replay the backfills, stream the landing files into `plan.target`, then repeat the
    recorded quarantine replays (`streaming.operations.quarantine`); returns seconds.

    `make_pipeline(stream_id)` builds the pipeline writing into `plan.target`, once the
    target is marked as this reprocess's and its stream identity is claimed. Safe to
    retry: the backfills overwrite their own batch folders, and the stream resumes from
    the target's checkpoint.
    """
    from streaming.operations.backfill import plan_backfill, run_backfill
    from streaming.operations.quarantine import repeat_replays
    from streaming.runner import run_stream
    from streaming.sources import landing_files_stream
    from streaming.stream_identity import claim_stream_identity

    started = time.monotonic()
    plan.target.mkdir(parents=True, exist_ok=True)
    marker = {"landing": str(plan.landing), "from_data_dir": str(plan.data_dir.resolve()),
              "started_at": datetime.now(timezone.utc).isoformat()}
    (plan.target / REPROCESS_MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
    pipeline = make_pipeline(claim_stream_identity(plan.target, plan.checkpoint, plan.landing, contracts))
    for number, run in enumerate(plan.backfills, start=1):
        out(f"[backfill {number}/{len(plan.backfills)}] {run['export_id']} ({run['table']})")
        backfill = plan_backfill(run["export_dir"], contracts, plan.target, run["table"])
        run_backfill(spark, backfill, pipeline, out=out)
    out(f"streaming {len(plan.landing_files)} landing files into {plan.target / 'raw'} (available-now) ...")
    from streaming.landing_ledger import LEDGER_DIR_NAME

    source = landing_files_stream(spark, str(plan.landing), ledger_dir=str(plan.target / "raw" / LEDGER_DIR_NAME))
    run_stream(spark, pipeline, source, checkpoint_dir=str(plan.checkpoint), trigger="available-now",
               query_name="reprocess")
    # After the stream: a replay repeats only what the new root quarantined as well.
    read_by_target = [*plan.landing_files, *(Path(run["export_dir"]) for run in plan.backfills)]
    repeat_replays(spark, read_pointer(plan.data_dir).data_root, plan.target, pipeline.contracts, pipeline.sink,
                   read_by_target, out=out)
    # `switch` accepts only a finished reprocess.
    marker["finished_at"] = datetime.now(timezone.utc).isoformat()
    (plan.target / REPROCESS_MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
    seconds = time.monotonic() - started
    log.info("reprocess of %s into %s finished in %.1fs", plan.landing, plan.target, seconds)
    return seconds


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
    below the new one; a Spark/Hudi datasource `path` serde parameter moves with them.
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
