"""Production raw sink: per DynamoDB table a Hudi change log and a Hudi current-state table.

Each micro-batch of one table lands twice: every distinct change is inserted into
`<raw_table>_changes` (append-only, partitioned by ingest hour), and the winner per key
(`streaming.pipeline.ordering.latest_per_key`) is upserted into `<raw_table>`.

Replays: a micro-batch that Spark runs again after a crash must not insert its changes
twice. Every commit records `<stream_id>:<batch_id>` in its extraMetadata; before
writing, the sink reads the newest commit of the table's timeline and skips the write
when it already holds this batch. Batches of one stream commit in order and one writer
owns a table, so the only batch that can be replayed is the one committed last.

Schema: the same newest commit holds the table's writer schema; the batch's columns are
put in the table's order with new contract columns at the end, the only place Hudi's
schema evolution on write accepts them.
"""
from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pyspark.sql import DataFrame, SparkSession

from streaming.contracts.model import raw_schema
from streaming.io.hudi_options import (
    ATHENA_TABLE_VERSION,
    BATCH_MARKER_KEY,
    DEFAULT_COMMIT_INTERVAL_SECONDS,
    DEFAULT_RETAIN_HOURS,
    DEFAULT_SYNC_MODE,
    SyncMode,
    batch_marker,
    batch_marker_options,
    change_log_write_options,
    current_state_write_options,
    hudi_table_path,
)
from streaming.io.storage import HadoopFiles, jvm_class_loadable
from streaming.pipeline.ordering import latest_per_key

if TYPE_CHECKING:
    from streaming.contracts.model import TableContract

log = logging.getLogger(__name__)

HUDI_DATASOURCE_CLASS = "org.apache.hudi.DefaultSource"


def hudi_bundle_available(spark: SparkSession) -> bool:
    """True when the Hudi Spark datasource can be loaded by this session's JVM."""
    return jvm_class_loadable(spark, HUDI_DATASOURCE_CLASS)

# Completed instants of a table version 6 timeline: `.hoodie/<instant time>.<action>`,
# JSON-serialised HoodieCommitMetadata. Requested and inflight instants carry a further
# suffix (`.commit.requested`, `.inflight`) and are not commits yet. Version 8 moved the
# timeline to `.hoodie/timeline/` with Avro files, which this reader refuses.
_COMPLETED_INSTANT = re.compile(r"^(?P<instant>\d+)\.(?P<action>commit|deltacommit|replacecommit)$")

HudiWriter = Callable[[DataFrame, Mapping[str, str], str], None]


class HudiTimelineError(RuntimeError):
    """A table's timeline cannot be read the way the replay check needs."""


class HudiSchemaError(ValueError):
    """A batch's columns cannot be written to the table without breaking its readers."""


class TableFiles(Protocol):
    """The few file operations the timeline reader needs (Hadoop FileSystem on the JVM)."""

    def exists(self, path: str) -> bool: ...

    def list_names(self, folder: str) -> list[str]: ...

    def read_text(self, path: str) -> str: ...


def _table_version(files: TableFiles, table_path: str) -> str | None:
    properties = files.read_text(f"{table_path}/.hoodie/hoodie.properties")
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
    if not files.exists(f"{table_path}/.hoodie/hoodie.properties"):
        return []
    version = _table_version(files, table_path)
    if version != ATHENA_TABLE_VERSION:
        raise HudiTimelineError(
            f"{table_path}: hoodie.table.version is {version}, but the raw tables are written as version "
            f"{ATHENA_TABLE_VERSION}; this reader knows only the version {ATHENA_TABLE_VERSION} timeline layout"
        )
    matches = (_COMPLETED_INSTANT.match(name) for name in files.list_names(f"{table_path}/.hoodie"))
    return [match.string for match in sorted((m for m in matches if m), key=lambda m: m["instant"])]


def commit_metadata(files: TableFiles, table_path: str, instant_file: str) -> dict:
    """One completed commit's HoodieCommitMetadata (JSON in table version 6)."""
    path = f"{table_path.rstrip('/')}/.hoodie/{instant_file}"
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


def read_timeline_head(files: TableFiles, table_path: str) -> TimelineHead:
    """The newest batch marker and column order, read newest commit first.

    Commits without a marker (table services, manual maintenance) are passed over for
    the marker. A steady stream costs one listing and one small read per write.
    """
    marker: str | None = None
    columns: tuple[str, ...] | None = None
    for instant_file in reversed(completed_instants(files, table_path)):
        extra = commit_metadata(files, table_path, instant_file).get("extraMetadata") or {}
        if marker is None and extra.get(BATCH_MARKER_KEY) is not None:
            marker = str(extra[BATCH_MARKER_KEY])
        if columns is None and extra.get("schema"):
            columns = _schema_columns(extra["schema"], f"{table_path}/.hoodie/{instant_file}")
        if marker is not None and columns is not None:
            break
    return TimelineHead(marker, columns)


