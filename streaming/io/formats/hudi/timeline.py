"""A Hudi table's timeline, read as files: the completed commits, their metadata, and
what the newest ones say (the batch marker and the writer schema).

Table version 6 (the raw tables' version) keeps each completed instant as
`.hoodie/<instant time>.<action>`, JSON-serialised HoodieCommitMetadata. No Spark: the
sink reads through Hadoop's FileSystem (`streaming.io.storage.HadoopFiles`, local or
S3), while `lakehouse status`, the demo and the tests read local tables with
`LocalFiles`.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from streaming.contracts.model import MAX_NESTING_DEPTH
from streaming.io.formats.hudi.options import ATHENA_TABLE_VERSION, BATCH_MARKER_KEY, BUCKETS_RECORD_KEY
from streaming.io.layout import HUDI_TIMELINE_FOLDER

# Completed instants of a table version 6 timeline: `.hoodie/<instant time>.<action>`,
# JSON-serialised HoodieCommitMetadata. Requested and inflight instants carry a further
# suffix (`.commit.requested`, `.inflight`) and are not commits yet. Version 8 moved the
# timeline to `.hoodie/timeline/` with Avro files, which this reader refuses.
_COMPLETED_INSTANT = re.compile(r"^(?P<instant>\d+)\.(?P<action>commit|deltacommit|replacecommit)$")


class HudiTimelineError(RuntimeError):
    """A table's timeline cannot be read the way the replay check needs."""


class TableFiles(Protocol):
    """The few file operations the timeline reader needs (Hadoop FileSystem on the JVM)."""

    def exists(self, path: str) -> bool: ...

    def list_names(self, folder: str) -> list[str]: ...

    def read_text(self, path: str) -> str: ...


def _table_version(files: TableFiles, table_path: str) -> str | None:
    properties = files.read_text(f"{table_path}/{HUDI_TIMELINE_FOLDER}/hoodie.properties")
    for line in properties.splitlines():
        key, separator, value = line.partition("=")
        if separator and key.strip() == "hoodie.table.version":
            return value.strip()
    return None


def completed_instants(files: TableFiles, table_path: str) -> list[str]:
    """File names of the completed commits in the table's active timeline, oldest first.

    A table that does not exist yet has none. Only table version 6 is read: it is the
    layout the raw tables are pinned to, and anything else fails loudly instead of
    passing for an empty timeline.
    """
    table_path = table_path.rstrip("/")
    if not files.exists(f"{table_path}/{HUDI_TIMELINE_FOLDER}/hoodie.properties"):
        return []
    version = _table_version(files, table_path)
    matches = (_COMPLETED_INSTANT.match(name) for name in files.list_names(f"{table_path}/{HUDI_TIMELINE_FOLDER}"))
    completed = [match.string for match in sorted((m for m in matches if m), key=lambda m: m["instant"])]
    if version is None and not completed:
        # Hudi creates hoodie.properties and then writes it (HoodieTableConfig.create), so a
        # reader may find it without its keys while the table's first write creates it.
        return []
    if version != ATHENA_TABLE_VERSION:
        raise HudiTimelineError(
            f"{table_path}: hoodie.table.version is {version}, but the raw tables are written as version "
            f"{ATHENA_TABLE_VERSION}; this reader knows only the version {ATHENA_TABLE_VERSION} timeline layout"
        )
    return completed


def commit_metadata(files: TableFiles, table_path: str, instant_file: str) -> dict:
    """One completed commit's HoodieCommitMetadata (JSON in table version 6)."""
    path = f"{table_path.rstrip('/')}/{HUDI_TIMELINE_FOLDER}/{instant_file}"
    text = files.read_text(path)
    try:
        metadata = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise HudiTimelineError(f"{path}: not JSON commit metadata: {exc}") from exc
    if not isinstance(metadata, dict):
        raise HudiTimelineError(f"{path}: commit metadata is not a JSON object")
    return metadata


@dataclass(frozen=True)
class TimelineHead:
    """What the newest commits say about a table."""

    batch_marker: str | None
    """`<stream_id>:<batch_id>` of the newest commit that records one."""
    columns: tuple[str, ...] | None
    """Top-level columns of the newest commit's writer schema, in the table's order."""
    too_deep: frozenset[str] = frozenset()
    """Those of them nesting more records and arrays than MAX_NESTING_DEPTH: hudi-rs cannot
    read the table while its schema holds one (written before contracts were held to it)."""
    committed: bool = False
    """Whether the table has a completed commit at all."""
    buckets_per_partition: int | None = None
    """The bucket count the newest commit read records (options.BUCKETS_RECORD_KEY)."""
    newest_file_ids: tuple[str, ...] = ()
    """The file groups the newest commit wrote (its write stats' fileId)."""


