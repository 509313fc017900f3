"""`lakehouse switch`: point readers at a rebuilt raw location, or back.

* Locally, `<data dir>/active_raw.json` names the active data root (streaming.io.layout
  reads and replaces it atomically); `stream`, `status` and dbt follow it. The target must
  be a finished `lakehouse reprocess` of the data directory (reprocess.py).
* On AWS, `switch_glue_table` points the Glue table (and its partitions) at the new S3
  prefix, keeping the previous one in the table parameters for a rollback.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streaming.errors import OperatorError
from streaming.io import layout as raw_layout
from streaming.io.layout import ActiveRaw, DataLayout, read_pointer, write_pointer
from streaming.runtime.data_lock import hold_data_dir
from streaming.runtime.startup import load_checked_contracts

if TYPE_CHECKING:
    from streaming.contracts.model import TableContract

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
            f"{target} was not made by `lakehouse reprocess` (it has no {raw_layout.REPROCESS_MARKER}); readers "
            f"switch only to a rebuilt copy: run `lakehouse reprocess --to <new folder>` and switch to that folder"
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
        raise SwitchError(f"{data_dir / raw_layout.POINTER_FILE}: no earlier switch to roll back")
    return write_pointer(data_dir, current.previous, current.data_root)


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
        out(f"dbt reads it with: export {raw_layout.RAW_DIR_ENV}={active.raw_dir}")
        return
    glue = glue_client or _glue_client()
    for contract in contracts.values():
        if rollback:
            moved = rollback_glue_table(glue, glue_database, contract.raw_table)
        else:
            moved = switch_glue_table(glue, glue_database, contract.raw_table,
                                      raw_layout.uri(to or "", contract.raw_table))
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