def _schema_columns(avro_schema: str, source: str) -> tuple[str, ...]:
    try:
        return tuple(field["name"] for field in json.loads(avro_schema)["fields"])
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise HudiTimelineError(f"{source}: extraMetadata.schema is not an Avro record schema: {exc}") from exc


def table_column_order(frame_columns: Sequence[str], table_columns: Sequence[str] | None) -> list[str]:
    """The frame's columns, ordered so that the table's columns keep their places.

    Hudi's schema evolution on write accepts a new nullable column at the end of the
    schema, not one that shifts existing columns (hudi.apache.org/docs/schema_evolution:
    "Add a new nullable column and change the ordering of fields" is unsupported). A
    contract attribute added later lands before the partition and metadata columns of
    raw_schema, so it is moved to the end here. A table column the frame lacks is refused:
    removing a contract attribute is not an evolution the raw layer allows.
    """
    if table_columns is None:
        return list(frame_columns)
    missing = [name for name in table_columns if name not in frame_columns]
    if missing:
        raise HudiSchemaError(
            f"the table has columns this batch lacks: {missing}; a contract attribute may be added, "
            "never removed or renamed (reprocess into a new table instead)"
        )
    return [*table_columns, *(name for name in frame_columns if name not in table_columns)]


def save_with_hudi(df: DataFrame, options: Mapping[str, str], path: str) -> None:
    """The real write: Spark's Hudi datasource, appending a commit to the table at `path`."""
    df.write.format("hudi").options(**options).mode("append").save(path)


class HudiSink:
    """Writes each table's changes to its Hudi change log and upserts its current state.

    `stream_id` identifies the streaming query (its checkpoint); without it a replayed
    batch cannot be recognised and its changes would be inserted twice, so the sink
    warns once. `writer` and `files` default to the Hudi datasource and the session's
    Hadoop FileSystem.
    """

    def __init__(
        self,
        base_path: str,
        database: str,
        contracts: Mapping[str, TableContract],
        *,
        sync_mode: SyncMode = DEFAULT_SYNC_MODE,
        retain_hours: int = DEFAULT_RETAIN_HOURS,
        stream_id: str | None = None,
        extra_options: Mapping[str, str] | None = None,
        commit_interval_seconds: int = DEFAULT_COMMIT_INTERVAL_SECONDS,
        writer: HudiWriter = save_with_hudi,
        files: TableFiles | None = None,
    ) -> None:
        self.base_path = base_path.rstrip("/")
        self.database = database
        self.stream_id = stream_id or None
        self._writer = writer
        self._files = files
        self._contracts = {contract.raw_table: contract for contract in contracts.values()}
        common = dict(
            base_path=self.base_path,
            database=database,
            sync_mode=sync_mode,
            retain_hours=retain_hours,
            commit_interval_seconds=commit_interval_seconds,
            extra=extra_options,
        )
        self._change_log_options = {
            raw_table: change_log_write_options(contract, **common) for raw_table, contract in self._contracts.items()
        }
        self._current_state_options = {
            raw_table: current_state_write_options(contract, **common)
            for raw_table, contract in self._contracts.items()
        }
        if self.stream_id is None:
            log.warning(
                "HudiSink without stream_id: a replayed micro-batch cannot be recognised and would "
                "insert its changes into the change logs a second time"
            )

    def _known(self, raw_table: str) -> str:
        if raw_table not in self._contracts:
            raise KeyError(f"no table contract has raw_table {raw_table!r}")
        return raw_table

    def write(self, changes: DataFrame, contract: TableContract, batch_id: int, rows: int | None = None) -> None:
        """Land one batch of one table: its changes in the change log, its winners per key upserted.

        `changes` has the columns of change_log_schema(contract); `rows` is its row count
        when known. An empty batch writes nothing, so it adds no commit and no catalog sync.
        """
        raw_table = self._known(contract.raw_table)
        if (changes.isEmpty() if rows is None else rows == 0):
            return
        current_state = latest_per_key(changes, contract).select(*raw_schema(contract).fieldNames())
        targets = (
            (contract.changes_table, self._change_log_options[raw_table], changes),
            (raw_table, self._current_state_options[raw_table], current_state),
        )
        for table, options, frame in targets:
            path = hudi_table_path(self.base_path, table)
            head = read_timeline_head(self._table_files(changes.sparkSession), path)
            frame = frame.select(*table_column_order(frame.columns, head.columns))
            if self.stream_id is None:
                self._writer(frame, options, path)
                continue
            marker = batch_marker(self.stream_id, batch_id)
            if head.batch_marker == marker:
                log.info("hudi %s: batch %s is already committed, not written again", table, marker)
                continue
            log.debug("hudi write table=%s batch=%s", table, marker)
            self._writer(frame, {**options, **batch_marker_options(self.stream_id, batch_id)}, path)

    def _table_files(self, spark: SparkSession) -> TableFiles:
        if self._files is None:
            self._files = HadoopFiles(spark)
        return self._files