def read_timeline_head(files: TableFiles, table_path: str) -> TimelineHead:
    """The newest batch marker and column order, read newest commit first.

    Commits without a marker (table services, manual maintenance) are passed over for
    the marker. A steady stream costs one listing and one small read per write.
    """
    marker: str | None = None
    fields: list[dict[str, Any]] | None = None
    buckets: int | None = None
    newest_file_ids: tuple[str, ...] = ()
    instants = completed_instants(files, table_path)
    for instant_file in reversed(instants):
        metadata = commit_metadata(files, table_path, instant_file)
        extra = metadata.get("extraMetadata") or {}
        if instant_file == instants[-1]:
            newest_file_ids = tuple(
                str(stat["fileId"]) for stats in (metadata.get("partitionToWriteStats") or {}).values()
                for stat in stats if stat.get("fileId"))
        if marker is None:
            marker = batch_marker_of(metadata)
        if buckets is None and extra.get(BUCKETS_RECORD_KEY):
            buckets = int(extra[BUCKETS_RECORD_KEY])
        if fields is None and extra.get("schema"):
            fields = _schema_fields(extra["schema"], f"{table_path}/{HUDI_TIMELINE_FOLDER}/{instant_file}")
        if marker is not None and fields is not None:
            break
    known = dict(committed=bool(instants), buckets_per_partition=buckets, newest_file_ids=newest_file_ids)
    if fields is None:
        return TimelineHead(marker, None, **known)
    too_deep = frozenset(field["name"] for field in fields if _avro_depth(field["type"]) > MAX_NESTING_DEPTH)
    return TimelineHead(marker, tuple(field["name"] for field in fields), too_deep, **known)


def holds_batch_marker(files: TableFiles, table_path: str, marker: str) -> bool:
    """Whether any completed commit of the active timeline records `marker`, newest first.

    For one-off batches (backfills and replays), which later stream commits may follow
    before a retry; a steady stream needs only the head (`read_timeline_head`).
    """
    return any(
        batch_marker_of(commit_metadata(files, table_path, instant_file)) == marker
        for instant_file in reversed(completed_instants(files, table_path))
    )


def batch_marker_of(metadata: dict) -> str | None:
    """The `<stream_id>:<batch_id>` a commit's extraMetadata records, if any."""
    marker = (metadata.get("extraMetadata") or {}).get(BATCH_MARKER_KEY)
    return None if marker is None else str(marker)


def _schema_fields(avro_schema: str, source: str) -> list[dict[str, Any]]:
    try:
        return [{"name": field["name"], "type": field.get("type")} for field in json.loads(avro_schema)["fields"]]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise HudiTimelineError(f"{source}: extraMetadata.schema is not an Avro record schema: {exc}") from exc


def _avro_depth(schema: Any) -> int:
    """Records, arrays and maps on the way to the deepest value of an Avro type; a union
    (Spark's nullable) counts its deepest branch."""
    if isinstance(schema, list):
        return max((_avro_depth(branch) for branch in schema), default=0)
    if not isinstance(schema, dict):
        return 0
    kind = schema.get("type")
    if kind == "record":
        return 1 + max((_avro_depth(field["type"]) for field in schema.get("fields", [])), default=0)
    if kind == "array":
        return 1 + _avro_depth(schema.get("items"))
    if kind == "map":
        return 1 + _avro_depth(schema.get("values"))
    return _avro_depth(kind)


@dataclass(frozen=True)
class HudiCommit:
    """One completed commit as an operator reads it: when, what, how many rows, which batch."""

    instant: str
    action: str
    operation: str | None
    """Hudi's WriteOperationType: INSERT, UPSERT, ..."""
    inserted: int
    updated: int
    deleted: int
    files_written: int
    batch_marker: str | None


def table_commits(files: TableFiles, table_path: str) -> list[HudiCommit]:
    """Every completed commit of the active timeline, oldest first, with the rows it wrote
    (the sums of its write stats) and the micro-batch it holds."""
    commits = []
    for instant_file in completed_instants(files, table_path):
        metadata = commit_metadata(files, table_path, instant_file)
        stats = [stat for partition in (metadata.get("partitionToWriteStats") or {}).values() for stat in partition]
        instant, action = instant_file.split(".", 1)
        commits.append(HudiCommit(
            instant=instant, action=action, operation=metadata.get("operationType"),
            inserted=sum(int(stat.get("numInserts") or 0) for stat in stats),
            updated=sum(int(stat.get("numUpdateWrites") or 0) for stat in stats),
            deleted=sum(int(stat.get("numDeletes") or 0) for stat in stats),
            files_written=len(stats), batch_marker=batch_marker_of(metadata),
        ))
    return commits


class LocalFiles:
    """TableFiles over the local file system."""

    def exists(self, path: str) -> bool:
        return Path(path).exists()

    def list_names(self, folder: str) -> list[str]:
        return [entry.name for entry in Path(folder).iterdir()]

    def read_text(self, path: str) -> str:
        return Path(path).read_text(encoding="utf-8")
